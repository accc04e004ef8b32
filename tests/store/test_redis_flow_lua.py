"""The Redis store's flow decisions (lua/lib/flow.lua) are store.flow_rules's: the
same cases, drawn at random from a fixed seed, run through the Python
functions and their Lua ports (EVAL of the library's top level on the test
Redis; no data read or written), and the answers compared."""

from __future__ import annotations

import json
import random

import pytest
import redis

from store import flow_rules as flow
from store.flow_rules import ParentFailure, QueueLimits, Rate, Usage
from store.lifecycle import JobStatus
from store.redis.scripts import prelude
from tests.backends import BACKENDS, REDIS_URL

S = JobStatus
CASES = 400


@pytest.fixture(scope="module")
def lua():
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    lib = f"{prelude()}\nstart_clock()\nstart_job()"
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)

    def run(snippet: str, case: dict) -> object:
        return json.loads(client.eval(f"{lib}\n{snippet}", 0, 0, 200, 10_000, json.dumps(case)))

    yield run
    client.close()


def _case(rng: random.Random) -> dict:
    keys = ["a", "b", "c", None]
    maybe = lambda value: value if rng.random() < 0.5 else None  # noqa: E731
    limits = QueueLimits(
        concurrency=maybe(rng.randint(1, 6)),
        per_key_concurrency=maybe(rng.randint(1, 3)),
        rate=maybe(Rate(rng.randint(1, 6), rng.choice([0.5, 1.0, 10.0]))),
        per_key_rate=maybe(Rate(rng.randint(1, 3), rng.choice([1.0, 5.0]))),
    )
    now = 1_000.0 + rng.random()
    by_key = {k: rng.randint(0, 3) for k in keys[:3] if rng.random() < 0.6}
    starts_by_key = {k: (rng.randint(1, 4), now - rng.random() * 4) for k in keys[:3] if rng.random() < 0.5}
    starts = rng.randint(0, 7)
    return {
        "limits": {k: v for k, v in limits.to_json().items() if v is not None},
        "running": rng.randint(0, 6),
        "running_by_key": by_key,
        "starts": starts,
        "first_start": now - rng.random() * 9 if starts else None,
        "starts_by_key": starts_by_key,
        "candidates": [[f"j{i}", rng.choice(keys)] for i in range(rng.randint(0, 12))],
        "now": now,
        "wanted": rng.randint(1, 8),
    }


ADMIT = """local c = cjson.decode(ARGV[4])
local U = {running = c.running, running_by_key = c.running_by_key, starts = c.starts,
  starts_by_key = c.starts_by_key, loaded = {}}
if c.first_start ~= cjson.null then
  U.first_start = c.first_start
end
local candidates = {}
for i, cand in ipairs(c.candidates) do
  local key = cand[2]
  if key == cjson.null then
    key = false
  end
  candidates[i] = {cand[1], key}
end
local admitted, retry = flow.admit(candidates, c.limits, U, c.now, c.wanted)
local ids = {}
for i, a in ipairs(admitted) do
  ids[i] = a[1]
end
return cjson.encode({ids = ids, retry = retry or cjson.null, n = #ids})"""


def test_admission_is_the_same_in_lua_and_python(lua) -> None:
    rng = random.Random(28)
    held = 0
    for _ in range(CASES):
        case = _case(rng)
        usage = Usage(
            running=case["running"],
            running_by_key=dict(case["running_by_key"]),
            starts=case["starts"],
            first_start=case["first_start"],
            starts_by_key={k: tuple(v) for k, v in case["starts_by_key"].items()},
        )
        limits = flow.parse_limits(case["limits"])
        want = flow.admit([tuple(c) for c in case["candidates"]], limits, usage, case["now"], case["wanted"])
        got = lua(ADMIT, case)
        assert (got["ids"] if got["n"] else []) == want.leased, case  # cjson: {} for an empty list
        if want.retry_after_s is None:
            assert got["retry"] is None, case
        else:
            held += 1
            assert got["retry"] == pytest.approx(want.retry_after_s, abs=1e-9), case
    assert held > CASES // 10  # the rate branches were exercised


FINISHED = """local c = cjson.decode(ARGV[4])
local left, to, reason = flow.on_parent_finished(c.status, c.pending, c.parent, c.outcome, c.policy)
return cjson.encode({left = left or cjson.null, to = to or cjson.null, reason = reason or cjson.null})"""

AT_ENQUEUE = """local c = cjson.decode(ARGV[4])
local pending, status, reason = flow.waits_on(c.found, c.policy)
return cjson.encode({pending = pending, status = status, reason = reason or cjson.null})"""


@pytest.mark.parametrize("policy", list(ParentFailure))
def test_dependency_decisions_are_the_same_in_lua_and_python(lua, policy: ParentFailure) -> None:
    for status in S:
        for outcome in flow.FINISHED:
            for pending in (0, 1, 2):
                case = {"status": int(status), "pending": pending, "parent": "p1", "outcome": int(outcome)}
                got = lua(FINISHED, {**case, "policy": policy.value})
                want = flow.on_parent_finished(status, pending, "p1", outcome, policy)
                if want is None:
                    assert got["left"] is None
                    continue
                to = None if want.status is None else int(want.status)
                assert (got["left"], got["to"], got["reason"]) == (want.pending, to, want.reason)
    rng = random.Random(7)
    for _ in range(200):
        parents = {f"p{i}": rng.choice(list(S)) for i in range(rng.randint(1, 4))}
        found = [[p, int(s)] for p, s in sorted(parents.items())]
        got = lua(AT_ENQUEUE, {"found": found, "policy": policy.value})
        want = flow.child_status_at_enqueue(parents, policy)
        assert (got["pending"], got["status"], got["reason"]) == (want.pending, int(want.status), want.reason)
