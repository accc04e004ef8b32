"""celery: Redis broker, results ignored, ``apply_async`` per message on one
producer (no bulk API), ``celery worker --pool prefork -c P`` (P child processes)."""

from __future__ import annotations

import sys

from celery import Celery
from common import COUNTER, URL, args, client, drain, report, timed

app = Celery("peer_celery", broker=URL)
app.conf.update(
    task_ignore_result=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True
)
_conn = None


@app.task(name="noop")
def noop():
    global _conn
    _conn = _conn or client()
    _conn.incr(COUNTER)


def main() -> None:
    jobs, procs, _threads, timeout = args()

    def enqueue() -> None:
        with app.producer_or_acquire() as producer:
            for _ in range(jobs):
                noop.apply_async(producer=producer)

    enq = timed(enqueue)
    bin_dir = sys.executable.rsplit("/", 1)[0]
    cmd = [
        f"{bin_dir}/celery",
        "-A",
        "peer_celery",
        "worker",
        "--pool",
        "prefork",
        "-c",
        str(procs),
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    report({"enqueue_s": enq, **drain(cmd, jobs, timeout), "workers": f"prefork, {procs} children"})


if __name__ == "__main__":
    import peer_celery  # tasks must be named peer_celery.*, not __main__.*

    peer_celery.main()
