"""dramatiq: RedisBroker, ``actor.send()`` per message (its enqueue is a Lua
script per message, no bulk API), ``dramatiq --processes P --threads T``."""

from __future__ import annotations

import sys

import dramatiq
from common import COUNTER, URL, args, client, drain, report, timed
from dramatiq.brokers.redis import RedisBroker

broker = RedisBroker(url=URL, namespace="bench-peers")
dramatiq.set_broker(broker)
_conn = None


@dramatiq.actor(max_retries=0)
def noop():
    global _conn
    _conn = _conn or client()
    _conn.incr(COUNTER)


def main() -> None:
    jobs, procs, threads, timeout = args()

    def enqueue() -> None:
        for _ in range(jobs):
            noop.send()

    enq = timed(enqueue)
    bin_dir = sys.executable.rsplit("/", 1)[0]
    cmd = [f"{bin_dir}/dramatiq", "peer_dramatiq", "--processes", str(procs), "--threads", str(threads)]
    report({"enqueue_s": enq, **drain(cmd, jobs, timeout), "workers": f"{procs} procs x {threads} threads"})


if __name__ == "__main__":
    import peer_dramatiq  # tasks must be named peer_dramatiq.*, not __main__.*

    peer_dramatiq.main()
