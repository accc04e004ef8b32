"""Logging of Leasehold processes (worker, CLI, gunicorn): one line per record on stderr.

``LEASEHOLD_LOG_FORMAT`` picks the line: ``text`` (default) or ``json``, one
JSON object per line (python-json-logger) with ``time``, ``level``,
``process``, ``logger``, ``message`` and whatever the call passed in
``extra=`` (the worker's job records carry ``job_id``, ``worker_id`` and
``queue``). A run's outcome is logged by ``workers.outcomes``: a success at
INFO with ``run_time_s`` (LEASEHOLD_LOG_SUCCESS), a failed attempt at
WARNING and a final failure at ERROR, each with ``handler``, ``job_id``,
``attempt``, ``error_type``, ``error_message`` and ``traceback`` (the text
format prints the traceback under the line). Records never carry payloads,
results or store credentials (the store URL is not logged).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from leasehold.settings import PREFIX, parse_choice

FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
#: Values of LEASEHOLD_LOG_FORMAT.
LOG_FORMATS = ("text", "json")
#: The standard attributes a JSON line carries, renamed as they appear in it.
JSON_FIELDS = {
    "asctime": "time",
    "levelname": "level",
    "process": "process",
    "name": "logger",
    "message": "message",
}


def log_format_from_env() -> str:
    """LEASEHOLD_LOG_FORMAT, ``text`` when unset. Raises ConfigError naming it."""
    return parse_choice("LOG_FORMAT", os.environ.get(f"{PREFIX}LOG_FORMAT") or "text", LOG_FORMATS)


class TextFormatter(logging.Formatter):
    """FORMAT, with a job failure's ``traceback`` (an ``extra=`` field) under the line."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        tb = getattr(record, "traceback", None)
        return f"{line}\n{tb.rstrip()}" if tb else line


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (``text`` or ``json``)."""
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        fmt = " ".join(f"%({name})s" for name in JSON_FIELDS)
        renames = {k: v for k, v in JSON_FIELDS.items() if k != v}
        return JsonFormatter(fmt, rename_fields=renames, datefmt="%Y-%m-%dT%H:%M:%S%z")
    return TextFormatter(FORMAT)


def configure_logging(level: str = "INFO", log_format: str | None = None) -> None:
    """Send records at ``level`` and above to stderr (one handler per
    process), formatted by ``log_format`` (default: LEASEHOLD_LOG_FORMAT)."""
    root = logging.getLogger()
    fmt = formatter(log_format or log_format_from_env())
    mine = [h for h in root.handlers if getattr(h, "_leasehold", False)]
    if mine:
        mine[0].setFormatter(fmt)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(fmt)
        handler._leasehold = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its import chatter at INFO


def gunicorn_logconfig(log_format: str, level: str = "info") -> dict[str, Any] | None:
    """gunicorn's ``logconfig_dict`` for ``log_format``: for ``json``, its
    error and access logs and the app's records as JSON lines (access
    lines keep gunicorn's access format as their message); None for text
    (gunicorn's own set-up). ``level``: LEASEHOLD_WEB_LOGLEVEL."""
    if log_format != "json":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json"}
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "leasehold.logs.formatter", "log_format": "json"}},
        "handlers": {
            "error": {**handler, "stream": "ext://sys.stderr"},
            "access": {**handler, "stream": "ext://sys.stdout"},
        },
        "root": {"level": level, "handlers": ["error"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["error"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["access"], "propagate": False},
        },
    }


def job_fields(job: Any, worker_id: str) -> dict[str, str]:
    """``extra=`` of a job's log record: its id, queue and the worker's id
    (fields of a JSON line; never the payload or result)."""
    return {"job_id": job.id, "worker_id": worker_id, "queue": job.queue}
