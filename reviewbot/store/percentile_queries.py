"""Nearest-rank percentiles in SQL, the same on both backends: the value at rank
``ceil(p * n)`` in ascending order (p in permille, in integer arithmetic), per group or over
all rows (SQLite has no ``percentile_cont``).

On SQLite, two statements, one sort: first the number of values per group (``GROUP BY``, no
sort of the values), from which the ranks wanted in each group follow; then one
``ROW_NUMBER()`` window over the values ordered within their group, keeping only the rows at
those ranks (a ``(group, rank) IN (VALUES ...)`` filter: two rows per group come back). The
single statement this replaced (``ROW_NUMBER()`` and ``COUNT()`` windows) sorted every value
twice (tests/bench/bench_report.py, docs/benchmarks.md). On PostgreSQL, its own
``percentile_disc`` (the first value whose position reaches ``p * n``: the same rank), one
sort per group in one statement.

:func:`calls_in` is the model calls of a window's reviews with the review's bucket (day or
week) computed once per review, in a materialized CTE, not once per call (a date parse per
call was a third of the grouped query's time on SQLite).

Owns: the percentile SQL and the window's calls source. Must not: choose the windows or
buckets (`reviewbot.store.report_queries`), or loop over a table's rows in Python (only over
the few groups and the two rows per group that come back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, tuple_

from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import Review as ReviewRow

__all__ = ["P50", "P95", "PERMILLE", "calls_in", "percentiles", "rank_of"]

PERMILLE = 1000
P50 = 500
P95 = 950


def rank_of(fraction_permille: int, count: int) -> int:
    """ceil(p * n) in integer arithmetic: (p‰ * n + 999) // 1000 (1 for one value)."""
    return (fraction_permille * count + (PERMILLE - 1)) // PERMILLE


def calls_in(conditions: Sequence[Any], group: Any | None = None) -> tuple[Any, Any | None]:
    """The source of the model calls of the reviews matching ``conditions`` and, with
    ``group`` (an expression over the review's columns), that bucket's column: computed once
    per review (a materialized CTE), then joined to its calls through their review index."""
    reviews = (
        select(
            ReviewRow.id.label("id"),
            *([group.label("grp")] if group is not None else []),
        )
        .where(*conditions)
        .cte("window_reviews")
        .prefix_with("MATERIALIZED")
    )
    source = reviews.join(LLMCallRow.__table__, LLMCallRow.review_id == reviews.c.id)
    return source, (reviews.c.grp if group is not None else None)


def percentiles(
    connection: Connection,
    value: Any,
    source: Any,
    conditions: Sequence[Any],
    group: Any | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of (group?, p50, p95, n) of ``value`` over ``source`` where ``conditions``, in
    the order of the group (no row for a group without values; none at all without values)."""
    where = [*conditions, value.is_not(None)]
    grouping = [group] if group is not None else []
    if connection.dialect.name == "postgresql":
        return _postgresql_percentiles(connection, value, source, where, grouping)
    counts = {
        (row[0] if group is not None else None): int(row[-1])
        for row in connection.execute(
            select(*grouping, func.count()).select_from(source).where(*where).group_by(*grouping)
        )
        if int(row[-1]) > 0
    }
    if not counts:
        return []
    wanted = {
        key: (rank_of(P50, count), rank_of(P95, count)) for key, count in sorted(counts.items())
    }
    found = _values_at(connection, value, source, where, group, wanted)
    return [
        (
            *([key] if group is not None else []),
            found[(key, at_p50)],
            found[(key, at_p95)],
            counts[key],
        )
        for key, (at_p50, at_p95) in wanted.items()
    ]


def _postgresql_percentiles(
    connection: Connection, value: Any, source: Any, where: Sequence[Any], grouping: list[Any]
) -> list[tuple[Any, ...]]:
    """PostgreSQL's own ``percentile_disc``: its row is ``ceil(p * n)`` (float8 arithmetic,
    exact for these two fractions: ``p * n`` is never within rounding of an integer it is
    not), one sort per group in one statement."""

    def at(permille: int) -> Any:
        return func.percentile_disc(permille / PERMILLE).within_group(value)

    query = (
        select(*grouping, at(P50), at(P95), func.count())
        .select_from(source)
        .where(*where)
        .group_by(*grouping)
        .order_by(*grouping)
    )
    return [tuple(row) for row in connection.execute(query) if int(row[-1]) > 0]


def _values_at(
    connection: Connection,
    value: Any,
    source: Any,
    where: Sequence[Any],
    group: Any | None,
    wanted: dict[Any, tuple[int, int]],
) -> dict[tuple[Any, int], Any]:
    """The value at each wanted (group, rank): one ROW_NUMBER() over the values ordered
    within their group, filtered to those ranks."""
    partition = {"partition_by": group} if group is not None else {}
    ranked = (
        select(
            *([group.label("grp")] if group is not None else []),
            value.label("value"),
            func.row_number().over(order_by=value, **partition).label("rank"),
        )
        .select_from(source)
        .where(*where)
        .subquery()
    )
    if group is None:
        ranks = sorted({rank for pair in wanted.values() for rank in pair})
        query = select(ranked.c.rank, ranked.c.value).where(ranked.c.rank.in_(ranks))
        return {(None, rank): at for rank, at in connection.execute(query)}
    pairs = sorted({(key, rank) for key, pair in wanted.items() for rank in pair})
    query = select(ranked.c.grp, ranked.c.rank, ranked.c.value).where(
        tuple_(ranked.c.grp, ranked.c.rank).in_(pairs)
    )
    return {(key, rank): at for key, rank, at in connection.execute(query)}
