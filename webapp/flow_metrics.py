"""Prometheus series of flow control, read from the store at scrape time:
``leasehold_queue_limit{queue,kind}`` (each set limit: a concurrency, or a
rate's starts per period) and ``leasehold_queue_limit_in_use{queue,kind}``
(running jobs, running jobs of the busiest limit key, starts in the rate
window, starts of the busiest key in its window). ``kind`` is one of
``store.flow_rules.LIMIT_KINDS``. ``leasehold_queue_limits_invalid{queue}`` is 1
for a queue whose stored limits no longer pass the rules (what does not
pass is not applied, and has no series). A store without flow control has
no series."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from store.base import JobStore
from store.contract_flow import FlowUnsupported


def limit_metrics(store: JobStore) -> Iterator[Metric]:
    """The gauge families: one sample per (limited queue, set kind), and one
    per queue whose stored limits are invalid."""
    try:
        limits = store.queue_limits()
    except FlowUnsupported:
        return
    value = GaugeMetricFamily(
        "leasehold_queue_limit", "A queue's flow control limit, by kind", labels=["queue", "kind"]
    )
    used = GaugeMetricFamily(
        "leasehold_queue_limit_in_use", "How much of a queue's limit is in use now", labels=["queue", "kind"]
    )
    invalid = GaugeMetricFamily(
        "leasehold_queue_limits_invalid",
        "1 when a queue's stored limits no longer pass the rules (not applied)",
        labels=["queue"],
    )
    for queue, queue_limits in sorted(limits.items()):
        if queue_limits.invalid:
            invalid.add_metric([queue], 1.0)
        if not queue_limits.any:
            continue
        in_use = store.limit_usage(queue).in_use(queue_limits)
        for kind, number in queue_limits.values().items():
            if number is None:
                continue
            value.add_metric([queue, kind], float(number))
            used.add_metric([queue, kind], float(in_use.get(kind, 0)))
    yield value
    yield used
    yield invalid
