"""The run-time mapping of the handler metrics is written once per language
(store/handler_metrics.py ``run_key``, lua/lib/handler_minutes.lua
``run_key``, PostgreSQL's ``store/sql/handler_minutes.run_key_sql``): the same
run times, drawn at random from a fixed seed over the whole range and its
ends, map to the same bins in each; and a bin's value is within the relative
accuracy of the run times in it."""

from __future__ import annotations

import json
import random

import pytest
import redis
from sqlalchemy import Double, bindparam, create_engine, select

from store import handler_metrics as hm
from store.redis.scripts import prelude
from store.sql.handler_minutes import run_key_sql
from tests.backends import BACKENDS, PG_ADMIN_URL, REDIS_URL


def _run_times() -> list[float]:
    rng = random.Random(7)
    drawn = [10 ** rng.uniform(-3, 9) for _ in range(2000)]
    edges = [hm.GAMMA**k * f for k in range(hm.KEY_MIN - 3, hm.KEY_MAX + 3, 37) for f in (0.999, 1.001)]
    return [0.0, hm.MIN_MS, 1.0, 1000.0, hm.MAX_MS, 1e12, *drawn, *edges]


def test_a_bin_holds_run_times_within_the_relative_accuracy() -> None:
    for ms in _run_times():
        if hm.MIN_MS < ms <= hm.MAX_MS:
            assert abs(hm.key_value(hm.run_key(ms)) - ms) <= hm.RELATIVE_ACCURACY * ms * (1 + 1e-9)
    assert hm.run_key(0.0) == hm.KEY_MIN and hm.run_key(1e15) == hm.KEY_MAX


def test_lua_maps_run_times_as_python_does() -> None:
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        snippet = (
            "local out = {}\nfor i, ms in ipairs(cjson.decode(ARGV[4])) do out[i] = run_key(ms) end\n"
            "return cjson.encode(out)"
        )
        values = _run_times()
        got = json.loads(
            client.eval(
                f"{prelude()}\nstart_clock()\nstart_job()\n{snippet}", 0, 0, 200, 10_000, json.dumps(values)
            )
        )
    finally:
        client.close()
    assert got == [hm.run_key(ms) for ms in values]


def test_postgresql_maps_run_times_as_python_does() -> None:
    if "postgresql" not in BACKENDS:
        pytest.skip("PostgreSQL is not among LEASEHOLD_TEST_BACKENDS")
    engine = create_engine(PG_ADMIN_URL)
    stmt = select(run_key_sql(bindparam("ms", type_=Double())))
    values = _run_times()
    try:
        with engine.connect() as conn:
            got = [int(conn.execute(stmt, {"ms": ms}).scalar_one()) for ms in values]
    finally:
        engine.dispose()
    assert got == [hm.run_key(ms) for ms in values]
