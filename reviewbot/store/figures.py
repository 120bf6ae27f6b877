"""Aggregate figures over reviews, model calls and findings (what `/metrics` shows).

Each figure is one aggregate query, so reading them costs the same whatever the table sizes:
histograms are ``count``, ``sum`` and one ``SUM(CASE WHEN value <= bound ...)`` per bucket;
counts by label are ``GROUP BY``. Nothing loops over rows in Python.

Review durations are computed in SQL on both backends: SQLite keeps datetimes as text, read
with ``julianday()`` (https://sqlite.org/lang_datefunc.html); PostgreSQL subtracts two
``timestamptz`` values and takes the interval's ``epoch``.

Owns: the snapshot's queries and types, and the SQL of a review's duration (the report's queries
use it too). Must not: render a figure for Prometheus (`reviewbot.webhook.metrics` does) or loop
over rows in Python.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, case, extract, func, select

from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = [
    "DEFAULT_METRIC_BUCKETS",
    "HistogramCounts",
    "MetricBuckets",
    "MetricsSnapshot",
    "TokenTotals",
    "read_metrics_snapshot",
    "review_seconds",
]

MS_PER_SECOND = 1000.0
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class MetricBuckets:
    """Upper bounds (seconds, ascending) of each histogram's buckets; +Inf is implied."""

    review_duration_s: tuple[float, ...] = (
        5.0,
        10.0,
        30.0,
        60.0,
        120.0,
        300.0,
        600.0,
        1200.0,
        1800.0,
        3600.0,
    )
    llm_ttft_s: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)
    llm_latency_s: tuple[float, ...] = (
        0.5,
        1.0,
        2.0,
        5.0,
        10.0,
        20.0,
        30.0,
        60.0,
        120.0,
        300.0,
    )


DEFAULT_METRIC_BUCKETS = MetricBuckets()


@dataclass(frozen=True)
class HistogramCounts:
    """Observations counted per upper bound (cumulative, ascending bounds, no +Inf bound)."""

    bounds: tuple[float, ...]
    cumulative_counts: tuple[int, ...]
    count: int
    total: float

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.cumulative_counts):
            raise ValueError("a histogram needs one cumulative count per bound")
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError("histogram bounds must be strictly ascending")
        counts = [*self.cumulative_counts, self.count]
        if any(later < earlier for earlier, later in itertools.pairwise(counts)):
            raise ValueError("cumulative counts must not decrease (and end at most at count)")

    @classmethod
    def from_aggregates(
        cls,
        bounds: Sequence[float],
        cumulative_counts: Sequence[int | None],
        count: int | None,
        total: float | None,
    ) -> HistogramCounts:
        """From SQL aggregates, where an empty table answers NULL sums."""
        return cls(
            bounds=tuple(float(bound) for bound in bounds),
            cumulative_counts=tuple(int(value or 0) for value in cumulative_counts),
            count=int(count or 0),
            total=float(total or 0.0),
        )


@dataclass(frozen=True)
class TokenTotals:
    """Tokens of every recorded model call."""

    prompt: int
    completion: int
    cached: int


@dataclass(frozen=True)
class MetricsSnapshot:
    """What the database says right now, for every listener process alike."""

    review_duration_s: HistogramCounts  # finished reviews, started_at -> finished_at
    llm_ttft_s: HistogramCounts  # model calls with a time to first token
    llm_latency_s: HistogramCounts  # model calls with a latency
    tokens: TokenTotals
    findings_by_severity: dict[str, int]
    reviews_by_status: dict[str, int]


def read_metrics_snapshot(
    connection: Connection, buckets: MetricBuckets = DEFAULT_METRIC_BUCKETS
) -> MetricsSnapshot:
    """Every figure, one aggregate query each, on the given connection."""
    duration_s = review_seconds(connection.dialect.name)
    prompt, completion, cached = connection.execute(
        select(
            func.sum(LLMCallRow.prompt_tokens),
            func.sum(LLMCallRow.completion_tokens),
            func.sum(LLMCallRow.cached_tokens),
        )
    ).one()
    return MetricsSnapshot(
        review_duration_s=_histogram(connection, duration_s, buckets.review_duration_s),
        llm_ttft_s=_histogram(connection, LLMCallRow.ttft_ms / MS_PER_SECOND, buckets.llm_ttft_s),
        llm_latency_s=_histogram(
            connection, LLMCallRow.latency_ms / MS_PER_SECOND, buckets.llm_latency_s
        ),
        tokens=TokenTotals(
            prompt=int(prompt or 0), completion=int(completion or 0), cached=int(cached or 0)
        ),
        findings_by_severity=_counts_by(connection, FindingRow.severity),
        reviews_by_status=_counts_by(connection, ReviewRow.status),
    )


def _histogram(connection: Connection, value: Any, bounds: tuple[float, ...]) -> HistogramCounts:
    """``count(value)`` skips NULLs: unfinished reviews, calls without a first token."""
    buckets = [func.sum(case((value <= bound, 1), else_=0)) for bound in bounds]
    count, total, *cumulative = connection.execute(
        select(func.count(value), func.sum(value), *buckets)
    ).one()
    return HistogramCounts.from_aggregates(bounds, cumulative, count, total)


def review_seconds(dialect: str) -> Any:
    """SQL for a review's duration in seconds (NULL while it runs), on ``dialect``."""
    if dialect == "sqlite":
        days = func.julianday(ReviewRow.finished_at) - func.julianday(ReviewRow.started_at)
        return days * SECONDS_PER_DAY
    return extract("epoch", ReviewRow.finished_at - ReviewRow.started_at)


def _counts_by(connection: Connection, column: Any) -> dict[str, int]:
    rows = connection.execute(select(column, func.count()).group_by(column).order_by(column))
    return {label: count for label, count in rows}
