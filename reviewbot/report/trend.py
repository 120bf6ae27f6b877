"""The report's trend section: the last ISO weeks (``report["trend"]``) as one chart of three
panels sharing the week axis, and its table.

Panels: acceptance, addressed and invalid-answer rates (%); findings per MR; first-token p95
against the SLO line. Each line has its own marker and line style and a legend label, so the
chart reads without colour; a week without data is a gap. As on every chart of the report
(:mod:`reviewbot.report.plot`), each panel keeps headroom above its highest value (a week that
missed the SLO is drawn clear of the top edge), its legend stands beside it, and a panel with
no value in any week says so. The week axis has one tick per week
(SVG id ``chart-trend-week-<ISO week>``), labelled with the week and, where the prompt
versions or models live that week differ from the last week with reviews, what came in
(``prompt v2``, ``model Qwen3.5-9B``), with a dotted line across the panels: a change is seen
where it happened. Pure: the report document in, a chart out.

Owns: the trend chart, its ids and its table. Must not: import `reviewbot.report.document`, query
anything, or mark a string of the document safe (matplotlib escapes the text it writes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from reviewbot.report.plot import highest, legend_beside, no_data, value_axis
from reviewbot.report.text import PERCENT, shown

__all__ = [
    "TREND_CHART_ID",
    "TREND_HEADERS",
    "trend_changes",
    "trend_draw",
    "trend_rows",
    "week_tick_id",
]

TREND_CHART_ID = "chart-trend"
WEEK_TICK_ID = TREND_CHART_ID + "-week-{week}"
TREND_SIZE_IN = (8.0, 6.4)
MARK_CHARS = 24  # a live prompt version or model is named on the axis in at most this
RATE_LINES = (
    # (key, label, marker, line style, colour)
    ("acceptance", "acceptance", "o", "-", "#31a354"),
    ("addressed", "addressed rate", "s", "--", "#756bb1"),
    ("invalid_rate", "invalid answers", "^", ":", "#d7301f"),
)
FINDINGS_COLOUR, P95_COLOUR, SLO_COLOUR = "#3182bd", "#e6550d", "#636363"
CHANGE_COLOUR = "#969696"
NO_RATES = "no votes, addressable findings or tool calls in these weeks"
NO_REVIEWS = "no reviews in these weeks"
NO_MODEL_CALLS = "no model calls in these weeks"
TREND_HEADERS = (
    "week",
    "reviews",
    "acceptance",
    "addressed rate",
    "findings per MR",
    "first-token p95",
    "SLO",
    "invalid answers",
    "prompt versions",
    "models",
)


def week_tick_id(week: str) -> str:
    """The SVG id of an ISO week's tick on the trend chart."""
    return WEEK_TICK_ID.format(week=week)


def _short(text: str) -> str:
    name = text.rsplit("/", 1)[-1]
    return name if len(name) <= MARK_CHARS else name[: MARK_CHARS - 1] + "…"


def trend_changes(weeks: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Per week: what came in that week ("prompt X", "model Y") against the last week with
    reviews before it (the first week with reviews names everything live)."""
    changes: list[list[str]] = []
    before: tuple[set[str], set[str]] | None = None
    for week in weeks:
        live = (set(week["prompt_versions"]), set(week["models"]))
        if not (live[0] or live[1]):
            changes.append([])
            continue
        old = before or (set(), set())
        came = [f"prompt {_short(v)}" for v in sorted(live[0] - old[0])]
        came += [f"model {_short(m)}" for m in sorted(live[1] - old[1])]
        changes.append(came)
        before = live
    return changes


def _values(weeks: Sequence[Mapping[str, Any]], key: str, scale: float = 1.0) -> list[float]:
    return [math.nan if w[key] is None else w[key] * scale for w in weeks]


def _week_axis(axes: Any, weeks: Sequence[Mapping[str, Any]], changes: list[list[str]]) -> None:
    places = list(range(len(weeks)))
    labels = [
        "\n".join([w["week"] + (" (part)" if w["partial"] else ""), *came])
        for w, came in zip(weeks, changes, strict=True)
    ]
    axes.set_xticks(places, labels, fontsize="small")
    axes.set_xlim(-0.5, len(weeks) - 0.5)
    for week, tick in zip(weeks, axes.xaxis.get_major_ticks(len(weeks)), strict=True):
        tick.set_gid(week_tick_id(week["week"]))


def _finish(axes: Any, *drawn: Sequence[float], note: str, line: bool = False) -> None:
    """A panel's legend beside it, or ``note`` in it when none of ``drawn`` has a value (the
    legend then only when the panel has a ``line``: the SLO's)."""
    empty = all(math.isnan(value) for values in drawn for value in values)
    if line or not empty:
        legend_beside(axes)
    if empty:
        no_data(axes, note)


def trend_draw(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    """The trend chart of ``report["trend"]`` (at least one week)."""
    weeks = report["trend"]["weeks"]
    target = report["trend"]["ttft_p95_target_ms"]
    changes = trend_changes(weeks)

    def draw(figure: Figure) -> None:
        rates, findings, ttft = figure.subplots(3, 1, sharex=True)
        places = list(range(len(weeks)))
        drawn = [_values(weeks, key, PERCENT) for key, *_ in RATE_LINES]
        for values, (key, label, marker, style, colour) in zip(drawn, RATE_LINES, strict=True):
            rates.plot(
                places,
                values,
                marker=marker,
                linestyle=style,
                color=colour,
                label=label,
                gid=f"trend-{key}",
            )
        value_axis(rates, PERCENT, bars=False)  # 0 to 100 %, a 0 % or 100 % week clear of the frame
        rates.set_ylabel("%")
        rates.set_title("Last weeks: rates, findings per MR, first-token p95")
        _finish(rates, *drawn, note=NO_RATES)
        per_mr = _values(weeks, "findings_per_mr")
        findings.plot(
            places,
            per_mr,
            marker="D",
            color=FINDINGS_COLOUR,
            label="findings per MR",
            gid="trend-findings-per-mr",
        )
        value_axis(findings, highest(per_mr), bars=False)
        findings.set_ylabel("per MR")
        _finish(findings, per_mr, note=NO_REVIEWS)
        p95 = _values(weeks, "ttft_p95_ms")
        ttft.plot(
            places, p95, marker="o", color=P95_COLOUR, label="first-token p95", gid="trend-ttft-p95"
        )
        ttft.axhline(
            target, linestyle="--", color=SLO_COLOUR, label=f"SLO {target:.0f} ms", gid="trend-slo"
        )
        value_axis(ttft, highest(p95, [target]), bars=False)  # a missed week above the SLO line
        ttft.set_ylabel("ms")
        _finish(ttft, p95, note=NO_MODEL_CALLS, line=True)
        for place, came in enumerate(changes):
            if came and place > 0:
                for axes in (rates, findings, ttft):
                    axes.axvline(place - 0.5, linestyle=":", color=CHANGE_COLOUR)
        _week_axis(ttft, weeks, changes)

    return draw


def trend_rows(report: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The trend table's rows (TREND_HEADERS), one per week."""
    verdict = {True: "met", False: "missed", None: "–"}
    return [
        (
            w["week"] + (" (part)" if w["partial"] else ""),
            w["reviews"],
            shown(w["acceptance"], "rate"),
            shown(w["addressed"], "rate"),
            "–" if w["findings_per_mr"] is None else f"{w['findings_per_mr']:.1f}",
            shown(w["ttft_p95_ms"], "ms"),
            verdict[w["ttft_p95_met"]],
            shown(w["invalid_rate"], "rate"),
            ", ".join(w["prompt_versions"]) or "–",
            ", ".join(w["models"]) or "–",
        )
        for w in report["trend"]["weeks"]
    ]
