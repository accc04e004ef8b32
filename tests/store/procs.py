"""Child-process bodies for the multi-process contract tests (spawned, so
each opens its own store from the URL as a real worker would)."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any

from store import StoreSettings, open_store


def claim_and_complete(url: str, worker: str, barrier: Any, out: mp.Queue) -> None:
    """Claim in small batches and complete until the queue stays empty; send
    back every (job_id, token) claimed."""
    store = open_store(url, StoreSettings())
    claimed: list[tuple[str, int]] = []
    try:
        barrier.wait(timeout=60)
        empty = 0
        while empty < 3:
            batch = store.claim(worker, ["default"], 10)
            if not batch:
                empty += 1
                continue
            empty = 0
            for job in batch:
                claimed.append((job.id, job.lease_token))
                store.complete(job.id, job.lease_token, {"by": worker}, worker_id=worker)
        out.put((worker, claimed, None))
    except Exception as exc:  # report to the parent instead of dying silently
        out.put((worker, claimed, repr(exc)))
    finally:
        store.close()


def recover_all(url: str, owner: str, offset_s: float, barrier: Any, out: mp.Queue) -> None:
    """Run recovery batches until none is left; send back the job ids recovered."""
    store = open_store(url, StoreSettings())
    store.clock_offset_s = offset_s
    got: list[str] = []
    try:
        barrier.wait(timeout=60)
        while True:
            report = store.recover_expired(limit=50, owner=owner)
            got.extend(r.job_id for r in report.recovered + report.failed)
            if not report.recovered and not report.failed and not report.more:
                break
        out.put((owner, got, None))
    except Exception as exc:
        out.put((owner, got, repr(exc)))
    finally:
        store.close()


def run_children(target: Any, args_for: list[tuple[Any, ...]], timeout_s: float = 240) -> list[Any]:
    """Start one spawned process per args tuple (with a shared barrier and
    result queue appended), wait for every result within ``timeout_s``."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(args_for))
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, barrier, out)) for a in args_for]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=timeout_s) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [r for r in results if r[2]]
    assert not errors, errors
    return results


def enqueue_unique(url: str, name: str, times: int, barrier: Any, out: mp.Queue) -> None:
    """Enqueue the same unique job ``times`` times; send back the ids answered."""
    store = open_store(url, StoreSettings())
    ids: set[str] = set()
    try:
        barrier.wait(timeout=60)
        for _ in range(times):
            ids.add(store.enqueue(name, {"same": True}, unique_for=3600).id)
        out.put((name, sorted(ids), None))
    except Exception as exc:
        out.put((name, sorted(ids), f"{exc!r}: {exc} {traceback.format_exc(limit=-2)}"))
    finally:
        store.close()
