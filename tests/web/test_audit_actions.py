"""Every operator action is one audit entry naming its actor, from the API,
the console and the command line; a bulk operation is two (start, end),
never one a job (every store)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from leasehold.cli import leasehold
from store import bulk
from store.base import JobStore
from store.contract_operating import MAX_AUDIT_PAGE
from store.lifecycle import EventKind, JobStatus
from store.models import JobEvent, Schedule, WorkerInfo
from tests.backends import StoreHandle
from tests.store.helpers import expire_leases, job_in
from tests.web.conftest import OPERATOR, api_app_for
from tests.web.console_fixtures import ConsoleClient, confirm_form, console_app_for

S = JobStatus
K = EventKind
NIGHTLY = Schedule("nightly", "report", "0 3 * * *", "UTC", "reports", {"full": True})


class Audit:
    """The audit entries written since the last call."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.seen = len(store.audit(MAX_AUDIT_PAGE))

    def new(self) -> list[JobEvent]:
        entries = self.store.audit(MAX_AUDIT_PAGE)
        fresh = entries[: len(entries) - self.seen]
        self.seen = len(entries)
        return fresh

    def one(self, kind: EventKind, actor: str) -> JobEvent:
        entries = self.new()
        assert [(e.kind, e.actor) for e in entries] == [(kind, actor)]
        return entries[0]


# -------------------------------------------------------------------- API
def test_api_actions_are_one_entry_each(handle: StoreHandle) -> None:
    store = handle.store
    store.save_schedules([NIGHTLY])
    client = api_app_for(handle).test_client()
    audit = Audit(store)
    actor = "operator:alice"

    assert client.post("/api/periodic/nightly/disable", headers=OPERATOR).status_code == 200
    assert audit.one(K.SCHEDULE_DISABLED, actor).message == "schedule nightly"
    assert client.post("/api/periodic/nightly/enable", headers=OPERATOR).status_code == 200
    audit.one(K.SCHEDULE_ENABLED, actor)
    run = client.post("/api/periodic/nightly/run", headers=OPERATOR)
    assert run.status_code == 202
    assert run.json["id"] in audit.one(K.SCHEDULE_RUN, actor).message

    assert client.post("/api/queues/mail/pause", headers=OPERATOR).status_code == 200
    audit.one(K.QUEUE_PAUSED, actor)

    job_in(store, S.Completed)
    assert client.post("/api/purge?dry_run=1&older_than=0", headers=OPERATOR).status_code == 200
    assert audit.new() == []  # a dry run changes nothing
    purged = client.post("/api/purge?older_than=0", headers=OPERATOR)
    assert purged.json["pruned"] == 1
    assert audit.one(K.JOBS_PURGED, actor).message.startswith("1 jobs purged (")


@pytest.mark.parametrize("batch", [2, bulk.BATCH])
def test_a_bulk_operation_over_many_jobs_is_two_entries(handle: StoreHandle, batch: int) -> None:
    store = handle.store
    ids = [store.enqueue("t", {}, queue="mail").id for _ in range(7)]
    client = api_app_for(handle).test_client()
    audit = Audit(store)
    body = {"action": "cancel", "filter": {"queue": "mail"}}
    assert client.post("/api/operations", json=body, headers=OPERATOR).status_code == 202
    while bulk.run_pending(store, "test", batch=batch):
        if store.operations()[0].finished:
            break
    assert all(store.get(i).status is S.Canceled for i in ids)
    entries = audit.new()
    assert [(e.kind, e.actor) for e in entries] == [
        (K.BULK_FINISHED, "operator:alice"),
        (K.BULK_STARTED, "operator:alice"),
    ]
    assert "7 changed" in entries[0].message
    # Each job's own timeline still says who canceled it.
    assert [e.actor for e in store.events(ids[0]) if e.kind == K.CANCELED] == ["bulk:alice"]


def test_a_bulk_delete_is_two_entries_and_leaves_nothing_behind(handle: StoreHandle) -> None:
    store = handle.store
    ids = [job_in(store, S.Failed, queue="old").id for _ in range(5)]
    audit = Audit(store)
    client = api_app_for(handle).test_client()
    body = {"action": "delete", "filter": {"queue": "old"}}
    assert client.post("/api/operations", json=body, headers=OPERATOR).status_code == 202
    bulk.run_pending(store, "test", batch=2)
    assert store.counts().by_status["Failed"] == 0
    assert [e.kind for e in audit.new()] == [K.BULK_FINISHED, K.BULK_STARTED]
    assert all(store.events(i) == [] for i in ids)  # no event of a deleted job is left over


# ---------------------------------------------------------------- console
def test_console_actions_are_one_entry_each(handle: StoreHandle) -> None:
    store = handle.store
    store.save_schedules([NIGHTLY])
    operator = ConsoleClient(console_app_for(handle).test_client())
    assert operator.login("ann").status_code == 303
    audit = Audit(store)
    actor = "operator:ann"

    assert operator.post("/periodic/nightly/disable").status_code == 303
    audit.one(K.SCHEDULE_DISABLED, actor)
    assert operator.post("/periodic/nightly/enable").status_code == 303
    audit.one(K.SCHEDULE_ENABLED, actor)
    assert operator.post("/periodic/nightly/run", {"nonce": uuid.uuid4().hex}).status_code == 303
    audit.one(K.SCHEDULE_RUN, actor)

    store.worker_heartbeat(WorkerInfo("old", "host", 1, ["default"], 1, [], None, None))
    store.clock_offset_s += 3600
    assert operator.post("/workers/old/forget").status_code == 303
    assert audit.one(K.WORKER_FORGOTTEN, actor).message.startswith("worker old ")

    # A console bulk action: two entries however many jobs.
    for _ in range(4):
        store.enqueue("t", {}, queue="bulk")
    form = {"action": "cancel", "queue": "bulk"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True).status_code == 200
    bulk.run_pending(store, "test", batch=2)
    assert [(e.kind, e.actor) for e in audit.new()] == [(K.BULK_FINISHED, actor), (K.BULK_STARTED, actor)]

    # A recovery run: its one line in the audit log, no entry a job.
    store.enqueue("t", {})
    store.enqueue("t", {})
    store.claim("w-dead", ["default"], 2)
    expire_leases(store)
    assert operator.post("/recovery/run").status_code == 303
    assert audit.new() == []
    page = operator.get("/audit").text
    assert page.count("<td>recovery run</td>") == 1


# -------------------------------------------------------------------- CLI
@pytest.fixture
def cli(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    monkeypatch.setenv("LEASEHOLD_HANDLERS", "tests.handlers")
    monkeypatch.setenv("USER", "ann")
    yield CliRunner()


def test_cli_actions_are_one_entry_each(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    store.save_schedules([NIGHTLY])
    audit = Audit(store)
    actor = "operator:cli:ann"

    def run(*args: str) -> str:
        result = cli.invoke(leasehold, list(args), prog_name="leasehold")
        assert result.exit_code == 0, result.output
        return result.stdout

    run("periodic", "disable", "nightly")
    audit.one(K.SCHEDULE_DISABLED, actor)
    run("periodic", "enable", "nightly")
    audit.one(K.SCHEDULE_ENABLED, actor)
    job_id = run("periodic", "run", "nightly").strip()
    assert job_id in audit.one(K.SCHEDULE_RUN, actor).message
    run("queue", "pause", "mail")
    audit.one(K.QUEUE_PAUSED, actor)
    job_in(store, S.Completed)
    job_in(store, S.Canceled)
    run("purge", "--older-than", "0", "--dry-run")
    assert audit.new() == []
    assert run("purge", "--older-than", "0") == "2 job(s) purged\n"
    assert audit.one(K.JOBS_PURGED, actor).message.startswith("2 jobs purged (")
