"""Which effort a job gets from the load: the queue's depth and the model boxes' own gauges.

Issue 37 ("effort that follows the load", docs/effort.md): ``deep`` when every box behind the
router is idle (nothing waiting, fewer than ``idle_running_below`` requests running) and no job
waits in the queue; ``standard`` when the pool or the queue is busy; ``quick`` when the queue
is backing up (its oldest job has waited past the first-comment SLO, or it holds
``quick_queue_depth`` jobs or more). A box whose ``/metrics`` could not be read counts as busy:
deep is never chosen on unknown load. The reason names the figures, e.g. ``queue 0, 1 box idle
(running 0, waiting 0): deep``.

More load never raises the effort (tests/test_effort_choice.py checks it with hypothesis), and
the choice never goes above ``ceiling`` (the most effort the team lets the load choose).

Owns: the load-to-effort rule and its reason. Must not: read the queue, a box or the settings
(the worker does: :mod:`reviewbot.worker.load_effort`), nor do I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reviewbot.effort import Effort, EffortChoice

__all__ = ["EFFORT_ORDER", "BoxGauges", "LoadLimits", "choose_effort", "lower_effort"]

EFFORT_ORDER = (Effort.QUICK, Effort.STANDARD, Effort.DEEP)  # cheapest first


@dataclass(frozen=True)
class BoxGauges:
    """One box's ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` at one moment,
    or why they could not be read (``error``: the box then counts as busy)."""

    url: str
    running: float | None = None
    waiting: float | None = None
    error: str | None = None

    @property
    def known(self) -> bool:
        return self.error is None and self.running is not None and self.waiting is not None


@dataclass(frozen=True)
class LoadLimits:
    """Where idle ends and backing up begins (settings ``effort_*``, docs/effort.md)."""

    idle_running_below: int  # a box is idle with fewer requests running than this, none waiting
    quick_queue_depth: int  # this many jobs waiting or more: quick
    first_comment_slo_s: float  # the oldest job waiting longer than this: quick


def lower_effort(first: Effort, second: Effort) -> Effort:
    """The cheaper of two efforts."""
    return min(first, second, key=EFFORT_ORDER.index)


def _figure(value: float) -> str:
    return f"{value:g}"


def _boxes_words(boxes: Sequence[BoxGauges], limits: LoadLimits) -> tuple[bool, str]:
    """(every box idle, the boxes in words)."""
    if not boxes:
        return False, "no box known (counted busy)"
    known = [box for box in boxes if box.known]
    unread = [box for box in boxes if not box.known]
    running = sum(box.running or 0.0 for box in known)
    waiting = sum(box.waiting or 0.0 for box in known)
    busy = [
        box
        for box in known
        if (box.waiting or 0.0) > 0 or (box.running or 0.0) >= limits.idle_running_below
    ]
    idle = not unread and not busy
    plural = "box" if len(boxes) == 1 else "boxes"
    state = "idle" if idle else "busy"
    words = (
        f"{len(boxes)} {plural} {state} (running {_figure(running)}, waiting {_figure(waiting)})"
    )
    if unread:
        names = ", ".join(box.url for box in unread)
        words += f"; metrics unread from {names} (counted busy)"
    return idle, words


def choose_effort(
    queue_depth: int,
    oldest_wait_s: float | None,
    box_loads: Sequence[BoxGauges],
    slo: LoadLimits,
    configured: EffortChoice,
) -> EffortChoice:
    """The effort for the next job and why, from the jobs waiting (``queue_depth``, the oldest
    waiting ``oldest_wait_s``; None: none waits) and every box's gauges; never above
    ``configured.effort`` (the ceiling)."""
    idle, boxes = _boxes_words(box_loads, slo)
    queue = f"queue {queue_depth}"
    if oldest_wait_s is not None and queue_depth > 0:
        queue += f" (oldest waiting {oldest_wait_s:.0f} s)"
    backed_up = queue_depth >= slo.quick_queue_depth or (
        oldest_wait_s is not None and queue_depth > 0 and oldest_wait_s > slo.first_comment_slo_s
    )
    if backed_up:
        effort = Effort.QUICK
        why = (
            f"{queue}, past the first-comment SLO of {slo.first_comment_slo_s:g} s or "
            f"{slo.quick_queue_depth} jobs; {boxes}"
        )
    elif idle and queue_depth == 0:
        effort, why = Effort.DEEP, f"{queue}, {boxes}"
    else:
        effort, why = Effort.STANDARD, f"{queue}, {boxes}"
    chosen = lower_effort(effort, configured.effort)
    if chosen != effort:
        why += f"; at most {configured.effort.value} ({configured.reason})"
    return EffortChoice(chosen, f"{why}: {chosen.value}")
