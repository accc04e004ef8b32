"""rq: ``Queue.enqueue`` per job; bulk ``Queue.enqueue_many`` of
``prepare_data``, BULK_CHUNK a call (one pipeline each); ``rq worker-pool -n N``
with ``SimpleWorker`` (jobs run in the worker process) or, kind ``fork``, RQ's
default ``Worker`` (a fork per job)."""

from __future__ import annotations

import sys

import common
from rq import Queue

QUEUE = "bench-peers"


def noop():
    common.noop_body()


def stamp(seq):
    common.stamp_body(seq)


class Rq(common.System):
    name = "rq"
    DEFAULT = {"n": 2, "kind": "simple"}
    SWEEP = [{"n": 2, "kind": "simple"}, {"n": 3, "kind": "simple"}, {"n": 4, "kind": "simple"}]
    BULK = "Queue.enqueue_many"

    def __init__(self, kind: str = "simple") -> None:
        self.queue = Queue(QUEUE, connection=common.task_conn())
        if kind == "fork":
            self.name = "rq-fork"
            self.DEFAULT = {"n": 2, "kind": "fork"}
            self.SWEEP = [{"n": 2, "kind": "fork"}, {"n": 4, "kind": "fork"}]

    def worker(self, config):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        cls = "rq.worker.SimpleWorker" if config["kind"] == "simple" else "rq.worker.Worker"
        n = str(config["n"])
        return [f"{bin_dir}/rq", "worker-pool", "-n", n, "-q", "-u", common.URL, "-w", cls, QUEUE]

    def describe(self, config):
        return f"rq worker-pool -n {config['n']} ({config['kind']})"

    def enqueue_one(self, seq):
        if seq is None:
            self.queue.enqueue(noop, result_ttl=600)
        else:
            self.queue.enqueue(stamp, seq, result_ttl=600)

    def enqueue_bulk(self, n):
        for i in range(0, n, common.BULK_CHUNK):
            k = min(common.BULK_CHUNK, n - i)
            self.queue.enqueue_many([Queue.prepare_data(noop, result_ttl=600) for _ in range(k)])


if __name__ == "__main__":
    import peer_rq  # functions must be named peer_rq.*, not __main__.*

    common.main(peer_rq.Rq)
