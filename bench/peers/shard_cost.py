"""Redis server instructions a job on a 3-master Redis Cluster, the namespace
unsharded (one master holds it) against ``shards=3``: each master's share of
a 3-queue drain, and the instructions a job's life costs in all.

    .venv/bin/python -m bench.peers.shard_cost [--jobs 600]

Three redis-servers of its own, each under ``valgrind --tool=callgrind`` (as
bench/peers/cost.py runs one), made a cluster (``redis-cli --cluster create``,
no replicas). For each layout, with the store alone (no worker processes, so
the count is the store's calls and nothing else): ``--jobs`` jobs enqueued
over three queues in chunks (``enqueue_many``), then drained by a worker's
path, a claim of 16 across the three queues and one ``complete_many`` of them,
until none is left. Each server's instructions are read from its callgrind
dumps around the enqueue and the drain; the instructions the cluster's own
housekeeping costs (its bus, its cron) over the same time, measured on the
idle cluster first, are taken off, so what is left is the calls' work.
Printed: thousands of instructions a job on each master, each one's share,
and the sum against the unsharded layout's (the issue's targets: each share
within 25 % of a third, the sum within 10 %).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.peers.instructions import dump_instructions
from store import open_store
from store.models import JobSpec
from store.redis.keys import DEFAULT_PREFIX
from tests.redis_cluster import free_ports as free_cluster_ports

QUEUES = ("shard-a", "shard-b", "shard-c")  # one on each of 3 shards (CRC-32 of the name)
#: Jobs a claim takes and an ack call completes (a worker's grouped acks).
IN_FLIGHT = 16
#: Seconds the idle cluster is measured for its housekeeping's rate.
IDLE_S = 5.0


@dataclass
class Server:
    port: int
    proc: subprocess.Popen
    out: Path

    def dump(self) -> int:
        """Instructions since the previous dump (callgrind_control --dump)."""
        return dump_instructions(self.proc.pid, self.out)


def start_cluster(folder: Path) -> list[Server]:
    """Three servers under callgrind made one cluster; stopped again if that fails."""
    servers: list[Server] = []
    try:
        return _start(folder, servers)
    except BaseException:
        stop(servers)
        raise


def stop(servers: list[Server]) -> None:
    for server in servers:
        subprocess.run(["redis-cli", "-p", str(server.port), "shutdown", "nosave"], capture_output=True)
        try:
            server.proc.wait(120)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


def _start(folder: Path, servers: list[Server]) -> list[Server]:
    for i, port in enumerate(free_cluster_ports(3)):
        out = folder / f"callgrind-{i}.out"
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            shutil.which("redis-server") or "redis-server", "--port", str(port),
            "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
            "--cluster-config-file", str(folder / f"nodes-{port}.conf"), "--cluster-node-timeout", "60000",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
        servers.append(Server(port, proc, out))
    for server in servers:
        deadline = time.monotonic() + 120
        while True:
            try:
                redis.Redis(port=server.port).ping()
                break
            except redis.ConnectionError:
                if server.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start under callgrind") from None
                time.sleep(0.3)
    nodes = [f"127.0.0.1:{s.port}" for s in servers]
    subprocess.run(
        ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    deadline = time.monotonic() + 300
    for server in servers:
        while redis.Redis(port=server.port).cluster("info").get("cluster_state") != "ok":
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not come up under callgrind")
            time.sleep(0.5)
    return servers


def drain(url: str, jobs: int) -> None:
    with open_store(url) as store:
        for i in range(0, jobs, 100):
            store.enqueue_many(
                [JobSpec("noop", {"seq": n}, queue=QUEUES[n % 3]) for n in range(i, min(jobs, i + 100))]
            )
        while held := store.claim("w", list(QUEUES), IN_FLIGHT):
            store.complete_many([(job.id, job.lease_token, None) for job in held], "w")


def measure(servers: list[Server], query: str, jobs: int, idle_per_s: list[float]) -> list[float]:
    """k instructions a job on each server for one layout, housekeeping taken off."""
    # The default prefix: its tags {leasehold:0..2} fall one on each master of an
    # evenly split cluster (docs/architecture.md, Shards); a random one may not.
    url = f"redis+cluster://127.0.0.1:{servers[0].port}?prefix={DEFAULT_PREFIX}{query}"
    drain(url, 3)  # untimed: the library's load, connections, slot maps
    for server in servers:
        server.dump()
    t0 = time.monotonic()
    drain(url, jobs)
    took = time.monotonic() - t0
    return [
        max(0.0, s.dump() - rate * took) / jobs / 1000 for s, rate in zip(servers, idle_per_s, strict=True)
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=600, help="jobs enqueued and drained a layout")
    p.add_argument("--shards", type=int, default=3)
    args = p.parse_args(argv)
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("valgrind not found: apt-get install valgrind", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="lh-shard-cost-") as tmp:
        servers = start_cluster(Path(tmp))
        try:
            for server in servers:
                server.dump()
            time.sleep(IDLE_S)
            idle = [server.dump() / IDLE_S for server in servers]
            rows = [("unsharded", measure(servers, "", args.jobs, idle))]
            try:
                rows.append(
                    (f"shards={args.shards}", measure(servers, f"&shards={args.shards}", args.jobs, idle))
                )
            except Exception as exc:  # a store without shards: say so, keep the baseline
                print(f"# shards={args.shards}: not run: {type(exc).__name__}: {str(exc)[:300]}")
        finally:
            for server in servers:
                subprocess.run(
                    ["redis-cli", "-p", str(server.port), "shutdown", "nosave"], capture_output=True
                )
                server.proc.wait(120)
    print("# Redis server instructions a job on a 3-master cluster (callgrind), unsharded against shards")
    print(f"# command: bench/peers/shard_cost.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"# {args.jobs} no-op jobs over {len(QUEUES)} queues, enqueue_many 100 a call, then claims of "
        f"{IN_FLIGHT} across the queues and complete_many; cluster housekeeping "
        f"({', '.join(f'{r / 1000:,.0f}k' for r in idle)} instructions a second, idle) taken off"
    )
    print("| layout | k instr./job on each master | share of each | sum (k instr./job) |")
    print("|---|---|---|---:|")
    for name, per in rows:
        total = sum(per) or 1.0
        cells = " / ".join(f"{v:,.1f}" for v in per)
        shares = " / ".join(f"{v / total:.0%}" for v in per)
        print(f"| {name} | {cells} | {shares} | {sum(per):,.1f} |")
    if len(rows) == 2:
        base, sharded = sum(rows[0][1]), rows[1][1]
        third = sum(sharded) / len(sharded)
        spread = max(abs(v - third) / third for v in sharded) if third else 0.0
        even = "met" if spread <= 0.25 else "NOT met"
        print(f"# target: each master within 25 % of a third: worst {spread:.0%}, {even}")
        ratio = sum(sharded) / base if base else 0.0
        verdict = "met" if abs(ratio - 1) <= 0.10 else "NOT met"
        print(f"# target: a job's life within 10 % of the unsharded store's: {ratio:.2f}x, {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
