"""How many deep reviews a day the pool could add at its load (issue 37, docs/effort.md):
spare capacity divided by the cost of a deep review, for ``reviewbot capacity --workload`` and
``reviewbot loadtest``.

A deep review sends each chunk ``DEEP_PASSES`` times. Pass 1 costs what a standard review
costs; a later pass sends the same prompt again, so its prefill is served from the prefix
cache (``cached_share`` of it) and only decoding and the uncached rest are paid. Its cost,
in standard reviews::

    1 + (passes - 1) x (1 - cached_share x prefill_share)

with ``prefill_share`` the share of a review's model time spent on prefill. Both are named
assumptions below (they are printed with the figure); the spare capacity is the pool's
measured or predicted reviews a day minus the reviews a day it already serves.

Owns: the arithmetic and its words. Must not: measure, read the store or print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEEP_PASSES",
    "DEEP_PASS_CACHED_SHARE",
    "PREFILL_SHARE",
    "DeepCapacity",
    "deep_capacity",
    "deep_review_cost",
]

DEEP_PASSES = 3
# A later pass sends pass 1's prompt again: every full KV block is cached, only the last
# partial block is computed again (16-token blocks on a 6,000-token chunk: about 99.9%); 0.95
# leaves room for evictions between the passes under load.
DEEP_PASS_CACHED_SHARE = 0.95
# Share of a review's model time spent on prefill (the rest decodes): an assumption, about a
# 6,000-token chunk at 19,400 prefill tokens/s next to 400 output tokens decoded in a batch
# (docs/capacity.md's H200 figures); a pool that prefills more gains more from the cache.
PREFILL_SHARE = 0.2


def deep_review_cost(
    passes: int = DEEP_PASSES,
    cached_share: float = DEEP_PASS_CACHED_SHARE,
    prefill_share: float = PREFILL_SHARE,
) -> float:
    """A deep review's model time in standard reviews (see the module's formula)."""
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    return 1.0 + (passes - 1) * (1.0 - cached_share * prefill_share)


@dataclass(frozen=True)
class DeepCapacity:
    """Deep reviews a day the pool could add, and what the figure rests on."""

    deep_reviews_per_day: float
    capacity_per_day: float
    served_per_day: float | None  # None: not known, the figure is for an otherwise idle pool
    cost: float
    passes: int
    cached_share: float
    prefill_share: float

    def describe(self) -> str:
        served = (
            "nothing else served (the served load is not known)"
            if self.served_per_day is None
            else f"{self.served_per_day:,.1f} reviews a day already served"
        )
        return (
            f"{self.deep_reviews_per_day:,.0f} deep reviews a day could be added: capacity "
            f"{self.capacity_per_day:,.0f} reviews a day, {served}; a deep review costs "
            f"{self.cost:.2f} standard ones ({self.passes} passes, later passes "
            f"{self.cached_share:.0%} cached, prefill assumed {self.prefill_share:.0%} of a "
            "review's model time)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "deep_reviews_per_day": self.deep_reviews_per_day,
            "capacity_reviews_per_day": self.capacity_per_day,
            "served_reviews_per_day": self.served_per_day,
            "deep_review_cost_in_reviews": round(self.cost, 3),
            "passes": self.passes,
            "later_pass_cached_share": self.cached_share,
            "prefill_share_assumed": self.prefill_share,
        }


def deep_capacity(
    capacity_per_day: float,
    served_per_day: float | None,
    *,
    passes: int = DEEP_PASSES,
    cached_share: float = DEEP_PASS_CACHED_SHARE,
    prefill_share: float = PREFILL_SHARE,
) -> DeepCapacity:
    """Spare reviews a day (capacity minus what is served, never below 0) over a deep review's
    cost."""
    cost = deep_review_cost(passes, cached_share, prefill_share)
    spare = max(0.0, capacity_per_day - (served_per_day or 0.0))
    return DeepCapacity(
        round(spare / cost, 1),
        round(capacity_per_day, 1),
        None if served_per_day is None else round(served_per_day, 1),
        cost,
        passes,
        cached_share,
        prefill_share,
    )
