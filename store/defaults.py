"""Defaults a store applies when a job or a call does not say otherwise
(``StoreSettings``), read from the environment by leasehold/settings.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.lifecycle import RetryPolicy


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Defaults a store applies when a job or call does not say otherwise.

    lease_ttl_s: lease length in seconds (LEASEHOLD_LEASE_TTL, 30).
    max_retries: retries allowed per job (LEASEHOLD_MAX_RETRIES, 3).
    job_timeout_s: execution timeout in seconds (LEASEHOLD_JOB_TIMEOUT, 1800).
    retry: backoff (LEASEHOLD_RETRY_BASE 2 s, LEASEHOLD_RETRY_MAX_DELAY 3600 s).
    recovery_batch: most expired leases one recovery batch takes (500).
    events_per_job: events every store keeps per job at least (200): Redis
        keeps exactly the newest this many; SQL keeps all of them.
    recovery_runs_kept: recovery runs every store keeps, newest first (1000).
    """

    lease_ttl_s: float = 30.0
    max_retries: int = 3
    job_timeout_s: float = 1800.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    recovery_batch: int = 500
    events_per_job: int = 200
    recovery_runs_kept: int = 1000
