"""The Redis store's Lua as one Redis Functions library (Redis >= 7.0, Valkey).

``lua/<name>.lua`` is the body of function ``<name>`` (the text before a
``-- @call`` line, if any, is that function's load section: built once, at
FUNCTION LOAD; see ``_body``); ``lua/lib/*.lua`` are
sections of the library's top level, defined once, at FUNCTION LOAD (helpers,
per-call state). ``library()`` concatenates them: the shebang
``#!lua name=leasehold_<v>``, the lifecycle table compiled from
``store.lifecycle`` (``OPERATIONS``: each operation's source statuses, target,
event kind, stamped and cleared fields; a call passes the operation's name,
never its row), the sections, then each body as a function registered as
``leasehold_<v>_<name>``. ``<v>`` is a hash of the whole text: a library
whose content differs has another name, so two Leasehold versions side by side
(a rolling deploy) each call their own functions and never replace each
other's.

A line ``-- @include lib/NAME.lua`` in a body says the function starts that
section's per-call state before its body runs: ``lib/clock.lua`` reads Redis
TIME (+ ARGV[1], the clock offset) into ``now``, ``lib/job.lua`` resets the
counter, history and listing state and reads ARGV[2..3]. ``lib/claim.lua``
and ``lib/ack.lua`` keep no per-call state: they define the claim and the ack
of one job, which several functions call.

The library on a client (loaded, unloaded, called) is ``functions.py``'s.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import cache
from pathlib import Path

from store import handler_metrics as hm
from store import lifecycle
from store.counters import HISTORY_KINDS, HISTORY_WIDTHS, NARROW
from store.flow_rules import MAX_LIMIT, MAX_PERIOD_S, MIN_PERIOD_S, WAITING_DUE_AT
from store.lifecycle import Operation
from store.redis.codec import ENQUEUE_FIXED, ENQUEUE_LETTERED
from store.redis.keys import LEASES_PAD
from store.redis.wakeups import WAKEUP_KEPT

LUA_DIR = Path(__file__).with_name("lua")
#: The library's sections, in the order they are pasted (job uses keys and
#: clock, and counts, listing and events continue it: job's per-call state,
#: start_job, is defined last of them, in events; flow uses job, and
#: flow_claim and dependencies continue it; claim and ack use job and
#: flow). Only keys, clock and job have a per-call state a function may
#: ``@include``.
SECTIONS = (
    "keys",
    "clock",
    "job",
    "enqueue_keys",
    "counts",
    "handler_minutes",
    "ready",
    "listing",
    "events",
    "flow",
    "flow_claim",
    "flow_keyed",
    "dependencies",
    "expiry",
    "claim",
    "hand_over",
    "ack",
)
_INCLUDE = re.compile(r"^-- @include lib/(\w+)\.lua$", re.MULTILINE)
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def _lua_text(value: str) -> str:
    """A Lua string literal of an identifier-like value (checked)."""
    if not _IDENT.fullmatch(value):
        raise ValueError(f"{value!r} is not an identifier")
    return f"'{value}'"


#: Stamps a job hash leaves out when the operation also stamps the field
#: given here (layout 6, store/redis/layout.py): the reader takes the later
#: of the two (store/redis/codec.py ``job_from_hash``). A claim's first
#: heartbeat is its start.
IMPLIED_STAMPS = {"last_heartbeat_at": "started_at"}
#: Cleared fields a job hash keeps, each read only in the status given here
#: (layout 6: store/redis/codec.py ``job_from_hash`` reads it as None in any
#: other; every function reads it after checking that status): one HDEL
#: fewer at every ack. A claim writes it again.
KEPT_CLEARS = {"lease_expires_at": lifecycle.JobStatus.InProgress}


def operations_table() -> str:
    """``local OPERATIONS = {...}``: the rows of ``lifecycle.OPERATIONS`` as
    lib/job.lua ``operation(name)`` reads them (``sources`` a set of status
    codes, ``target`` a code or nil for FAIL, whose target is the retry
    decision's, ENQUEUE's too, ``event`` a kind or nil, ``stamps``, ``clears``,
    ``zeroes``, ``delays`` and ``held`` lists of field names, ``written``:
    the stamps the hash gets, those IMPLIED_STAMPS leaves out removed,
    ``dropped``: the clears it deletes, those of KEPT_CLEARS removed, and
    ``await_parents``: refused while a parent has not finished,
    ``lifecycle.AWAIT_PARENTS``)."""
    rows = []
    for op in Operation:
        row = lifecycle.rule(op)
        sources = ", ".join(f"[{code}] = true" for code in lifecycle.source_codes(op))
        target = str(int(lifecycle.target(op))) if len(row.targets) == 1 else "nil"
        event = "nil" if row.event is None else _lua_text(row.event.value)
        lists = {
            name: ", ".join(_lua_text(f) for f in getattr(row, name))
            for name in ("stamps", "clears", "zeroes", "delays", "held")
        }
        written = [f for f in row.stamps if IMPLIED_STAMPS.get(f) not in row.stamps]
        lists["written"] = ", ".join(_lua_text(f) for f in written)
        lists["dropped"] = ", ".join(_lua_text(f) for f in row.clears if f not in KEPT_CLEARS)
        fields = ", ".join(f"{name} = {{{text}}}" for name, text in lists.items())
        awaits = "true" if op in lifecycle.AWAIT_PARENTS else "false"
        head = f"sources = {{{sources}}}, target = {target}, event = {event}, await_parents = {awaits}"
        rows.append(f"  [{_lua_text(op.value)}] = {{{head}, {fields}}},")
    return "local OPERATIONS = {\n" + "\n".join(rows) + "\n}"


def history_table() -> str:
    """``HISTORY_WIDTHS`` (bucket widths, seconds, store.counters order),
    ``HISTORY_NARROW`` (the first width as text: a number joined to a key
    name is formatted at every join) and ``HISTORY_KINDS`` (the set of kinds
    counted) as Lua locals."""
    widths = ", ".join(str(int(w)) for w in HISTORY_WIDTHS)
    kinds = ", ".join(f"[{_lua_text(k.value)}] = true" for k in sorted(HISTORY_KINDS))
    return (
        f"local HISTORY_WIDTHS = {{{widths}}}\nlocal HISTORY_NARROW = '{int(NARROW)}'\n"
        f"local HISTORY_KINDS = {{{kinds}}}"
    )


def handler_minutes_table() -> str:
    """``HANDLER_MINUTES``: the run-time mapping's constants, the outcome
    codes and the minute buckets' lifetime (store/handler_metrics.py),
    as a Lua local read by lib/handler_minutes.lua."""
    return (
        f"local HANDLER_MINUTES = {{log_gamma = {math.log(hm.GAMMA)!r}, min_ms = {hm.MIN_MS!r}, "
        f"key_min = {hm.KEY_MIN}, key_max = {hm.KEY_MAX}, keep_s = {hm.RETENTION_S}, "
        f"succeeded = {_lua_text(hm.CODES[hm.SUCCEEDED])}, failed = {_lua_text(hm.CODES[hm.FAILED])}, "
        f"retried = {_lua_text(hm.CODES[hm.RETRIED])}}}"
    )


def flow_table() -> str:
    """``local FLOW``: what lib/flow.lua takes from Python: status codes by
    name (``status``) and names by code (``name``), ``store.flow_rules.WAITING_DUE_AT``,
    ``store.redis.wakeups.WAKEUP_KEPT`` and the bounds of the limits rule
    (``store.flow_rules`` MAX_LIMIT, MIN_PERIOD_S, MAX_PERIOD_S)."""
    statuses = list(lifecycle.JobStatus)
    by_name = ", ".join(f"{s.name} = {int(s)}" for s in statuses)
    by_code = ", ".join(f"[{int(s)}] = '{s.name}'" for s in statuses)
    return (
        f"local FLOW = {{status = {{{by_name}}}, name = {{{by_code}}}, "
        f"waiting_due_at = {WAITING_DUE_AT!r}, wakeup_kept = {int(WAKEUP_KEPT)}, "
        f"max_limit = {int(MAX_LIMIT)}, min_period_s = {MIN_PERIOD_S!r}, max_period_s = {MAX_PERIOD_S!r}}}"
    )


def status_text_table() -> str:
    """``local STATUS_TEXT``: each status code's text by code,
    ``STATUS_CODE`` each code by its text, and ``LEASES_PAD``
    (store/redis/keys.py). A number passed to ``redis.call`` is formatted
    with ``%.17g`` on every call (about 2k instructions), and ``tonumber``
    of a text costs a strtod (about 1k): the functions pass these texts and
    look codes up instead."""
    entries = ", ".join(f"[{int(s)}] = '{int(s)}'" for s in lifecycle.JobStatus)
    codes = ", ".join(f"['{int(s)}'] = {int(s)}" for s in lifecycle.JobStatus)
    return (
        f"local STATUS_TEXT = {{{entries}}}\nlocal STATUS_CODE = {{{codes}}}\n"
        f"local LEASES_PAD = '{LEASES_PAD}'"
    )


def enqueue_table() -> str:
    """The layout of a job's ARGV values that lua/enqueue.lua reads
    (store/redis/codec.py ``enqueue_values``): ``ENQUEUE_FIXED`` (the fields
    in order), ``ENQUEUE_BYTE`` (the byte of each optional value's letter, by
    name), ``ENQUEUE_FIELD`` (its name by that byte) and ``UNIQUE_HOLDING``
    (the status texts whose job holds its unique key whatever its age: every
    status not terminal, ``lifecycle.TERMINAL``)."""
    fixed = ", ".join(_lua_text(f) for f in ENQUEUE_FIXED)
    holding = ", ".join(f"['{int(s)}'] = true" for s in sorted(set(lifecycle.JobStatus) - lifecycle.TERMINAL))
    letters = ", ".join(f"{name} = {ord(letter)}" for letter, name in ENQUEUE_LETTERED)
    names = ", ".join(f"[{ord(letter)}] = {_lua_text(name)}" for letter, name in ENQUEUE_LETTERED)
    return (
        f"local ENQUEUE_FIXED = {{{fixed}}}\nlocal ENQUEUE_BYTE = {{{letters}}}\n"
        f"local ENQUEUE_FIELD = {{{names}}}\nlocal UNIQUE_HOLDING = {{{holding}}}"
    )


def function_names() -> list[str]:
    """The functions of the library: the stems of ``lua/*.lua``, sorted."""
    return sorted(p.stem for p in LUA_DIR.glob("*.lua"))


def includes(name: str, text: str | None = None) -> list[str]:
    """The sections whose per-call state function ``name`` (its file's
    ``text``, default ``lua/<name>.lua``) starts besides lib/keys.lua's,
    which every function starts."""
    text = (LUA_DIR / f"{name}.lua").read_text() if text is None else text
    found = _INCLUDE.findall(text)
    unknown = set(found) - set(SECTIONS) | ({"keys"} & set(found))
    if unknown:
        raise ValueError(f"{name}.lua includes unknown sections {sorted(unknown)}")
    return [s for s in SECTIONS if s in found]


def prelude() -> str:
    """The library's top level before the functions: the lifecycle table and
    the sections (also run by tests with EVAL, where KEYS and ARGV are the
    script's own)."""
    sections = [(LUA_DIR / "lib" / f"{s}.lua").read_text() for s in SECTIONS]
    tables = [
        operations_table(),
        history_table(),
        handler_minutes_table(),
        flow_table(),
        status_text_table(),
        enqueue_table(),
    ]
    return "\n".join([*tables, *sections])


#: The line of a function's file after which its per-call body starts; the
#: text before it is the function's load section.
CALL_MARK = "-- @call\n"


def _body(name: str, text: str | None = None) -> str:
    """Function ``name`` as a block of the library: its load section (the text
    before a ``-- @call`` line, if any: tables and helpers built once, at
    FUNCTION LOAD, where only table constructors, numeric loops, operators
    and function definitions may run), then the registered function, whose
    body is the rest."""
    text = (LUA_DIR / f"{name}.lua").read_text() if text is None else text
    starts = "".join(f"  start_{section}()\n" for section in ["keys", *includes(name, text)])
    load, _, call = text.rpartition(CALL_MARK)
    head = "if not tonumber then\n  start_globals()\nend\nKEYS, ARGV = keys, args\n"
    function = f"F[{_lua_text(name)}] = function(keys, args)\n{head}{starts}{call}\nend\n"
    return f"do\n{load}{function}end\n"


#: The globals the functions use, as locals of the library, read once at the
#: first call (the load-time environment has none of them): a function then
#: reads them as upvalues, not through the protected globals table.
GLOBALS = """local register_function = redis.register_function
local function runtime_globals()
  return redis, cjson, string, math, table, tonumber, tostring, unpack, ipairs, pairs, error, type, pcall
end
local redis, cjson, string, math, table, tonumber, tostring, unpack, ipairs, pairs, error, type, pcall
local function start_globals()
  redis, cjson, string, math, table, tonumber, tostring, unpack, ipairs, pairs, error, type, pcall =
    runtime_globals()
end"""


def version(code: str) -> str:
    """The library version of ``code`` (its text before the registrations):
    12 hex digits of its SHA-256."""
    return hashlib.sha256(code.encode()).hexdigest()[:12]


def build_library(prefix: str, functions: dict[str, str]) -> tuple[str, str]:
    """``(library name, library code)`` of the prelude and ``functions``
    (name -> its file's text); the name is ``prefix`` and the ``version`` of
    the code before the registrations. The store's library is ``library()``;
    a library of other functions on the same prelude (the benches' fixture
    loader, bench/fixtures/) is built here too, and is never the store's."""
    bodies = [_body(fn, text) for fn, text in sorted(functions.items())]
    code = "\n".join([GLOBALS, "local KEYS, ARGV = {}, {}", prelude(), "local F = {}", *bodies])
    name = f"{prefix}_{version(code)}"
    # One line a function: the library's load-time environment has no pairs().
    register = "".join(f"register_function('{name}_{fn}', F['{fn}'])\n" for fn in sorted(functions))
    return name, f"#!lua name={name}\n{code}\n{register}"


@cache
def library() -> tuple[str, str]:
    """``(library name, library code)`` of the store: every ``lua/*.lua``."""
    return build_library("leasehold", {fn: (LUA_DIR / f"{fn}.lua").read_text() for fn in function_names()})
