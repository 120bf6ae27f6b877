"""A team's review workload: the shape of each review (its chunks and their model calls) and
when reviews arrive, from the store's history, a JSON export of it, or a named default mix.

``reviewbot capacity --workload`` (reviewbot.ops.pool_simulation) replays it against a box
profile. What a review costs the model server is its calls: per chunk, the calls in order
(tool rounds, repairs and retries follow each other; the chunks of one review run side by
side), each with the prompt tokens the server had to prefill (prompt minus cached) and the
tokens it generated. Verification calls are calls of their chunk too.

The arrivals are the reviews' start times: the store keeps when a review started, not when its
job was queued, so queueing that happened before a start is not seen (docs/capacity.md).

Owns: the workload's data, its summary figures, its busiest hour, the default mix and the JSON
export format. Must not: read the database (reviewbot.store.workload_queries does) or simulate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "DEFAULT_MIX_NAME",
    "MIN_DAYS",
    "MIN_REVIEWS",
    "BusiestHour",
    "CallShape",
    "ReviewShape",
    "Workload",
    "WorkloadError",
    "default_workload",
    "workload_from_json",
]

EXPORT_VERSION = 1
MIN_REVIEWS = 30  # fewer reviews than this cannot say what a p95 will be
MIN_DAYS = 7  # less than a week cannot say which hour of which weekday is the busiest
HOURS_PER_DAY = 24
DAYS_PER_WEEK = 7
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
PERCENTILES = (50, 95)
DEFAULT_MIX_NAME = "reviewbot's default mix (assumed, not measured)"


class WorkloadError(ValueError):
    """A workload export that cannot be read: one line naming what is wrong."""


@dataclass(frozen=True)
class CallShape:
    """One model call: the prompt tokens the server prefilled, and those it generated."""

    uncached_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    purpose: str = "review"
    tool_round: int = 0


@dataclass(frozen=True)
class ReviewShape:
    """One review: when it started and, per chunk, its calls in the order they were sent."""

    started_at: datetime
    chunks: tuple[tuple[CallShape, ...], ...]

    @property
    def calls(self) -> list[CallShape]:
        return [call for chunk in self.chunks for call in chunk]

    def figure(self, name: str) -> int:
        calls = self.calls
        figures = {
            "chunks": len(self.chunks),
            "calls": len(calls),
            "prompt tokens": sum(c.uncached_tokens + c.cached_tokens for c in calls),
            "cached tokens": sum(c.cached_tokens for c in calls),
            "completion tokens": sum(c.completion_tokens for c in calls),
            "tool rounds": sum(1 for c in calls if c.tool_round > 0),
            "verification calls": sum(1 for c in calls if c.purpose == "verify"),
        }
        return figures[name]


FIGURES = (
    "chunks",
    "calls",
    "prompt tokens",
    "cached tokens",
    "completion tokens",
    "tool rounds",
    "verification calls",
)


@dataclass(frozen=True)
class BusiestHour:
    """The hour of the week with the most reviews on average, and that average."""

    weekday: int
    hour: int
    reviews_per_hour: float
    weeks: int  # how many such hours the window held
    assumed: str = ""  # a mix's stated busiest hour, in words (not measured)

    def describe(self) -> str:
        if self.assumed:
            return f"{self.reviews_per_hour:.1f} reviews/h, assumed: {self.assumed}"
        return (
            f"{WEEKDAYS[self.weekday]} {self.hour:02d}:00 UTC, {self.reviews_per_hour:.1f} "
            f"reviews/h (mean over {self.weeks} such hour(s))"
        )


@dataclass(frozen=True)
class Workload:
    """The reviews of a window, and where they were read."""

    reviews: tuple[ReviewShape, ...]
    source: str
    start: datetime
    end: datetime
    busiest_override: BusiestHour | None = None  # a mix that states its busiest hour
    per_day_override: float | None = None  # and its reviews a day

    @property
    def days(self) -> float:
        return max((self.end - self.start).total_seconds() / 86_400, 0.0)

    def too_small(self) -> str | None:
        """Why this workload cannot be judged, or None."""
        if self.busiest_override is not None:
            return None
        if len(self.reviews) >= MIN_REVIEWS and self.days >= MIN_DAYS:
            return None
        return (
            f"the workload is too small to judge: {len(self.reviews)} review(s) over "
            f"{self.days:.1f} day(s) (at least {MIN_REVIEWS} reviews over {MIN_DAYS} days); use "
            "a longer --window, or --workload default"
        )

    def percentiles(self) -> dict[str, dict[int, float]]:
        """p50 and p95 of each figure of a review."""
        return {
            name: {p: percentile([r.figure(name) for r in self.reviews], p) for p in PERCENTILES}
            for name in FIGURES
        }

    def busiest_hour(self) -> BusiestHour:
        """The hour of the week with the highest mean count of reviews in the window."""
        if self.busiest_override is not None:
            return self.busiest_override
        counts = Counter((r.started_at.weekday(), r.started_at.hour) for r in self.reviews)
        occurrences = _hour_occurrences(self.start, self.end)
        best = max(
            counts,
            key=lambda slot: (counts[slot] / max(occurrences[slot], 1), -slot[0], -slot[1]),
            default=(0, 0),
        )
        weeks = max(occurrences[best], 1)
        return BusiestHour(best[0], best[1], counts[best] / weeks, weeks)

    def scaled(self, per_day: float) -> Workload:
        """The same mix arriving ``per_day`` reviews a day, its busiest hour scaled alike."""
        busiest, now = self.busiest_hour(), self.per_day()
        factor = per_day / now if now > 0 else 0.0
        said = f"{busiest.describe()}, scaled from {now:,.1f} to {per_day:,.0f} reviews a day"
        hour = BusiestHour(
            busiest.weekday, busiest.hour, busiest.reviews_per_hour * factor, 0, said
        )
        return replace(self, busiest_override=hour, per_day_override=per_day)

    def per_day(self) -> float:
        if self.per_day_override is not None:
            return self.per_day_override
        return len(self.reviews) / max(self.days, 1 / HOURS_PER_DAY)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": EXPORT_VERSION,
            "source": self.source,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "reviews": [
                {
                    "started_at": review.started_at.isoformat(),
                    "chunks": [[_call_json(c) for c in chunk] for chunk in review.chunks],
                }
                for review in self.reviews
            ],
        }


def _call_json(call: CallShape) -> list[Any]:
    """A call in the export: uncached, cached and completion tokens, purpose, tool round."""
    return [
        call.uncached_tokens,
        call.cached_tokens,
        call.completion_tokens,
        call.purpose,
        call.tool_round,
    ]


def percentile(values: Sequence[float], p: int) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return float(ordered[rank - 1])


def _hour_occurrences(start: datetime, end: datetime) -> Counter[tuple[int, int]]:
    """How often each (weekday, hour) occurs in [start, end)."""
    found: Counter[tuple[int, int]] = Counter()
    hour = start.replace(minute=0, second=0, microsecond=0)
    while hour < end:
        found[(hour.weekday(), hour.hour)] += 1
        hour += timedelta(hours=1)
    return found


def workload_from_json(data: Any, name: str) -> Workload:
    """A workload export (``Workload.to_json``), or WorkloadError naming what is wrong."""
    if not isinstance(data, Mapping) or data.get("version") != EXPORT_VERSION:
        raise WorkloadError(f"{name}: not a reviewbot workload export (version {EXPORT_VERSION})")
    try:
        reviews = tuple(_review_from(item) for item in data["reviews"])
        start, end = _when(data["start"]), _when(data["end"])
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise WorkloadError(f"{name}: a review or a field is malformed ({error})") from None
    if end <= start:
        raise WorkloadError(f"{name}: its end is not after its start")
    return Workload(reviews, f"{name} ({data.get('source', 'an export')})", start, end)


def _when(text: Any) -> datetime:
    moment = datetime.fromisoformat(str(text))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _review_from(item: Mapping[str, Any]) -> ReviewShape:
    chunks = tuple(
        tuple(_call_from(call) for call in chunk) for chunk in item["chunks"] if len(chunk)
    )
    return ReviewShape(_when(item["started_at"]), chunks)


def _call_from(call: Sequence[Any]) -> CallShape:
    uncached, cached, completion = (int(value) for value in call[:3])
    if min(uncached, cached, completion) < 0:
        raise ValueError("a token count is negative")
    purpose = str(call[3]) if len(call) > 3 else "review"
    return CallShape(uncached, completion, cached, purpose, int(call[4]) if len(call) > 4 else 0)


# --- the default mix --------------------------------------------------------------------------

# Without history: sizes from the bundled fixtures and benchmarks (tests/fixtures/eval: one
# chunk of about 1,300 prompt tokens; tests/bench/bench_tool_cost: a 60-module MR in one 29K
# chunk, a 400-module one in four), 200 MRs a day (the seed's team), the busiest hour holding
# 12% of a day's reviews (a morning peak). Assumed, not measured: docs/capacity.md says so.
DEFAULT_MIX = (
    # share, chunks, uncached prompt per call, cached per call, completion per call
    (0.55, 1, 2_500, 1_200, 350),
    (0.30, 2, 12_000, 2_000, 500),
    (0.12, 4, 24_000, 4_000, 700),
    (0.03, 10, 28_000, 4_000, 900),
)
DEFAULT_REVIEWS_PER_DAY = 200
DEFAULT_BUSIEST_SHARE = 0.12
DEFAULT_MIX_SIZE = 100


def default_workload(now: datetime) -> Workload:
    """The named default mix: ``DEFAULT_MIX_SIZE`` reviews in the mix's shares."""
    reviews = []
    for share, chunks, uncached, cached, completion in DEFAULT_MIX:
        call = CallShape(uncached, completion, cached)
        shape = ReviewShape(now, tuple((call,) for _ in range(chunks)))
        reviews += [shape] * round(share * DEFAULT_MIX_SIZE)
    per_hour = DEFAULT_REVIEWS_PER_DAY * DEFAULT_BUSIEST_SHARE
    said = f"{DEFAULT_BUSIEST_SHARE:.0%} of {DEFAULT_REVIEWS_PER_DAY} reviews a day"
    busiest = BusiestHour(0, 0, per_hour, 0, said)
    start = now - timedelta(days=1)
    return Workload(tuple(reviews), DEFAULT_MIX_NAME, start, now, busiest, DEFAULT_REVIEWS_PER_DAY)
