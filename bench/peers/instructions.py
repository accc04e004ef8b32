"""Redis server instructions a job (callgrind): the measure of bench/peers/cost.py.

Seconds on these machines vary 3x from day to day and with whatever else
runs; the instructions a redis-server executes for the same commands do not.
``cost.py`` starts one redis-server under ``valgrind --tool=callgrind`` and
runs each system against it; here, in the system's own process, each
operation runs between two ``callgrind_control --dump`` calls, and the
instructions counted in the dump taken after it (callgrind counts from the
previous dump) are divided by the jobs it handled.

Operations: ``single`` (``single`` jobs through the one-job API), ``bulk``
(``bulk`` jobs through the bulk API, where the system has one), each after
WARMUP jobs enqueued untimed the same way, and ``drain``
(``jobs`` no-op jobs enqueued untimed, then run by the system's workers: from
their start to the last completion, so start-up and idle polls count too).

Environment: BENCH_PEERS_CALLGRIND_PID (the server's pid) and
BENCH_PEERS_CALLGRIND_OUT (its ``--callgrind-out-file``; dumps are
``<that>.<n>``).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The issue's instruction budgets, k a job (bench/peers/cost.py and
#: life_cost.py print each figure against them): one enqueue call for one
#: job, and a job's whole life (enqueue, claim, ack), or an ack that claims
#: the next job.
ENQUEUE_BUDGET_K = 180.0
LIFE_BUDGET_K = 300.0

#: Jobs enqueued untimed before a timed enqueue (the first loads scripts, opens connections).
WARMUP = 5
#: Seconds between two reads of the completion count (each read is server work too).
POLL_S = 0.25


def _dump() -> int:
    """Dump callgrind's counts; the instructions since the previous dump."""
    return dump_instructions(
        int(os.environ["BENCH_PEERS_CALLGRIND_PID"]), Path(os.environ["BENCH_PEERS_CALLGRIND_OUT"])
    )


def dump_instructions(pid: int, out: Path) -> int:
    """Dump the counts of the server under callgrind with ``pid`` (its
    ``--callgrind-out-file`` is ``out``; dumps are ``<out>.<n>``): the
    instructions since its previous dump."""
    subprocess.run(["callgrind_control", "--dump", str(pid)], check=True, capture_output=True)
    dumps = out.parent.glob(f"{out.name}.*")
    newest = max(dumps, key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else -1)
    with newest.open() as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {newest}")


def per_job(run: Callable[[], None], jobs: int) -> float:
    """Thousands of server instructions a job of ``run()``."""
    _dump()
    run()
    return _dump() / jobs / 1000


def instructions(system: Any, config: dict[str, Any], spec: dict[str, Any]) -> dict[str, float]:
    """``{"single", "bulk", "drain"}``: thousands of server instructions a job."""
    from common import Workers  # imported here: common.measure imports this module

    out: dict[str, float] = {}
    system.reset()
    single = spec["single"]
    for _ in range(WARMUP):  # untimed: script loads, connections
        system.enqueue_one(None)
    out["single"] = per_job(lambda: [system.enqueue_one(None) for _ in range(single)], single)
    if system.BULK:
        system.reset()
        system.enqueue_bulk(WARMUP)
        out["bulk"] = per_job(lambda: system.enqueue_bulk(spec["bulk"]), spec["bulk"])
    system.reset()
    jobs = spec["jobs"]
    system.enqueue_for_drain(jobs)

    def drain() -> None:
        deadline = time.monotonic() + spec["timeout"]
        with Workers(system, config) as w:
            while system.count() < jobs:
                if (err := w.failed()) is not None:
                    raise RuntimeError(err)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{system.count()}/{jobs} done after {spec['timeout']:.0f} s")
                time.sleep(POLL_S)

    out["drain"] = per_job(drain, jobs)
    system.check()
    return out
