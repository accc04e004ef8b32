"""Entry point of a supervised worker process: ``python -m workers.child``.

Reads its WorkerConfig from the environment (``supervisor.CONFIG_ENV``),
asks Linux to send it SIGTERM if the supervisor dies (so it shuts down
gracefully instead of running orphaned), loads the handler modules and runs
one worker. The exit code is the worker's.
"""

from __future__ import annotations

import os
import signal
import sys


def _die_with_parent() -> None:
    parent = os.environ.get("_LEASEHOLD_SUPERVISOR_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the supervisor died before prctl took effect
        sys.exit(0)


def main() -> int:
    from leasehold.logs import configure_logging
    from workers.config import WorkerConfig
    from workers.handlers import load_handlers
    from workers.supervisor import CONFIG_ENV
    from workers.worker import run_worker

    config = WorkerConfig.from_json(os.environ[CONFIG_ENV])
    _die_with_parent()
    configure_logging(config.log_level)
    load_handlers(config.handlers)
    return run_worker(config)


if __name__ == "__main__":
    sys.exit(main())
