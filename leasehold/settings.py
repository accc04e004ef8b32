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

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.urls import DEFAULT_STORE_URL, UnknownScheme, store_kind
from store import JobStore, StoreSettings
from store import open_store as _open_store
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
    "PG_STATEMENT_TIMEOUT": 5.0,  # seconds a PostgreSQL read may run (claims and acks have none)
    "RETENTION_AUDIT": 7776000.0,  # seconds an audit entry is kept (90 days); 0 keeps forever
    "LOG_SUCCESS": True,  # log each completed job at INFO with its run time
    "UNKNOWN_HANDLER_GRACE": 3600.0,  # seconds a job whose handler no worker has waits, then fails
    "JOB_LOG_LINES": 1000,  # lines of ctx.log an attempt keeps (the newest)
}

#: Defaults of the web app's own keys (``webapp.config`` validates them), each with its unit.
#: They live here so that every process knows every name: the worker and the
#: CLI refuse an unknown ``LEASEHOLD_*`` variable without importing the web app.
WEB_DEFAULTS: dict[str, Any] = {
    "SECRET_KEY": "",  # signs the standalone console's sessions and CSRF tokens; required there
    "API_TOKENS": "",  # token:role[:name],... (roles viewer, operator)
    "USERS": "",  # name:password-hash:role,... (console logins)
    "MAX_CONTENT_LENGTH": 1048576,  # bytes; larger request bodies get 413
    "SECURE_COOKIES": False,  # Secure session cookie even on plain-http requests
    "METRICS_SAMPLE_JOBS": 500,  # jobs; window of the run-time/queue-wait percentile gauges
    "SEARCH_LIMIT": 10,  # searches per API token or console user per window (webapp/search_limit.py)
    "TRUSTED_PROXIES": 0,  # proxy hops in front whose X-Forwarded-For/-Proto are applied
    "TRUST_FORWARDED_HOST": False,  # also apply X-Forwarded-Host from those hops
    "LOG_FORMAT": "text",  # text or json
}

#: gunicorn's variables (read by ``webapp/gunicorn_conf.py``, which documents them).
GUNICORN_KEYS: tuple[str, ...] = (
    "WEB_BIND",
    "WEB_WORKERS",
    "WEB_THREADS",
    "WEB_TIMEOUT",
    "WEB_ACCESSLOG",
    "WEB_LOGLEVEL",
    "FORWARDED_ALLOW_IPS",
)

#: ``LEASEHOLD_*`` names that are not settings and are let through: the switches of
#: the project's own tests, soak runs and benchmarks (``LEASEHOLD_TEST_PG_URL``, ...).
NOT_SETTINGS_PREFIXES: tuple[str, ...] = (
    "LEASEHOLD_TEST_",
    "LEASEHOLD_SOAK_",
    "LEASEHOLD_BENCH_",
    "LEASEHOLD_BROWSER_",
)
NOT_SETTINGS: tuple[str, ...] = ("LEASEHOLD_FORCE_THROWAWAY",)

#: Shortest LEASEHOLD_SECRET_KEY accepted (characters): 32 hex digits carry 128 bits.
MIN_SECRET_KEY_CHARS = 32

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
    #: Seconds an audit-log entry is kept before maintenance prunes it (0: forever).
    audit_retention_s: float
    worker_forget_after_s: float
    maintenance_interval_s: float
    #: Log each completed job at INFO with its run time (failures are always logged).
    log_success: bool = True
    #: Seconds after its enqueue a job whose handler a worker lacks is released (not
    #: failed) for another worker to take; past it the job fails with UnknownHandler.
    unknown_handler_grace_s: float = 3600.0
    #: Lines of ``ctx.log`` a job attempt keeps, the newest (store/job_logs.py).
    job_log_lines: int = 1000

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


def known_names() -> frozenset[str]:
    """Every ``LEASEHOLD_*`` variable that is a setting of some process."""
    return frozenset(_var(key) for key in (*DEFAULTS, *WEB_DEFAULTS, *GUNICORN_KEYS))


def check_names(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a ``LEASEHOLD_*`` variable that is no setting (a typo would
    otherwise be ignored in silence). Raises ConfigError ``unknown setting
    LEASEHOLD_STORE_ULR (did you mean LEASEHOLD_STORE_URL?)`` for the first one
    (sorted); the names of NOT_SETTINGS_PREFIXES and NOT_SETTINGS pass."""
    environ = os.environ if environ is None else environ
    known = known_names()
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in known or name in NOT_SETTINGS:
            continue
        if name.startswith(NOT_SETTINGS_PREFIXES):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown setting {name}{hint}")


def _check_store_environment(config: Mapping[str, Any]) -> None:
    """The store's own variables, which the SQL store reads itself when it
    connects: checked here too so a bad one stops the process at start."""
    parse_number(
        "PG_CONNECT_TIMEOUT", config.get("PG_CONNECT_TIMEOUT", DEFAULTS["PG_CONNECT_TIMEOUT"]), 1, True, 300
    )
    parse_number(
        "PG_STATEMENT_TIMEOUT",
        config.get("PG_STATEMENT_TIMEOUT", DEFAULTS["PG_STATEMENT_TIMEOUT"]),
        0.001,
        high=3600.0,  # store.sql.engine.MAX_PG_STATEMENT_TIMEOUT_S (not imported: no SQLAlchemy here)
    )
    schema = str(config.get("PG_SCHEMA") or "")
    if schema:
        from store.pg_schema import resolve_pg_schema  # the one rule for schema names

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
    try:
        store_kind(store_url)
    except UnknownScheme as exc:
        raise ConfigError(f"LEASEHOLD_STORE_URL has an {exc}") from None
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
        audit_retention_s=_number(config, "RETENTION_AUDIT", 0.0, high=MAX_RETENTION_S),
        worker_forget_after_s=forget,
        maintenance_interval_s=_number(config, "MAINTENANCE_INTERVAL", 0.05, high=DAY_S),
        log_success=_flag(config, "LOG_SUCCESS"),
        unknown_handler_grace_s=_number(config, "UNKNOWN_HANDLER_GRACE", 0.0, high=30 * DAY_S),
        job_log_lines=int(_number(config, "JOB_LOG_LINES", 1, integer=True, high=100_000)),
    )


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from ``LEASEHOLD_*`` in the environment (no Flask app
    built). Raises ConfigError naming the first bad or unknown variable."""
    check_names(environ)
    return load_settings({**DEFAULTS, **env_config(environ)})


def open_store(url: str | None = None, settings: StoreSettings | None = None, **options: Any) -> JobStore:
    """``store.open_store`` as the public API offers it (``from leasehold import
    open_store``): with no ``url``, the store ``LEASEHOLD_STORE_URL`` names (and
    with no ``settings``, the store defaults of the other ``LEASEHOLD_*``
    variables), read by this one settings model. Raises ConfigError naming a
    bad or unknown variable, and what ``store.open_store`` raises."""
    if url is None or settings is None:
        configured = settings_from_env()
        url = configured.store_url if url is None else url
        settings = configured.store_settings() if settings is None else settings
    return _open_store(url, settings, **options)
