"""What each box behind vllm-router served during a load test, from its own ``/metrics``.

vllm-router 0.1.17's answers name no worker (their headers are the box's own plus the router's
``x-request-id`` and CORS headers; tried through tests/router_pool.py), so ``reviewbot
loadtest`` reads every box's Prometheus text before and after the run and reports the
difference. The metric names are vLLM 0.32's (vllm/v1/metrics/loggers.py):

- ``vllm:request_success_total`` (one sample per ``finished_reason``): requests completed;
- ``vllm:time_to_first_token_seconds`` (a histogram): TTFT p50/p95 at bucket resolution, i.e.
  the upper bound of the bucket the percentile falls in (0.1, 0.25, 0.5, 0.75, 1, 2.5 s ...);
- ``vllm:prompt_tokens_total`` (every prompt token, computed and cached) and
  ``vllm:prompt_tokens_cached_total`` (the cached ones, counted once at admission): the box's
  share of prompt tokens served from its prefix cache;
- ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total``, shown as they are
  (a request that waits is queried again at each scheduling step, so their ratio is not the
  share of prompt tokens served from the cache).

The gauges ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` (requests in the
box's batches and waiting for one) tell the worker how busy a box is now
(:func:`read_gauges`, the effort that follows the load, docs/effort.md).

Samples of one name are summed over their labels (engines, finish reasons). Pure: text in,
figures out.

Owns: reading a box's ``/metrics`` text, the per-box figures between two readings and the
pool's part of the report. Must not: ask a box (:mod:`reviewbot.ops.router_probes` does), or
print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "BoxCounters",
    "BoxLoad",
    "box_load",
    "bucket_percentile",
    "pool_figures",
    "read_counters",
    "read_gauges",
]

REQUESTS = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
CACHED_PROMPT_TOKENS = "vllm:prompt_tokens_cached_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
COUNTERS = (REQUESTS, PROMPT_TOKENS, CACHED_PROMPT_TOKENS, PREFIX_QUERIES, PREFIX_HITS)
BUCKET_BOUND_LABEL = "le"
MS_PER_S = 1000.0
TTFT_PERCENTILES = {"p50": 0.50, "p95": 0.95}
TTFT_RESOLUTION = "bucket upper bound (vllm:time_to_first_token_seconds)"


@dataclass(frozen=True)
class BoxCounters:
    """One reading of a box's ``/metrics``: each counter summed over its labels (None: the box
    does not export it), and the TTFT histogram's cumulative buckets by upper bound."""

    counters: Mapping[str, float | None]
    ttft_buckets: Mapping[float, float]


@dataclass(frozen=True)
class BoxLoad:
    """What one box served between two readings, or why it cannot be told (``error``)."""

    url: str
    error: str | None = None
    requests: int | None = None
    ttft_ms: Mapping[str, float | None] | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    prefix_cache_queries: int | None = None
    prefix_cache_hits: int | None = None

    @property
    def cache_share(self) -> float | None:
        """Share of this box's prompt tokens served from its prefix cache."""
        if self.cached_prompt_tokens is None or not self.prompt_tokens:
            return None
        return round(self.cached_prompt_tokens / self.prompt_tokens, 4)

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "error": self.error,
            "requests": self.requests,
            "ttft_ms": None if self.ttft_ms is None else dict(self.ttft_ms),
            "ttft_resolution": TTFT_RESOLUTION,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cache_share": self.cache_share,
            "prefix_cache_queries": self.prefix_cache_queries,
            "prefix_cache_hits": self.prefix_cache_hits,
        }


def read_counters(text: str) -> BoxCounters:
    """The counters and TTFT buckets of one ``/metrics`` text; ValueError when it is not
    Prometheus text or has no ``vllm:request_success_total`` (not a vLLM)."""
    sums: dict[str, float] = {}
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in COUNTERS:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            elif sample.name == TTFT_BUCKET:
                bound = float(sample.labels[BUCKET_BOUND_LABEL])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    if REQUESTS not in sums:
        raise ValueError(f"no {REQUESTS} in it: not a vLLM's /metrics")
    return BoxCounters({name: sums.get(name) for name in COUNTERS}, buckets)


def read_gauges(text: str) -> tuple[float, float]:
    """(requests running, requests waiting) of one ``/metrics`` text, each summed over its
    engines; ValueError when it is not Prometheus text or lacks either gauge."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (RUNNING, WAITING):
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    missing = [name for name in (RUNNING, WAITING) if name not in sums]
    if missing:
        raise ValueError(f"no {' or '.join(missing)} in it: not a vLLM's /metrics")
    return sums[RUNNING], sums[WAITING]


def bucket_percentile(buckets: Mapping[float, float], fraction: float) -> float | None:
    """The upper bound (seconds) of the first bucket holding ``fraction`` of the observations
    (cumulative counts by bound, as Prometheus gives them); None when there are none, or when
    the percentile lies past the last finite bound."""
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    if total <= 0:
        return None
    for bound, count in ordered:
        if count >= fraction * total:
            return None if math.isinf(bound) else bound
    return None


def _delta(before: BoxCounters, after: BoxCounters, name: str) -> int | None:
    start, end = before.counters.get(name), after.counters.get(name)
    return None if start is None or end is None else round(end - start)


def box_load(url: str, before: BoxCounters, after: BoxCounters) -> BoxLoad:
    """The difference between two readings of one box (a restart in between reads as an
    error: its counters went back)."""
    requests = _delta(before, after, REQUESTS)
    assert requests is not None  # read_counters insists on it
    if requests < 0:
        return BoxLoad(url, error="its counters went back between the readings (restarted?)")
    buckets = {
        bound: count - before.ttft_buckets.get(bound, 0.0)
        for bound, count in after.ttft_buckets.items()
    }
    ttft_ms: dict[str, float | None] = {}
    for name, fraction in TTFT_PERCENTILES.items():
        bound = bucket_percentile(buckets, fraction)
        ttft_ms[name] = None if bound is None else round(bound * MS_PER_S, 3)
    return BoxLoad(
        url,
        requests=requests,
        ttft_ms=ttft_ms,
        prompt_tokens=_delta(before, after, PROMPT_TOKENS),
        cached_prompt_tokens=_delta(before, after, CACHED_PROMPT_TOKENS),
        prefix_cache_queries=_delta(before, after, PREFIX_QUERIES),
        prefix_cache_hits=_delta(before, after, PREFIX_HITS),
    )


def pool_figures(router_url: str, boxes: Sequence[BoxLoad]) -> dict[str, Any]:
    """The pool's part of the report: the router, its boxes, the requests the boxes counted
    and the share of their prompt tokens served from their caches (None unless every box was
    read and exports the cached count)."""
    read = [box for box in boxes if box.error is None]
    complete = len(read) == len(boxes) and all(b.cached_prompt_tokens is not None for b in read)
    prompt = sum(box.prompt_tokens or 0 for box in read)
    cached = sum(box.cached_prompt_tokens or 0 for box in read)
    return {
        "router": router_url,
        "boxes": len(boxes),
        "boxes_read": len(read),
        "requests_counted_by_boxes": sum(box.requests or 0 for box in read),
        "cache_share_by_boxes": round(cached / prompt, 4) if complete and prompt else None,
        "per_box": [box.to_dict() for box in boxes],
    }
