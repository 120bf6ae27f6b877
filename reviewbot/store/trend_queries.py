"""The report trend's own figures, in SQL: per window (the report asks once per ISO week of
the trend, through :func:`reviewbot.store.report_queries.read_window_summary`, which adds
these to the window's totals, latency and outcomes) the tool calls and the unreadable ones
(the invalid-answer rate), and the prompt versions and models that reviewed in it.

Each is one aggregate query bounded by the window's reviews (8 weeks of a busy year: well
under a second, tests/bench/bench_report.py).

Owns: the trend's figures beyond the window summary, as SQL. Must not: choose the weeks
(`reviewbot.window`), shape or word the report, or loop over a table's rows in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, case, func, select

from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["live_figures"]


def _tool_calls(connection: Connection, in_scope: Sequence[Any]) -> dict[str, int]:
    """Tool calls of the window's model calls that counted them, and the unreadable ones."""
    counted = LLMCallRow.tool_calls.is_not(None)
    calls, invalid = connection.execute(
        select(
            func.coalesce(func.sum(LLMCallRow.tool_calls), 0),
            func.coalesce(func.sum(case((counted, LLMCallRow.invalid_tool_calls), else_=0)), 0),
        )
        .join(ReviewRow, LLMCallRow.review_id == ReviewRow.id)
        .where(*in_scope)
    ).one()
    return {"tool_calls": int(calls), "invalid_tool_calls": int(invalid)}


def _live(connection: Connection, in_scope: Sequence[Any], column: Any) -> list[str]:
    """The distinct values of ``column`` among the window's reviews, sorted."""
    rows = connection.scalars(select(column).where(*in_scope, column.is_not(None)).distinct())
    return sorted(str(value) for value in rows)


def live_figures(connection: Connection, in_scope: Sequence[Any]) -> dict[str, Any]:
    """Of the reviews matching ``in_scope`` (a ReportScope's review conditions): their tool
    calls and unreadable ones, and the prompt versions and models they used."""
    return {
        "tool_call_totals": _tool_calls(connection, in_scope),
        "prompt_versions": _live(connection, in_scope, ReviewRow.prompt_version),
        "models": _live(connection, in_scope, ReviewRow.model),
    }
