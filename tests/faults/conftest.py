"""Fixtures of the fault tests: real worker processes running the ledger
handlers on a fresh store, always killed at the end (logs attached to a
failing test), and a summary table of every soak printed after the run,
with the figures other fault tests measured (claim latency, resume time)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store import StoreSettings
from store.lifecycle import RetryPolicy
from tests.backends import StoreHandle
from tests.workers.procs import Spawner

#: Figures of each soak run in this session, printed by pytest_terminal_summary.
SOAK_RESULTS: list[dict[str, Any]] = []
#: One line per measured figure of the other fault tests, printed after the soak table.
FIGURES: list[str] = []
HANDLERS = "tests.faults.ledger_handlers"


@pytest.fixture
def store_settings() -> StoreSettings:
    """The test process's store retries as fast as the workers it starts."""
    return StoreSettings(lease_ttl_s=1.0, retry=RetryPolicy(base_s=0.05, max_delay_s=1.0))


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.fixture
def spawn(
    handle: StoreHandle, tmp_path: Path, ledger: Path, request: pytest.FixtureRequest
) -> Iterator[Spawner]:
    """Starts workers with the ledger handlers (env: LEASEHOLD_TEST_LEDGER)."""
    spawner = Spawner(handle.url, tmp_path)
    base_env = spawner.env

    def env(**extra: str) -> dict[str, str]:
        return base_env(**{"LEASEHOLD_HANDLERS": HANDLERS, "LEASEHOLD_TEST_LEDGER": str(ledger), **extra})

    spawner.env = env  # type: ignore[method-assign]
    request.node.leasehold_spawner = spawner
    yield spawner
    spawner.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    spawner = getattr(item, "leasehold_spawner", None)
    if spawner is not None and report.when == "call" and report.failed:
        report.sections.append(("worker logs", spawner.logs()[-20000:]))
    return report


def report(line: str) -> None:
    """Print a measured figure now (``-s``) and again in the terminal summary."""
    print(f"\n{line}")
    FIGURES.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("leasehold fault figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
    if not SOAK_RESULTS:
        return
    cols = [
        "backend",
        "jobs",
        "processes",
        "kills",
        "retries",
        "lease_expired",
        "duration_s",
        "jobs_per_s",
        "violations",
    ]
    tr = terminalreporter
    tr.section("leasehold soak")
    tr.write_line("  ".join(f"{c:>13}" for c in cols))
    for r in SOAK_RESULTS:
        tr.write_line("  ".join(f"{r.get(c, '')!s:>13}" for c in cols))
