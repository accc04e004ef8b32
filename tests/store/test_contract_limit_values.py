"""Contract: queue limits pass one rule at every door (``store.flow_rules``:
integers in [1, MAX_LIMIT], rates with finite periods, queue names as
enqueue takes them), and a stored value that no longer passes it (written
by an older version, or by hand) is reported for its own queue alone: it
is not applied, every other queue's limits, usage and claims go on."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import update

from store.base import JobStore
from store.errors import ValidationError
from store.flow_rules import MAX_LIMIT, QueueLimits, Rate
from store.spec import MAX_QUEUE_LEN
from tests.backends import REDIS_BACKENDS, StoreHandle, redis_engine


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: QueueLimits(concurrency=MAX_LIMIT + 1), "concurrency"),
        (lambda: QueueLimits(concurrency=99999999999999999999999), "concurrency"),
        (lambda: QueueLimits(concurrency=10**5000), "concurrency"),
        (lambda: QueueLimits(per_key_concurrency=0), "per_key_concurrency"),
        (lambda: QueueLimits(concurrency="3"), "concurrency"),  # type: ignore[arg-type]
        (lambda: QueueLimits(concurrency=True), "concurrency"),
        (lambda: QueueLimits(rate=Rate(MAX_LIMIT + 1, 1.0)), "rate.limit"),
        (lambda: QueueLimits(rate=Rate(5, math.inf)), "rate.period_s"),
        (lambda: QueueLimits(rate=Rate(5, 0.0)), "rate.period_s"),
        (lambda: QueueLimits(per_key_rate=Rate(5, 1e300)), "rate.period_s"),
        (lambda: QueueLimits(rate={"limit": 5, "period_s": 1}), "rate"),  # type: ignore[arg-type]
    ],
)
def test_python_callers_get_the_same_rule_as_every_door(store: JobStore, build, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        store.set_queue_limits("mail", build())
    assert raised.value.field == field and isinstance(raised.value, ValueError)
    assert store.queue_limits() == {}


@pytest.mark.parametrize("queue", ["a\x00b", "", "   ", "q" * (MAX_QUEUE_LEN + 1)])
def test_a_queue_name_enqueue_refuses_is_refused_for_limits(store: JobStore, queue: str) -> None:
    with pytest.raises(ValidationError) as raised:
        store.set_queue_limits(queue, QueueLimits(concurrency=1))
    assert raised.value.field == "queue"
    assert store.queue_limits() == {}
    assert store.set_queue_limits("q" * MAX_QUEUE_LEN, QueueLimits(concurrency=1)).concurrency == 1


def write_bad_limits(handle: StoreHandle, queue: str) -> None:
    """Store limits for ``queue`` that no longer pass the rule, as an older
    version or a hand edit could have: a concurrency past MAX_LIMIT (0 on
    PostgreSQL, whose column cannot hold more) beside a valid rate."""
    store = handle.store
    store.set_queue_limits(queue, QueueLimits(concurrency=2, rate=Rate(5, 60.0)))
    if handle.backend in REDIS_BACKENDS:
        text = '{"concurrency": 99999999999, "rate": {"limit": 5, "period_s": 60.0}}'
        (shard := redis_engine(store, queue=queue))._client.hset(shard.keys.limits, queue, text)  # type: ignore[attr-defined]
        return
    from store.sql.schema import queues

    bad = 0 if handle.backend == "postgresql" else 99999999999
    with store.write_engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(update(queues).where(queues.c.name == queue).values(concurrency=bad))


def test_a_stored_value_that_no_longer_parses_is_reported_for_its_queue_alone(handle: StoreHandle) -> None:
    store = handle.store
    store.set_queue_limits("good", QueueLimits(concurrency=1))
    write_bad_limits(handle, "bad")
    limits = store.queue_limits()
    assert limits["good"] == QueueLimits(concurrency=1)
    bad = limits["bad"]
    assert bad.concurrency is None and bad.rate == Rate(5, 60.0)  # the valid kind is kept
    assert bad.invalid is not None and bad.invalid.startswith("concurrency: must be within")
    assert store.limit_usage("bad").running == 0 and store.limit_usage("good").running == 0
    # Claims go on: the good queue is still limited, the bad one by its rate only.
    for queue in ("good", "good", "bad", "bad"):
        store.enqueue("t", None, queue=queue)
    assert len(store.claim("w", ["good"], 5)) == 1
    assert len(store.claim("w", ["bad"], 5)) == 2
    waiting = store.enqueue("t", None, queue="good")
    assert store.limit_hold(waiting) == ("concurrency", "concurrency limit 1: 1 running")
    # Setting the queue's limits again replaces what was stored.
    assert store.set_queue_limits("bad", QueueLimits(concurrency=3)) == QueueLimits(concurrency=3)
    assert store.queue_limits()["bad"] == QueueLimits(concurrency=3)


def test_stored_limits_that_are_not_json_are_reported_on_redis(handle: StoreHandle) -> None:
    if handle.backend not in REDIS_BACKENDS:
        pytest.skip("the Redis limits hash holds JSON text")
    store = handle.store
    store.set_queue_limits("good", QueueLimits(concurrency=1))
    store.set_queue_limits("bad", QueueLimits(concurrency=1))
    (shard := redis_engine(store, queue="bad"))._client.hset(shard.keys.limits, "bad", "{" + "9" * 5000)  # type: ignore[attr-defined]
    limits = store.queue_limits()
    assert limits["good"] == QueueLimits(concurrency=1)
    assert not limits["bad"].any and "not JSON" in (limits["bad"].invalid or "")
    # The claim reads the limits in Lua as store.flow_rules reads them: what does not
    # pass is not applied, and no claim fails for it (nor a claim of other queues).
    (shard := redis_engine(store, queue="odd"))._client.hset(
        shard.keys.limits, "odd", '{"concurrency": "two", "rate": {"limit": 0}}'
    )  # type: ignore[attr-defined]
    for queue in ("good", "good", "bad", "bad", "odd", "odd"):
        store.enqueue("t", None, queue=queue)
    assert len(store.claim("w", ["bad"], 5)) == 2
    assert len(store.claim("w", ["odd"], 5)) == 2
    assert len(store.claim("w", ["good", "bad", "odd"], 5)) == 1  # good's limit of 1 still holds
    assert store.limit_usage("odd").running == 0
