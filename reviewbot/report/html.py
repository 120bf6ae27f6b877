"""The report as one self-contained HTML file: inline SVG charts drawn by matplotlib, and the
tables behind them. No script, no stylesheet or font from the network: it opens offline.

Safe to open whatever the database holds: the page is the Jinja2 template
``templates/report.html.j2`` rendered with autoescaping, so every string from the
report document is escaped where it lands (text or attribute); the only markup not written by
the template is the charts' SVG, in which matplotlib escapes the text it writes (chart labels
are SVG text, ``svg.fonttype = "none"``, so tick labels can be read from the file) and reads no
mathtext (``$...$`` in a category name is plain text). A link is made only to an http(s) address
(:func:`reviewbot.weburl.web_url`). The page carries a Content-Security-Policy ``<meta>``
(:data:`CONTENT_SECURITY_POLICY`): no script at all, inline styles and ``data:`` images only,
so even an escape that was missed could not run anything.

Charts (matplotlib's SVG backend, text written as SVG text in the browser's sans-serif font):
findings per day by severity, first-token p50/p95 per day against the SLO line, and the
acceptance and addressed rates per category. Every per-day chart draws on
:class:`reviewbot.report.days.DayAxis`: exactly the window's days, one tick each. Series are told
apart without colour: hatches per severity, markers and line styles per line. Each series has
a stable SVG ``id`` (matplotlib's gid): ``ttft-slo``, ``ttft-p50``/``ttft-p95``, per
severity ``findings-<severity>`` (the stacked area of a long window) or
``findings-<severity>-<day>`` (a bar), and ``rates-acceptance-<row>``/``rates-addressed-<row>``
(the bars of the category in that row of the rates table, from 0); each day's tick
``<chart>-day-<day>``. Nothing drawn is hidden (:mod:`reviewbot.report.plot`): headroom above
the highest value, the legend beside the plotted area, "no findings in this window" on an
empty chart, whole-number ticks on the findings axis. Pure: the report document in, HTML out.

Owns: the page: its template, tables, charts and their ids. Must not: import
`reviewbot.report.document`, reach the network, or mark a string of the document safe (only the
charts' SVG is put on the page as markup).
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup
from matplotlib import rc_context
from matplotlib.figure import Figure

from reviewbot.findings import Severity
from reviewbot.report.days import MAX_DAY_TICKS, DayAxis
from reviewbot.report.learnings import learning_tables
from reviewbot.report.plot import highest, legend_beside, no_data, value_axis
from reviewbot.report.text import (
    COMPARISON_HEADERS,
    HEADLINE,
    PAIR_HEADERS,
    PERCENT,
    change_text,
    comparison_cells,
    issue_title,
    minute,
    printable,
    shown,
    value_at,
)
from reviewbot.report.trend import (
    TREND_CHART_ID,
    TREND_HEADERS,
    TREND_SIZE_IN,
    trend_draw,
    trend_rows,
)
from reviewbot.weburl import web_url

__all__ = [
    "CHART_IDS",
    "CONTENT_SECURITY_POLICY",
    "SLO_LINE_ID",
    "findings_series_id",
    "rates_bar_id",
    "report_html",
    "ttft_line_id",
]

CHART_IDS = ("chart-findings", "chart-ttft", "chart-rates", TREND_CHART_ID)
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
RATES_SERIES = ("acceptance", "addressed")
RATES_COLOURS = dict(zip(RATES_SERIES, (ACCEPTANCE_COLOUR, ADDRESSED_COLOUR), strict=True))
RATES_BAR_ID = "rates-{series}-{row}"  # row: the category's row in the table, from 0
ADDRESSED_LOOK = {"hatch": "//"}  # the two bars of a category told apart without colour
NO_FINDINGS = "no findings in this window"
NO_MODEL_CALLS = "no model calls in this window"
BAR_WIDTH = 0.4
SEVERITY_HATCHES = {  # readable without colour: a pattern per severity
    "blocker": "xx",
    "critical": "//",
    "major": "..",
    "minor": "\\\\",
    "info": "",
}
DAY_BAR_WIDTH = 0.8  # of a day's position
MAX_MARKED_DAYS = 31  # a point per day is drawn up to a month; beyond, a plain line
SVG_START = re.compile(r"<svg\b")
TEMPLATE_PACKAGE, TEMPLATE_FOLDER, TEMPLATE_NAME = "reviewbot.report", "templates", "report.html.j2"
# Nothing may run, load or be sent: no script of any kind, no fetch, frame, font, form or base
# URL; the template's <style> and the charts' inline styles, and data: images, are allowed.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
# A label with a character the bundled font lacks is drawn as a box; the table shows its text.
MISSING_GLYPH_WARNING = r"Glyph \d+ .*missing from font"


def _trend(report: Mapping[str, Any]) -> list[Chart]:
    """The trend over the last weeks (none when the store holds no week)."""
    if not report["trend"]["weeks"]:
        return []
    return [
        Chart(
            TREND_CHART_ID,
            _svg(trend_draw(report), "trend", TREND_SIZE_IN[1]),
            "Last ISO weeks: acceptance, addressed and invalid-answer rates, findings per MR, "
            f"first-token p95 against the SLO ({report['trend']['ttft_p95_target_ms']:.0f} ms); "
            "prompt versions and models named where they came in",
            _table(TREND_HEADERS, trend_rows(report)),
        )
    ]


def _svg(draw: Callable[[Figure], None], name: str, height_in: float) -> Markup:
    """A figure drawn by ``draw`` as an inline ``<svg>`` element (ids salted per chart)."""
    settings = {
        "svg.fonttype": "none",  # text as <text>: readable from the file, escaped by matplotlib
        "svg.hashsalt": f"reviewbot-{name}",
        "text.parse_math": False,  # "$x$" in a category is text, not a formula
    }
    with rc_context(settings), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=MISSING_GLYPH_WARNING, category=UserWarning)
        figure = Figure(figsize=(CHART_SIZE_IN[0], height_in), layout="constrained")
        draw(figure)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = SVG_START.search(text)
    # matplotlib's own markup, whose text it escapes: the one thing the template does not escape
    return Markup(text[start.start() :] if start else text)


def findings_series_id(severity: str, day: str | None = None) -> str:
    """The id of a severity's stacked area (``day`` None) or of its bar on ``day``."""
    series = FINDINGS_SERIES_ID.format(severity=severity)
    return series if day is None else f"{series}-{day}"


def rates_bar_id(series: str, row: int) -> str:
    """The id of the ``acceptance`` or ``addressed`` bar of the category in ``row`` (from 0)
    of the rates table."""
    return RATES_BAR_ID.format(series=series, row=row)


def ttft_line_id(name: str) -> str:
    """The id of the ``p50`` or ``p95`` line of the first-token chart."""
    return TTFT_LINE_ID.format(name=name)


def _per(report: Mapping[str, Any]) -> str:
    """ "day", or "ISO week" for a long window's charts (reviewbot.report.days)."""
    return "day" if report["daily"]["unit"] == "day" else "ISO week"


def _axis(report: Mapping[str, Any], chart: str) -> DayAxis:
    return DayAxis.of(chart, report["daily"]["buckets"], report["daily"]["unit"])


def _long_note(report: Mapping[str, Any]) -> str:
    """The caption's note on a chart drawn per ISO week."""
    if report["daily"]["unit"] == "day":
        return ""
    return (
        f" (the window has {len(report['daily']['days'])} days, more than the "
        f"{MAX_DAY_TICKS} drawn a tick per day: one tick per ISO week it touches)"
    )


def _findings_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    days = _axis(report, CHART_IDS[0])
    unit = report["daily"]["unit"]
    counts: dict[str, dict[str, int]] = {}
    for row in report["daily"]["findings"]:
        counts.setdefault(row["severity"], {})[row[unit]] = row["findings"]

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        series = [
            (severity, days.values(counts.get(severity, {}), 0))
            for severity in (s.value for s in Severity)
        ]
        series = [(severity, heights) for severity, heights in series if any(heights)]
        if len(days.days) > MAX_MARKED_DAYS and series:
            # a bar per day and severity is thousands of shapes over a year: stacked areas
            areas = axes.stackplot(
                days.positions,
                *(h for _, h in series),
                labels=[s for s, _ in series],
                colors=[SEVERITY_COLOURS[severity] for severity, _ in series],
                hatch=[SEVERITY_HATCHES[severity] for severity, _ in series],
                step="mid",
                linewidth=0,
            )
            for (severity, _), area in zip(series, areas, strict=True):
                area.set_gid(findings_series_id(severity))
        else:
            bottom = [0] * len(days.days)
            for severity, heights in series:
                bars = axes.bar(
                    days.positions,
                    heights,
                    bottom=bottom,
                    width=DAY_BAR_WIDTH,
                    label=severity,
                    color=SEVERITY_COLOURS[severity],
                    hatch=SEVERITY_HATCHES[severity],
                    linewidth=0,
                )
                for day, bar in zip(days.days, bars.patches, strict=True):
                    bar.set_gid(findings_series_id(severity, day))
                bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        axes.set_title(f"Findings per {_per(report)} by severity")
        axes.set_ylabel("findings")
        days.draw(axes)
        totals = [sum(day) for day in zip(*(h for _, h in series), strict=True)]
        value_axis(axes, highest(totals), bars=True, count=True)
        if series:
            legend_beside(axes)
        else:
            no_data(axes, NO_FINDINGS)

    return draw


def _ttft_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    days = _axis(report, CHART_IDS[1])
    by_day = {row[report["daily"]["unit"]]: row for row in report["daily"]["ttft"]}
    target = report["slo"]["ttft_p95_target_ms"]
    lines = (("p50", P50_COLOUR, "o", "-"), ("p95", P95_COLOUR, "s", "-."))

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        few = len(days.days) <= MAX_MARKED_DAYS
        drawn: list[list[float]] = []
        for name, colour, marker, style in lines:
            # a day without model calls is a gap in the line (NaN), not a dropped day
            values = [
                math.nan if row is None or row[f"{name}_ms"] is None else row[f"{name}_ms"]
                for row in days.values(by_day, None)
            ]
            drawn.append(values)
            axes.plot(
                days.positions,
                values,
                marker=marker if few else None,
                linestyle=style,
                label=name,
                color=colour,
                gid=ttft_line_id(name),
            )
        axes.axhline(
            target, linestyle="--", color=SLO_COLOUR, label=f"SLO {target:.0f} ms", gid=SLO_LINE_ID
        )
        axes.set_title(f"Time to first token per {_per(report)}")
        axes.set_ylabel("ms")
        value_axis(axes, highest(*drawn, [target]), bars=False)  # the SLO line included
        days.draw(axes)
        legend_beside(axes)
        if not highest(*drawn):
            no_data(axes, NO_MODEL_CALLS)

    return draw


def _rates_chart(report: Mapping[str, Any]) -> Callable[[Figure], None]:
    rows = list(reversed(report["by_category"]))

    def draw(figure: Figure) -> None:
        axes = figure.subplots()
        places = list(range(len(rows)))
        acceptance = [(row["acceptance"] or 0.0) * PERCENT for row in rows]
        addressed = [(row["addressed_rate"] or 0.0) * PERCENT for row in rows]
        bars = (
            (RATES_SERIES[0], acceptance, BAR_WIDTH / 2, "acceptance: up / (up + down)", {}),
            (RATES_SERIES[1], addressed, -BAR_WIDTH / 2, "addressed rate", ADDRESSED_LOOK),
        )
        for series, widths, offset, label, look in bars:
            drawn = axes.barh(
                [p + offset for p in places],
                widths,
                height=BAR_WIDTH,
                label=label,
                color=RATES_COLOURS[series],
                **look,
            )
            # the row of the table (by_category's order; the chart draws it bottom up)
            for place, bar in zip(places, drawn.patches, strict=True):
                bar.set_gid(rates_bar_id(series, len(rows) - 1 - place))
        axes.set_yticks(places, [row["category"] for row in rows])
        value_axis(axes, PERCENT, bars=True, axis="x")
        axes.set_xlabel("%")
        axes.set_title("Acceptance and addressed rate per category")
        if rows:
            legend_beside(axes)
        else:
            no_data(axes, NO_FINDINGS)

    return draw


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, and the address it links to (http(s) only, else None)."""

    text: str
    href: str | None = None


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: list[tuple[Cell, ...]]


@dataclass(frozen=True)
class Chart:
    id: str
    svg: Markup
    caption: str
    table: Table


@dataclass(frozen=True)
class Section:
    title: str
    table: Table


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table of plain values (a Cell is kept as it is; anything else becomes its text)."""
    return Table(
        tuple(headers),
        [
            tuple(value if isinstance(value, Cell) else Cell(str(value)) for value in row)
            for row in rows
        ],
    )


def _headline(report: Mapping[str, Any]) -> Table:
    rows = []
    for label, path, kind in HEADLINE:
        now, before = value_at(report, path), value_at(report["previous"], path)
        text = label.replace("👍", "thumbs up").replace("👎", "thumbs down")  # no emoji font needed
        rows.append((text, shown(now, kind), shown(before, kind), change_text(now, before, kind)))
    return _table(("", "this window", "previous", "change"), rows)


def _charts(report: Mapping[str, Any]) -> list[Chart]:
    daily, per = report["daily"], _per(report)
    unit = daily["unit"]
    shown_as = {  # a part week says so
        key: key + (" (part)" if part else "")
        for key, part in zip(daily["buckets"], daily["partial"], strict=True)
    }
    by_day = {(r[unit], r["severity"]): r["findings"] for r in daily["findings"]}
    severities = [s.value for s in Severity]
    findings_table = _table(
        (per, *severities),
        [(shown_as[day], *(by_day.get((day, s), 0) for s in severities)) for day in shown_as],
    )
    ttft_table = _table(
        (per, "p50 ms", "p95 ms", "calls", "SLO ms"),
        [
            (
                shown_as[r[unit]],
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
        *_trend(report),
        Chart(
            CHART_IDS[0],
            _svg(_findings_chart(report), "findings", CHART_SIZE_IN[1]),
            f"Findings per {per} by severity" + _long_note(report),
            findings_table,
        ),
        Chart(
            CHART_IDS[1],
            _svg(_ttft_chart(report), "ttft", CHART_SIZE_IN[1]),
            f"Time to first token per {per} (p50, p95) against the SLO" + _long_note(report),
            ttft_table,
        ),
        Chart(
            CHART_IDS[2],
            _svg(_rates_chart(report), "rates", rates_height),
            "Acceptance and addressed rate per category",
            rates_table,
        ),
    ]


def _groups(title: str, dimension: str, rows: Sequence[Mapping[str, Any]]) -> Section:
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
    return Section(title, table)


def _slowest(report: Mapping[str, Any]) -> Section:
    rows = []
    for review in report["slowest_reviews"]:
        name = f"{review['project']}!{review['mr_iid']}" if review["mr_iid"] else review["project"]
        rows.append(
            (
                Cell(name, web_url(review["url"])),
                f"{review['seconds']:.1f}",
                review["chunks"],
                review["findings"],
                review["model"],
            )
        )
    return Section(
        "Slowest reviews", _table(("merge request", "seconds", "chunks", "findings", "model"), rows)
    )


def _evals(report: Mapping[str, Any]) -> Section:
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
            for r in report["eval_runs"]
        ],
    )
    return Section("Eval runs (labelled datasets)", table)


def _comparison(report: Mapping[str, Any]) -> list[Section]:
    """The latest `eval --compare` run: its configurations, then its pairs (none: no section)."""
    comparison = report.get("eval_comparison")
    if comparison is None:
        return []
    configurations, pairs = comparison_cells(comparison)
    return [
        Section("Latest eval comparison", _table(COMPARISON_HEADERS, configurations)),
        Section(
            "Latest eval comparison: pairs (95% paired bootstrap)", _table(PAIR_HEADERS, pairs)
        ),
    ]


@cache
def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATE_PACKAGE, TEMPLATE_FOLDER),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(TEMPLATE_NAME)


VERIFICATION_HEADERS = (
    "category",
    "prompt version",
    "judged",
    "dropped",
    "kept, posted",
    "👍",
    "👎",
    "addressed",
)
VERIFICATION_FIELDS = ("judged", "dropped", "kept_posted", "thumbs_up", "thumbs_down", "addressed")
REPLY_HEADERS = ("command", "status", "answers", "👍", "👎", "model calls")
REPLY_FIELDS = ("command", "status", "replies", "thumbs_up", "thumbs_down", "model_calls")


def _second_look(report: Mapping[str, Any]) -> list[Section]:
    """What the verification pass dropped and how the kept findings fared, and the answers in
    the bot's threads with their reception (issue 21); none when the window has neither."""
    sections = []
    outcomes = (report.get("verification") or {}).get("outcomes") or []
    if outcomes:
        rows = [
            (row["category"], row["prompt_version"], *(row[name] for name in VERIFICATION_FIELDS))
            for row in outcomes
        ]
        sections.append(Section("Verification", _table(VERIFICATION_HEADERS, rows)))
    replies = report.get("replies") or []
    if replies:
        rows = [tuple(row[name] for name in REPLY_FIELDS) for row in replies]
        sections.append(Section("Answers in the bot's threads", _table(REPLY_HEADERS, rows)))
    return sections


EFFORT_HEADERS = (
    "effort",
    "reviews",
    "calls / review",
    "prompt / review",
    "cached",
    "kept by vote",
    "mean confidence",
    "voted out",
)
IDLE_LOOK_HEADERS = ("second looks", "MRs", "model s", "findings added", "👍", "👎", "addressed")
IDLE_LOOK_FIELDS = (
    "reviews",
    "mrs",
    "model_seconds",
    "findings_added",
    "thumbs_up",
    "thumbs_down",
    "addressed",
)


def _effort(report: Mapping[str, Any]) -> list[Section]:
    """Per review effort, its cost and what the deep reviews' vote kept off; the second looks
    while the pool was idle and how their findings were received (issue 37, docs/effort.md);
    none when the window has neither."""
    sections = []
    rows = [
        (
            row["effort"],
            row["reviews"],
            f"{row['model_calls'] / max(row['reviews'], 1):.1f}",
            f"{row['prompt_tokens'] / max(row['reviews'], 1):,.0f}",
            row["cached_tokens"],
            row["kept_by_vote"],
            shown(row["mean_confidence"], "rate"),
            row["voted_out"],
        )
        for row in report.get("effort") or []
    ]
    if rows:
        sections.append(Section("Review effort", _table(EFFORT_HEADERS, rows)))
    looks = report.get("second_look") or {}
    if looks.get("reviews"):
        row = tuple(
            shown(looks[name], "s") if name == "model_seconds" else looks[name]
            for name in IDLE_LOOK_FIELDS
        )
        sections.append(Section("Second looks while idle", _table(IDLE_LOOK_HEADERS, [row])))
    return sections


def _tool_calls(report: Mapping[str, Any]) -> Section:
    """Unreadable tool calls per model and prompt version."""
    table = _table(
        ("model", "prompt version", "tool calls", "unreadable", "invalid rate", "resent readably"),
        [
            (
                r["model"],
                r["prompt_version"] or "(none)",
                r["tool_calls"],
                r["invalid_tool_calls"],
                shown(r["invalid_rate"], "rate"),
                r["repaired_tool_calls"],
            )
            for r in report["tool_calls"]
        ],
    )
    return Section("Unreadable tool calls", table)


def report_html(report: Mapping[str, Any]) -> str:
    """The whole report as one HTML document (see the module notes)."""
    report = printable(report)
    window = report["window"]
    slo = report["slo"]
    return _template().render(
        content_security_policy=CONTENT_SECURITY_POLICY,
        title=issue_title(report),
        since=minute(window["since"]),
        until=minute(window["until"]),
        project=window["project"],
        empty=report["empty"],
        headline=_headline(report),
        slo_p95=shown(slo["ttft_p95_ms"], "ms"),
        slo_target=f"{slo['ttft_p95_target_ms']:.0f}",
        verdict={True: "met", False: "missed", None: "no data"}[slo["pass"]],
        charts=_charts(report),  # an empty window still shows its days (all zero)
        sections=[
            _slowest(report),
            _groups("By prompt version", "prompt_version", report["by_prompt_version"]),
            _groups("By model", "model", report["by_model"]),
            _groups("By review rule", "rule", report["by_rule"]),
            _groups("By source", "source", report["by_source"]),
            _evals(report),
            *_comparison(report),
            _tool_calls(report),
            *_second_look(report),
            *_effort(report),
            *[
                Section(title, _table(headers, rows))
                for title, headers, rows in learning_tables(report.get("learnings") or {})
            ],
        ],
    )
