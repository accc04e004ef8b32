"""Configuration of the web app: the shared settings plus the web's own keys.

The settings every process shares (store, handlers, worker, recovery) and
their validation live in ``leasehold.settings``, which the ``leasehold`` command
reads without building this app. The web adds the console's and the API's
keys, validated here the same strict way: every value is read as the string
the environment holds (never guessed as JSON: an all-digit secret stays a
string), typed, bounded, and a bad one raises ConfigError naming its variable.
Tests and embedding apps may pass typed values instead of strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.settings import DEFAULTS as SHARED_DEFAULTS
from leasehold.settings import (
    MIN_SECRET_KEY_CHARS,
    WEB_DEFAULTS,
    ConfigError,
    Settings,
    load_settings,
    parse_choice,
    parse_flag,
    parse_number,
)
from store.base import MAX_PAGE_SIZE

#: Every key the web app reads: the shared ones, then its own.
DEFAULTS: dict[str, Any] = {**SHARED_DEFAULTS, **WEB_DEFAULTS}

#: Bounds of the web's numeric keys (inclusive).
MAX_BODY_BYTES = 1024**3
MAX_PROXY_HOPS = 10
MAX_SEARCH_LIMIT = 1_000_000
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True, slots=True)
class WebSettings:
    """The web's own validated settings."""

    secret_key: str
    api_tokens: str
    users: str
    max_content_length: int  # bytes
    secure_cookies: bool
    metrics_sample_jobs: int
    search_limit: int  # searches per caller per webapp.search_limit.SEARCH_WINDOW_S
    trusted_proxies: int  # hops
    trust_forwarded_host: bool
    log_format: str


def load_web_settings(config: Mapping[str, Any]) -> WebSettings:
    """Validate the web's keys of ``config`` (strings or typed values; missing
    keys take WEB_DEFAULTS). Raises ConfigError naming the first bad variable."""

    def text(key: str) -> str:
        raw = config.get(key, WEB_DEFAULTS[key])
        if raw is None:
            return ""
        if not isinstance(raw, str | bytes):
            raise ConfigError(f"LEASEHOLD_{key} must be text, got {type(raw).__name__}")
        return raw.decode() if isinstance(raw, bytes) else raw

    def integer(key: str, low: int, high: int) -> int:
        return int(parse_number(key, config.get(key, WEB_DEFAULTS[key]), low, integer=True, high=high))

    secret_key = text("SECRET_KEY")
    if secret_key and len(secret_key) < MIN_SECRET_KEY_CHARS and not config.get("TESTING"):
        raise ConfigError(
            f"LEASEHOLD_SECRET_KEY must be at least {MIN_SECRET_KEY_CHARS} characters, got "
            f"{len(secret_key)} (python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return WebSettings(
        secret_key=secret_key,
        api_tokens=text("API_TOKENS"),
        users=text("USERS"),
        max_content_length=integer("MAX_CONTENT_LENGTH", 1, MAX_BODY_BYTES),
        secure_cookies=parse_flag("SECURE_COOKIES", config.get("SECURE_COOKIES", False)),
        metrics_sample_jobs=integer("METRICS_SAMPLE_JOBS", 0, MAX_PAGE_SIZE),
        search_limit=integer("SEARCH_LIMIT", 1, MAX_SEARCH_LIMIT),
        trusted_proxies=integer("TRUSTED_PROXIES", 0, MAX_PROXY_HOPS),
        trust_forwarded_host=parse_flag("TRUST_FORWARDED_HOST", config.get("TRUST_FORWARDED_HOST", False)),
        log_format=parse_choice("LOG_FORMAT", config.get("LOG_FORMAT", "text"), LOG_FORMATS),
    )


__all__ = [
    "DEFAULTS",
    "WEB_DEFAULTS",
    "ConfigError",
    "Settings",
    "WebSettings",
    "load_settings",
    "load_web_settings",
]
