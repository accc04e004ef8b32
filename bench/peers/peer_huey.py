"""huey: RedisHuey (blocking dequeue, its default), results off.

Single enqueue: calling the task (``noop()``). Bulk: huey has no bulk API;
LPUSH of ``serialize_task`` output, BULK_CHUNK a call (what its own
``enqueue`` does, batched; not a public API). Workers: ``huey_consumer -k
KIND -w N`` (one task at a time a worker)."""

from __future__ import annotations

import sys

import common
from huey import RedisHuey

huey = RedisHuey("bench-peers", url=common.URL, results=False)


@huey.task()
def noop():
    common.noop_body()


@huey.task()
def stamp(seq):
    common.stamp_body(seq)


class Huey(common.System):
    name = "huey"
    DEFAULT = {"k": "process", "w": 2}
    SWEEP = [{"k": "process", "w": 2}, {"k": "process", "w": 4}, {"k": "thread", "w": 8}]
    BULK = "LPUSH of serialised tasks (no public bulk API)"

    def worker(self, config):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        kind, workers = config["k"], str(config["w"])
        return [f"{bin_dir}/huey_consumer", "peer_huey.huey", "-k", kind, "-w", workers, "-q", "-C"]

    def describe(self, config):
        return f"huey_consumer -k {config['k']} -w {config['w']}"

    def enqueue_one(self, seq):
        noop() if seq is None else stamp(seq)

    def enqueue_bulk(self, n):
        conn, key = huey.storage.conn, huey.storage.queue_key
        for i in range(0, n, common.BULK_CHUNK):
            conn.lpush(key, *[huey.serialize_task(noop.s()) for _ in range(min(common.BULK_CHUNK, n - i))])


if __name__ == "__main__":
    import peer_huey  # tasks must be named peer_huey.*, not __main__.*

    common.main(peer_huey.Huey)
