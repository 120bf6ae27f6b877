"""The report's charts read from the SVG itself (matplotlib writes text as ``<text>``):
every per-day chart's x axis is exactly the window's days, one tick each, for stores with
data on one day, on every day and on no day, for a window of one day and for up to 92 days
(every day keeps its tick; labels thinned to every n-th day); a longer window is drawn one
tick per ISO week and says so in the chart, its caption and its table, and one over three
years is refused naming the limit; the trend covers the ISO weeks the
store holds (8 at most) and names a prompt or model change on the week it happened; a
label matplotlib writes into the SVG is escaped; and nothing drawn is hidden, read from the
SVG's geometry: on a week whose key points sit where a frame edge or a legend was (a missed
SLO, a 100 % week, the highest day first), every point, line and bar is inside its plotted
area with headroom above it, no legend box overlaps a plotted area, an empty chart (and trend
panel) says "no ..." in it, and the findings axis has whole-number ticks only.

Store tests run on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ElementTree
from datetime import datetime, timedelta
from itertools import pairwise

import pytest

from reviewbot.report.days import (
    MAX_DAY_LABELS,
    MAX_DAY_TICKS,
    MAX_WINDOW_DAYS,
    tick_id,
)
from reviewbot.report.document import build_report, report_markdown
from reviewbot.report.html import CHART_IDS, report_html
from reviewbot.report.trend import TREND_CHART_ID, week_tick_id
from reviewbot.store import MergeRequestKey, Store
from reviewbot.window import Window, WindowError
from tests.builders import MONDAY, FakeClock
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

pytestmark = pytest.mark.slow  # measured: see docs/development.md

WEEK = Window(MONDAY, MONDAY + timedelta(days=7))
NOW = MONDAY + timedelta(days=8)
SVG_NS = "{http://www.w3.org/2000/svg}"
PER_DAY_CHARTS = (CHART_IDS[0], CHART_IDS[1])  # findings per day, first token per day
HOSTILE_LABEL = "</svg><script>x</script>&<b>"  # categories hold 32 characters


def seed_review(
    store: Store,
    clock: FakeClock,
    started: datetime,
    *,
    category: str = "bug",
    model: str = "qwen",
    prompt_version: str = "v1",
    iid: int = 1,
) -> None:
    """One finished review with one model call and one posted finding."""
    clock.now = started
    review = store.start_review(
        project="group/app",
        mr_iid=iid,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger="ci",
        model=model,
        prompt_version=prompt_version,
        key=MergeRequestKey("https://gitlab.example.com", 7, iid),
    )
    store.record_llm_calls(
        review,
        [{"chunk_index": 0, "mode": "tool_calls", "outcome": "ok", "ttft_ms": 300.0}],
    )
    store.record_findings(
        review,
        [
            {
                "fingerprint": f"{started.isoformat()}-{iid}",
                "path": "a.py",
                "side": "new",
                "line": 1,
                "severity": "major",
                "category": category,
                "title": "t",
                "body": "b",
                "anchor": "exact",
                "state": "posted",
            }
        ],
    )
    clock.now = started + timedelta(seconds=20)
    store.finish_review(review, status="succeeded")


def chart_svg(html: str, chart_id: str) -> ElementTree.Element:
    """The parsed <svg> of one chart's section."""
    section = html.split(f'<section id="{chart_id}">', 1)[1].split("</section>", 1)[0]
    svg = section[section.index("<svg") : section.index("</svg>") + len("</svg>")]
    return ElementTree.fromstring(svg)


def day_ticks(
    svg: ElementTree.Element, chart_id: str, unit: str = "day"
) -> list[tuple[str, float, str]]:
    """(day, x, label) of each day (or week) tick on the chart's x axis, in document order."""
    prefix = tick_id(chart_id, unit, "")
    ticks = []
    for group in svg.iter(f"{SVG_NS}g"):
        found = group.get("id", "")
        if not found.startswith(prefix):
            continue
        mark = next(group.iter(f"{SVG_NS}use"))
        label = "".join("".join(text.itertext()) for text in group.iter(f"{SVG_NS}text"))
        ticks.append((found.removeprefix(prefix), float(mark.get("x", "nan")), label))
    return ticks


def assert_axis_is_the_window(html: str, window: Window) -> None:
    days = window.days()
    step = max(1, math.ceil(len(days) / MAX_DAY_LABELS))
    for chart_id in PER_DAY_CHARTS:
        ticks = day_ticks(chart_svg(html, chart_id), chart_id)
        assert [day for day, _, _ in ticks] == days, chart_id
        places = [x for _, x, _ in ticks]
        gaps = [b - a for a, b in pairwise(places)]
        assert all(gap > 0 for gap in gaps), "days in order, left to right"
        assert all(gap == pytest.approx(gaps[0], rel=1e-3) for gap in gaps), "evenly spaced"
        labelled = [label for _, _, label in ticks if label]
        assert labelled == days[::step], chart_id
        assert len(labelled) <= MAX_DAY_LABELS


def test_data_on_one_day_spans_the_whole_week(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    for hour in (9, 12, 18):  # three reviews on Wednesday
        seed_review(store, clock, MONDAY + timedelta(days=2, hours=hour), iid=hour)
    html = report_html(build_report(store, WEEK, now=NOW))
    assert_axis_is_the_window(html, WEEK)
    assert len(WEEK.days()) == 7


def test_data_on_every_day(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    for day in range(7):
        seed_review(store, clock, MONDAY + timedelta(days=day, hours=10), iid=day + 1)
    assert_axis_is_the_window(report_html(build_report(store, WEEK, now=NOW)), WEEK)


def test_data_on_no_day_still_shows_the_week(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY - timedelta(days=3))  # the week before only
    report = build_report(store, WEEK, now=NOW)
    assert report["empty"] is True
    assert_axis_is_the_window(report_html(report), WEEK)


def test_a_window_of_one_day(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY + timedelta(hours=10))
    day = Window(MONDAY, MONDAY + timedelta(days=1))
    assert_axis_is_the_window(report_html(build_report(store, day, now=NOW)), day)


@pytest.mark.parametrize("days", [15, 31, 32, 90, MAX_DAY_TICKS])
def test_a_long_window_keeps_every_day_and_thins_its_labels(
    clocked: tuple[Store, FakeClock], days: int
) -> None:
    store, clock = clocked
    since = WEEK.until - timedelta(days=days)
    seed_review(store, clock, since + timedelta(hours=1))
    seed_review(store, clock, WEEK.until - timedelta(hours=1), iid=2)
    window = Window(since, WEEK.until)
    assert_axis_is_the_window(report_html(build_report(store, window, now=NOW)), window)


def test_a_window_over_a_quarter_is_drawn_per_iso_week_and_says_so(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    window = Window(WEEK.until - timedelta(days=MAX_DAY_TICKS + 1, hours=12), WEEK.until)
    weeks = [week.iso_week for week in window.weeks()]
    assert len(window.days()) == MAX_DAY_TICKS + 2
    seed_review(store, clock, window.since + timedelta(hours=1))  # in the first (part) week
    seed_review(store, clock, WEEK.since + timedelta(days=2), iid=2)  # the last week: two
    seed_review(store, clock, WEEK.since + timedelta(days=4), iid=3)
    report = build_report(store, window, now=NOW)
    html = report_html(report)
    step = math.ceil(len(weeks) / MAX_DAY_LABELS)
    for chart_id in PER_DAY_CHARTS:
        svg = chart_svg(html, chart_id)
        assert day_ticks(svg, chart_id) == [], "no day tick left"
        ticks = day_ticks(svg, chart_id, "week")
        assert [week for week, _, _ in ticks] == weeks, chart_id
        assert [label for _, _, label in ticks if label] == weeks[::step]
        assert any("per ISO week" in text for text in all_texts(svg)), "the title says so"
    section = html.split(f'<section id="{CHART_IDS[0]}">', 1)[1].split("</section>", 1)[0]
    assert "one tick per ISO week" in section and "<th>ISO week</th>" in section
    first, last = weeks[0], weeks[-1]
    assert f"<td>{first} (part)</td>" in section  # the window starts on a Thursday noon
    counted = {row["week"]: row["findings"] for row in report["daily"]["findings"]}
    assert counted == {first: 1, last: 2}, "every finding in its week, none dropped"
    assert [row["week"] for row in report["daily"]["ttft"]] == [first, last]


def test_a_window_over_three_years_is_refused_naming_the_limit(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY + timedelta(hours=1))
    century = Window(WEEK.until - timedelta(days=36_525), WEEK.until)
    with pytest.raises(WindowError, match=f"{MAX_WINDOW_DAYS:,} days"):
        build_report(store, century, now=NOW)
    longest = Window(WEEK.until - timedelta(days=MAX_WINDOW_DAYS), WEEK.until)
    assert len(longest.days()) == MAX_WINDOW_DAYS
    assert build_report(store, longest, now=NOW)["daily"]["unit"] == "week"


def test_a_window_not_on_midnight_shows_every_day_it_touches(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    window = Window(MONDAY + timedelta(hours=18), MONDAY + timedelta(days=2, hours=6))
    seed_review(store, clock, MONDAY + timedelta(days=1, hours=1))
    html = report_html(build_report(store, window, now=NOW))
    assert window.days() == ["2026-03-09", "2026-03-10", "2026-03-11"]
    assert_axis_is_the_window(html, window)


def all_texts(svg: ElementTree.Element) -> list[str]:
    return ["".join(text.itertext()) for text in svg.iter(f"{SVG_NS}text")]


def test_matplotlib_escapes_a_hostile_label_it_writes_as_text(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY + timedelta(hours=1), category=HOSTILE_LABEL)
    html = report_html(build_report(store, WEEK, now=NOW))
    rates = chart_svg(html, CHART_IDS[2])  # the category is a y tick label: parses as XML
    assert HOSTILE_LABEL in all_texts(rates)
    assert not [element.tag for element in rates.iter() if "script" in element.tag]
    assert "<script>" not in html and "&lt;script&gt;x" in html


def trend_labels(html: str) -> list[list[str]]:
    """Each week tick's label lines on the trend chart, left to right."""
    svg = chart_svg(html, TREND_CHART_ID)
    prefix = week_tick_id("")
    ticks = []
    for group in svg.iter(f"{SVG_NS}g"):
        if group.get("id", "").startswith(prefix):
            lines = [" ".join(text.itertext()) for text in group.iter(f"{SVG_NS}text")]
            ticks.append((group.get("id", "").removeprefix(prefix), lines))
    assert all(lines[0].startswith(week) for week, lines in ticks)
    return [lines for _, lines in ticks]


def test_the_trend_covers_eight_weeks_and_marks_a_prompt_change(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    for back in range(10):  # ten weeks of reviews; the prompt changed three weeks ago
        monday = MONDAY - timedelta(days=7 * back)
        version = "v2" if back < 3 else "v1"
        seed_review(store, clock, monday + timedelta(days=1), prompt_version=version, iid=back)
    report = build_report(store, WEEK, now=NOW)
    weeks = [f"2026-W{n:02d}" for n in range(4, 12)]
    assert [w["week"] for w in report["trend"]["weeks"]] == weeks
    labels = trend_labels(report_html(report))
    assert [lines[0] for lines in labels] == weeks
    changes = {week: lines[1:] for week, lines in zip(weeks, labels, strict=True)}
    assert changes["2026-W04"] == ["prompt v1", "model qwen"]  # what was live at the start
    assert changes["2026-W09"] == ["prompt v2"]  # where it changed
    assert all(not came for week, came in changes.items() if week not in ("2026-W04", "2026-W09"))
    assert "## Last weeks" in report_markdown(report)


def test_the_trend_has_only_the_weeks_the_store_holds(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY - timedelta(days=12))  # 2026-W09, then nothing in W10
    seed_review(store, clock, MONDAY + timedelta(days=3), iid=2)
    report = build_report(store, WEEK, now=NOW)
    trend = report["trend"]["weeks"]
    assert [w["week"] for w in trend] == ["2026-W09", "2026-W10", "2026-W11"]
    assert [w["reviews"] for w in trend] == [1, 0, 1]
    assert trend[1]["ttft_p95_ms"] is None and trend[1]["findings_per_mr"] is None  # a gap
    assert [lines[0] for lines in trend_labels(report_html(report))] == [
        "2026-W09",
        "2026-W10",
        "2026-W11",
    ]


def test_an_empty_store_has_no_trend(clocked: tuple[Store, FakeClock]) -> None:
    store, _ = clocked
    report = build_report(store, WEEK, now=NOW)
    assert report["trend"]["weeks"] == []
    html = report_html(report)
    assert f'id="{TREND_CHART_ID}"' not in html
    assert_axis_is_the_window(html, WEEK)  # the week's days are still drawn
    assert "## Last weeks" not in report_markdown(report)


def test_a_long_window_ends_its_trend_on_a_part_week(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY + timedelta(days=1))
    window = Window(MONDAY - timedelta(days=80), MONDAY + timedelta(days=3, hours=12))
    trend = build_report(store, window, now=NOW)["trend"]["weeks"]
    assert [(w["week"], w["partial"], w["reviews"]) for w in trend] == [("2026-W11", True, 1)]
    assert trend[0]["until"] == window.until.isoformat()


# --- nothing drawn is hidden: read from each chart's SVG geometry (issue 32) ------------------

# matplotlib's own ids: a plotted area is an <g id="axes_N"> whose first group is its
# background (the frame's box), a legend an <g id="legend_N"> whose first path is its box.
AXES_ID = re.compile(r"axes_\d+")
LEGEND_ID = re.compile(r"legend_\d+")
SERIES_PREFIXES = ("findings-", "ttft-", "trend-", "rates-")  # the ids of what is drawn
PATH_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
MIN_HEADROOM = 0.05  # of a plot's height (width for horizontal bars) clear above the highest
PIXEL = 0.01  # SVG units: slack for a value drawn exactly on a bound (a bar standing on 0)
Box = tuple[float, float, float, float]  # left, top, right, bottom (SVG y grows downwards)


def _points(
    element: ElementTree.Element,
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """The (x, y) of every path vertex and of every marker (<use>) drawn under ``element``,
    leaving out <defs> (a marker's shape is defined there, at the origin)."""
    vertices: list[tuple[float, float]] = []
    markers: list[tuple[float, float]] = []

    def visit(node: ElementTree.Element) -> None:
        for child in node:
            if child.tag == f"{SVG_NS}defs":
                continue
            if child.tag == f"{SVG_NS}path":
                numbers = [float(n) for n in PATH_NUMBER.findall(child.get("d", ""))]
                vertices.extend(zip(numbers[::2], numbers[1::2], strict=True))
            elif child.tag == f"{SVG_NS}use":
                markers.append((float(child.get("x", "nan")), float(child.get("y", "nan"))))
            visit(child)

    visit(element)
    return vertices, markers


def _box(points: list[tuple[float, float]]) -> Box:
    xs, ys = [x for x, _ in points], [y for _, y in points]
    return min(xs), min(ys), max(xs), max(ys)


def _first_box(group: ElementTree.Element) -> Box:
    """The box of the first path under ``group`` (a frame's or a legend's outline)."""
    holder = ElementTree.Element(f"{SVG_NS}g")
    holder.append(next(group.iter(f"{SVG_NS}path")))
    return _box(_points(holder)[0])


def plots(svg: ElementTree.Element) -> list[tuple[Box, dict[str, ElementTree.Element]]]:
    """Each plotted area of a chart: its frame's box and the drawn series in it, by id."""
    found = []
    for group in svg.iter(f"{SVG_NS}g"):
        if AXES_ID.fullmatch(group.get("id", "")):
            background = next(group.iter(f"{SVG_NS}g"))
            series = {
                inner.get("id", ""): inner
                for inner in group.iter(f"{SVG_NS}g")
                if inner.get("id", "").startswith(SERIES_PREFIXES)
            }
            found.append((_first_box(background), series))
    return found


def legends(svg: ElementTree.Element) -> list[Box]:
    return [
        _first_box(group)
        for group in svg.iter(f"{SVG_NS}g")
        if LEGEND_ID.fullmatch(group.get("id", ""))
    ]


def overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def assert_drawn_clear_of_the_frame(
    chart_id: str, frame: Box, series: str, element: ElementTree.Element
) -> None:
    """Every vertex within the frame, HEADROOM clear of its top (of its right edge for the
    horizontal bars of the rates chart); every marker strictly inside, clear of the bottom."""
    left, top, right, bottom = frame
    vertices, markers = _points(element)
    assert vertices or markers, f"{chart_id}: {series} draws nothing"
    where = f"{chart_id}: {series}"
    if chart_id == CHART_IDS[2]:  # bars grow to the right: the room is left of the right edge
        room = MIN_HEADROOM * (right - left)
        for x, y in vertices:
            assert left - PIXEL <= x <= right - room, f"{where} reaches the right edge at {x}"
            assert top - PIXEL <= y <= bottom + PIXEL, where
        return
    room = MIN_HEADROOM * (bottom - top)
    for x, y in vertices:
        assert left - PIXEL <= x <= right + PIXEL, f"{where} leaves the plot at x={x}"
        assert top + room <= y <= bottom + PIXEL, f"{where} at y={y}: frame {top}..{bottom}"
    for x, y in markers:
        assert left < x < right, f"{where}: a point on the left or right edge"
        assert top + room <= y < bottom - PIXEL, f"{where}: a point at y={y}, {top}..{bottom}"


@pytest.fixture
def crowded(clocked: tuple[Store, FakeClock]) -> str:
    """report.html of a week whose key points sit where a frame or a legend was: the last
    week missed the SLO, one week's acceptance is 100 % and its invalid answers 0 %, the
    first day's p95 and its findings are the week's highest (top left, where a legend stood),
    every category's rates are 100 % (bottom right, the rates chart's legend)."""
    store, clock = clocked
    for back in range(1, 8):
        seed_review(store, clock, MONDAY - timedelta(days=7 * back - 1), iid=100 + back)
    for day in range(7):
        seed_review(store, clock, MONDAY + timedelta(days=day, hours=10), iid=day + 1)
    report = build_report(store, WEEK, now=NOW)
    target = report["slo"]["ttft_p95_target_ms"]
    weeks = report["trend"]["weeks"]
    weeks[-1].update(ttft_p95_ms=target * 1.05, ttft_p95_met=False, findings_per_mr=7.0)
    for week in weeks:
        week["addressed"] = 0.5  # no finding here had a later version to be addressed in
    weeks[-2].update(acceptance=1.0, invalid_rate=0.0)
    first = report["daily"]["days"][0]
    for row in report["daily"]["ttft"]:
        row.update(p50_ms=target / 2, p95_ms=target * (1.5 if row["day"] == first else 0.9))
    for row in report["daily"]["findings"]:
        row["findings"] = 9 if row["day"] == first else 1
    for row in report["by_category"]:
        row.update(acceptance=1.0, addressed_rate=1.0)
    return report_html(report)


@pytest.mark.parametrize("chart_id", CHART_IDS)
def test_every_point_line_and_bar_is_drawn_clear_of_its_frame(crowded: str, chart_id: str) -> None:
    svg = chart_svg(crowded, chart_id)
    found = plots(svg)
    assert len(found) == (3 if chart_id == TREND_CHART_ID else 1)
    for frame, series in found:
        assert series, f"{chart_id}: a plotted area without a series id"
        for name, element in series.items():
            assert_drawn_clear_of_the_frame(chart_id, frame, name, element)


@pytest.mark.parametrize("chart_id", CHART_IDS)
def test_no_legend_covers_a_plotted_area(crowded: str, chart_id: str) -> None:
    svg = chart_svg(crowded, chart_id)
    boxes = legends(svg)
    assert boxes, f"{chart_id} has a legend"
    for legend in boxes:
        for frame, _ in plots(svg):
            assert not overlap(legend, frame), f"{chart_id}: legend {legend} on {frame}"


def test_an_empty_chart_says_it_has_no_data(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY - timedelta(days=3))  # the week before only
    report = build_report(store, WEEK, now=NOW)
    for week in report["trend"]["weeks"]:  # weeks whose figures are all gaps
        week.update(acceptance=None, addressed=None, invalid_rate=None, findings_per_mr=None)
        week["ttft_p95_ms"] = None
    html = report_html(report)
    notes = {
        CHART_IDS[0]: ["no findings in this window"],
        CHART_IDS[1]: ["no model calls in this window"],
        CHART_IDS[2]: ["no findings in this window"],
        TREND_CHART_ID: [
            "no votes, addressable findings or tool calls in these weeks",
            "no reviews in these weeks",
            "no model calls in these weeks",
        ],
    }
    for chart_id, expected in notes.items():
        svg = chart_svg(html, chart_id)
        assert [text for text in all_texts(svg) if text.startswith("no ")] == expected
        # a legend only where a line is still drawn: the SLO's
        slo = chart_id in (CHART_IDS[1], TREND_CHART_ID)
        assert len(legends(svg)) == (1 if slo else 0), f"{chart_id}: a legend of nothing"


def test_a_chart_with_data_has_no_empty_note(crowded: str) -> None:
    for chart_id in CHART_IDS:
        assert not [t for t in all_texts(chart_svg(crowded, chart_id)) if t.startswith("no ")]


def y_tick_labels(svg: ElementTree.Element) -> list[str]:
    return [
        "".join("".join(text.itertext()) for text in group.iter(f"{SVG_NS}text"))
        for group in svg.iter(f"{SVG_NS}g")
        if re.fullmatch(r"ytick_\d+", group.get("id", ""))
    ]


@pytest.mark.parametrize("findings", [0, 1, 3, 7])
def test_findings_are_counted_in_whole_numbers_on_the_axis(
    clocked: tuple[Store, FakeClock], findings: int
) -> None:
    store, clock = clocked
    seed_review(store, clock, MONDAY + timedelta(hours=10))
    report = build_report(store, WEEK, now=NOW)
    report["daily"]["findings"] = [
        {"day": MONDAY.date().isoformat(), "severity": "major", "findings": findings}
    ][: 1 if findings else 0]
    labels = y_tick_labels(chart_svg(report_html(report), CHART_IDS[0]))
    assert labels and all(re.fullmatch(r"\d+", label) for label in labels), labels
    assert labels[0] == "0" and int(labels[-1]) <= max(findings, 1)


def test_a_month_and_more_is_drawn_clear_of_the_frame_too(clocked: tuple[Store, FakeClock]) -> None:
    """Over MAX_MARKED_DAYS days the findings are stacked areas and the lines have no
    markers: the highest day (the first, under where a legend stood) still has headroom."""
    store, clock = clocked
    since = WEEK.until - timedelta(days=40)
    for day in range(0, 40, 3):
        seed_review(store, clock, since + timedelta(days=day, hours=10), iid=day + 1)
    report = build_report(store, Window(since, WEEK.until), now=NOW)
    target = report["slo"]["ttft_p95_target_ms"]
    first = report["daily"]["days"][0]
    for row in report["daily"]["ttft"]:
        row.update(p50_ms=target / 2, p95_ms=target * (1.5 if row["day"] == first else 0.9))
    for row in report["daily"]["findings"]:
        row["findings"] = 9 if row["day"] == first else 1
    html = report_html(report)
    for chart_id in PER_DAY_CHARTS:
        svg = chart_svg(html, chart_id)
        ((frame, series),) = plots(svg)
        assert series
        for name, element in series.items():
            assert_drawn_clear_of_the_frame(chart_id, frame, name, element)
        assert not any(overlap(legend, frame) for legend in legends(svg))
