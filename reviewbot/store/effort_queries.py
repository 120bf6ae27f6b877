"""The review effort's figures (issue 37), in SQL: per effort, the reviews, their model calls
and tokens, and what the deep reviews' vote kept and voted out.

A review belongs to the report when it is in the report's ``ReportScope`` (its window and,
with ``--project``, its project). Reviews recorded before efforts existed (``effort`` NULL) are
left out.

Owns: those figures as SQL. Must not: shape or word the report.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, case, distinct, func, select

from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import FindingState
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.report_queries import ReportScope
from reviewbot.store.store import Store

__all__ = ["effort_figures"]


def _calls(connection: Connection, scope: ReportScope) -> dict[str, tuple[int, int, int]]:
    """Per effort: model calls, prompt tokens and cached tokens."""
    rows = connection.execute(
        select(
            ReviewRow.effort,
            func.count(LLMCallRow.id),
            func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.cached_tokens), 0),
        )
        .join(ReviewRow, ReviewRow.id == LLMCallRow.review_id)
        .where(ReviewRow.effort.is_not(None), *scope.review_conditions())
        .group_by(ReviewRow.effort)
    ).all()
    return {effort: (calls, prompt, cached) for effort, calls, prompt, cached in rows}


def effort_figures(store: Store, scope: ReportScope) -> list[dict[str, Any]]:
    """Per effort: reviews, model calls, prompt and cached tokens, findings kept by a vote (with
    their mean confidence) and voted out."""
    voted = FindingRow.votes.is_not(None)
    out = FindingRow.state == FindingState.VOTED_OUT.value
    with store.engine.connect() as connection:
        calls = _calls(connection, scope)
        rows = connection.execute(
            select(
                ReviewRow.effort,
                func.count(distinct(ReviewRow.id)),
                func.sum(case((voted & ~out, 1), else_=0)),
                func.sum(case((out, 1), else_=0)),
                func.avg(case((voted & ~out, FindingRow.confidence), else_=None)),
            )
            .outerjoin(FindingRow, FindingRow.review_id == ReviewRow.id)
            .where(ReviewRow.effort.is_not(None), *scope.review_conditions())
            .group_by(ReviewRow.effort)
            .order_by(ReviewRow.effort)
        ).all()
    figures = []
    for effort, reviews, kept, voted_out, confidence in rows:
        model_calls, prompt, cached = calls.get(effort, (0, 0, 0))
        figures.append(
            {
                "effort": effort,
                "reviews": reviews,
                "model_calls": model_calls,
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "kept_by_vote": kept or 0,
                "voted_out": voted_out or 0,
                "mean_confidence": confidence,
            }
        )
    return figures
