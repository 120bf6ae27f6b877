"""The report's values as people read them, shared by the Markdown and the HTML renderer.

:mod:`reviewbot.report.document` builds the report document and writes its Markdown;
:mod:`reviewbot.report.html` writes its HTML. Both take their wording from here (the headline
rows, figures with units, week-over-week arrows, minutes, the title) and :func:`printable`
makes a document's text writable whatever the database held. Imports point one way: document
and html import this module, html imports nothing of document. Pure.

Owns: the report's wording and how each value is shown. Must not: import
`reviewbot.report.document` or `reviewbot.report.html` (both import it), or read the store (it
words the document's values).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reviewbot.markdown import REPLACEMENT_CHARACTER, printable_text

__all__ = [
    "COMPARISON_COSTS",
    "COMPARISON_HEADERS",
    "HEADLINE",
    "PAIR_HEADERS",
    "PERCENT",
    "REPLACEMENT_CHARACTER",
    "change_text",
    "comparison_cells",
    "issue_title",
    "minute",
    "printable",
    "shown",
    "value_at",
]

PERCENT = 100.0
COMPARISON_COSTS = ("model_calls", "prompt_tokens", "cached_tokens", "completion_tokens", "wall_s")
HEADLINE = (
    # (label, path in the report, kind): kind "count", "rate", "ms" or "s"
    ("Reviews", ("totals", "reviews"), "count"),
    ("Merge requests", ("totals", "mrs"), "count"),
    ("Findings", ("totals", "findings"), "count"),
    ("Findings posted", ("totals", "findings_posted"), "count"),
    ("Model calls", ("totals", "model_calls"), "count"),
    ("👍", ("feedback", "thumbs_up"), "count"),
    ("👎", ("feedback", "thumbs_down"), "count"),
    ("Addressed", ("feedback", "addressed"), "count"),
    ("Resolved by a human", ("feedback", "resolved_by_human"), "count"),
    ("Ignored", ("feedback", "ignored"), "count"),
    ("Acceptance 👍/(👍+👎)", ("rates", "acceptance"), "rate"),
    ("Addressed rate", ("rates", "addressed"), "rate"),
    ("First token p50", ("latency", "ttft_ms", "p50"), "ms"),
    ("First token p95", ("latency", "ttft_ms", "p95"), "ms"),
    ("Review time p50", ("latency", "review_s", "p50"), "s"),
    ("Review time p95", ("latency", "review_s", "p95"), "s"),
)


def printable(value: Any) -> Any:
    """``value`` (a report document, or any part of it) with every string's unprintable
    characters replaced by U+FFFD; numbers, None and the keys of mappings as they are."""
    if isinstance(value, str):
        return printable_text(value)
    if isinstance(value, Mapping):
        return {key: printable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [printable(item) for item in value]
    return value


def value_at(document: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` in nested mappings, None when absent."""
    value: Any = document
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    return value


def shown(value: Any, kind: str) -> str:
    """A figure for people: "count", "rate" (percent), "ms" or "s"; "–" when None."""
    if value is None:
        return "–"
    if kind == "rate":
        return f"{value * PERCENT:.0f}%"
    if kind == "ms":
        return f"{value:.0f} ms"
    if kind == "s":
        return f"{value:.1f} s"
    return str(value)


def change_text(now: Any, before: Any, kind: str) -> str:
    """An arrow and the difference: ▲ up, ▼ down, → unchanged ("–" when either is missing)."""
    if now is None or before is None:
        return "–"
    delta = now - before
    arrow = "▲" if delta > 0 else "▼" if delta < 0 else "→"
    if kind == "rate":
        return f"{arrow} {abs(delta) * PERCENT:.0f} pp"
    if kind == "ms":
        return f"{arrow} {abs(delta):.0f} ms"
    if kind == "s":
        return f"{arrow} {abs(delta):.1f} s"
    return f"{arrow} {abs(delta)}"


def minute(iso_time: str) -> str:
    """``2025-03-10 07:00`` of an ISO 8601 UTC time."""
    return iso_time[: len("YYYY-MM-DDTHH:MM")].replace("T", " ")


def issue_title(report: Mapping[str, Any]) -> str:
    return f"reviewbot report {report['window']['iso_week']}"


def _per_item_figure(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def comparison_cells(comparison: Mapping[str, Any]) -> tuple[list[list[Any]], list[list[Any]]]:
    """The rows of the comparison's two tables (configurations, pairs) as text, for Markdown
    and HTML alike."""
    configurations = []
    for row in comparison["configurations"]:
        if row["run_id"] is None:
            configurations.append([row["name"], f"incomplete: {row['incomplete']}", *[""] * 9])
            continue
        cost = row["cost_per_item"]
        configurations.append(
            [
                row["name"],
                row["items"],
                f"{row['precision']:.2f}",
                f"{row['recall']:.2f}",
                f"{row['f1']:.2f}",
                f"{row['mean_f1']:.2f}",
                *(_per_item_figure(cost[name]) for name in COMPARISON_COSTS[:-1]),
                shown(cost["wall_s"], "s"),
            ]
        )
    pairs = []
    for pair in comparison["pairs"]:
        interval = pair["interval"]
        difference = pair["mean_f1_difference"]
        pairs.append(
            [
                f"{pair['b']} vs {pair['a']}",
                "" if difference is None else f"{difference:+.3f}",
                "" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]",
                pair["improved"],
                pair["worsened"],
                pair["verdict"],
            ]
        )
    return configurations, pairs


COMPARISON_HEADERS = (
    "configuration",
    "items",
    "precision",
    "recall",
    "F1",
    "mean F1",
    "calls/item",
    "prompt tokens/item",
    "cached/item",
    "completion/item",
    "wall s/item",
)
PAIR_HEADERS = ("pair", "mean ΔF1", "95% interval", "improved", "worsened", "verdict")
