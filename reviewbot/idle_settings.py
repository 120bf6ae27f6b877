"""The settings of the effort that follows the load and of the second look when idle
(docs/effort.md, issue 37).

:class:`IdleReviewSettings` is a base of :class:`reviewbot.config.Settings`: its fields are
settings like any other (file, ``REVIEWBOT_*``, the generated reference), declared here to keep
``config.py`` to one screenful per concern.

Owns: these settings' defaults, bounds and help. Must not: read anything, or be read as a
global.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewbot.setting_fields import Bounds, setting

__all__ = [
    "DEFAULT_FIRST_COMMENT_SLO_S",
    "DEFAULT_IDLE_REVIEW_GPU_SECONDS_PER_DAY",
    "DEFAULT_IDLE_REVIEW_INTERVAL_S",
    "DEFAULT_IDLE_REVIEW_WINDOW_H",
    "IdleReviewSettings",
]

# A box is idle while fewer requests than this run on it and none waits: 1 = nothing running.
DEFAULT_IDLE_RUNNING_BELOW = 1
MAX_IDLE_RUNNING_BELOW = 100_000
# Quick reviews once this many jobs wait (a burst of pushes), or once the oldest waits past
# the first-comment SLO (five minutes from the push to the first comment).
DEFAULT_QUICK_QUEUE_DEPTH = 20
MAX_QUEUE_DEPTH = 1_000_000
DEFAULT_FIRST_COMMENT_SLO_S = 300.0
MAX_SLO_S = 7 * 24 * 3600.0
DEFAULT_IDLE_REVIEW_WINDOW_H = 72.0
MAX_WINDOW_H = 24 * 365.0
# One GPU hour a day for second looks (a deep review of a mid-sized MR takes a few minutes).
DEFAULT_IDLE_REVIEW_GPU_SECONDS_PER_DAY = 3600.0
SECONDS_PER_DAY = 24 * 3600.0
DEFAULT_IDLE_REVIEW_INTERVAL_S = 300.0
MAX_POOL_GPUS = 1024  # the budget's bound: a whole day of this many GPUs
MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = SECONDS_PER_DAY
DEFAULT_METRICS_TIMEOUT_S = 2.0
MAX_METRICS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class IdleReviewSettings:
    """The load-following effort's and the idle second look's settings: a base of
    ``Settings``."""

    effort_follows_load: bool = setting(
        False,
        help="The worker chooses each job's effort from the load: `deep` when every model box "
        "is idle and no job waits, `standard` when busy, `quick` when the queue backs up "
        "past `first_comment_slo_s` or `effort_quick_queue_depth` ([effort](effort.md)). "
        "Off: the effort comes from the settings.",
    )
    effort_idle_running_below: int = setting(
        DEFAULT_IDLE_RUNNING_BELOW,
        bounds=Bounds(1, MAX_IDLE_RUNNING_BELOW),
        help="A box counts as idle while fewer requests than this run on it "
        "(`vllm:num_requests_running`) and none waits (`vllm:num_requests_waiting`).",
    )
    effort_quick_queue_depth: int = setting(
        DEFAULT_QUICK_QUEUE_DEPTH,
        bounds=Bounds(1, MAX_QUEUE_DEPTH),
        help="With this many jobs or more waiting in the queue, jobs get the `quick` effort.",
    )
    first_comment_slo_s: float = setting(
        DEFAULT_FIRST_COMMENT_SLO_S,
        bounds=Bounds(0, MAX_SLO_S, above_low=True, unit="seconds"),
        help="The promised time from a push to the first comment: once the queue's oldest job "
        "has waited longer, jobs get the `quick` effort.",
    )
    effort_metrics_timeout_s: float = setting(
        DEFAULT_METRICS_TIMEOUT_S,
        bounds=Bounds(0, MAX_METRICS_TIMEOUT_S, above_low=True, unit="seconds"),
        help="How long the worker waits for one box's `/metrics` when it chooses an effort; a "
        "box that does not answer counts as busy.",
    )
    idle_review: bool = setting(
        False,
        help="When the model pool is idle and the queue empty, the worker queues a second look "
        "at `deep` effort at recent open MRs (lowest priority; only new findings are posted), "
        "within `idle_review_gpu_seconds_per_day` ([effort](effort.md)).",
    )
    idle_review_window_h: float = setting(
        DEFAULT_IDLE_REVIEW_WINDOW_H,
        bounds=Bounds(0, MAX_WINDOW_H, above_low=True, unit="hours"),
        help="A second look goes to open MRs reviewed within this many hours.",
    )
    idle_review_gpu_seconds_per_day: float = setting(
        DEFAULT_IDLE_REVIEW_GPU_SECONDS_PER_DAY,
        bounds=Bounds(0, SECONDS_PER_DAY * MAX_POOL_GPUS, unit="seconds"),
        help="The team's daily budget of model time for second looks: the wall time of their "
        "model calls (the store's llm_calls) since midnight UTC; none is queued once it is "
        "spent.",
    )
    idle_review_interval_s: float = setting(
        DEFAULT_IDLE_REVIEW_INTERVAL_S,
        bounds=Bounds(MIN_INTERVAL_S, MAX_INTERVAL_S, unit="seconds"),
        help="How often the worker looks whether the pool is idle enough for a second look.",
    )
