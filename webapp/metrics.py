"""Prometheus metrics, read from the store at scrape time.

Every number lives in the store (counters kept in the same transaction or
Lua script as the change they count), so a scrape of any web process gives
the same answer however many workers and web processes there are: nothing
is counted in this process's memory. Each app has its own CollectorRegistry
(no process-global registry), holding one custom collector.

Series (``_total`` added by the exposition format for counters):

* ``leasehold_jobs{queue,status}``: gauge from ``store.counts()`` (sum over
  ``queue`` for the totals by status).
* ``leasehold_expired_leases``: InProgress jobs whose lease expired, awaiting recovery.
* ``leasehold_workers``: live worker processes: registry heartbeat within 3
  lease TTLs (the console's "alive"); ``leasehold_workers_registered``: every
  registry entry, silent ones included (maintenance forgets those after
  LEASEHOLD_WORKER_FORGET_AFTER).
* ``leasehold_queue_latency_seconds{queue}``: seconds the queue's oldest
  Queued job has waited (``store.latency``).
* ``leasehold_queue_paused{queue}``: 1 while the queue is paused, 0 once
  resumed (queues never paused have no series).
* ``leasehold_queue_limit{queue,kind}`` and ``leasehold_queue_limit_in_use{queue,kind}``:
  each set flow control limit and its use now (``webapp.flow_metrics``).
* ``leasehold_jobs_pruned_total``: jobs removed by retention, the sum of the
  ``count`` of the recorded ``retention`` maintenance runs (the workers'
  runs and ``POST /api/purge``). The store keeps the newest
  ``StoreSettings.recovery_runs_kept`` runs per task and no running total, so
  the sum covers that history: exact until the history wraps, after which
  older runs drop out and Prometheus sees a counter reset. (A store-kept
  ``e:pruned`` counter bumped by ``purge`` would make it exact for ever.)
* ``leasehold_alerts_fired_total{alert}``, ``leasehold_alert_deliveries_failed_total{alert}``
  and ``leasehold_queue_workers{queue}``: see webapp/alert_metrics.py.
* ``leasehold_job_events_total{kind}``: every job event kind from ``store.event_counts()``.
* Named counters from the same totals: ``leasehold_jobs_enqueued_total``,
  ``leasehold_jobs_claimed_total``, ``leasehold_jobs_completed_total``,
  ``leasehold_jobs_failed_total`` (handler failures that ended Failed),
  ``leasehold_retries_scheduled_total`` (handler failures rescheduled),
  ``leasehold_lease_expirations_total`` (expired leases recovered, retried or
  failed), ``leasehold_leases_released_total`` (given back at shutdown),
  ``leasehold_stale_writes_refused_total{kind}`` (a worker's completion,
  failure, heartbeat, release or progress refused for a stale lease token),
  ``leasehold_operator_actions_total{action}`` (cancel, requeue, retry, delete).
  These are global, over every queue.
* ``leasehold_queue_events_total{queue,kind}``: per queue, the kinds the
  history graphs count (enqueued, completed, failed, retry_scheduled,
  lease_expired), from ``store.queue_event_counts()``: counters the store
  bumps in the same atomic unit as the history buckets, never trimmed (a
  store upgraded from 0.2 counts from the upgrade on).
* ``leasehold_recovery_last_run_timestamp_seconds`` and
  ``leasehold_recovery_last_run_jobs{outcome}``: the newest recorded recovery run.
  (The store contract keeps the run history but no total of runs, so no
  ``leasehold_recovery_runs_total`` is exported yet.)
* ``leasehold_recent_jobs_sampled``, ``leasehold_recent_job_run_seconds{percentile}``
  and ``leasehold_recent_job_queue_wait_seconds{percentile}``: gauges over the
  most recently updated Completed jobs (at most ``LEASEHOLD_METRICS_SAMPLE_JOBS``,
  default 500): how many were read, and the 50th, 90th, 99th and 100th
  percentile of their run time (``completed_at - started_at``, the last
  attempt) and queue wait (``started_at - created_at``, backoff of retried jobs
  included). A window, not cumulative, so they are gauges (no histogram
  whose counts would go down as jobs leave the window); no series while
  the window is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from store.base import MAX_PAGE_SIZE, JobStore
from store.latency import queue_latency
from store.lifecycle import EventKind as E
from store.lifecycle import JobStatus
from store.statuses import REFUSALS
from webapp.alert_metrics import alert_metrics
from webapp.console.diagnosis import ALIVE_TTLS, is_alive
from webapp.flow_metrics import limit_metrics

#: Percentiles of the recent-jobs gauges (label ``percentile``).
PERCENTILES: tuple[int, ...] = (50, 90, 99, 100)
#: The maintenance task whose runs count pruned jobs.
RETENTION_TASK = "retention"
#: Default number of recent Completed jobs the recent-jobs gauges are computed from.
DEFAULT_SAMPLE_JOBS = 500

#: Named counters: metric name (without _total), help, event kind.
_NAMED_COUNTERS: tuple[tuple[str, str, E], ...] = (
    ("leasehold_jobs_enqueued", "Jobs enqueued.", E.ENQUEUED),
    ("leasehold_jobs_claimed", "Leases granted (claims, each bumping a fencing token).", E.CLAIMED),
    ("leasehold_jobs_completed", "Jobs completed.", E.COMPLETED),
    ("leasehold_jobs_failed", "Handler failures that ended Failed (retries spent or permanent).", E.FAILED),
    ("leasehold_retries_scheduled", "Handler failures rescheduled for a retry.", E.RETRY_SCHEDULED),
    ("leasehold_lease_expirations", "Expired leases recovered (job retried or failed).", E.LEASE_EXPIRED),
    ("leasehold_leases_released", "Leases given back by workers shutting down (job due again).", E.RELEASED),
)
#: Labelled counters: metric name, help, label, {event kind: label value}.
_LABELLED_COUNTERS: tuple[tuple[str, str, str, dict[E, str]], ...] = (
    (
        "leasehold_stale_writes_refused",
        "Worker writes (completion, failure, heartbeat, release, progress) refused for a stale lease token.",
        "kind",
        {kind: kind.removesuffix("_refused") for kind in sorted(REFUSALS)},
    ),
    (
        "leasehold_operator_actions",
        "Operator actions on jobs.",
        "action",
        {E.CANCELED: "cancel", E.REQUEUED: "requeue", E.RETRIED_NOW: "retry", E.DELETED: "delete"},
    ),
)


def percentile(ordered: Sequence[float], p: int) -> float:
    """The ``p``-th percentile of sorted values, nearest rank (100: the largest)."""
    rank = max(1, -(-p * len(ordered) // 100))
    return ordered[rank - 1]


def _window(name: str, doc: str, values: Sequence[float]) -> GaugeMetricFamily:
    ordered = sorted(values)
    family = GaugeMetricFamily(name, doc, labels=["percentile"], unit="seconds")
    for p in PERCENTILES if ordered else ():
        family.add_metric([str(p)], percentile(ordered, p))
    return family


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max(0.0, (later - earlier).total_seconds())


class StoreCollector(Collector):
    """Reads the store on every scrape (about six queries; the sample reads
    up to ``sample_jobs`` rows). A store that does not answer makes the scrape
    fail (StoreUnavailable), so Prometheus records ``up == 0`` instead of stale numbers."""

    def __init__(self, get_store: Callable[[], JobStore], sample_jobs: int = DEFAULT_SAMPLE_JOBS) -> None:
        if not 0 <= sample_jobs <= MAX_PAGE_SIZE:
            raise ValueError(f"sample_jobs must be within [0, {MAX_PAGE_SIZE}]")
        self.get_store = get_store
        self.sample_jobs = sample_jobs

    @property
    def store(self) -> JobStore:
        """The app's store, looked up at each scrape (never a stale handle)."""
        return self.get_store()

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration: that would query the store

    def collect(self) -> Iterator[Metric]:
        yield from self._counts()
        yield from self._events()
        yield from self._recovery()
        yield from self._pruned()
        yield from limit_metrics(self.store)
        yield from alert_metrics(self.store)
        if self.sample_jobs:
            yield from self._recent()

    def _counts(self) -> Iterator[Metric]:
        counts = self.store.counts()
        by_queue = GaugeMetricFamily(
            "leasehold_jobs", "Jobs by queue and status.", labels=["queue", "status"]
        )
        for queue in sorted(counts.by_queue):
            for status in JobStatus:
                by_queue.add_metric([queue, status.name], counts.by_queue[queue].get(status.name, 0))
        yield by_queue
        yield GaugeMetricFamily(
            "leasehold_expired_leases",
            "InProgress jobs whose lease has expired, awaiting recovery.",
            value=self.store.expired_lease_count(),
        )
        yield from self._workers()
        paused = GaugeMetricFamily(
            "leasehold_queue_paused", "1 while the queue is paused (claims skip it).", labels=["queue"]
        )
        for state in self.store.queue_states():
            paused.add_metric([state.name], 1 if state.paused else 0)
        yield paused
        latency = GaugeMetricFamily(
            "leasehold_queue_latency",
            "Seconds the oldest Queued job of the queue has waited (0: none waiting).",
            labels=["queue"],
            unit="seconds",
        )
        for queue, seconds in queue_latency(self.store, counts).items():
            latency.add_metric([queue], seconds)
        yield latency

    def _workers(self) -> Iterator[Metric]:
        store = self.store
        now_s, ttl_s = store.now(), store.settings.lease_ttl_s
        registry = store.workers()
        live = sum(1 for w in registry if is_alive(w, now_s, ttl_s))
        yield GaugeMetricFamily(
            "leasehold_workers",
            f"Live worker processes (registry heartbeat within {ALIVE_TTLS:g} lease TTLs).",
            value=live,
        )
        yield GaugeMetricFamily(
            "leasehold_workers_registered",
            "Worker processes in the registry, silent ones included.",
            value=len(registry),
        )

    def _events(self) -> Iterator[Metric]:
        totals = self.store.event_counts()
        every = CounterMetricFamily("leasehold_job_events", "Job events by kind.", labels=["kind"])
        for kind in sorted(totals):
            every.add_metric([kind], totals[kind])
        yield every
        for name, doc, kind in _NAMED_COUNTERS:
            yield CounterMetricFamily(name, doc, value=totals.get(kind, 0))
        for name, doc, label, kinds in _LABELLED_COUNTERS:
            family = CounterMetricFamily(name, doc, labels=[label])
            for kind, value in kinds.items():
                family.add_metric([value], totals.get(kind, 0))
            yield family
        per_queue = CounterMetricFamily(
            "leasehold_queue_events",
            "Job events per queue, of the kinds the history graphs count.",
            labels=["queue", "kind"],
        )
        for (queue, kind), value in sorted(self.store.queue_event_counts().items()):
            per_queue.add_metric([queue, kind], value)
        yield per_queue

    def _pruned(self) -> Iterator[Metric]:
        runs = self.store.maintenance_runs(RETENTION_TASK, limit=self.store.settings.recovery_runs_kept)
        yield CounterMetricFamily(
            "leasehold_jobs_pruned",
            "Finished jobs removed by retention (sum of the recorded retention runs).",
            value=sum(r.count for r in runs),
        )

    def _recovery(self) -> Iterator[Metric]:
        runs = self.store.recovery_runs(limit=1)
        if not runs:
            return
        last = runs[0]
        yield GaugeMetricFamily(
            "leasehold_recovery_last_run_timestamp_seconds",
            "When the newest recorded recovery run finished (epoch seconds).",
            value=last.finished_at.timestamp(),
        )
        jobs = GaugeMetricFamily(
            "leasehold_recovery_last_run_jobs",
            "Jobs the newest recovery run retried or failed.",
            labels=["outcome"],
        )
        jobs.add_metric(["retried"], last.recovered)
        jobs.add_metric(["failed"], last.failed)
        yield jobs

    def _recent(self) -> Iterator[Metric]:
        page = self.store.list_jobs(status=JobStatus.Completed, limit=self.sample_jobs)
        runs = [s for j in page.items if (s := _seconds(j.completed_at, j.started_at)) is not None]
        waits = [s for j in page.items if (s := _seconds(j.started_at, j.created_at)) is not None]
        yield GaugeMetricFamily(
            "leasehold_recent_jobs_sampled",
            "Completed jobs the recent-jobs gauges were computed from (newest first).",
            value=len(page.items),
        )
        yield _window(
            "leasehold_recent_job_run",
            "Run time of the most recently completed jobs, by percentile (a window).",
            runs,
        )
        yield _window(
            "leasehold_recent_job_queue_wait",
            "Wait from enqueue to the last start of the most recently completed jobs, by percentile.",
            waits,
        )


def make_registry(
    get_store: Callable[[], JobStore], sample_jobs: int = DEFAULT_SAMPLE_JOBS
) -> CollectorRegistry:
    """A registry of its own for one app, holding a StoreCollector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(get_store, sample_jobs))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of ``registry`` (queries the store).
    Raises StoreUnavailable when the store does not answer."""
    return generate_latest(registry)
