"""The report's "Second look" part (issue 37, docs/effort.md): the second looks while idle
(reviews with trigger ``idle``) of a window, the findings they added (posted: a finding already
on the MR is not posted again, so every posted one is new) and how those were received.

The figures are the report's own (:func:`reviewbot.store.report_queries.totals` and
:func:`~reviewbot.store.report_queries.outcome_groups`) on the window's second looks only.

Owns: the part's queries. Must not: word the part (reviewbot.report.document does).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import func, select

from reviewbot.states import Trigger
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.report_queries import (
    OUTCOME_FIELDS,
    ReportScope,
    outcome_groups,
    roll_up,
    totals,
)
from reviewbot.store.store import Store

__all__ = ["second_look_figures"]

MS_PER_S = 1000.0


def second_look_figures(store: Store, scope: ReportScope) -> dict[str, Any]:
    """The window's second looks: reviews, MRs, model seconds, findings posted, and their 👍,
    👎, addressed and resolved counts."""
    looks = dataclasses.replace(scope, trigger=Trigger.IDLE.value)
    with store.engine.connect() as connection:
        counted = totals(connection, looks)
        outcomes = roll_up(outcome_groups(connection, looks), None, OUTCOME_FIELDS).get(
            "", dict.fromkeys(OUTCOME_FIELDS, 0)
        )
        model_ms = connection.scalar(
            select(func.coalesce(func.sum(LLMCallRow.latency_ms), 0.0))
            .join(ReviewRow, LLMCallRow.review_id == ReviewRow.id)
            .where(*looks.review_conditions())
        )
    return {
        "reviews": counted["reviews"],
        "mrs": counted["mrs"],
        "model_seconds": round(float(model_ms or 0.0) / MS_PER_S, 1),
        "findings_added": outcomes["findings_posted"],
        "thumbs_up": outcomes["thumbs_up"],
        "thumbs_down": outcomes["thumbs_down"],
        "addressed": outcomes["addressed"],
        "resolved_by_human": outcomes["resolved_by_human"],
    }
