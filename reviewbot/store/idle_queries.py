"""What the second look while idle reads from the store (issue 37, docs/effort.md): the recent
MRs worth a second look, and the model time second looks spent since a moment.

GPU time of a review is the sum of its model calls' wall time (``llm_calls.latency_ms``): a
call holds a slot of the model server for that long.

Owns: the two queries. Must not: decide when to look again or enqueue
(:mod:`reviewbot.worker.idle_review` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, and_, false, func, select

from reviewbot.states import MergeRequestState, ReviewStatus, Trigger
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import MergeRequestRecord as MergeRequestRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["RecentMR", "idle_gpu_seconds_since", "recent_reviewed_mrs"]

MS_PER_S = 1000.0


@dataclass(frozen=True)
class RecentMR:
    """An MR with a complete review started since a moment (the newest first)."""

    gitlab_url: str
    project: str
    project_id: int
    mr_iid: int
    last_reviewed: datetime


def idle_gpu_seconds_since(engine: Engine, since: datetime) -> float:
    """Seconds of model time the second looks' calls (reviews with trigger ``idle``) took
    since ``since``."""
    query = (
        select(func.coalesce(func.sum(LLMCallRow.latency_ms), 0.0))
        .join(ReviewRow, LLMCallRow.review_id == ReviewRow.id)
        .where(ReviewRow.trigger == Trigger.IDLE.value, LLMCallRow.started_at >= since)
    )
    with engine.connect() as connection:
        return float(connection.scalar(query) or 0.0) / MS_PER_S


def recent_reviewed_mrs(engine: Engine, since: datetime, limit: int) -> list[RecentMR]:
    """The MRs with a succeeded review (not a dry run) started since ``since``, most recently
    reviewed first, at most ``limit``; an MR ``feedback sync`` saw merged or closed is left
    out (GitLab is asked again before a second look is queued)."""
    ended = (
        select(MergeRequestRow.mr_iid)
        .where(
            MergeRequestRow.gitlab_url == ReviewRow.gitlab_url,
            MergeRequestRow.project_id == ReviewRow.project_id,
            MergeRequestRow.mr_iid == ReviewRow.mr_iid,
            MergeRequestRow.state != MergeRequestState.OPENED.value,
        )
        .exists()
    )
    newest = func.max(ReviewRow.started_at)
    query = (
        select(
            ReviewRow.gitlab_url,
            func.max(ReviewRow.project),
            ReviewRow.project_id,
            ReviewRow.mr_iid,
            newest,
        )
        .where(
            ReviewRow.started_at >= since,
            ReviewRow.status == ReviewStatus.SUCCEEDED.value,
            ReviewRow.dry_run.is_(false()),
            and_(
                ReviewRow.gitlab_url.is_not(None),
                ReviewRow.project_id.is_not(None),
                ReviewRow.mr_iid.is_not(None),
            ),
            ~ended,
        )
        .group_by(ReviewRow.gitlab_url, ReviewRow.project_id, ReviewRow.mr_iid)
        .order_by(newest.desc())
        .limit(limit)
    )
    with engine.connect() as connection:
        return [
            RecentMR(str(url), str(path), int(project_id), int(iid), reviewed)
            for url, path, project_id, iid, reviewed in connection.execute(query)
        ]
