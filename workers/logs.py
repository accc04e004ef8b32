"""Logging of worker processes: one line per record on stderr.

Per-job records are DEBUG; INFO and above never carry payloads, results or
store credentials (the store URL is not logged).
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"


def configure_logging(level: str = "INFO") -> None:
    """Send records at ``level`` and above to stderr (once per process)."""
    root = logging.getLogger()
    if not any(getattr(h, "_leasehold", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._leasehold = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its import chatter at INFO
