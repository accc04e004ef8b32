"""The lifecycle table and the counters as the Redis library has them
compiled (store/redis/scripts.py), checked from the Lua source and on the
test Redis:

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
  is store/counters.py's.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import redis

from store import lifecycle
from store.counters import HISTORY_KINDS, HISTORY_WIDTHS, event_key, queue_event_key
from store.lifecycle import EventKind, Operation
from store.redis.keys import Keys, parse_history_field
from store.redis.plumbing import op_args
from store.redis.scripts import LUA_DIR, prelude
from tests.backends import BACKENDS, REDIS_URL
from tests.store.lua_source import redis_calls, strip_comments

OPERATIONS = sorted(LUA_DIR.glob("*.lua"))


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
