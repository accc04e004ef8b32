"""The worker flows one way (docs/architecture.md, "The worker as a pipeline"):
claim (``workers.claiming``, the main thread) -> run (``workers.pool``) ->
record (``workers.outcomes`` and the inbox the main thread reads,
``workers.inbox``, recorded by ``workers.recorder``).

Read from the source: no stage imports a stage before it (every import, those
inside functions and under ``TYPE_CHECKING`` included). Read from a worker
object: what a later stage holds of the worker is the inbox (a queue it
posts to) and the outcomes, never a bound method of the claim loop.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from workers.config import WorkerConfig
from workers.worker import Worker

REPO = Path(__file__).resolve().parents[2]

#: Each stage module and the worker modules it must not import (an earlier stage, or the worker).
FORBIDDEN = {
    "workers.inbox": {
        "workers.claiming",
        "workers.worker",
        "workers.pool",
        "workers.outcomes",
        "workers.recorder",
    },
    "workers.recorder": {"workers.claiming", "workers.worker", "workers.pool", "workers.outcomes"},
    "workers.outcomes": {"workers.claiming", "workers.worker", "workers.pool"},
    "workers.pool": {"workers.claiming", "workers.worker", "workers.inbox", "workers.recorder"},
    "workers.wakeup": {"workers.claiming", "workers.worker", "workers.pool", "workers.outcomes"},
    "workers.heartbeat": {"workers.claiming", "workers.worker"},
}


def _imports(module: str) -> set[str]:
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_no_stage_imports_an_earlier_one(module: str) -> None:
    assert not _imports(module) & FORBIDDEN[module]


def test_the_later_stages_hold_the_inbox_and_the_outcomes_never_the_claim_loop(tmp_path: Path) -> None:
    config = WorkerConfig(store_url=f"sqlite:///{tmp_path}/x.db", concurrency=2, handlers=())
    worker = Worker(config, store=None, install_signals=False)  # type: ignore[arg-type]  # nothing runs
    runner = worker.runner
    held = [getattr(runner, name) for name in vars(runner) if callable(getattr(runner, name))]
    owners = {type(getattr(fn, "__self__", None)).__name__ for fn in held if inspect.ismethod(fn)}
    assert owners <= {"Outcomes", "Inbox"}, owners
    assert runner._done.__self__ is worker.outcomes and runner._freed.__self__ is worker.inbox
    later = [worker.outcomes, worker.recorder, worker.inbox]
    for part in later:  # nothing of the worker but the parts after the claim stage
        for value in vars(part).values():
            assert value is not worker and getattr(value, "__self__", None) is not worker


def test_the_claim_stage_is_a_part_of_the_worker_not_a_base(tmp_path: Path) -> None:
    """The worker holds its claim stage (``worker.claims``) as it holds its
    other parts; the claim stage holds the later stages and the shared stop
    and quiet events, never the worker, and no later stage holds it."""
    config = WorkerConfig(store_url=f"sqlite:///{tmp_path}/x.db", concurrency=2, handlers=())
    worker = Worker(config, store=None, install_signals=False)  # type: ignore[arg-type]  # nothing runs
    assert Worker.__mro__ == (Worker, object)
    claims = worker.claims
    for value in vars(claims).values():
        assert value is not worker and getattr(value, "__self__", None) is not worker
    assert claims.runner is worker.runner and claims.inbox is worker.inbox
    for part in (worker.runner, worker.outcomes, worker.recorder, worker.inbox, worker.timeouts):
        for value in vars(part).values():
            assert value is not claims and getattr(value, "__self__", None) is not claims
