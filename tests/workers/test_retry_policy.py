"""A handler's own retry policy in a real worker (in the test's process, a
burst run) on every store: ``retry_on`` and ``give_up_on`` decide whether a
failure may retry at all, and a retry, a timeout and an expired lease wait
the handler's own backoff (checked against the store's clock)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from store.base import JobStore
from store.catalogue import catalogue
from store.models import WorkerInfo, ts
from tests.backends import StoreHandle
from tests.store.helpers import expire_leases
from tests.store.test_contract_catalogue import SLOW
from tests.workers.test_leasehold_cli import cli, invoke  # noqa: F401 - cli: a fixture
from workers import handler
from workers.config import WorkerConfig
from workers.handlers import HandlerSpec, load_handlers
from workers.worker import Worker

load_handlers(["tests.retry_policy_handlers"])


def _burst(handle: StoreHandle, **options: Any) -> None:
    """Run a worker until nothing is due (its startup drains expired leases first)."""
    config = WorkerConfig(
        store_url=handle.url,
        concurrency=2,
        lease_ttl_s=1.0,
        name="w-policy",
        handlers=("tests.retry_policy_handlers",),
        store=handle.store.settings,
        burst=True,
        **options,
    )
    assert Worker(config, handle.store, install_signals=False).run() == 0


def _wait_s(store: JobStore, job_id: str) -> float:
    """How long after its last failure the Scheduled job is due, by the store's clock."""
    job = store.get(job_id)
    assert job.status.name == "Scheduled", job
    return (job.retry_delay_until - job.last_updated_at).total_seconds()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_retry_on_fails_others_at_once_and_retries_its_own_with_its_backoff(
    handle: StoreHandle, pool: str
) -> None:
    store = handle.store
    other = store.enqueue("retry-on-key-error", {"raise": "ValueError"})
    listed = store.enqueue("retry-on-key-error", {"raise": "KeyError"})
    _burst(handle, pool=pool)  # a pool process classifies with its own import of the handler
    failed = store.get(other.id)
    assert (failed.status.name, failed.retry_count, failed.max_retries) == ("Failed", 0, 3)
    assert failed.error["type"] == "ValueError"
    retried = store.get(listed.id)
    assert (retried.retry_count, retried.error["type"]) == (1, "KeyError")
    assert _wait_s(store, listed.id) == pytest.approx(60.0, abs=0.01)  # not the store's 0.1 s
    store.clock_offset_s += 61
    _burst(handle, pool=pool)
    assert store.get(listed.id).retry_count == 2
    assert _wait_s(store, listed.id) == pytest.approx(120.0, abs=0.01)


def test_give_up_on_fails_at_once_and_others_retry_with_its_backoff(handle: StoreHandle) -> None:
    store = handle.store
    given_up = store.enqueue("give-up-on-value-error", {"raise": "ValueError"})
    other = store.enqueue("give-up-on-value-error", {"raise": "KeyError"})
    _burst(handle)
    failed = store.get(given_up.id)
    assert (failed.status.name, failed.retry_count, failed.error["type"]) == ("Failed", 0, "ValueError")
    assert store.get(other.id).retry_count == 1
    assert _wait_s(store, other.id) == pytest.approx(40.0, abs=0.01)


def test_a_timeout_and_an_expired_lease_wait_the_handlers_backoff(handle: StoreHandle) -> None:
    store = handle.store
    timed_out = store.enqueue("slow-own-backoff", timeout_s=0.2)
    _burst(handle)
    job = store.get(timed_out.id)
    assert (job.retry_count, job.error["type"]) == (1, "JobTimeout")  # retried though not a KeyError
    assert _wait_s(store, timed_out.id) == pytest.approx(90.0, abs=0.01)

    lost = store.enqueue("retry-on-key-error", {"raise": "KeyError"})
    [claimed] = store.claim("w-dead", ["default"], 1, lease_ttl_s=1.0)
    assert claimed.id == lost.id
    expire_leases(store, 5)
    _burst(handle)  # its start-up recovery: the policy its own entry publishes
    recovered = store.get(lost.id)
    assert (recovered.retry_count, recovered.lease_expirations) == (1, 1)
    assert _wait_s(store, lost.id) == pytest.approx(60.0, abs=0.01)


def test_a_worker_publishes_each_handlers_policy(handle: StoreHandle) -> None:
    store = handle.store
    seen: dict[str, Any] = {}

    def look(job_store: JobStore) -> None:
        seen.update(catalogue(job_store))

    store.enqueue("retry-on-key-error", {"raise": "ValueError"})
    config = WorkerConfig(
        store_url=handle.url,
        name="w-pub",
        handlers=("tests.retry_policy_handlers",),
        store=handle.store.settings,
        burst=True,
    )
    worker = Worker(config, store, install_signals=False)
    worker._register()  # publishes, as run() does first
    try:
        look(store)
    finally:
        worker._shutdown()
    entry = seen["retry-on-key-error"]
    assert (entry.retry_base_s, entry.retry_max_delay_s, entry.retry_jitter) == (30.0, 600.0, None)
    assert (entry.retry_on, entry.give_up_on) == (("KeyError",), ())
    assert seen["give-up-on-value-error"].give_up_on == ("ValueError",)


class Busy(Exception):
    pass


def test_give_up_on_wins_over_retry_on_and_subclasses_count() -> None:
    spec = HandlerSpec("h", print, retry_on=(LookupError, Busy), give_up_on=(IndexError,))
    assert not spec.gives_up(KeyError("k")) and not spec.gives_up(Busy())  # a LookupError
    assert spec.gives_up(IndexError("i")) and spec.gives_up(ValueError("v"))
    assert not HandlerSpec("h", print).gives_up(ValueError("v"))  # no lists: everything retries
    assert HandlerSpec("h", print, give_up_on=(ValueError,)).gives_up(ValueError("v"))
    assert spec.policy_json()["retry_on"] == ["LookupError", f"{__name__}.Busy"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"retry_on": KeyError("not a type")}, "retry_on"),
        ({"give_up_on": (ValueError, "KeyError")}, "give_up_on"),
        ({"retry_on": "KeyError"}, "retry_on"),
        ({"retry_base": -1}, "base"),
        ({"retry_max_delay": -5}, "max delay"),
        ({"retry_jitter": 1.5}, "jitter"),
    ],
)
def test_bad_retry_options_are_refused_at_declaration(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        handler("never-registered", **options)


def test_the_cli_lists_each_handlers_policy(handle: StoreHandle, cli: CliRunner) -> None:  # noqa: F811
    store = handle.store
    own = {**SLOW, "retry_max_delay_s": None, "retry_on": ["KeyError"], "give_up_on": []}
    plain = {k: v for k, v in SLOW.items() if not k.startswith(("retry_", "give_up_"))}
    info = WorkerInfo(
        "w-1", "h", 1, ["slowq"], 1, started_at=ts(store.now()), handlers=[own, {**plain, "name": "p"}]
    )
    store.worker_heartbeat(info)
    text = invoke(cli, "handlers", "list").stdout
    assert "    retry policy: base 5s, max delay default, jitter 0.1; retries only KeyError\n" in text
    assert text.count("retry policy") == 1  # none for a handler with the store's policy
    listed = {h["name"]: h for h in json.loads(invoke(cli, "handlers", "list", "--json").stdout)}
    assert (listed["slow"]["retry_base_s"], listed["p"]["retry_on"]) == (5.0, [])
