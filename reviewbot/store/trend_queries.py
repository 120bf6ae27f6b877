"""The report trend's own figures, in SQL: the week a review falls in (:func:`week_number`,
which lets :func:`reviewbot.store.report_queries.read_trend` count the outcomes of every
trend week in one grouped query, not one query per week), and per week the tool calls and
the unreadable ones (the invalid-answer rate) and the prompt versions and models that
reviewed in it, each one aggregate query bounded by the week's reviews
(tests/bench/bench_report.py).

Owns: the trend's figures beyond the window summary, as SQL. Must not: choose the weeks
(`reviewbot.window`), shape or word the report, or loop over a table's rows in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Integer, case, cast, func, literal, select

from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["WEEK_SECONDS", "live_figures", "week_number"]

WEEK_SECONDS = 7 * 24 * 3600
DAYS_PER_WEEK = 7
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores DateTime on SQLite


def week_number(column: Any, since: datetime, dialect: str) -> Any:
    """The whole weeks from ``since`` to the timestamp ``column`` (0 for its first week);
    ``column`` is never before ``since`` where it is used."""
    if dialect == "sqlite":
        start = since.astimezone(UTC).strftime(SQLITE_TIME)
        days = func.julianday(column) - func.julianday(literal(start))
        return cast(days / DAYS_PER_WEEK, Integer)
    seconds = func.extract("epoch", column - literal(since))
    return cast(func.floor(seconds / WEEK_SECONDS), Integer)


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
