"""celery: Redis broker, results ignored, ``apply_async`` per message (no bulk
API: a group publishes one message per task), ``celery worker --pool P -c N``
(no gossip, mingle or heartbeat)."""

from __future__ import annotations

import sys

import common
from celery import Celery

app = Celery("peer_celery", broker=common.URL)
app.conf.update(
    task_ignore_result=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True
)


@app.task(name="noop")
def noop():
    common.noop_body()


@app.task(name="stamp")
def stamp(seq):
    common.stamp_body(seq)


class CeleryPeer(common.System):
    name = "celery"
    DEFAULT = {"pool": "prefork", "c": 2, "prefetch": 4}
    SWEEP = [
        {"pool": "prefork", "c": 2, "prefetch": 4},
        {"pool": "prefork", "c": 4, "prefetch": 4},
        {"pool": "prefork", "c": 2, "prefetch": 64},
        {"pool": "threads", "c": 8, "prefetch": 16},
    ]

    def __init__(self) -> None:
        self.producer = app.producer_pool.acquire(block=True)

    def __exit__(self, *exc):
        self.producer.release()

    def worker(self, config):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        return [
            f"{bin_dir}/celery", "-A", "peer_celery", "worker", "--pool", config["pool"],
            "-c", str(config["c"]), "--prefetch-multiplier", str(config["prefetch"]), "--loglevel", "WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip

    def describe(self, config):
        pool, c, prefetch = config["pool"], config["c"], config["prefetch"]
        return f"celery worker --pool {pool} -c {c} --prefetch-multiplier {prefetch}"

    def enqueue_one(self, seq):
        if seq is None:
            noop.apply_async(producer=self.producer)
        else:
            stamp.apply_async((seq,), producer=self.producer)


if __name__ == "__main__":
    import peer_celery  # tasks must be named peer_celery.*, not __main__.*

    common.main(peer_celery.CeleryPeer)
