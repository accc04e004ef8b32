"""dramatiq: RedisBroker, ``send()`` per message (one Lua call each; no bulk
API), ``dramatiq --processes P --threads T``."""

from __future__ import annotations

import sys

import common
import dramatiq
from dramatiq.brokers.redis import RedisBroker

broker = RedisBroker(url=common.URL, namespace="bench-peers")
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=0)
def noop():
    common.noop_body()


@dramatiq.actor(max_retries=0)
def stamp(seq):
    common.stamp_body(seq)


class Dramatiq(common.System):
    name = "dramatiq"
    DEFAULT = {"p": 2, "t": 32}
    SWEEP = [{"p": 2, "t": 8}, {"p": 2, "t": 32}, {"p": 1, "t": 8}, {"p": 4, "t": 8}]

    def worker(self, config):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        procs, threads = str(config["p"]), str(config["t"])
        return [f"{bin_dir}/dramatiq", "peer_dramatiq", "--processes", procs, "--threads", threads]

    def describe(self, config):
        return f"dramatiq -p {config['p']} -t {config['t']}"

    def enqueue_one(self, seq):
        noop.send() if seq is None else stamp.send(seq)


if __name__ == "__main__":
    import peer_dramatiq  # actors must be named peer_dramatiq.*, not __main__.*

    common.main(peer_dramatiq.Dramatiq)
