"""When idle, look again: a second look at recent open MRs while the model pool has nothing to
do (issue 37, docs/effort.md).

With ``idle_review`` on, the worker calls :meth:`IdleReview.tick` every
``idle_review_interval_s`` while it runs nothing: when no job waits, no second look is pending,
every box is idle (the same rule as the effort that follows the load) and the day's budget of
model time (``idle_review_gpu_seconds_per_day``, since midnight UTC) is not spent, it queues
one second look: a review job with trigger ``idle`` of the most recently reviewed open MR whose
current head has not had one, a full review (not only what changed) at ``deep`` effort
(:data:`reviewbot.worker.load_effort.SECOND_LOOK`). The job's dedupe key names the MR's head,
so one head is looked at once; the queue runs every other job before it, and its model calls
go at the lowest priority (``Workload.BACKGROUND``). Publishing is the ordinary exactly-once
publishing: what is already on the MR is not posted again, so only new findings appear.

Owns: deciding when to queue a second look and which MR gets it. Must not: run the review, or
write SQL (reviewbot.store.idle_queries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reviewbot.app import App
from reviewbot.effort import Effort
from reviewbot.gitlab import GitLabError
from reviewbot.queue import FULL_REVIEW_KEY, JobQueue
from reviewbot.states import JobKind, MergeRequestState, Trigger
from reviewbot.store import job_queries
from reviewbot.store.idle_queries import (
    RecentMR,
    idle_gpu_seconds_since,
    recent_reviewed_mrs,
)
from reviewbot.store.store import utc_now
from reviewbot.worker.load_effort import LoadEffort

__all__ = ["IdleReview", "IdleTick", "second_look_key"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

# MRs asked of GitLab in one tick, at most (the newest reviewed first).
CANDIDATES_PER_TICK = 20
SECOND_LOOK_KEY_PREFIX = "idle"


@dataclass(frozen=True)
class IdleTick:
    """What one tick did: the job it queued (None: none) and why, in a line."""

    job_id: int | None
    reason: str


def second_look_key(mr: RecentMR, head_sha: str) -> str:
    """The dedupe key of the second look at one MR head: one head is looked at once."""
    return f"{SECOND_LOOK_KEY_PREFIX}:{mr.gitlab_url}:{mr.project_id}:{mr.mr_iid}:{head_sha}"


def start_of_day(moment: datetime) -> datetime:
    """Midnight UTC of ``moment``'s day: the daily budget's start."""
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


class IdleReview:
    """Queues second looks while the pool is idle, within the day's budget."""

    def __init__(
        self, app: App, queue: JobQueue, load: LoadEffort, *, clock: Clock = utc_now
    ) -> None:
        self.app = app
        self.queue = queue
        self.load = load
        self._clock = clock

    def spent_today_s(self) -> float:
        """Model time the second looks took since midnight UTC, in seconds."""
        return idle_gpu_seconds_since(self.app.store.engine, start_of_day(self._clock()))

    def tick(self) -> IdleTick:
        """Queue one second look if the pool is idle and the budget allows; say why not."""
        settings = self.app.settings
        spent = self.spent_today_s()
        budget = settings.idle_review_gpu_seconds_per_day
        if spent >= budget:
            return IdleTick(None, f"today's budget is spent ({spent:.0f} of {budget:.0f} s)")
        if self._second_look_pending():
            return IdleTick(None, "a second look is already queued or running")
        choice = self.load.now()
        if choice.effort is not Effort.DEEP:
            return IdleTick(None, f"the pool is not idle: {choice.reason}")
        since = self._clock() - timedelta(hours=settings.idle_review_window_h)
        for mr in recent_reviewed_mrs(self.app.store.engine, since, CANDIDATES_PER_TICK):
            head = self._open_head(mr)
            if head is None:
                continue
            key = second_look_key(mr, head)
            if job_queries.find_by_dedupe_key(self.app.store.engine, key) is not None:
                continue
            queued = self.queue.enqueue(
                project=mr.project,
                mr_iid=mr.mr_iid,
                head_sha=head,
                trigger=Trigger.IDLE.value,
                dedupe_key=key,
                payload={FULL_REVIEW_KEY: True},
                project_id=mr.project_id,
                kind=JobKind.REVIEW.value,
            )
            reason = (
                f"second look at {mr.project}!{mr.mr_iid} head {head[:8]} queued "
                f"({spent:.0f} of {budget:.0f} s spent today; {choice.reason})"
            )
            log.info("%s", reason)
            return IdleTick(queued.job_id if queued.created else None, reason)
        return IdleTick(None, "every recent open MR's head has had its second look")

    def _second_look_pending(self) -> bool:
        engine = self.app.store.engine
        return job_queries.pending_with_trigger(engine, Trigger.IDLE.value) > 0

    def _open_head(self, mr: RecentMR) -> str | None:
        """The MR's head now when it is open on GitLab (None: ended, gone or unreadable)."""
        try:
            found = self.app.gitlab(mr.gitlab_url).merge_request(mr.project_id, mr.mr_iid)
        except GitLabError as error:
            log.info("second look: %s!%d skipped: %s", mr.project, mr.mr_iid, error)
            return None
        head = found.get("sha")
        if found.get("state") != MergeRequestState.OPENED.value or not isinstance(head, str):
            return None
        return head
