"""The report as one self-contained HTML file: inline SVG charts drawn by matplotlib, and the
tables behind them. No script, no stylesheet or font from the network: it opens offline.

Charts (matplotlib's SVG backend, text drawn as paths so no font is needed to view them):
findings per day by severity, first-token p50/p95 per day against the SLO line, and the
acceptance and addressed rates per category. Each series has a stable SVG ``id`` (matplotlib's
gid): ``ttft-slo``, ``ttft-p50``/``ttft-p95``, and per severity ``findings-<severity>`` (the
stacked area of a long window) or ``findings-<severity>-<day>`` (a bar). Pure: the report
document in, HTML out.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from html import escape
from typing import Any

from matplotlib import rc_context
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from reviewbot.findings import Severity
from reviewbot.report_text import (
    HEADLINE,
    PERCENT,
    change_text,
    issue_title,
    minute,
    shown,
    value_at,
)

__all__ = ["CHART_IDS", "SLO_LINE_ID", "findings_series_id", "report_html", "ttft_line_id"]

CHART_IDS = ("chart-findings", "chart-ttft", "chart-rates")
# Stable ids of the drawn series (matplotlib's gid is the SVG element's id), so a test or a
# reader of the file can find them: the SLO line, the p50/p95 lines, each severity's series.
SLO_LINE_ID = "ttft-slo"
TTFT_LINE_ID = "ttft-{name}"
FINDINGS_SERIES_ID = "findings-{severity}"  # the stacked area; a bar adds "-<day>"
CHART_SIZE_IN = (8.0, 3.2)
RATE_CHART_ROW_IN = 0.35
RATE_CHART_MIN_IN = 2.4
SEVERITY_COLOURS = {
    "blocker": "#7f0000",
    "critical": "#d7301f",
    "major": "#fc8d59",
    "minor": "#fdcc8a",
    "info": "#9ecae1",
}
P50_COLOUR, P95_COLOUR, SLO_COLOUR = "#3182bd", "#e6550d", "#636363"
ACCEPTANCE_COLOUR, ADDRESSED_COLOUR = "#31a354", "#756bb1"
BAR_WIDTH = 0.4
DAY_BAR_WIDTH = 0.8  # days
MAX_DATE_TICKS = 10
MAX_MARKED_DAYS = 31  # a point per day is drawn up to a month; beyond, a plain line
SVG_START = re.compile(r"<svg\b")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1rem 0; }
figure svg { max-width: 100%; height: auto; }
.empty { font-size: 1.3rem; font-weight: bold; }
"""


def _svg(draw: Callable[[Figure], None], name: str, height_in: float) -> str:
    """A figure drawn by ``draw`` as an inline ``<svg>`` element (ids salted per chart)."""
    with rc_context({"svg.fonttype": "path", "svg.hashsalt": f"reviewbot-{name}"}):
        figure = Figure(figsize=(CHART_SIZE_IN[0], height_in), layout="constrained")
        draw(figure)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = SVG_START.search(text)
    return text[start.start() :] if start else text


def _date_axis(axes: Any) -> None:
    """A few date ticks whatever the window's length (a year has 365 days, not 365 labels)."""
    locator = AutoDateLocator(maxticks=MAX_DATE_TICKS)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))


def _dates(days: Sequence[str]) -> list[date]:
    return [date.fromisoformat(day) for day in days]


def findings_series_id(severity: str, day: str | None = None) -> str:
    """The id of a severity's stacked area (``day`` None) or of its bar on ``day``."""
    series = FINDINGS_SERIES_ID.format(severity=severity)
    return series if day is None else f"{series}-{day}"


def ttft_line_id(name: str) -> str:
    """The id of the ``p50`` or ``p95`` line of the first-token chart."""
    return TTFT_LINE_ID.format(name=name)


def _findings_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    days = report["daily"]["days"]
    counts: dict[str, dict[str, int]] = {}
    for row in report["daily"]["findings"]:
        counts.setdefault(row["severity"], {})[row["day"]] = row["findings"]

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        dates = _dates(days)
        series = [
            (severity, [counts.get(severity, {}).get(day, 0) for day in days])
            for severity in (s.value for s in Severity)
        ]
        series = [(severity, heights) for severity, heights in series if any(heights)]
        colours = [SEVERITY_COLOURS[severity] for severity, _ in series]
        if len(days) > MAX_MARKED_DAYS and series:
            # a bar per day and severity is thousands of shapes over a year: stacked areas
            areas = axes.stackplot(
                dates,
                *(h for _, h in series),
                labels=[s for s, _ in series],
                colors=colours,
                step="mid",
                linewidth=0,
            )
            for (severity, _), area in zip(series, areas, strict=True):
                area.set_gid(findings_series_id(severity))
        else:
            bottom = [0] * len(days)
            for (severity, heights), colour in zip(series, colours, strict=True):
                bars = axes.bar(
                    dates,
                    heights,
                    bottom=bottom,
                    width=DAY_BAR_WIDTH,
                    label=severity,
                    color=colour,
                    linewidth=0,
                )
                for day, bar in zip(days, bars.patches, strict=True):
                    bar.set_gid(findings_series_id(severity, day))
                bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        axes.set_title("Findings per day by severity")
        axes.set_ylabel("findings")
        _date_axis(axes)
        if series:
            axes.legend(loc="upper left", fontsize="small")

    return draw


def _ttft_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    rows = report["daily"]["ttft"]
    target = report["slo"]["ttft_p95_target_ms"]

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        days = _dates([row["day"] for row in rows])
        marker = "o" if len(days) <= MAX_MARKED_DAYS else None
        for name, colour in (("p50", P50_COLOUR), ("p95", P95_COLOUR)):
            values = [row[f"{name}_ms"] for row in rows]
            axes.plot(days, values, marker=marker, label=name, color=colour, gid=ttft_line_id(name))
        axes.axhline(
            target, linestyle="--", color=SLO_COLOUR, label=f"SLO {target:.0f} ms", gid=SLO_LINE_ID
        )
        axes.set_title("Time to first token per day")
        axes.set_ylabel("ms")
        axes.set_ylim(bottom=0)
        _date_axis(axes)
        axes.legend(loc="upper left", fontsize="small")

    return draw


def _rates_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    rows = list(reversed(report["by_category"]))

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        places = list(range(len(rows)))
        acceptance = [(row["acceptance"] or 0.0) * PERCENT for row in rows]
        addressed = [(row["addressed_rate"] or 0.0) * PERCENT for row in rows]
        axes.barh(
            [p + BAR_WIDTH / 2 for p in places],
            acceptance,
            height=BAR_WIDTH,
            label="acceptance: up / (up + down)",
            color=ACCEPTANCE_COLOUR,
        )
        axes.barh(
            [p - BAR_WIDTH / 2 for p in places],
            addressed,
            height=BAR_WIDTH,
            label="addressed rate",
            color=ADDRESSED_COLOUR,
        )
        axes.set_yticks(places, [row["category"] for row in rows])
        axes.set_xlim(0, PERCENT)
        axes.set_xlabel("%")
        axes.set_title("Acceptance and addressed rate per category")
        axes.legend(loc="lower right", fontsize="small")

    return draw


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(chart_id: str, svg: str, caption: str, table: str) -> str:
    return (
        f'<section id="{chart_id}"><figure>{svg}<figcaption>{escape(caption)}</figcaption>'
        f"</figure>{table}</section>"
    )


def _headline(report: Mapping[str, Any]) -> str:
    rows = []
    for label, path, kind in HEADLINE:
        now, before = value_at(report, path), value_at(report["previous"], path)
        text = label.replace("👍", "thumbs up").replace("👎", "thumbs down")  # no emoji font needed
        rows.append((text, shown(now, kind), shown(before, kind), change_text(now, before, kind)))
    return _table(("", "this window", "previous", "change"), rows)


def _charts(report: Mapping[str, Any]) -> list[str]:
    days = report["daily"]["days"]
    by_day = {(r["day"], r["severity"]): r["findings"] for r in report["daily"]["findings"]}
    severities = [s.value for s in Severity]
    findings_table = _table(
        ("day", *severities),
        [(day, *(by_day.get((day, s), 0) for s in severities)) for day in days],
    )
    ttft_table = _table(
        ("day", "p50 ms", "p95 ms", "calls", "SLO ms"),
        [
            (
                r["day"],
                shown(r["p50_ms"], "ms"),
                shown(r["p95_ms"], "ms"),
                r["calls"],
                f"{report['slo']['ttft_p95_target_ms']:.0f}",
            )
            for r in report["daily"]["ttft"]
        ],
    )
    category_rows = report["by_category"]
    rates_table = _table(
        (
            "category",
            "findings",
            "posted",
            "thumbs up",
            "thumbs down",
            "acceptance",
            "addressed",
            "addressable",
            "addressed rate",
        ),
        [
            (
                r["category"],
                r["findings"],
                r["findings_posted"],
                r["thumbs_up"],
                r["thumbs_down"],
                shown(r["acceptance"], "rate"),
                r["addressed"],
                r["addressable"],
                shown(r["addressed_rate"], "rate"),
            )
            for r in category_rows
        ],
    )
    rates_height = max(RATE_CHART_MIN_IN, RATE_CHART_ROW_IN * len(category_rows) + 1.2)
    return [
        _figure(
            CHART_IDS[0],
            _svg(_findings_chart(report), "findings", CHART_SIZE_IN[1]),
            "Findings per day by severity",
            findings_table,
        ),
        _figure(
            CHART_IDS[1],
            _svg(_ttft_chart(report), "ttft", CHART_SIZE_IN[1]),
            "Time to first token per day (p50, p95) against the SLO",
            ttft_table,
        ),
        _figure(
            CHART_IDS[2],
            _svg(_rates_chart(report), "rates", rates_height),
            "Acceptance and addressed rate per category",
            rates_table,
        ),
    ]


def _groups(title: str, dimension: str, rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    table = _table(
        (
            dimension.replace("_", " "),
            "findings",
            "posted",
            "thumbs up",
            "thumbs down",
            "acceptance",
            "addressed",
            "addressed rate",
        ),
        [
            (
                r[dimension] or "(none)",
                r["findings"],
                r["findings_posted"],
                r["thumbs_up"],
                r["thumbs_down"],
                shown(r["acceptance"], "rate"),
                r["addressed"],
                shown(r["addressed_rate"], "rate"),
            )
            for r in rows
        ],
    )
    return f"<h2>{escape(title)}</h2>{table}"


def _slowest(report: Mapping[str, Any]) -> str:
    rows = []
    for review in report["slowest_reviews"]:
        name = f"{review['project']}!{review['mr_iid']}" if review["mr_iid"] else review["project"]
        link = f'<a href="{escape(review["url"])}">{escape(name)}</a>' if review["url"] else name
        rows.append(
            f"<tr><td>{link}</td><td>{review['seconds']:.1f}</td><td>{review['chunks']}</td>"
            f"<td>{review['findings']}</td><td>{escape(review['model'])}</td></tr>"
        )
    if not rows:
        return ""
    return (
        "<h2>Slowest reviews</h2><table><thead><tr><th>merge request</th><th>seconds</th>"
        f"<th>chunks</th><th>findings</th><th>model</th></tr></thead><tbody>{''.join(rows)}"
        "</tbody></table>"
    )


def _evals(report: Mapping[str, Any]) -> str:
    runs = report["eval_runs"]
    if not runs:
        return ""
    table = _table(
        ("prompt version", "model", "dataset", "items", "precision", "recall", "F1", "when"),
        [
            (
                r["prompt_version"],
                r["model"],
                r["dataset"],
                r["items"],
                f"{r['precision']:.2f}",
                f"{r['recall']:.2f}",
                f"{r['f1']:.2f}",
                minute(r["started_at"]),
            )
            for r in runs
        ],
    )
    return f"<h2>Eval runs (labelled datasets)</h2>{table}"


def report_html(report: Mapping[str, Any]) -> str:
    """The whole report as one HTML document (see the module notes)."""
    window = report["window"]
    title = issue_title(report)
    slo = report["slo"]
    verdict = {True: "met", False: "missed", None: "no data"}[slo["pass"]]
    scope = f" · project {escape(window['project'])}" if window["project"] else ""
    parts = [
        f"<h1>{escape(title)}</h1>",
        f"<p>Reviews started from {escape(minute(window['since']))} to "
        f"{escape(minute(window['until']))} UTC (end excluded){scope}"
        "</p>",
    ]
    if report["empty"]:
        parts.append('<p class="empty">No reviews in this window.</p>')
    parts += [
        _headline(report),
        f"<p><strong>SLO</strong>: first-token p95 {escape(shown(slo['ttft_p95_ms'], 'ms'))} "
        f"against {slo['ttft_p95_target_ms']:.0f} ms: {verdict}.</p>",
    ]
    if not report["empty"]:
        parts += _charts(report)
    parts += [
        _slowest(report),
        _groups("By prompt version", "prompt_version", report["by_prompt_version"]),
        _groups("By model", "model", report["by_model"]),
        _evals(report),
    ]
    body = "\n".join(part for part in parts if part)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )
