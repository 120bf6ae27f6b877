"""Queries of `reviewbot eval`: one eval run; for `eval --compare` one comparison and its
configurations' eval runs written together, and the latest comparison read back for the report.

Owns: those statements, each a function of an open connection, and the checks of what a
comparison row holds. Must not: compute a score, an interval or a verdict (`reviewbot.compare`
does), or open a connection or a transaction (the ``Store`` hands one in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from reviewbot.store.models import EvalComparison as EvalComparisonRow
from reviewbot.store.models import EvalRun as EvalRunRow
from reviewbot.store.records import writable_columns

__all__ = [
    "COMPARISON_FIELDS",
    "RUN_FIELDS",
    "insert_comparison",
    "insert_run",
    "latest_comparison",
]

COMPARISON_FIELDS = writable_columns(EvalComparisonRow)
RUN_FIELDS = writable_columns(EvalRunRow)  # a plain run may leave out the NULL-able ones
COMPARED_RUN_FIELDS = RUN_FIELDS - {"comparison_id"}  # insert_comparison fills it in
RUN_REQUIRED = frozenset(c.name for c in EvalRunRow.__table__.columns if not c.nullable) - {"id"}


def _checked(
    given: Mapping[str, Any], allowed: frozenset[str], required: frozenset[str], what: str
) -> dict[str, Any]:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(unknown)}")
    missing = sorted(required - set(given))
    if missing:
        raise ValueError(f"missing {what} field(s): {', '.join(missing)}")
    return dict(given)


def insert_run(connection: Connection, run: Mapping[str, Any]) -> int:
    """Insert one ``eval_runs`` row (RUN_FIELDS; the NULL-able ones may be left out); its id."""
    row = _checked(run, RUN_FIELDS, RUN_REQUIRED, "eval run")
    return int(
        connection.execute(insert(EvalRunRow).values(row).returning(EvalRunRow.id)).scalar_one()
    )


def insert_comparison(
    connection: Connection, comparison: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> tuple[int, list[int]]:
    """Insert the ``eval_comparisons`` row and its ``eval_runs`` rows (each names its
    ``configuration``); the comparison's id and the runs' ids, in order."""
    row = _checked(comparison, COMPARISON_FIELDS, COMPARISON_FIELDS, "eval comparison")
    checked = [_checked(run, COMPARED_RUN_FIELDS, RUN_REQUIRED, "eval run") for run in runs]
    if any(not run.get("configuration") for run in checked):
        raise ValueError("every eval run of a comparison names its configuration")
    comparison_id = int(
        connection.execute(
            insert(EvalComparisonRow).values(row).returning(EvalComparisonRow.id)
        ).scalar_one()
    )
    run_ids = [insert_run(connection, {**run, "comparison_id": comparison_id}) for run in checked]
    return comparison_id, run_ids


def latest_comparison(connection: Connection, until: datetime) -> dict[str, Any] | None:
    """The newest comparison started before ``until`` with its eval runs under ``runs``, keyed
    by configuration name (without their per-item results), or None."""
    found = (
        connection.execute(
            select(EvalComparisonRow)
            .where(EvalComparisonRow.started_at < until)
            .order_by(EvalComparisonRow.started_at.desc(), EvalComparisonRow.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    if found is None:
        return None
    runs = connection.execute(
        select(EvalRunRow).where(EvalRunRow.comparison_id == found["id"]).order_by(EvalRunRow.id)
    ).mappings()
    by_name = {
        row["configuration"]: {key: value for key, value in row.items() if key != "results"}
        for row in runs
    }
    return {**found, "runs": by_name}
