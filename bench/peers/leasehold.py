"""Leasehold as one more system of the side-by-side run (main venv):
``.venv/bin/python -m bench.peers.leasehold '{json spec}'``, run by run.py.

Each measurement gets a fresh store of ``kind`` (``reset``: SQLite file,
PostgreSQL database cloned from a migrated template, or Redis key prefix),
removed afterwards. Single enqueue ``store.enqueue``; bulk
``store.enqueue_many``, BULK_CHUNK a call. Workers: ``leasehold worker
--processes P --concurrency T`` (run as ``python -m leasehold.cli``: the
``leasehold`` command without needing the package installed).

With ``features`` on, the drain runs what the issue asks of it: every job a
unique job (``unique_key``), another queue paused (so every claim checks the
paused set), the time-bucketed counters (always on) and one progress report
a job (handler ``bench_full``). Checked after every drain: each job Completed
with the result its lease holder's handler returned (``check_ran``) and, with
features on, holding that progress report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from bench.peers import common
from bench.peers.lh_handlers import PROGRESS
from bench.stores import FreshStores
from bench.worker_throughput import check_ran, worker_env
from store import open_store
from store.lifecycle import JobStatus
from store.models import JobSpec

REPO = Path(__file__).resolve().parent.parent.parent

PAUSED = "bench-paused"
HANDLERS = "tests.handlers,bench.peers.lh_handlers"


class Leasehold(common.System):
    DEFAULT = {"p": 2, "t": 8}
    SWEEP = [{"p": 1, "t": 8}, {"p": 2, "t": 8}, {"p": 2, "t": 16}, {"p": 2, "t": 4}]
    BULK = "JobStore.enqueue_many"
    CAPPED = False

    def __init__(self, kind: str, features: bool = True) -> None:
        self.kind = kind
        self.name = f"leasehold-{kind}"
        self.server = "redis" if kind == "redis" else kind
        self.features = features
        self.ids: list[str] = []
        self.store = None

    def __enter__(self) -> Leasehold:
        self._stack = contextlib.ExitStack()
        self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="lh-peers-")))
        self._stores = FreshStores(self._tmp)
        self._stack.callback(self._stores.close)
        self._current: contextlib.ExitStack | None = None
        self.reset()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._current is not None:
            self._current.close()
        self._stack.close()

    def reset(self) -> None:
        """A fresh store (the previous one removed); a paused queue with features on."""
        common.task_conn().delete(common.TIMES)
        if self._current is not None:
            self._current.close()
        self._current = contextlib.ExitStack()
        self.url = self._current.enter_context(self._stores.fresh(self.kind))
        self.store = self._current.enter_context(open_store(self.url))
        if self.features:
            self.store.pause_queue(PAUSED, actor="operator:bench")
        self.ids = []

    def worker(self, config):
        return [
            sys.executable, "-m", "leasehold.cli", "worker", "--processes", str(config["p"]),
            "--concurrency", str(config["t"]), "--name", "bench-peers", "--log-level", "WARNING",
        ]  # fmt: skip

    def cwd(self) -> Path:
        return REPO

    def worker_env(self):
        return dict(worker_env(self.url), LEASEHOLD_HANDLERS=HANDLERS, BENCH_PEERS_REDIS_URL=common.URL)

    def describe(self, config):
        return f"leasehold worker --processes {config['p']} --concurrency {config['t']}"

    def enqueue_one(self, seq):
        if seq is None:
            self.store.enqueue("noop")
        else:
            self.store.enqueue("bench_stamp", {"seq": seq})

    def enqueue_bulk(self, n):
        for i in range(0, n, common.BULK_CHUNK):
            self.store.enqueue_many([JobSpec("noop")] * min(common.BULK_CHUNK, n - i))

    def enqueue_for_drain(self, n):
        for i in range(0, n, common.BULK_CHUNK):
            if self.features:
                end = min(n, i + common.BULK_CHUNK)
                specs = [JobSpec("bench_full", unique_key=f"bench:{j}") for j in range(i, end)]
            else:
                specs = [JobSpec("noop")] * min(common.BULK_CHUNK, n - i)
            self.ids += [job.id for job in self.store.enqueue_many(specs)]

    def count(self) -> int:
        return self.store.count_jobs(JobStatus.Completed)

    def check(self) -> None:
        check_ran(self.store, self.ids, progress=PROGRESS if self.features else None)


if __name__ == "__main__":
    os.chdir(REPO)
    common.main(Leasehold)
