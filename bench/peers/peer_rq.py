"""rq: ``Queue.enqueue_many`` of ``prepare_data`` in chunks of 1000 (one pipeline
each), ``rq worker-pool -n P --burst``. Worker class from argv[5]: ``simple``
(rq.worker.SimpleWorker, runs jobs in the worker process) or ``fork`` (RQ's
default Worker, one fork per job)."""

from __future__ import annotations

import sys

from common import COUNTER, URL, args, client, drain, report, timed
from rq import Queue

_conn = None


def noop():
    global _conn
    _conn = _conn or client()
    _conn.incr(COUNTER)


def main() -> None:
    jobs, procs, _threads, timeout = args()
    kind = sys.argv[5] if len(sys.argv) > 5 else "simple"
    queue = Queue("bench-peers", connection=client())

    def enqueue() -> None:
        for i in range(0, jobs, 1000):
            queue.enqueue_many([Queue.prepare_data(noop, result_ttl=600) for _ in range(min(1000, jobs - i))])

    enq = timed(enqueue)
    bin_dir = sys.executable.rsplit("/", 1)[0]
    worker_class = "rq.worker.SimpleWorker" if kind == "simple" else "rq.worker.Worker"
    cmd = [f"{bin_dir}/rq", "worker-pool", "-n", str(procs), "--burst", "-q", "-u", URL,
           "-w", worker_class, "bench-peers"]  # fmt: skip
    report({"enqueue_s": enq, **drain(cmd, jobs, timeout), "workers": f"{procs} procs x 1 ({kind})"})


if __name__ == "__main__":
    import peer_rq  # tasks must be named peer_rq.*, not __main__.*

    peer_rq.main()
