"""The verification pass's figures (issue 21), in SQL: what verification cost, and, per
category and prompt version, how many findings it dropped and how the kept ones fared.

A review belongs to the report when it started in the window (``since <= started_at < until``)
and, with ``--project``, is of that project: the report's ``ReportScope``. Cost: the
``llm_calls`` rows with ``purpose = 'verify'``. Votes: award events whose value is exactly
``thumbsup`` / ``thumbsdown`` (a revoked vote ends in ``:revoked`` and does not count); a
finding counts once per kind however many events it has.

Owns: those figures as SQL. Must not: shape or word the report.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, case, distinct, func, select

from reviewbot.states import CallPurpose, FeedbackKind
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import FindingState
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.report_queries import ReportScope
from reviewbot.store.store import Store

__all__ = ["verification_cost", "verification_figures", "verification_outcomes"]

THUMBS_UP = "thumbsup"
THUMBS_DOWN = "thumbsdown"
MS_PER_S = 1000.0


def verification_cost(connection: Connection, scope: ReportScope) -> dict:
    """Calls, tokens and seconds of the window's verification calls, and per verified review."""
    row = connection.execute(
        select(
            func.count(LLMCallRow.id),
            func.count(distinct(LLMCallRow.review_id)),
            func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.cached_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.latency_ms), 0.0),
        )
        .join(ReviewRow, ReviewRow.id == LLMCallRow.review_id)
        .where(LLMCallRow.purpose == CallPurpose.VERIFY.value, *scope.review_conditions())
    ).one()
    calls, reviews, prompt, completion, cached, latency_ms = row
    return {
        "calls": calls,
        "reviews": reviews,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "seconds": latency_ms / MS_PER_S,
        "tokens_per_review": _per(prompt + completion, reviews),
        "seconds_per_review": _per(latency_ms / MS_PER_S, reviews),
    }


def _per(total: float, reviews: int) -> float | None:
    return total / reviews if reviews else None


def verification_outcomes(connection: Connection, scope: ReportScope) -> list[dict[str, Any]]:
    """Per category and prompt version: findings judged, dropped, kept and posted, and of the
    kept posted ones how many got 👍, 👎, or were addressed."""

    def has(kind: FeedbackKind, value: str | None = None) -> Any:
        match = [FeedbackRow.finding_id == FindingRow.id, FeedbackRow.kind == kind.value]
        if value is not None:
            match.append(FeedbackRow.value == value)
        return select(FeedbackRow.id).where(*match).exists()

    kept_posted = and_(
        FindingRow.verdict.is_not(None),
        FindingRow.state != FindingState.DROPPED.value,
        FindingRow.discussion_id.is_not(None),
    )

    def count_if(condition: Any) -> Any:
        return func.sum(case((condition, 1), else_=0))

    rows = connection.execute(
        select(
            FindingRow.category,
            ReviewRow.prompt_version,
            func.count(FindingRow.id),
            count_if(FindingRow.state == FindingState.DROPPED.value),
            count_if(kept_posted),
            count_if(and_(kept_posted, has(FeedbackKind.AWARD, THUMBS_UP))),
            count_if(and_(kept_posted, has(FeedbackKind.AWARD, THUMBS_DOWN))),
            count_if(and_(kept_posted, has(FeedbackKind.ADDRESSED))),
        )
        .join(ReviewRow, ReviewRow.id == FindingRow.review_id)
        .where(FindingRow.verdict.is_not(None), *scope.review_conditions())
        .group_by(FindingRow.category, ReviewRow.prompt_version)
        .order_by(FindingRow.category, ReviewRow.prompt_version)
    ).all()
    names = ("judged", "dropped", "kept_posted", "thumbs_up", "thumbs_down", "addressed")
    return [
        {"category": category, "prompt_version": version, **dict(zip(names, counts, strict=True))}
        for category, version, *counts in rows
    ]


def verification_figures(store: Store, scope: ReportScope) -> dict[str, Any]:
    """The report's verification section: its cost and its outcomes per category and prompt
    version, for the reviews of ``scope``."""
    with store.engine.connect() as connection:
        return {
            "cost": verification_cost(connection, scope),
            "outcomes": verification_outcomes(connection, scope),
        }
