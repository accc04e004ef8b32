"""The settings every Leasehold process reads: store, handlers, worker, recovery.

One model for the web app, the worker and the CLI. ``settings_from_env()``
reads ``LEASEHOLD_*`` from the environment the way Flask's
``app.config.from_prefixed_env("LEASEHOLD")`` does (each value parsed as JSON
when it is JSON, else kept as a string), so the ``leasehold`` command and
``flask --app wsgi`` see the same values without building a Flask app. The
web app adds its own keys on top (``webapp.config``). A bad value raises
ConfigError naming its variable; the timers are checked together.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from store import DEFAULT_STORE_URL, StoreSettings
from store.lifecycle import JobStatus, RetryPolicy

#: Environment prefix of every setting: ``LEASEHOLD_LEASE_TTL`` is key ``LEASE_TTL``.
PREFIX = "LEASEHOLD_"

#: Defaults, each with its unit. Keys are the names after ``LEASEHOLD_``.
DEFAULTS: dict[str, Any] = {
    "STORE_URL": DEFAULT_STORE_URL,  # SQLAlchemy or Redis URL
    "HANDLERS": "",  # comma-separated import paths of handler modules
    "LEASE_TTL": 30.0,  # seconds
    "RECOVERY_INTERVAL": 15.0,  # seconds
    "MAX_RETRIES": 3,  # retries per job (4 attempts)
    "RETRY_BASE": 2.0,  # seconds; delay = base * 2**retry_count
    "RETRY_MAX_DELAY": 3600.0,  # seconds
    "RETRY_JITTER": 0.0,  # fraction of the delay drawn at random, [0, 1]
    "JOB_TIMEOUT": 1800.0,  # seconds
    "RECOVERY_ENABLED": True,
    "RECOVERY_BATCH": 500,  # expired leases per recovery batch
    "RECOVERY_LOCK_TTL": 300.0,  # seconds
    "CONCURRENCY": 0,  # job slots per worker process; 0 = CPU count
    "RETENTION_COMPLETED": 604800.0,  # seconds a Completed job is kept; 0 keeps forever
    "RETENTION_FAILED": 2592000.0,  # seconds a Failed job is kept; 0 keeps forever
    "RETENTION_CANCELED": 604800.0,  # seconds a Canceled job is kept; 0 keeps forever
    "WORKER_FORGET_AFTER": 0.0,  # seconds without a heartbeat; 0 = max(300, 10 x lease TTL)
    "MAINTENANCE_INTERVAL": 60.0,  # seconds between retention and worker-pruning runs
    "PG_SCHEMA": "",  # PostgreSQL schema of the tables; "" = the server's search_path
    "PG_CONNECT_TIMEOUT": 5,  # seconds to wait for a PostgreSQL connection
    "LOG_SUCCESS": True,  # log each completed job at INFO with its run time
    "UNKNOWN_HANDLER_GRACE": 3600.0,  # seconds a job whose handler no worker has waits, then fails
}

#: Upper bounds (inclusive): a value past them is a typo, not a setting.
DAY_S = 86400.0
MAX_RETENTION_S = 3650 * DAY_S


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the variable."""


def _var(key: str) -> str:
    return f"{PREFIX}{key}"


def parse_number(key: str, raw: Any, low: float, integer: bool = False, high: float = math.inf) -> float:
    """``raw`` (a string from the environment, or a number) as a finite number
    within [low, high]. Raises ConfigError naming ``LEASEHOLD_<key>``."""
    kind = "an integer" if integer else "a number"
    try:
        if isinstance(raw, bool):
            raise TypeError
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{_var(key)} must be {kind}, got {raw!r}") from None
    if integer and not value.is_integer():
        raise ConfigError(f"{_var(key)} must be an integer, got {raw!r}")
    if not math.isfinite(value) or not low <= value <= high:
        bound = f">= {low:g}" if high == math.inf else f"within [{low:g}, {high:g}]"
        raise ConfigError(f"{_var(key)} must be {bound}, got {raw!r}")
    return float(int(value)) if integer else value


def parse_flag(key: str, raw: Any) -> bool:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case) or a bool;
    anything else (``ture``) raises ConfigError naming ``LEASEHOLD_<key>``."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{_var(key)} must be true or false, got {raw!r}")


def parse_choice(key: str, raw: Any, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (case-insensitive). Raises ConfigError naming ``LEASEHOLD_<key>``."""
    text = str(raw).strip().lower()
    if text not in choices:
        raise ConfigError(f"{_var(key)} must be one of {', '.join(choices)}, got {raw!r}")
    return text


def _number(
    config: Mapping[str, Any], key: str, low: float, integer: bool = False, high: float = math.inf
) -> float:
    return parse_number(key, config.get(key, DEFAULTS[key]), low, integer, high)


def _flag(config: Mapping[str, Any], key: str) -> bool:
    return parse_flag(key, config.get(key, DEFAULTS[key]))


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated settings (seconds for every ``_s``)."""

    store_url: str
    handlers: tuple[str, ...]
    lease_ttl_s: float
    heartbeat_interval_s: float
    recovery_interval_s: float
    recovery_enabled: bool
    recovery_batch: int
    recovery_lock_ttl_s: float
    job_timeout_s: float
    max_retries: int
    retry: RetryPolicy
    concurrency: int
    #: Seconds each finished status is kept before retention prunes it (0: forever).
    retention_s: Mapping[JobStatus, float]
    worker_forget_after_s: float
    maintenance_interval_s: float
    #: Log each completed job at INFO with its run time (failures are always logged).
    log_success: bool = True
    #: Seconds after its enqueue a job whose handler a worker lacks is released (not
    #: failed) for another worker to take; past it the job fails with UnknownHandler.
    unknown_handler_grace_s: float = 3600.0

    def store_settings(self) -> StoreSettings:
        """The store's defaults from these settings."""
        return StoreSettings(
            lease_ttl_s=self.lease_ttl_s,
            max_retries=self.max_retries,
            job_timeout_s=self.job_timeout_s,
            retry=self.retry,
            recovery_batch=self.recovery_batch,
        )


def env_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``LEASEHOLD_*`` variables as config keys (prefix dropped), each value
    the string the environment holds: never guessed as JSON, so an all-digit
    secret stays text and ``1MB`` is refused by its parser, not passed on.
    The web app reads the same way (``from_prefixed_env(..., loads=str)``)."""
    environ = os.environ if environ is None else environ
    return {name.removeprefix(PREFIX): environ[name] for name in sorted(environ) if name.startswith(PREFIX)}


def _check_store_environment(config: Mapping[str, Any]) -> None:
    """The store's own variables, which the SQL store reads itself when it
    connects: checked here too so a bad one stops the process at start."""
    parse_number(
        "PG_CONNECT_TIMEOUT", config.get("PG_CONNECT_TIMEOUT", DEFAULTS["PG_CONNECT_TIMEOUT"]), 1, True, 300
    )
    schema = str(config.get("PG_SCHEMA") or "")
    if schema:
        from store.sql.engine import resolve_pg_schema  # the one rule for schema names

        try:
            resolve_pg_schema(schema)
        except ValueError as exc:
            raise ConfigError(f"{_var('PG_SCHEMA')} {getattr(exc, 'message', exc)}") from None


def load_settings(config: Mapping[str, Any]) -> Settings:
    """Validate a Flask config (or any mapping of the keys of DEFAULTS).

    Raises ConfigError naming the first bad variable. Timers are checked
    together: the heartbeat (lease TTL / 3) must leave room inside the lease,
    the recovery lock must outlive a recovery interval."""
    store_url = str(config.get("STORE_URL") or DEFAULTS["STORE_URL"])
    scheme = store_url.split(":", 1)[0].lower()
    if not scheme.startswith(("sqlite", "postgresql", "redis", "rediss")):
        raise ConfigError(f"LEASEHOLD_STORE_URL has an unknown scheme {scheme!r}")
    handlers = tuple(h.strip() for h in str(config.get("HANDLERS") or "").split(",") if h.strip())
    lease_ttl = _number(config, "LEASE_TTL", 0.3, high=DAY_S)
    recovery_interval = _number(config, "RECOVERY_INTERVAL", 0.05, high=DAY_S)
    lock_ttl = _number(config, "RECOVERY_LOCK_TTL", 0.1, high=DAY_S)
    base = _number(config, "RETRY_BASE", 0.0, high=DAY_S)
    max_delay = _number(config, "RETRY_MAX_DELAY", 0.0, high=30 * DAY_S)
    jitter = _number(config, "RETRY_JITTER", 0.0, high=1.0)
    if max_delay < base:
        raise ConfigError("LEASEHOLD_RETRY_MAX_DELAY must be >= LEASEHOLD_RETRY_BASE")
    if lock_ttl < recovery_interval:
        raise ConfigError("LEASEHOLD_RECOVERY_LOCK_TTL must be >= LEASEHOLD_RECOVERY_INTERVAL")
    concurrency = int(_number(config, "CONCURRENCY", 0, integer=True, high=1024)) or (os.cpu_count() or 1)
    heartbeat = lease_ttl / 3
    retention = {
        JobStatus.Completed: _number(config, "RETENTION_COMPLETED", 0.0, high=MAX_RETENTION_S),
        JobStatus.Failed: _number(config, "RETENTION_FAILED", 0.0, high=MAX_RETENTION_S),
        JobStatus.Canceled: _number(config, "RETENTION_CANCELED", 0.0, high=MAX_RETENTION_S),
    }
    _check_store_environment(config)
    forget = _number(config, "WORKER_FORGET_AFTER", 0.0, high=MAX_RETENTION_S) or max(300.0, 10 * lease_ttl)
    if forget < 3 * lease_ttl:
        raise ConfigError(
            "LEASEHOLD_WORKER_FORGET_AFTER must be >= 3 x LEASEHOLD_LEASE_TTL (or 0 for the default)"
        )
    return Settings(
        store_url=store_url,
        handlers=handlers,
        lease_ttl_s=lease_ttl,
        heartbeat_interval_s=heartbeat,
        recovery_interval_s=recovery_interval,
        recovery_enabled=_flag(config, "RECOVERY_ENABLED"),
        recovery_batch=int(_number(config, "RECOVERY_BATCH", 1, integer=True, high=100_000)),
        recovery_lock_ttl_s=lock_ttl,
        job_timeout_s=_number(config, "JOB_TIMEOUT", 0.001, high=30 * DAY_S),
        max_retries=int(_number(config, "MAX_RETRIES", 0, integer=True, high=1000)),
        retry=RetryPolicy(base_s=base, max_delay_s=max_delay, jitter=jitter),
        concurrency=concurrency,
        retention_s=retention,
        worker_forget_after_s=forget,
        maintenance_interval_s=_number(config, "MAINTENANCE_INTERVAL", 0.05, high=DAY_S),
        log_success=_flag(config, "LOG_SUCCESS"),
        unknown_handler_grace_s=_number(config, "UNKNOWN_HANDLER_GRACE", 0.0, high=30 * DAY_S),
    )


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from ``LEASEHOLD_*`` in the environment (no Flask app
    built). Raises ConfigError naming the first bad variable."""
    return load_settings({**DEFAULTS, **env_config(environ)})
