"""Pure parts of the workers: queue weights, idle backoff, the handler
registry, what a handler run turns into, and the child configuration."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store import StoreSettings
from store.errors import StoreUnavailable
from store.lifecycle import RetryPolicy
from workers.claim import IdleBackoff, WeightedQueues, format_queues, parse_queues
from workers.config import WorkerConfig
from workers.declare import handler
from workers.execute import run_handler, run_in_child
from workers.handlers import (
    HandlerError,
    HandlerSpec,
    JobContext,
    PermanentError,
    get_handler,
    load_handlers,
    registry,
    unregister,
)
from workers.retry import retry_unavailable


def ctx(name: str = "t", payload: object = None) -> JobContext:
    return JobContext("job-1", name, payload, None, None, None, 0, "w-1", 7)


# ------------------------------------------------------------------ queues
@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("default", [("default", 1)]),
        ("a,b:3", [("a", 1), ("b", 3)]),
        (" a : 2 , b ", [("a", 2), ("b", 1)]),
        ("emails:1000", [("emails", 1000)]),
    ],
)
def test_parse_queues(text: str, parsed: list[tuple[str, int]]) -> None:
    assert parse_queues(text) == parsed
    assert parse_queues(format_queues(parsed)) == parsed


@pytest.mark.parametrize(
    "text", ["", " ", "a,", ",a", "a,,b", "a:x", "a:0", "a:-1", "a:1.5", "a:1001", "a,a", ":3"]
)
def test_parse_queues_refuses_bad_syntax(text: str) -> None:
    with pytest.raises(ValueError):
        parse_queues(text)


def test_smooth_weighted_round_robin_is_exact_and_spread_out() -> None:
    queues = WeightedQueues([("a", 1), ("b", 3)])
    picks = [queues.next() for _ in range(400)]
    for window in range(0, 400, 4):  # every cycle of sum(weights) picks holds each weight exactly
        assert Counter(picks[window : window + 4]) == {"a": 1, "b": 3}
    assert "".join(picks[:8]) == "babbbabb"  # nginx's sequence: spread, not bursts


@given(st.lists(st.integers(1, 50), min_size=1, max_size=6))
def test_every_queue_gets_its_share_in_every_cycle(weights: list[int]) -> None:
    queues = WeightedQueues([(f"q{i}", w) for i, w in enumerate(weights)])
    total = sum(weights)
    for _ in range(2):
        cycle = Counter(queues.next() for _ in range(total))
        assert cycle == {f"q{i}": w for i, w in enumerate(weights)}


def test_a_light_queue_is_never_starved_by_a_heavy_one() -> None:
    queues = WeightedQueues([("heavy", 100), ("light", 1)])
    picks = [queues.next() for _ in range(1010)]
    gaps = [len(list(g)) for k, g in itertools.groupby(picks) if k == "heavy"]
    assert picks.count("light") == 10 and max(gaps) <= 100


def test_order_puts_the_chosen_queue_first_and_the_others_after() -> None:
    queues = WeightedQueues([("a", 1), ("b", 1), ("c", 1)])
    orders = [queues.order() for _ in range(3)]
    assert [first for first, _ in orders] == ["a", "b", "c"]
    assert orders[1] == ("b", ["a", "c"])


def test_idle_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = IdleBackoff()
    delays = [backoff.next() for _ in range(8)]
    assert delays[:6] == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16]
    assert delays[6:] == [0.2, 0.2]
    backoff.reset()
    assert backoff.next() == 0.005


# ----------------------------------------------------------------- registry
def test_handler_registers_with_its_enqueue_defaults() -> None:
    @handler("unit-defaults", queue="mail", max_retries=5, timeout=9)
    def fn(ctx: JobContext) -> int:
        return 1

    try:
        spec = get_handler("unit-defaults")
        assert spec is not None and spec.fn is fn.__wrapped__ and "unit-defaults" in registry()
        job = spec.job_spec({"a": 1}, priority=3, queue=None)
        assert (job.name, job.payload, job.queue, job.max_retries, job.timeout_s, job.priority) == (
            "unit-defaults", {"a": 1}, "mail", 5, 9.0, 3,
        )  # fmt: skip
        assert spec.job_spec(None, queue="other").queue == "other"
    finally:
        unregister("unit-defaults")
    assert get_handler("unit-defaults") is None


def test_a_name_taken_by_another_function_is_refused() -> None:
    @handler("unit-taken")
    def first(ctx: JobContext) -> None: ...

    try:
        with pytest.raises(HandlerError, match="already registered"):

            @handler("unit-taken")
            def second(ctx: JobContext) -> None: ...

        handler("unit-taken")(first)  # the same function again (module re-import) is fine
    finally:
        unregister("unit-taken")


@pytest.mark.parametrize(
    "options", [{"name": ""}, {"name": "x", "max_retries": -1}, {"name": "x", "timeout": 0}]
)
def test_bad_handler_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        handler(**options)  # type: ignore[arg-type]


def test_load_handlers_imports_modules_and_names_the_one_that_fails() -> None:
    names = load_handlers("tests.handlers, ")
    assert {"noop", "sleep", "crash", "not_json"} <= set(names)
    with pytest.raises(HandlerError, match=r"'tests\.no_such_module'"):
        load_handlers(["tests.handlers", "tests.no_such_module"])


def test_job_context_fields_rebuild_it_in_another_process() -> None:
    original = ctx(payload={"p": 1})
    copy = JobContext(**original.fields())
    assert copy.fields() == original.fields()
    assert isinstance(copy.cancelled, threading.Event) and copy.cancelled is not original.cancelled


# ---------------------------------------------------------------- outcomes
def spec_of(fn: object) -> HandlerSpec:
    return HandlerSpec("t", fn)  # type: ignore[arg-type]


def test_a_result_is_kept() -> None:
    outcome = run_handler(spec_of(lambda c: {"job": c.job_id, "token": c.lease_token}), ctx())
    assert outcome.ok and outcome.result == {"job": "job-1", "token": 7}


def test_a_result_that_is_not_json_fails_permanently() -> None:
    outcome = run_handler(spec_of(lambda c: {"when": object()}), ctx())
    assert not outcome.ok and outcome.permanent
    assert outcome.error["type"] == "ResultNotJSON" and "not JSON" in outcome.error["message"]


def test_an_exception_is_a_retryable_failure_with_its_traceback() -> None:
    def boom(c: JobContext) -> None:
        raise KeyError("missing")

    outcome = run_handler(spec_of(boom), ctx())
    assert not outcome.permanent and outcome.error["type"] == "KeyError"
    assert "'missing'" in outcome.error["message"] and "in boom" in outcome.error["traceback"]


def test_permanent_error_and_sys_exit() -> None:
    class BadInput(PermanentError):
        pass

    def bad(c: JobContext) -> None:
        raise BadInput("no such file")

    outcome = run_handler(spec_of(bad), ctx())
    assert outcome.permanent and outcome.error["type"] == "BadInput"
    exited = run_handler(spec_of(lambda c: exit(3)), ctx())
    assert not exited.permanent and exited.error["type"] == "SystemExit"


def test_an_unknown_handler_fails_permanently() -> None:
    outcome = run_in_child("no-such-handler", ctx().fields())
    assert outcome.permanent and outcome.error["type"] == "UnknownHandler"
    assert "no-such-handler" in outcome.error["message"] and "LEASEHOLD_HANDLERS" in outcome.error["message"]


def test_long_messages_and_tracebacks_are_cut() -> None:
    def loud(c: JobContext) -> None:
        raise RuntimeError("x" * 10_000)

    outcome = run_handler(spec_of(loud), ctx())
    assert len(outcome.error["message"]) == 2_000


# ------------------------------------------------------------------ config
def test_worker_config_survives_the_trip_to_a_child() -> None:
    config = WorkerConfig(
        store_url="sqlite:///x.db",
        queues=(("a", 1), ("b", 3)),
        concurrency=4,
        pool="process",
        lease_ttl_s=2.5,
        name="w",
        burst=True,
        grace_s=1.0,
        handlers=("tests.handlers",),
        store=StoreSettings(max_retries=5, retry=RetryPolicy(base_s=0.5, max_delay_s=9, jitter=0.1)),
    )
    assert WorkerConfig.from_json(config.to_json()) == config
    assert config.heartbeat_interval_s == pytest.approx(2.5 / 3)


@pytest.mark.parametrize("bad", [{"concurrency": 0}, {"pool": "fork"}, {"lease_ttl_s": 0}, {"queues": ()}])
def test_worker_config_refuses_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorkerConfig(store_url="sqlite:///x.db", **bad)  # type: ignore[arg-type]


# ---------------------------------------------------------- outage retries
def test_retry_unavailable_retries_with_the_delays_then_raises_the_last_error() -> None:
    slept: list[float] = []
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise StoreUnavailable(f"down {len(calls)}")
        return "ok"

    assert retry_unavailable(flaky, (0.1, 0.2, 0.3), "test", sleep=slept.append) == "ok"
    assert (len(calls), slept) == (3, [0.1, 0.2])

    def down() -> None:
        raise StoreUnavailable("still down")

    slept.clear()
    with pytest.raises(StoreUnavailable, match="still down"):
        retry_unavailable(down, (0.1, 0.2), "test", sleep=slept.append)
    assert slept == [0.1, 0.2]  # one try, then one more after each delay


def test_retry_unavailable_lets_other_errors_through_at_once() -> None:
    slept: list[float] = []

    def refused() -> None:
        raise ValueError("not an outage")

    with pytest.raises(ValueError):
        retry_unavailable(refused, (0.1,), "test", sleep=slept.append)
    assert slept == []
