"""The alerting series of /metrics (webapp/metrics.py), read from the store
at scrape time like every other series:

* ``leasehold_alerts_fired_total{alert}``: firings of each alert rule
  (a condition that began to hold; muted ones included);
* ``leasehold_alert_deliveries_failed_total{alert}``: firings whose delivery
  to the webhook was given up (every attempt failed, or the queue was full);
* ``leasehold_queue_workers{queue}``: live workers (registry heartbeat within
  ALIVE_TTLS lease TTLs) serving each queue that has jobs or a live worker,
  so Prometheus can say "a queue no live worker serves" as the rules do
  (deploy/prometheus-alerts.yml).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from store.alerts import alerts
from store.base import JobStore
from store.catalogue import ALIVE_TTLS, is_live


def alert_metrics(store: JobStore) -> Iterator[Metric]:
    """The series above (one read of the rules, one of the registry, the counts)."""
    fired = CounterMetricFamily("leasehold_alerts_fired", "Firings of each alert rule.", labels=["alert"])
    failed = CounterMetricFamily(
        "leasehold_alert_deliveries_failed",
        "Alert firings whose webhook delivery was given up.",
        labels=["alert"],
    )
    for rule in alerts(store):
        fired.add_metric([rule.name], rule.fired)
        failed.add_metric([rule.name], rule.deliveries_failed)
    yield fired
    yield failed
    now, ttl_s = store.now(), store.settings.lease_ttl_s
    serving: Counter[str] = Counter()
    for worker in store.workers():
        if is_live(worker, now, ttl_s):
            serving.update(set(worker.queues or []))
    workers = GaugeMetricFamily(
        "leasehold_queue_workers",
        f"Live workers (registry heartbeat within {ALIVE_TTLS:g} lease TTLs) serving each queue.",
        labels=["queue"],
    )
    for queue in sorted(set(store.counts().by_queue) | set(serving)):
        workers.add_metric([queue], serving.get(queue, 0))
    yield workers
