"""Static checks of the Redis store's Lua (store/redis/lua): the rules that make
the scripts safe on Redis Cluster and bounded in cost.

* each file starts with a header naming its KEYS, ARGV and what it returns;
* no SCAN/KEYS/FLUSH* calls (in Lua or in the Python store);
* the hash-tag rule: every key argument of ``redis.call`` is built from the
  prefix ``P`` (KEYS[1], the only declared key, read in lib/keys.lua alone) as
  ``P .. '<literal>'`` + data, directly or through a local assigned only
  such values; never a name without the prefix;
* only commands whose key positions this test knows are used;
* a script that counts (lib/job.lua ``move``, ``append_event``, ``count``)
  writes the counters with ``flush_counts()``;
* the files, the library's functions and ``Scripts`` agree, includes name
  known sections, and the ``rank`` format of
  lua/lib/job.lua matches what keys.py parses;
* the lifecycle table reaches the functions only as the table compiled into
  the library (OPERATIONS, read by ``operation(name)``): no script outside
  lib/ names an event kind, builds a counter key, or names a field its
  operation's row stamps or clears (lib/job.lua ``change`` applies them), and
  the row ``operation`` returns for the name ``plumbing.op_args`` passes is
  lifecycle.OPERATIONS's;
* lib/job.lua's counter keys are store/counters.py's, and its history fields
  what keys.py parses (run on the test Redis);
* the functions whose events are of HISTORY_KINDS count them in the history
  (lib/job.lua ``count_history``), and the library's compiled history table
  is store/counters.py's;
* the library: its name follows its content, two versions load side by side.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import fields
from pathlib import Path

import pytest
import redis

from store import lifecycle
from store.counters import HISTORY_KINDS, HISTORY_WIDTHS, event_key, queue_event_key
from store.lifecycle import EventKind, JobStatus, Operation
from store.models import MAX_PRIORITY
from store.redis import keys as redis_keys
from store.redis.functions import Library, Scripts
from store.redis.keys import Keys, parse_history_field
from store.redis.plumbing import op_args
from store.redis.scripts import (
    LUA_DIR,
    function_names,
    includes,
    library,
    prelude,
    version,
)
from tests.backends import BACKENDS, REDIS_URL

OPERATIONS = sorted(LUA_DIR.glob("*.lua"))
ALL_FILES = sorted(LUA_DIR.rglob("*.lua"))
FORBIDDEN = {"SCAN", "HSCAN", "SSCAN", "ZSCAN", "KEYS", "FLUSHDB", "FLUSHALL", "RANDOMKEY"}
#: Commands the scripts may use, and which arguments are keys: 1 = the first
#: argument only, "all" = every argument, 0 = none.
KEY_POSITIONS: dict[str, int | str] = {
    "TIME": 0,
    "EXISTS": "all",
    "DEL": "all",
    **dict.fromkeys(["HGET", "HMGET", "HGETALL", "HSET", "HSETNX", "HDEL", "HINCRBY"], 1),
    **dict.fromkeys(["ZADD", "ZREM", "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT", "ZSCORE", "ZREMRANGEBYRANK"], 1),
    **dict.fromkeys(["ZREMRANGEBYSCORE", "ZCARD", "ZRANGEBYLEX", "ZLEXCOUNT", "GET", "SET"], 1),
    **dict.fromkeys(["SADD", "SREM", "SISMEMBER", "SMEMBERS"], 1),
    **dict.fromkeys(["RPUSH", "LPUSH", "LTRIM", "LRANGE", "LLEN", "LREM", "PEXPIRE", "EXPIREAT"], 1),
}
KEY_REF = re.compile(r"KEYS\[[^\[\]]+\]")


def strip_comments(code: str) -> str:
    """Lua source without ``--`` comments (string literals respected)."""
    out, i, quote = [], 0, None
    while i < len(code):
        ch = code[i]
        if quote:
            out.append(ch)
            if ch == "\\":
                out.append(code[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif code.startswith("--", i):
            while i < len(code) and code[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def call_args(code: str, start: int) -> list[str]:
    """Top-level arguments of the call whose ``(`` is just before ``start``."""
    args, depth, quote, current = [], 0, None, []
    for i in range(start, len(code)):
        ch = code[i]
        if quote:
            quote = None if ch == quote and code[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    raise AssertionError("unbalanced redis.call")


def redis_calls(code: str) -> list[tuple[str, list[str]]]:
    """``(command, argument expressions)`` of every redis.call / redis.pcall."""
    out = []
    for m in re.finditer(r"redis\.p?call\s*\(", code):
        command, *args = call_args(code, m.end())
        literal = re.fullmatch(r"""['"](\w+)['"]""", command)
        assert literal, f"command must be a string literal, got {command!r}"
        out.append((literal[1].upper(), args))
    return out


def header(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--") and line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_header_names_keys_argv_and_returns(path: Path) -> None:
    head = header(path)
    assert re.search(r"\bKEYS\b", head), "header must name the KEYS"
    assert re.search(r"\bARGV\b", head), "header must name the ARGV"
    assert re.search(r"\bReturns:", head), "header must say what the script returns"


#: A key built from the prefix: ``P .. '<literal>'`` (then more ``..`` data).
FROM_PREFIX = re.compile(r"""P\s*\.\.\s*'[a-z_:]+'(\s*\.\..*)?""", re.DOTALL)
ASSIGNMENT = re.compile(r"^[ \t]*(?:local[ \t]+)?([\w \t,]+?)[ \t]*=(?!=)[ \t]*(.+)$", re.MULTILINE)


def top_level_split(expr: str, sep: str) -> list[str]:
    """``expr`` split at ``sep`` outside brackets and string literals."""
    parts, depth, quote, current, i = [], 0, None, [], 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            quote = None if ch == quote and expr[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(sep, i):
            parts.append("".join(current).strip())
            current, i = [], i + len(sep)
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current).strip())
    return parts


def assignments(code: str) -> dict[str, list[str]]:
    """Every value assigned to each name in ``code`` (one-line statements)."""
    out: dict[str, list[str]] = {}
    for m in ASSIGNMENT.finditer(code):
        names = [n.strip() for n in m[1].split(",")]
        values = top_level_split(m[2].strip(), ",")
        for name, value in zip(names, values, strict=False):
            out.setdefault(name, []).append(value)
    return out


def built_from_prefix(arg: str, assigned: dict[str, list[str]]) -> bool:
    """``arg`` is ``P .. '<literal>' ..`` data, or starts with a local whose
    every assigned value is."""
    if FROM_PREFIX.fullmatch(arg):
        return True
    head = top_level_split(arg, "..")[0]
    values = assigned.get(head) if re.fullmatch(r"[a-z_]\w*", head) else None
    return bool(values) and all(FROM_PREFIX.fullmatch(v) for v in values)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_every_key_is_built_from_the_prefix(path: Path) -> None:
    """The hash-tag rule: every key argument of ``redis.call`` is the prefix
    ``P`` (KEYS[1], lib/keys.lua) + a literal + data, directly or through a
    local assigned only such values; no key name without the prefix, and
    KEYS is read nowhere but lib/keys.lua (a call declares the prefix alone)."""
    code = strip_comments(path.read_text())
    assigned = assignments(code)
    for command, args in redis_calls(code):
        assert command not in FORBIDDEN, f"{command} is not allowed in the store"
        assert command in KEY_POSITIONS, f"{command}: add its key positions to this test first"
        positions = KEY_POSITIONS[command]
        key_args = args if positions == "all" else args[: int(positions)]
        if positions == "all":
            assert key_args, f"{command} without a key"
        for arg in key_args:
            assert built_from_prefix(arg, assigned), f"{command}: key {arg!r} is not P .. '<literal>' .. data"
    if path.relative_to(LUA_DIR) == Path("lib/keys.lua"):
        assert re.findall(r"KEYS\[[^\]]*\]", code) == ["KEYS[1]"] and "P = KEYS[1]" in code
    else:
        assert "KEYS" not in code, "keys are built from P; only lib/keys.lua reads KEYS[1]"


def test_the_prefix_rule_catches_what_it_should() -> None:
    assigned = assignments(
        "local job = P .. 'job:' .. id\nlocal a, b = P .. 'x', other\nb = 'y'\n"
        "  return\nend\nlocal c = P .. 'c'\nif d == 1 then"
    )
    assert built_from_prefix("P .. 'leases'", assigned)
    assert built_from_prefix("job", assigned) and built_from_prefix("a .. ':queue'", assigned)
    assert built_from_prefix("c", assigned) and "d" not in assigned  # one line a statement; == compares
    for bad in ("'leases'", "KEYS[1]", "other .. 'x'", "b", "ARGV[1]", "P", "P .. ARGV[1]", "x .. P .. 'a'"):
        assert not built_from_prefix(bad, assigned), bad


def test_the_python_keys_match_the_prefix() -> None:
    k = Keys("dep")
    assert k.route == "{dep}:"
    assert (
        k.job("1") == k.route + "job:1"
        and k.by_queue(JobStatus.Queued, "q") == k.route + "updated:100:queue:q"
        and k.by_name(JobStatus.Queued, "n") == k.route + "updated:100:name:n"
    )
    assert k.history(60) == (k.route + "history:60", k.route + "history_index:60")
    assert (
        k.record("hold", "r") == k.route + "rec:hold:r"
        and k.record_index("worker") == k.route + "recs:worker"
    )


#: The one module allowed to SCAN: ``leasehold db upgrade``'s move of layout-2
#: records, run once outside the serving path, finds keys no index of that
#: layout lists (failure windows, locks) by SCAN under the prefix.
SCAN_ALLOWED = {"upgrade_records.py"}


def test_forbidden_commands_in_the_python_store() -> None:
    for path in (LUA_DIR.parent).glob("*.py"):
        if path.name in SCAN_ALLOWED:
            continue
        text = path.read_text()
        assert not re.search(r"\.(scan|scan_iter|[hsz]scan(_iter)?|keys|flushdb|flushall)\(", text), path.name


def test_scripts_and_files_agree_and_includes_resolve() -> None:
    assert {f.name for f in fields(Scripts)} == {p.stem for p in OPERATIONS} == set(function_names())
    name, code = library()
    assert code.startswith(f"#!lua name={name}\n")
    for path in OPERATIONS:
        assert includes(path.stem) == [
            s for s in ("clock", "job") if f"-- @include lib/{s}.lua" in path.read_text()
        ]
        assert f"\nregister_function('{name}_{path.stem}', F['{path.stem}'])" in code
        for command, _ in redis_calls(strip_comments(path.read_text())):
            assert command in KEY_POSITIONS


def test_clock_comes_from_redis_time() -> None:
    clock = strip_comments((LUA_DIR / "lib" / "clock.lua").read_text())
    assert "redis.call('TIME')" in clock
    for path in OPERATIONS:
        text = path.read_text()
        if re.search(r"\bnow\b", strip_comments(text)):
            assert "-- @include lib/clock.lua" in text, f"{path.name} uses now without lib/clock.lua"


@pytest.mark.parametrize("path", OPERATIONS, ids=lambda p: p.name)
def test_a_script_that_counts_flushes_its_counters(path: Path) -> None:
    code = strip_comments(path.read_text())
    if re.search(r"\b(move|append_event|count)\(", code):
        assert "-- @include lib/job.lua" in path.read_text()
        assert re.search(r"^flush_counts\(\)$", code, re.MULTILINE), "counter deltas would be lost"


def test_rank_format_matches_the_python_side() -> None:
    lib = (LUA_DIR / "lib" / "job.lua").read_text()
    assert f"{MAX_PRIORITY} - tonumber(priority)" in lib
    assert "string.format('%07d', 1000000 - tonumber(priority))" in lib
    assert "string.format('%017d', math.floor(due * 1000000 + 0.5))" in lib
    assert redis_keys.RANK_HEAD == 7 + 17
    member = "0999995" + "1".zfill(17) + ":" + "0" * 8 + "-job"
    assert redis_keys.rank_job_id(member) == "00000000-job"


# --------------------------------------------------- the lifecycle table in Lua
#: Functions of the lifecycle operations, each naming its operation at ARGV[4]
#: or, with one operation, taking its row of the compiled table by its name.
OPERATION_SCRIPTS: dict[str, tuple[Operation, ...]] = {
    "enqueue": (Operation.ENQUEUE,),
    "claim": (Operation.CLAIM,),
    "complete": (Operation.COMPLETE,),
    "release": (Operation.RELEASE,),
    "cancel": (Operation.CANCEL,),
    "requeue": (Operation.REQUEUE, Operation.RETRY_NOW),
    "apply_failures": (Operation.FAIL,),
    "delete": (Operation.DELETE,),
}
LITERAL = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")


def literals(code: str) -> set[str]:
    """The string literals of Lua code (without comments)."""
    return {a or b for a, b in LITERAL.findall(code)}


#: Operations applied by a helper of the library rather than a function of
#: their own: UNBLOCK, by lib/dependencies.lua when a parent ends (called from the
#: functions that end jobs: complete, apply_failures, cancel, delete, cancel_batch).
IN_LIB = {Operation.UNBLOCK: "lib/dependencies.lua", Operation.EXPIRE: "lib/expiry.lua"}


def test_operation_scripts_are_named_in_this_test() -> None:
    covered = {op for ops in OPERATION_SCRIPTS.values() for op in ops}
    assert covered | set(IN_LIB) == set(Operation)
    assert not covered & set(IN_LIB)
    for op, path in IN_LIB.items():
        assert f"OPERATIONS['{op.value}']" in (LUA_DIR / path).read_text()
    for name, ops in OPERATION_SCRIPTS.items():
        text = (LUA_DIR / f"{name}.lua").read_text()
        named = len(ops) == 1 and f"OPERATIONS['{ops[0].value}']" in text
        assert named or re.search(r"local op = operation\(ARGV\[\d\]\)", text)


@pytest.mark.parametrize("path", OPERATIONS, ids=lambda p: p.name)
def test_no_script_names_an_event_kind_or_builds_a_counter_key(path: Path) -> None:
    text = path.read_text()
    named = literals(strip_comments(text))
    assert not named & {kind.value for kind in EventKind}, "event kinds come in ARGV"
    assert "'s:'" not in text and "'e:'" not in text, "counter keys: status_counter/event_counter"
    assert not [s for s in named if s.startswith(("s:", "e:"))], "counter keys: status_counter/event_counter"


@pytest.mark.parametrize("name", sorted(OPERATION_SCRIPTS))
def test_stamped_and_cleared_fields_come_from_the_table(name: str) -> None:
    code = strip_comments((LUA_DIR / f"{name}.lua").read_text())
    rows = [lifecycle.rule(op) for op in OPERATION_SCRIPTS[name]]
    named = {f for r in rows for f in (*r.stamps, *r.clears, *r.zeroes, *r.delays, *r.held)}
    table = named - {f for r in rows for f in r.writes}
    calls = redis_calls(code)
    read = {arg.strip("'") for command, args in calls if command in ("HGET", "HMGET") for arg in args[1:]}
    assert not (literals(code) - read) & table, "the row's fields come from the compiled table"
    if name == "enqueue":  # a new job: its hash is written whole, from the row, zeroes left absent
        assert "op.held" in code and "op.delays" in code and "op.stamps" in code
        return
    assert not {command for command, _ in calls} & {"HSET", "HDEL"}, "job writes go through change()"


@pytest.fixture(scope="module")
def lua() -> object:
    """Run a snippet after the library's top level (scripts.py ``prelude``:
    the compiled lifecycle table, lib/clock.lua, lib/job.lua, their per-call
    state started) on the test Redis (EVAL with no keys: it reads and writes
    no data). ARGV[1..3] are the common ones; the snippet's own start at ARGV[4]."""
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    lib = f"{prelude()}\nstart_clock()\nstart_job()"
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)

    def run(snippet: str, *argv: object) -> object:
        return client.eval(f"{lib}\n{snippet}", 0, 0, 200, 10_000, *argv)

    yield run
    client.close()


def test_counter_keys_are_the_same_text_in_lua_and_python(lua) -> None:
    for kind in EventKind:
        assert lua("return event_counter(ARGV[4])", kind.value) == event_key(kind)
        got = lua("return queue_event_counter(ARGV[4], ARGV[5])", kind.value, "q:a b")
        assert got == queue_event_key(kind, "q:a b")


@pytest.mark.parametrize("op", list(Operation), ids=lambda op: op.value)
def test_lua_reads_the_row_op_args_passes(lua, op: Operation) -> None:
    snippet = """local op = operation(ARGV[4])
local sources = {}
for code in pairs(op.sources) do
  sources[#sources + 1] = code
end
table.sort(sources)
return {sources, op.target or '', op.event or '', op.stamps, op.clears}"""
    sources, target, event, stamps, clears = lua(snippet, *op_args(op))
    row = lifecycle.rule(op)
    assert sources == sorted(int(s) for s in row.sources)
    assert target == ("" if len(row.targets) != 1 else int(lifecycle.target(op)))
    assert event == ("" if row.event is None else row.event.value)
    assert (tuple(stamps), tuple(clears)) == (row.stamps, row.clears)


#: Scripts that append events of HISTORY_KINDS (enqueued, completed, and the
#: failure kinds of apply_failures), each counting them in the history block;
#: the acks' count is lib/ack.lua's complete_job.
HISTORY_SCRIPTS = ("enqueue", "apply_failures", "complete", "complete_claim")


@pytest.mark.parametrize("name", HISTORY_SCRIPTS)
def test_scripts_that_append_history_kinds_count_them(name: str) -> None:
    code = strip_comments((LUA_DIR / f"{name}.lua").read_text())
    assert re.search(r"^flush_counts\(\)$", code, re.MULTILINE)
    if "complete_job(" in code:
        code = strip_comments((LUA_DIR / "lib" / "ack.lua").read_text())
    assert "count_history(" in code


def test_the_compiled_history_table_is_the_counters_module(lua) -> None:
    widths, kinds = lua("""local kinds = {}
for kind in pairs(HISTORY_KINDS) do
  kinds[#kinds + 1] = kind
end
table.sort(kinds)
return {HISTORY_WIDTHS, kinds}""")
    assert widths == list(HISTORY_WIDTHS)
    assert kinds == sorted(k.value for k in HISTORY_KINDS)
    assert len(Keys("p").histories()) == 2 * len(HISTORY_WIDTHS)


def test_history_fields_are_what_keys_py_parses() -> None:
    """lib/job.lua's flush_counts writes fields that parse_history_field reads
    back, in the bucket of the narrowest width only (the wider ones are its
    roll-ups: store/redis/history.py), under the prefix KEYS[1] (run on the
    test Redis, throwaway keys deleted afterwards)."""
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    lib = f"{prelude()}\nstart_keys()\nstart_clock()\nstart_job()"
    snippet = """count_history(ARGV[4], ARGV[5])
count_history(ARGV[4], ARGV[5])
count_history(ARGV[4], 'not counted')
flush_counts()
return fmt(now)"""
    k = Keys(f"lh-static-{uuid.uuid4().hex[:10]}")
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        now = float(client.eval(f"{lib}\n{snippet}", 1, k.route, 0, 200, 10_000, "a|b", "completed"))
        narrow, *wider = HISTORY_WIDTHS
        for width in wider:
            assert not client.exists(*k.history(width))
        for width in [narrow]:
            hash_key, index = k.history(width)
            [(field, n)] = client.hgetall(hash_key).items()
            bucket = now // width * width
            assert (parse_history_field(field), n) == ((bucket, "a|b", "completed"), "2")
            assert client.zrange(index, 0, -1, withscores=True) == [(field, bucket)]
        assert client.hgetall(k.counters) == {queue_event_key("completed", "a|b"): "2"}
    finally:
        client.delete(k.counters, *k.histories())
        client.close()


# ------------------------------------------------------------ the library
def _libraries(client: redis.Redis) -> set[str]:
    """Names of the libraries loaded (FUNCTION LIST: flat pairs in RESP2)."""
    return {dict(zip(e[::2], e[1::2], strict=True))["library_name"] for e in client.function_list()}


def test_the_library_name_follows_its_content() -> None:
    name, code = library()
    head, rest = code.split("\n", 1)
    assert head == f"#!lua name={name}"
    body, registrations = rest.split("\nregister_function(", 1)
    assert name == f"leasehold_{version(body)}"
    assert version(body + " ") != version(body)
    assert registrations.count("\nregister_function(") == len(function_names()) - 1
    assert "local OPERATIONS = {" in body


def test_two_versions_side_by_side_and_loading_twice(redis_client_for_library) -> None:
    """A second library (another Leasehold version: other content, so other
    name) loads beside this one; each version's functions answer; loading
    this one again is a no-op. Only the libraries this test made are removed."""
    client = redis_client_for_library
    lib = Library(client)
    lib.load()
    lib.load()  # already there: no error, nothing replaced
    other = Library(client)
    other.code = lib.code.replace(lib.name, lib.name[:-4] + "beef").replace("-- lib/clock.lua", "-- v2 clock")
    other.name = lib.name[:-4] + "beef"
    made = other.name not in _libraries(client)
    try:
        other.load()
        assert {lib.name, other.name} <= _libraries(client)
        for name in (lib.name, other.name):
            assert float(client.fcall(f"{name}_now", 1, "{lh-static}:x", 0)) > 1e9
    finally:
        if made:
            client.function_delete(other.name)


@pytest.fixture
def redis_client_for_library() -> object:
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()
