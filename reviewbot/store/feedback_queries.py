"""Queries behind `reviewbot feedback sync`: which MRs to read, what the bot posted on one, what
is already on record about it. Plain values out; :class:`~reviewbot.store.Store` wraps them.

Owns: those reads, each a function of an open connection. Must not: decide an outcome
(`reviewbot.feedback` does), write, or open a connection (the ``Store`` hands one in).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, case, func, or_, select

from reviewbot.states import FeedbackKind
from reviewbot.store.models import PUBLISHED_STATES
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["outcomes_on_record", "published_findings", "reviewed_merge_requests", "votes_in_force"]

REVOKED_SUFFIX = ":revoked"


def reviewed_merge_requests(
    connection: Connection, gitlab_url: str, since: datetime, project: str | None
) -> list[dict[str, Any]]:
    """MRs of ``gitlab_url`` with a review started at or after ``since`` (of one project, by
    path or id, when given), the most recently reviewed first, each with its newest path."""
    conditions = [
        ReviewRow.gitlab_url == gitlab_url.rstrip("/"),
        ReviewRow.project_id.is_not(None),
        ReviewRow.mr_iid.is_not(None),
        ReviewRow.started_at >= since,
    ]
    if project is not None:
        by_path = ReviewRow.project == project
        conditions.append(
            or_(by_path, ReviewRow.project_id == int(project)) if project.isdigit() else by_path
        )
    newest = (
        select(func.max(ReviewRow.id).label("id"))
        .where(*conditions)
        .group_by(ReviewRow.project_id, ReviewRow.mr_iid)
        .subquery()
    )
    rows = connection.execute(
        select(ReviewRow.project_id, ReviewRow.mr_iid, ReviewRow.project)
        .join(newest, newest.c.id == ReviewRow.id)
        .order_by(ReviewRow.id.desc())
    )
    return [
        {"project_id": int(row.project_id), "mr_iid": int(row.mr_iid), "project": row.project}
        for row in rows
    ]


def published_findings(
    connection: Connection, gitlab_url: str, project_id: int, mr_iid: int
) -> list[dict[str, Any]]:
    """The findings posted on one MR (one row each), with the head their review saw."""
    rows = connection.execute(
        select(
            FindingRow.id,
            FindingRow.project,
            FindingRow.fingerprint,
            FindingRow.path,
            FindingRow.side,
            FindingRow.line,
            FindingRow.end_line,
            FindingRow.state,
            FindingRow.note_id,
            FindingRow.discussion_id,
            FindingRow.created_at,
            ReviewRow.head_sha,
        )
        .join(ReviewRow, FindingRow.review_id == ReviewRow.id)
        .where(
            FindingRow.gitlab_url == gitlab_url.rstrip("/"),
            FindingRow.project_id == project_id,
            FindingRow.mr_iid == mr_iid,
            FindingRow.state.in_([state.value for state in PUBLISHED_STATES]),
        )
        .order_by(FindingRow.id)
    ).mappings()
    return [dict(row) for row in rows]


def votes_in_force(
    connection: Connection, finding_ids: Collection[int]
) -> set[tuple[int, str, str]]:
    """(finding id, username, vote) of every 👍/👎 in force: per finding, user and vote the
    newest recorded event is not a revocation."""
    if not finding_ids:
        return set()
    vote = case((FeedbackRow.value.like("thumbsup%"), "thumbsup"), else_="thumbsdown")
    newest_first = func.row_number().over(
        partition_by=(FeedbackRow.finding_id, FeedbackRow.username, vote),
        order_by=(FeedbackRow.created_at.desc(), FeedbackRow.id.desc()),
    )
    ranked = (
        select(
            FeedbackRow.finding_id,
            FeedbackRow.username,
            FeedbackRow.value,
            newest_first.label("rank"),
        )
        .where(
            FeedbackRow.kind == FeedbackKind.AWARD.value,
            FeedbackRow.finding_id.in_(list(finding_ids)),
            FeedbackRow.username.is_not(None),
        )
        .subquery()
    )
    rows = connection.execute(
        select(ranked.c.finding_id, ranked.c.username, ranked.c.value).where(
            ranked.c.rank == 1, ranked.c.value.not_like(f"%{REVOKED_SUFFIX}")
        )
    )
    return {(int(row.finding_id), str(row.username), str(row.value)) for row in rows}


def outcomes_on_record(connection: Connection, finding_ids: Collection[int]) -> dict[int, set[str]]:
    """Finding id -> the feedback kinds recorded about it."""
    if not finding_ids:
        return {}
    rows = connection.execute(
        select(FeedbackRow.finding_id, FeedbackRow.kind)
        .where(FeedbackRow.finding_id.in_(list(finding_ids)))
        .distinct()
    )
    found: dict[int, set[str]] = {}
    for finding_id, kind in rows:
        found.setdefault(int(finding_id), set()).add(str(kind))
    return found
