"""huey: RedisHuey, LPUSH of pre-serialised tasks in chunks of 1000 (pipelined
bulk enqueue), ``huey_consumer -k process -w P`` (one task at a time a process)."""

from __future__ import annotations

import sys

from common import COUNTER, URL, args, client, drain, report, timed
from huey import RedisHuey

huey = RedisHuey("bench-peers", url=URL, results=False)
_conn = None


@huey.task()
def noop():
    global _conn
    _conn = _conn or client()
    _conn.incr(COUNTER)


def main() -> None:
    jobs, procs, _threads, timeout = args()
    conn = huey.storage.conn
    key = huey.storage.queue_key

    def enqueue() -> None:
        for i in range(0, jobs, 1000):
            conn.lpush(key, *[huey.serialize_task(noop.s()) for _ in range(min(1000, jobs - i))])

    enq = timed(enqueue)
    bin_dir = sys.executable.rsplit("/", 1)[0]
    cmd = [f"{bin_dir}/huey_consumer", "peer_huey.huey", "-k", "process", "-w", str(procs), "-q", "-C"]
    report({"enqueue_s": enq, **drain(cmd, jobs, timeout), "workers": f"{procs} procs x 1"})


if __name__ == "__main__":
    import peer_huey  # tasks must be named peer_huey.*, not __main__.*

    peer_huey.main()
