"""The Lua scripts of the Redis store, one file per operation in ``lua/``.

Each file's header names its KEYS, ARGV and return value. A line
``-- @include lib/NAME.lua`` is replaced by that helper file when the source is
read (once per process); ``Scripts.load`` registers every script once per
client (``register_script``: EVALSHA, reloaded transparently on NOSCRIPT).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from redis.commands.core import Script

LUA_DIR = Path(__file__).with_name("lua")
_INCLUDE = re.compile(r"^-- @include (lib/[\w.]+\.lua)$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """The text of ``lua/<name>.lua`` with its includes pasted in."""
    text = (LUA_DIR / f"{name}.lua").read_text()
    return _INCLUDE.sub(lambda m: (LUA_DIR / m[1]).read_text(), text)


@dataclass(frozen=True, slots=True)
class Scripts:
    """Every script, registered on one client; field name = file name."""

    now: Script
    enqueue: Script
    claim_candidates: Script
    claim: Script
    heartbeat: Script
    progress: Script
    complete: Script
    apply_failures: Script
    release: Script
    cancel: Script
    requeue: Script
    record_events: Script
    expired_leases: Script
    purge_candidates: Script
    purge: Script
    purge_count: Script
    trim_history: Script
    delete: Script
    queue_state: Script
    lock_acquire: Script
    lock_release: Script
    lock_info: Script
    failure_record: Script
    audit: Script
    audit_migrate: Script
    operation_save: Script
    failure_count: Script
    worker_heartbeat: Script
    command_worker: Script
    worker_remove: Script
    prune_workers: Script
    record_run: Script
    schedule_save: Script
    schedule_enable: Script
    schedule_tick: Script
    reindex: Script

    @classmethod
    def load(cls, client: Any) -> Scripts:
        """Register every script on ``client`` (Redis or RedisCluster)."""
        return cls(**{f.name: client.register_script(source(f.name)) for f in fields(cls)})
