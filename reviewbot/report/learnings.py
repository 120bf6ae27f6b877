"""The report's learnings (pure): those in use, with how many findings each suppressed in the
window, and the suggested ones (proposals waiting for a human), as JSON rows and as tables.

``reviewbot.learnings.teaching.learning_figures`` reads them; ``reviewbot.report.document``
(Markdown) and ``reviewbot.report.html`` place the tables. Every string from the database goes
through :func:`reviewbot.markdown.table_cell` in Markdown (the HTML template escapes its cells).

Owns: the rows and headers of the two learnings tables. Must not: read the database, or lay
out the rest of the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reviewbot.learnings.learning import EVIDENCE_UNREADABLE, Learning
from reviewbot.markdown import table_cell

__all__ = ["EMPTY_LEARNINGS", "learning_tables", "learnings_json", "learnings_markdown"]

EMPTY_LEARNINGS: dict[str, list[dict[str, Any]]] = {"in_use": [], "suggested": []}
IN_USE_TITLE = "Learnings in use"
SUGGESTED_TITLE = "Suggested learnings"
IN_USE_HEADERS = ("id", "scope", "paths", "category", "suppresses", "suppressed", "text")
SUGGESTED_HEADERS = ("id", "scope", "paths", "category", "turned down", "text")


def _row(learning: Learning) -> dict[str, Any]:
    return {
        "id": learning.id,
        "scope": learning.scope,
        "paths": list(learning.path_globs),
        "category": learning.category,
        "excludes": learning.excludes,
        "text": learning.text,
        "source": learning.source.value,
        "author": learning.author,
    }


def _turned_down(learning: Learning) -> int | None:
    """How often its kind of finding was turned down; None when its evidence is unreadable."""
    evidence = learning.evidence
    return evidence.count if evidence.readable else None


def learnings_json(
    in_use: Iterable[Learning], suppressed: Mapping[int, int], suggested: Iterable[Learning]
) -> dict[str, list[dict[str, Any]]]:
    """The report's ``learnings`` section: ``in_use`` with the findings each suppressed,
    ``suggested`` with how often the kind of finding was turned down (None: its stored
    evidence is unreadable)."""
    return {
        "in_use": [
            {**_row(item), "suppressed": suppressed.get(item.id or 0, 0)} for item in in_use
        ],
        "suggested": [{**_row(item), "turned_down": _turned_down(item)} for item in suggested],
    }


def _or_unreadable(count: int | None) -> int | str:
    return EVIDENCE_UNREADABLE if count is None else count


def learning_tables(
    section: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]]:
    """(title, headers, rows) of the two tables, plain values."""

    def common(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return (
            row["id"],
            row["scope"],
            ", ".join(row["paths"]) or "every path",
            row["category"] or "any",
        )

    return [
        (
            IN_USE_TITLE,
            IN_USE_HEADERS,
            [
                (*common(row), "yes" if row["excludes"] else "no", row["suppressed"], row["text"])
                for row in section.get("in_use", ())
            ],
        ),
        (
            SUGGESTED_TITLE,
            SUGGESTED_HEADERS,
            [
                (*common(row), _or_unreadable(row["turned_down"]), row["text"])
                for row in section.get("suggested", ())
            ],
        ),
    ]


def learnings_markdown(section: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> list[str]:
    """The two tables in Markdown (none when empty); suggested ones say how to accept."""
    lines: list[str] = []
    for title, headers, rows in learning_tables(section or EMPTY_LEARNINGS):
        if not rows:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(headers) + " |"]
        lines.append("|" + "---|" * len(headers))
        lines += ["| " + " | ".join(table_cell(str(cell)) for cell in row) + " |" for row in rows]
        if title == SUGGESTED_TITLE:
            lines += ["", "Accept one with `reviewbot learnings accept ID` (docs/learnings.md)."]
        lines.append("")
    return lines
