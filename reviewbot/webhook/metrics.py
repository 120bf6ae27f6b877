"""The listener's `/metrics`: a prometheus_client collector read at scrape time.

Figures come from three places, read when Prometheus scrapes (nothing is kept in between):
the database's aggregates (`Store.metrics_snapshot`: shared by every listener and worker),
the job queue's counts by status, and this process's webhook deliveries by outcome. They are
rendered by prometheus_client (https://prometheus.github.io/client_python/collector/custom/)
from a private `CollectorRegistry`, never the library's global default registry.

Owns: the families ``/metrics`` shows (names, help and labels) and their rendering. Must not:
keep a figure between scrapes, register in prometheus_client's global registry, or query the
database itself (``Store.metrics_snapshot`` and the queue's counts do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from reviewbot.states import JobStatus
from reviewbot.store import HistogramCounts, MetricsSnapshot

__all__ = [
    "CONTENT_TYPE",
    "ListenerCollector",
    "listener_registry",
    "render",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
INFINITY_BOUND = "+Inf"


class MetricsSource(Protocol):
    """The part of `reviewbot.store.Store` the collector reads."""

    def metrics_snapshot(self) -> MetricsSnapshot: ...


class JobCounts(Protocol):
    """The part of `reviewbot.queue.JobQueue` the collector reads."""

    def counts(self) -> dict[str, int]: ...


class ListenerCollector(Collector):
    """Every family `/metrics` shows, read from its sources on each `collect()`."""

    def __init__(
        self,
        store: MetricsSource,
        jobs: JobCounts,
        deliveries: Callable[[], Mapping[str, int]],
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._deliveries = deliveries

    def collect(self) -> Iterator[Metric]:
        jobs = self._jobs.counts()
        deliveries = self._deliveries()
        snapshot = self._store.metrics_snapshot()
        tokens = snapshot.tokens
        yield _labelled(
            GaugeMetricFamily,
            "reviewbot_jobs",
            "Review jobs in the queue, by status.",
            "status",
            {status.value: jobs.get(status.value, 0) for status in JobStatus},
        )
        yield _labelled(
            CounterMetricFamily,
            "reviewbot_webhook_deliveries_total",
            "Webhook deliveries received by this process, by outcome.",
            "outcome",
            deliveries,
        )
        yield _labelled(
            CounterMetricFamily,
            "reviewbot_reviews_total",
            "Reviews run, by status.",
            "status",
            dict(sorted(snapshot.reviews_by_status.items())),
        )
        yield _histogram(
            "reviewbot_review_duration_seconds",
            "Wall time of finished reviews.",
            snapshot.review_duration_s,
        )
        yield _histogram(
            "reviewbot_llm_time_to_first_token_seconds",
            "Time to the first streamed token of model calls.",
            snapshot.llm_ttft_s,
        )
        yield _histogram(
            "reviewbot_llm_call_duration_seconds", "Latency of model calls.", snapshot.llm_latency_s
        )
        yield _labelled(
            CounterMetricFamily,
            "reviewbot_llm_tokens_total",
            "Tokens of model calls, by kind.",
            "kind",
            {"prompt": tokens.prompt, "completion": tokens.completion, "cached": tokens.cached},
        )
        yield _labelled(
            CounterMetricFamily,
            "reviewbot_findings_total",
            "Findings recorded, by severity.",
            "severity",
            dict(sorted(snapshot.findings_by_severity.items())),
        )


def _labelled(
    family_type: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    documentation: str,
    label: str,
    values: Mapping[str, float],
) -> Metric:
    family = family_type(name, documentation, labels=[label])
    for label_value, value in values.items():
        family.add_metric([label_value], value)
    return family


def _histogram(name: str, documentation: str, histogram: HistogramCounts) -> Metric:
    buckets = [
        (floatToGoString(bound), count)
        for bound, count in zip(histogram.bounds, histogram.cumulative_counts, strict=True)
    ]
    buckets.append((INFINITY_BOUND, histogram.count))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=histogram.total)


def listener_registry(collector: ListenerCollector) -> CollectorRegistry:
    """A registry of its own holding `collector` (registering does not collect)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The registry's families in the text exposition format (collects: may raise)."""
    return generate_latest(registry)
