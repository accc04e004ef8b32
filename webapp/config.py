"""Configuration of the web app: the shared settings plus the web's own keys.

Every setting is read with ``app.config.from_prefixed_env("LEASEHOLD")``, so
``LEASEHOLD_LEASE_TTL=10`` becomes ``app.config["LEASE_TTL"] == 10``. The
settings every process shares (store, handlers, worker, recovery) and their
validation live in ``workers.settings``, which the ``leasehold`` command reads
without building this app; the web adds the console's and the API's keys.
A bad value raises ConfigError naming its variable.
"""

from __future__ import annotations

from typing import Any

from workers.settings import DEFAULTS as SHARED_DEFAULTS
from workers.settings import ConfigError, Settings, load_settings

#: Defaults, each with its unit. Keys are the names after ``LEASEHOLD_``.
DEFAULTS: dict[str, Any] = {
    **SHARED_DEFAULTS,
    "API_TOKENS": "",  # token:role,token:role (roles viewer, operator)
    "USERS": "",  # name:password-hash:role,... (console logins)
}

__all__ = ["DEFAULTS", "ConfigError", "Settings", "load_settings"]
