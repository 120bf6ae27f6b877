"""`reviewbot report`: figures from the store (window bounds, percentiles, votes), the JSON,
Markdown and HTML documents, the report issue on GitLab, and the command's bad inputs.

Store tests run on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reviewbot.commands import main
from reviewbot.findings import Severity
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.report.document import (
    REPORT_MARKER_PREFIX,
    build_report,
    post_report_issue,
    report_markdown,
    write_report,
)
from reviewbot.report.html import (
    CHART_IDS,
    SLO_LINE_ID,
    findings_series_id,
    report_html,
    ttft_line_id,
)
from reviewbot.report.text import printable
from reviewbot.store import MergeRequestKey, Store
from reviewbot.store.models import Base
from reviewbot.store.models import EvalRun as EvalRunRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.weburl import web_url
from reviewbot.window import Window
from tests.builders import MONDAY, FakeClock, finding_row
from tests.fakes.gitlab_server import FakeGitLab
from tests.hostile_text import hostile_text, hostile_url, storable
from tests.hypothesis_profiles import examples
from tests.store_fixtures import migrated_sqlite_url, migrated_store, store_url  # noqa: F401

pytestmark = pytest.mark.slow  # measured: see docs/development.md

PROJECT = "group/app"
PROJECT_ID = 7
OTHER_PROJECT = "group/lib"
OTHER_PROJECT_ID = 8
GITLAB = "https://gitlab.example.com"
WEEK = Window(MONDAY, MONDAY + timedelta(days=7))
NEXT_WEEK = Window(WEEK.until, WEEK.until + timedelta(days=7))
LAST_INSTANT = MONDAY + timedelta(days=7, microseconds=-1)  # Sunday 23:59:59.999999
NOW = MONDAY + timedelta(days=8)


def _review(
    store: Store,
    clock: FakeClock,
    started: datetime,
    *,
    seconds: float = 10.0,
    iid: int | None = 1,
    head: str = "a",
    ttfts: tuple[float | None, ...] = (),
    findings: tuple[dict[str, Any], ...] = (),
    model: str = "qwen",
    prompt_version: str = "v1",
    project: str = PROJECT,
    project_id: int = PROJECT_ID,
    gitlab_url: str | None = GITLAB,
) -> list[int]:
    clock.now = started
    key = MergeRequestKey(gitlab_url, project_id, iid) if gitlab_url and iid else None
    review_id = store.start_review(
        project=project,
        mr_iid=iid,
        head_sha=head * 40,
        base_sha=None,
        start_sha=None,
        trigger="ci",
        model=model,
        prompt_version=prompt_version,
        key=key,
    )
    store.record_llm_calls(
        review_id,
        [
            {
                "chunk_index": i,
                "mode": "tool_calls",
                "outcome": "ok",
                "ttft_ms": ttft,
                "started_at": started,
            }
            for i, ttft in enumerate(ttfts)
        ],
    )
    ids = store.record_findings(review_id, [finding_row(**f) for f in findings])
    clock.now = started + timedelta(seconds=seconds)
    store.finish_review(review_id, status="succeeded")
    return ids


def _vote(store: Store, finding_id: int, user: str, value: str, key: str, at: datetime) -> None:
    store.record_feedback(
        finding_id=finding_id,
        project=PROJECT,
        kind="award",
        value=value,
        username=user,
        event_key=key,
        created_at=at,
    )


def test_window_bounds_are_exact(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    _review(store, clock, MONDAY - timedelta(microseconds=1), iid=1)  # previous week
    _review(store, clock, MONDAY, iid=2)  # first instant: in
    _review(store, clock, LAST_INSTANT, iid=3)  # Sunday 23:59:59.999999: in
    _review(store, clock, MONDAY + timedelta(days=7), iid=4)  # next Monday 00:00: out
    report = build_report(store, WEEK, now=NOW)
    assert (report["totals"]["reviews"], report["totals"]["mrs"]) == (2, 2)
    assert report["previous"]["totals"]["reviews"] == 1
    assert report["window"] == {
        "since": "2026-03-09T00:00:00+00:00",
        "until": "2026-03-16T00:00:00+00:00",
        "until_exclusive": True,
        "iso_week": "2026-W11",
        "project": None,
    }
    assert report["daily"]["days"][0] == "2026-03-09" and len(report["daily"]["days"]) == 7


def test_percentiles_are_nearest_rank_per_window_and_per_day(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    tuesday = MONDAY + timedelta(days=1, hours=9)
    _review(
        store,
        clock,
        MONDAY + timedelta(hours=9),
        seconds=4.0,
        ttfts=(100.0, 200.0, 300.0, 400.0, None),
    )
    _review(
        store,
        clock,
        tuesday,
        seconds=30.0,
        iid=2,
        ttfts=(500.0, 600.0, 700.0, 800.0, 900.0, 1000.0),
    )
    _review(store, clock, tuesday + timedelta(hours=1), seconds=20.0, iid=3)
    report = build_report(store, WEEK, now=NOW, slo_ttft_ms=900.0)
    # 10 first tokens: p50 = 5th smallest, p95 = 10th (ceil(9.5))
    assert report["latency"]["ttft_ms"] == {"p50": 500.0, "p95": 1000.0, "count": 10}
    assert report["latency"]["review_s"]["p50"] == pytest.approx(20.0, abs=1e-3)
    assert report["latency"]["review_s"]["p95"] == pytest.approx(30.0, abs=1e-3)
    assert report["daily"]["ttft"] == [
        {"day": "2026-03-09", "p50_ms": 200.0, "p95_ms": 400.0, "calls": 4},
        {"day": "2026-03-10", "p50_ms": 700.0, "p95_ms": 1000.0, "calls": 6},
    ]
    assert report["slo"] == {"ttft_p95_target_ms": 900.0, "ttft_p95_ms": 1000.0, "pass": False}
    assert report["totals"]["model_calls"] == 11
    assert report["slowest_reviews"][0]["seconds"] == pytest.approx(30.0, abs=1e-3)
    assert report["slowest_reviews"][0]["url"] == f"{GITLAB}/{PROJECT}/-/merge_requests/2"


def test_votes_count_once_and_revoked_votes_not_at_all(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    up, down, other = _review(
        store,
        clock,
        MONDAY + timedelta(hours=1),
        findings=(
            {"fingerprint": "a", "category": "bug"},
            {"fingerprint": "b", "category": "security"},
            {"fingerprint": "c", "category": "security"},
        ),
    )
    t = MONDAY + timedelta(hours=2)
    # alice's 👍 seen by the webhook and by a sync: one vote
    _vote(store, up, "alice", "thumbsup", "webhook-delivery-1", t)
    _vote(store, up, "alice", "thumbsup", "award:gitlab:1", t)
    # bob 👎, takes it back, votes again: in force
    _vote(store, down, "bob", "thumbsdown", "d1", t)
    _vote(store, down, "bob", "thumbsdown:revoked", "d2", t + timedelta(minutes=1))
    _vote(store, down, "bob", "thumbsdown", "d3", t + timedelta(minutes=2))
    # carol 👍 then revoked: not counted; her 👎 on the same finding stands
    _vote(store, other, "carol", "thumbsup", "c1", t)
    _vote(store, other, "carol", "thumbsup:revoked", "c2", t + timedelta(minutes=1))
    _vote(store, other, "carol", "thumbsdown", "c3", t)
    report = build_report(store, WEEK, now=NOW)
    assert (report["feedback"]["thumbs_up"], report["feedback"]["thumbs_down"]) == (1, 2)
    assert report["rates"]["acceptance"] == pytest.approx(1 / 3)
    by_category = {r["category"]: r for r in report["by_category"]}
    assert (by_category["security"]["thumbs_down"], by_category["bug"]["thumbs_up"]) == (2, 1)
    # a week later, this week is `previous`: its feedback and rates come along
    previous = build_report(store, NEXT_WEEK, now=NOW)["previous"]
    assert (previous["feedback"]["thumbs_up"], previous["feedback"]["thumbs_down"]) == (1, 2)
    assert previous["rates"] == {"acceptance": pytest.approx(1 / 3), "addressed": None}
    assert store.votes_in_force([up, down, other]) == {
        (up, "alice", "thumbsup"),
        (down, "bob", "thumbsdown"),
        (other, "carol", "thumbsdown"),
    }


def test_refound_findings_count_once_and_addressed_rate_needs_a_later_version(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    (first, second) = _review(
        store,
        clock,
        MONDAY + timedelta(hours=1),
        head="a",
        findings=(
            {"fingerprint": "a", "note_id": 11},
            {"fingerprint": "b", "note_id": 12},
        ),
    )
    # the next push: both found again (duplicates, not new findings)
    _review(
        store,
        clock,
        MONDAY + timedelta(hours=2),
        head="b",
        findings=(
            {"fingerprint": "a", "state": "duplicate", "note_id": 11},
            {"fingerprint": "b", "state": "duplicate", "note_id": 12},
        ),
    )
    # a third MR with one finding still at the reviewed head
    _review(store, clock, MONDAY + timedelta(hours=3), iid=9, findings=({"fingerprint": "z"},))
    store.record_feedback(
        finding_id=first,
        project=PROJECT,
        kind="addressed",
        value="addressed",
        event_key="addressed:x",
    )
    report = build_report(store, WEEK, now=NOW)
    assert (report["totals"]["findings"], report["totals"]["findings_posted"]) == (3, 3)
    # addressed 1 of the 2 findings whose MR got a later version
    assert report["rates"]["addressed"] == 0.5
    assert build_report(store, NEXT_WEEK, now=NOW)["previous"]["rates"] == report["rates"]
    assert store.note_owner(12).finding_id == second  # the posting row, not the duplicate


def test_empty_window_is_a_report_that_says_no_reviews(
    clocked: tuple[Store, FakeClock], tmp_path: Path
) -> None:
    store, _ = clocked
    report = build_report(store, WEEK, now=NOW)
    assert report["empty"] is True
    assert report["rates"] == {"acceptance": None, "addressed": None}
    assert report["latency"]["ttft_ms"] == {"p50": None, "p95": None, "count": 0}
    assert report["slo"] == {"ttft_p95_target_ms": 800.0, "ttft_p95_ms": None, "pass": None}
    assert "**No reviews** in this window." in report_markdown(report)
    assert "No reviews in this window." in report_html(report)
    json.dumps(report)  # plain JSON


def _sample_report(store: Store, clock: FakeClock) -> dict[str, Any]:
    _review(
        store, clock, MONDAY - timedelta(days=3), ttfts=(900.0,), findings=({"fingerprint": "p"},)
    )
    ids = _review(
        store,
        clock,
        MONDAY + timedelta(hours=5),
        ttfts=(300.0, 500.0),
        findings=(
            {"fingerprint": "a", "category": "security", "severity": "critical"},
            {"fingerprint": "b", "category": "bug", "severity": "minor"},
        ),
    )
    _vote(store, ids[1], "bob", "thumbsdown", "k1", MONDAY + timedelta(hours=6))
    _vote(store, ids[0], "bob", "thumbsup", "k2", MONDAY + timedelta(hours=6))
    return build_report(store, WEEK, now=NOW)


def test_markdown_has_arrows_worst_categories_slowest_reviews_and_links(
    clocked: tuple[Store, FakeClock],
) -> None:
    markdown = report_markdown(_sample_report(*clocked))
    assert markdown.startswith("<!-- reviewbot:report week=2026-W11 project=all -->\n")
    assert "# reviewbot report 2026-W11" in markdown
    assert "| Findings | 2 | 1 | ▲ 1 |" in markdown
    assert "| First token p95 | 500 ms | 900 ms | ▼ 400 ms |" in markdown
    assert "| Acceptance 👍/(👍+👎) | 50% | – | – |" in markdown
    worst = markdown.split("## Worst categories by 👎")[1].split("##")[0]
    assert worst.index("| bug | 1 | 0 |") < worst.index("| security | 0 | 1 |")
    assert f"[{PROJECT}!1]({GITLAB}/{PROJECT}/-/merge_requests/1)" in markdown
    assert "met ✅" in markdown


def test_html_is_one_offline_file_with_three_charts_and_their_tables(
    clocked: tuple[Store, FakeClock],
) -> None:
    html = report_html(_sample_report(*clocked))
    assert html.count("<svg") == len(CHART_IDS)
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}"' in html
    # nothing fetched: no script, no external stylesheet, image or font (only #fragments)
    assert not re.search(r"<script|<link|@import|url\((?!#)|src=", html, re.IGNORECASE)
    assert set(re.findall(r'xlink:href="(.)', html)) <= {"#"}
    assert "<table>" in html and "2026-03-09" in html


def _chart(html: str, chart_id: str) -> str:
    """The <section> of one chart."""
    return html.split(f'id="{chart_id}"', 1)[1].split("</section>", 1)[0]


def _first_y(svg: str, element_id: str) -> float:
    """The SVG y of the first point of the line drawn as ``element_id``."""
    found = re.search(rf'<g id="{element_id}">\s*<path d="M [-\d.]+ ([-\d.]+)', svg)
    assert found, f"no line {element_id}"
    return float(found.group(1))


@pytest.mark.parametrize("target_ms", [800.0, 400.0])
def test_ttft_chart_draws_the_slo_line_at_the_target(
    clocked: tuple[Store, FakeClock], target_ms: float
) -> None:
    sample = _sample_report(*clocked)
    report = {**sample, "slo": {**sample["slo"], "ttft_p95_target_ms": target_ms}}
    [monday] = report["daily"]["ttft"]  # the one day with model calls: p50 300, p95 500 ms
    svg = _chart(report_html(report), CHART_IDS[1])
    # two known points of the y axis (p50 and p95 of that day) place the target on it
    p50, p95 = _first_y(svg, ttft_line_id("p50")), _first_y(svg, ttft_line_id("p95"))
    pixels_per_ms = (p95 - p50) / (monday["p95_ms"] - monday["p50_ms"])
    expected = p50 + (target_ms - monday["p50_ms"]) * pixels_per_ms
    assert _first_y(svg, SLO_LINE_ID) == pytest.approx(expected, abs=0.01)
    assert svg.count(f'id="{SLO_LINE_ID}"') == 1


def test_findings_chart_has_one_series_per_severity_found(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    week = _sample_report(store, clock)
    present = {row["severity"] for row in week["daily"]["findings"]}
    assert present == {"critical", "minor"}
    # a week: a bar per day of each severity present, none of the others
    bars = _chart(report_html(week), CHART_IDS[0])
    for severity in (s.value for s in Severity):
        days = week["daily"]["days"]
        drawn = {day for day in days if f'id="{findings_series_id(severity, day)}"' in bars}
        assert drawn == (set(days) if severity in present else set())
    # six weeks (the previous week's major finding too): one stacked area per severity
    six_weeks = Window(MONDAY - timedelta(days=35), WEEK.until)
    long = build_report(store, six_weeks, now=NOW)
    areas = _chart(report_html(long), CHART_IDS[0])
    area_id = re.compile('id="{}"'.format(findings_series_id(r"(\w+)")))
    drawn = set(area_id.findall(areas))
    assert drawn == {row["severity"] for row in long["daily"]["findings"]}
    assert drawn == {"critical", "major", "minor"}


def test_report_issue_is_created_once_then_edited(clocked: tuple[Store, FakeClock]) -> None:
    report = _sample_report(*clocked)
    with FakeGitLab() as gitlab:
        gitlab.add_user("reviewbot", token="glpat-bot", bot=True)
        gitlab.add_user("lead", token="glpat-lead")
        gitlab.add_project("team/reports", project_id=30)
        client = GitLabClient(GitLabSettings(url=gitlab.url, token="glpat-bot"))
        # someone else's issue with the same title but no marker is left alone
        mine = {"title": "reviewbot report 2026-W11", "description": "mine"}
        requests.post(
            f"{gitlab.url}/api/v4/projects/30/issues",
            json=mine,
            timeout=10,
            headers={"PRIVATE-TOKEN": "glpat-lead"},
        )
        created, was_new = post_report_issue(client, "team/reports", report)
        edited, again_new = post_report_issue(client, "team/reports", {**report, "empty": True})
        assert (was_new, again_new) == (True, False)
        assert created["iid"] == edited["iid"] == 2
        issues = sorted(gitlab.issues("team/reports"), key=lambda i: i["iid"])
        assert [i["title"] for i in issues] == ["reviewbot report 2026-W11"] * 2
        assert issues[0]["description"] == "mine"
        assert "**No reviews**" in issues[1]["description"]


def _invoke(*args: str, database_url: str) -> Any:
    env = {"REVIEWBOT_DATABASE_URL": database_url}
    return CliRunner().invoke(main, ["report", *args], env=env)


def test_report_command_writes_the_files_asked_for(store_url: str, tmp_path: Path) -> None:  # noqa: F811
    output = tmp_path / "out"
    result = _invoke(
        "--weekly", "--output", str(output), "--format", "json,md", database_url=store_url
    )
    assert result.exit_code == 0, result.output
    assert "no reviews" in result.output
    assert sorted(p.name for p in output.iterdir()) == ["report.json", "report.md"]


@pytest.mark.parametrize("output", ["/proc/reviewbot-report", "/sys/reviewbot-report"])
def test_an_output_folder_that_cannot_be_made_is_one_line_and_exit_1(
    store_url: str,  # noqa: F811
    output: str,
) -> None:
    """Issue 32 item 13: /proc and /sys exist, so --output passed its check, and making the
    folder in them was a FileNotFoundError or PermissionError traceback."""
    result = _invoke("--weekly", "--output", output, "--format", "md", database_url=store_url)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # not an OSError's traceback
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"reviewbot: error: cannot write the report to {output}: ")


def _review_with_calls(
    store: Store, clock: FakeClock, model: str, version: str, calls: list[dict[str, Any]]
) -> int:
    clock.now = MONDAY + timedelta(hours=1)
    review_id = store.start_review(
        project=PROJECT,
        mr_iid=1,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger="ci",
        model=model,
        prompt_version=version,
        key=MergeRequestKey(GITLAB, PROJECT_ID, 1),
    )
    base = {"chunk_index": 0, "mode": "tool_calls", "outcome": "ok", "started_at": clock.now}
    store.record_llm_calls(review_id, [{**base, **call} for call in calls])
    store.finish_review(review_id, status="failed")
    return review_id


def test_the_invalid_call_rate_per_model_and_prompt_version(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    unreadable_then_repaired = [
        {"outcome": "invalid_calls", "tool_calls": 3, "invalid_tool_calls": 2},
        {"outcome": "repair", "tool_calls": 2, "repaired_tool_calls": 2},
        {"chunk_index": 1, "tool_calls": 4},
    ]
    _review_with_calls(store, clock, "qwen", "v1", unreadable_then_repaired)
    _review_with_calls(store, clock, "qwen", "v1", [{"invalid_tool_calls": 5}])  # not counted
    _review_with_calls(store, clock, "qwen", "v2", [{"tool_calls": 5}])
    report = build_report(store, WEEK, now=NOW)
    assert report["tool_calls"] == [
        {
            "model": "qwen",
            "prompt_version": "v1",
            "tool_calls": 9,
            "invalid_tool_calls": 2,
            "repaired_tool_calls": 2,
            "model_calls": 4,
            "invalid_rate": 2 / 9,
            "repaired_rate": 1.0,
        },
        {
            "model": "qwen",
            "prompt_version": "v2",
            "tool_calls": 5,
            "invalid_tool_calls": 0,
            "repaired_tool_calls": 0,
            "model_calls": 1,
            "invalid_rate": 0.0,
            "repaired_rate": None,
        },
    ]
    markdown = report_markdown(report)
    assert "## Unreadable tool calls" in markdown
    assert (
        "| qwen | v1 | 9 | 2 | 22% | 2 |" in markdown
        and "| qwen | v2 | 5 | 0 | 0% | 0 |" in markdown
    )
    html = report_html(report)
    assert "<h2>Unreadable tool calls</h2>" in html and "<td>22%</td>" in html
    json.dumps(report)  # the JSON document holds it as it is


def test_report_of_one_project_leaves_the_others_out(
    clocked: tuple[Store, FakeClock],
    store_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`reviewbot report --project` by path or by id: that project's reviews, findings,
    feedback and latency only, this window and the previous one."""
    store, clock = clocked
    [mine] = _review(
        store, clock, MONDAY + timedelta(hours=1), ttfts=(100.0,), findings=({"category": "bug"},)
    )
    _vote(store, mine, "bob", "thumbsup", "k1", MONDAY + timedelta(hours=2))
    other = {"project": OTHER_PROJECT, "project_id": OTHER_PROJECT_ID}
    _review(store, clock, MONDAY - timedelta(days=1), **other)  # the previous week
    theirs, _ = _review(
        store,
        clock,
        MONDAY + timedelta(hours=3),
        ttfts=(900.0, 950.0),
        findings=({"category": "security"}, {"fingerprint": "q", "category": "security"}),
        **other,
    )
    _vote(store, theirs, "bob", "thumbsdown", "k2", MONDAY + timedelta(hours=4))

    def report_of(*project: str) -> dict[str, Any]:
        output = tmp_path / "-".join(project or ("all",)).replace("/", "_")
        window = ("--since", "2026-03-09", "--until", "2026-03-16", *project)
        result = _invoke(
            *window, "--output", str(output), "--format", "json", database_url=store_url
        )
        assert result.exit_code == 0, result.output
        return json.loads((output / "report.json").read_text())

    def seen(report: dict[str, Any]) -> tuple[Any, ...]:
        return (
            report["totals"]["reviews"],
            report["totals"]["findings"],
            {row["category"] for row in report["by_category"]},
            (report["feedback"]["thumbs_up"], report["feedback"]["thumbs_down"]),
            report["latency"]["ttft_ms"]["count"],
            {review["project"] for review in report["slowest_reviews"]},
            report["previous"]["totals"]["reviews"],
        )

    app = report_of("--project", PROJECT)
    assert app["window"]["project"] == PROJECT
    assert seen(app) == (1, 1, {"bug"}, (1, 0), 1, {PROJECT}, 0)
    lib = report_of("--project", str(OTHER_PROJECT_ID))  # by the project's GitLab id
    assert seen(lib) == (1, 2, {"security"}, (0, 1), 2, {OTHER_PROJECT}, 1)
    everything = report_of()
    assert everything["window"]["project"] is None
    assert seen(everything) == (2, 3, {"bug", "security"}, (1, 1), 3, {PROJECT, OTHER_PROJECT}, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--weekly", "--since", "2026-03-01"), "give --weekly or --since/--until, not both"),
        (("--until", "2026-03-01"), "--until needs --since"),
        (("--since", "yesterday"), "--since 'yesterday': give a date"),
        (("--since", "2026-03-02", "--until", "2026-03-01"), "the window is empty"),
        (("--format", "pdf"), "--format 'pdf': a comma-separated list of json, md, html"),
    ],
)
def test_bad_report_options_are_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = _invoke(*args, "--output", str(tmp_path), database_url="sqlite:///unused.db")
    assert result.exit_code == 2
    assert result.output.strip().startswith("reviewbot: error: ")
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------
# Safe to open: nothing from the database becomes an element, an attribute, a link that is not
# http(s), a quick action or a mention (issue 17, item 2).


class _Page(HTMLParser):
    """Every start tag of a page with its attributes, and the text of each table cell."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))
        if tag in ("td", "th"):
            self._cell = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def vocabulary(self) -> set[tuple[str, str | None]]:
        """Each element name alone and with each attribute name it was seen with."""
        return {(tag, None) for tag, _ in self.elements} | {
            (tag, name) for tag, attrs in self.elements for name, _ in attrs
        }

    def links(self) -> list[str | None]:
        return [dict(attrs).get("href") for tag, attrs in self.elements if tag == "a"]


# What an address must look like once the page is parsed: http(s), a host, nothing that ends
# an attribute or a Markdown link, no control character (checked independently of weburl.py).
WEB_LINK = re.compile(r"(?i:https?)://[^\s\"'<>`\\()\[\]|\x00-\x1f\x7f]+\Z")
MENTION = re.compile(r"(?<![A-Za-z0-9])@[A-Za-z0-9_]")
OTHER_SCHEME_AUTOLINK = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
QUICK_ACTION = re.compile(r"[ \t]*/")
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
CODE_SPAN_STAND_IN = "`"  # what a code span counts as next to text (GitLab skips code)


def _markdown_parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").enable("table")
    parser.validateLink = lambda url: True  # see every link, javascript: ones included
    return parser


def _linked(report: dict[str, Any]) -> int:
    return sum(review["url"] is not None for review in report["slowest_reviews"])


def _assert_html_is_inert(
    html: str, report: dict[str, Any], reference: set[tuple[str, str | None]]
) -> None:
    page = _Page(html)
    strange = page.vocabulary() - reference
    assert not strange, f"elements or attributes not from the template: {sorted(strange)}"
    for tag, attrs in page.elements:
        for name, value in attrs:
            if name in ("href", "xlink:href", "src"):
                assert value is not None
                assert WEB_LINK.match(value) if tag == "a" else value.startswith("#"), value
    assert len(page.links()) == _linked(report)
    shown_as_text = {
        printable(f"{r['project']}!{r['mr_iid']}" if r["mr_iid"] else r["project"])
        for r in report["slowest_reviews"]
    }
    shown_as_text |= {printable(r["model"] or "(none)") for r in report["by_model"]}
    shown_as_text |= {printable(r["category"]) for r in report["by_category"]}
    shown_as_text |= {printable(r["dataset"]) for r in report["eval_runs"]}
    assert shown_as_text <= set(page.cells)


def _inline_texts(tokens: list[Any]) -> list[str]:
    """The text of each inline run as GitLab's filters see it (a code span is a stand-in)."""
    texts = []
    for token in tokens:
        if token.type == "inline":
            parts = [
                child.content
                if child.type == "text"
                else CODE_SPAN_STAND_IN
                if child.type == "code_inline"
                else "\n"
                for child in token.children or []
                if child.type not in ("link_open", "link_close")
            ]
            texts.append("".join(parts))
    return texts


def _assert_markdown_is_inert(markdown: str, report: dict[str, Any]) -> None:
    tokens = _markdown_parser().parse(markdown)
    assert tokens[0].type == "html_block"
    assert tokens[0].content.strip() == markdown.splitlines()[0]
    assert markdown.startswith(REPORT_MARKER_PREFIX)
    everything = [*tokens, *(child for token in tokens for child in token.children or [])]
    kinds = {token.type for token in everything[1:]}
    assert not kinds & {"html_block", "html_inline", "image"}, kinds
    hrefs = [token.attrs["href"] for token in everything if token.type == "link_open"]
    assert len(hrefs) == _linked(report)
    assert all(WEB_LINK.match(str(href)) for href in hrefs), hrefs
    for text in _inline_texts(tokens):
        assert not MENTION.search(text), text
        schemes = {m.group(1).lower() for m in OTHER_SCHEME_AUTOLINK.finditer(text)}
        assert schemes <= {"http", "https"}, text
    lines = markdown.replace("\r", "").split("\n")
    assert not [line for line in lines if QUICK_ACTION.match(line)]
    columns = None
    for line in lines:
        if not line.startswith("|"):
            columns = None
            continue
        pipes = len(UNESCAPED_PIPE.findall(line))
        columns = pipes if columns is None else columns
        assert pipes == columns, line  # no cell split or merged by data


@st.composite
def _hostile_rows(draw: st.DrawFn) -> dict[str, Any]:
    review = st.fixed_dictionaries(
        {
            "project": hostile_text,
            "gitlab_url": st.none() | hostile_url,
            "iid": st.none() | st.integers(1, 999),
            "model": hostile_text,
            "prompt_version": hostile_text,
            "findings": st.lists(st.tuples(hostile_text, hostile_text), max_size=3),
        }
    )
    run = st.fixed_dictionaries(
        {"dataset": hostile_text, "model": hostile_text, "prompt_version": hostile_text}
    )
    return {
        "reviews": draw(st.lists(review, min_size=1, max_size=3)),
        "eval_runs": draw(st.lists(run, max_size=2)),
        "of_one_project": draw(st.booleans()),
    }


def _eval_run(store: Store, **text: str) -> None:
    figures = dict.fromkeys(("precision", "recall", "f1", "mean_precision"), 1.0)
    figures |= {"mean_recall": 1.0, "mean_f1": 1.0}
    counts = {"tolerance": 3, "items": 1, "tp": 1, "fp": 0, "fn": 0}
    at = MONDAY + timedelta(hours=1)
    store.record_eval_run(**text, **counts, **figures, results={}, started_at=at, finished_at=at)


def _store_rows(store: Store, clock: FakeClock, rows: dict[str, Any]) -> str | None:
    """Write ``rows`` through the Store; the project to report on, if any. (A review's status
    is one of the schema's CHECK constraint: only the document-level test makes it hostile.)"""
    dialect = store.engine.dialect.name

    def fit(text: str, column: Any) -> str:
        return storable(text, dialect, column.type.length)

    for n, row in enumerate(rows["reviews"]):
        started = MONDAY + timedelta(hours=n + 2)
        url = row["gitlab_url"]
        _review(
            store,
            clock,
            started,
            seconds=10.0 + n,
            iid=row["iid"],
            ttfts=(300.0,),
            findings=tuple(
                {
                    "fingerprint": f"{n}-{i}",
                    "category": fit(category, FindingRow.category),
                    "severity": fit(severity, FindingRow.severity),
                }
                for i, (category, severity) in enumerate(row["findings"])
            ),
            model=fit(row["model"], ReviewRow.model),
            prompt_version=fit(row["prompt_version"], ReviewRow.prompt_version),
            project=fit(row["project"], ReviewRow.project),
            gitlab_url=None if url is None else fit(url, ReviewRow.gitlab_url),
        )
    for run in rows["eval_runs"]:
        _eval_run(
            store,
            dataset=fit(run["dataset"], EvalRunRow.dataset),
            model=fit(run["model"], EvalRunRow.model),
            prompt_version=fit(run["prompt_version"], EvalRunRow.prompt_version),
        )
    first = rows["reviews"][0]["project"]
    return fit(first, ReviewRow.project) if rows["of_one_project"] else None


def _wipe(store: Store) -> None:
    with store.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())


_BENIGN_ROWS: dict[str, Any] = {
    "reviews": [
        {
            "project": "group/app",
            "gitlab_url": GITLAB,
            "iid": 1,
            "model": "qwen",
            "prompt_version": "v1",
            "status": "succeeded",
            "findings": [("bug", "major"), ("security", "minor")],
        },
        {
            "project": "local",
            "gitlab_url": None,
            "iid": None,
            "model": "qwen",
            "prompt_version": "v2",
            "status": "failed",
            "findings": [],
        },
    ],
    "eval_runs": [{"dataset": "set", "model": "qwen", "prompt_version": "v1"}],
    "of_one_project": False,
}


def _reference_vocabulary(store: Store, clock: FakeClock) -> set[tuple[str, str | None]]:
    """Elements and attributes of benign reports with every part: links, reviews without a
    GitLab URL, eval runs, the charts, and an empty window."""
    _store_rows(store, clock, _BENIGN_ROWS)
    full = _Page(report_html(build_report(store, WEEK, now=NOW))).vocabulary()
    empty = _Page(report_html(build_report(store, NEXT_WEEK, now=NOW))).vocabulary()
    _wipe(store)
    return full | empty


def test_hostile_text_in_every_column_the_report_shows_stays_text(
    clocked: tuple[Store, FakeClock],
) -> None:
    """Project paths, GitLab URLs, models, prompt versions, statuses, categories, severities,
    eval datasets: hostile strings written through the Store, the report built from the
    database; report.html parsed (every element and attribute is one a benign report has,
    links are http(s), the data shows as text) and report.md parsed (no link but to an
    http(s) MR, no image or HTML, no mention, no quick action, no split cell)."""
    store, clock = clocked
    reference = _reference_vocabulary(store, clock)

    @settings(
        max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(rows=_hostile_rows())
    def check(rows: dict[str, Any]) -> None:
        try:
            project = _store_rows(store, clock, rows)
            report = build_report(store, WEEK, now=NOW, project=project)
            assert report["totals"]["reviews"] >= 1
            _assert_html_is_inert(report_html(report), report, reference)
            _assert_markdown_is_inert(report_markdown(report), report)
        finally:
            _wipe(store)

    check()


def _with_hostile_text(report: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """A copy of ``report`` whose every text from the database is hostile (lone surrogates,
    NUL and any status too, which no database returns)."""
    hostile = copy.deepcopy(report)
    hostile["window"]["project"] = draw(st.none() | hostile_text)
    for review in hostile["slowest_reviews"]:
        review |= {name: draw(hostile_text) for name in ("project", "model", "status")}
        review["url"] = draw(st.none() | hostile_url)
    for dimension in ("category", "prompt_version", "model", "severity"):
        for row in hostile[f"by_{dimension}"]:
            row[dimension] = draw(hostile_text)
    for run in hostile["eval_runs"]:
        run |= {name: draw(hostile_text) for name in ("dataset", "model", "prompt_version")}
    return hostile


def test_renderers_keep_any_text_inert_even_what_no_database_returns(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The renderers are pure: whatever strings a report document holds (a lone surrogate, NUL,
    any status, a URL that skipped mr_url), the HTML and Markdown stay inert and can be
    written. (One backend is enough to build the document the strings go into.)"""
    url = migrated_sqlite_url(tmp_path_factory, tmp_path / "report.db")
    clock = FakeClock(MONDAY)
    store = Store.from_url(url, clock=clock)
    try:
        reference = _reference_vocabulary(store, clock)
        _store_rows(store, clock, _BENIGN_ROWS)
        report = build_report(store, WEEK, now=NOW)
    finally:
        store.close()

    @settings(
        max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        hostile = _with_hostile_text(report, data.draw)
        # what the renderers would link to: the document's URL only where it is http(s)
        linked = copy.deepcopy(hostile)
        for review in linked["slowest_reviews"]:
            review["url"] = web_url(printable(review["url"]))
        html, markdown = report_html(hostile), report_markdown(hostile)
        _assert_html_is_inert(html, linked, reference)
        _assert_markdown_is_inert(markdown, linked)
        html.encode("utf-8"), markdown.encode("utf-8")  # writable

    check()


SCRIPT = "<script>document.title='pwned'</script>"


def test_a_review_without_a_gitlab_url_shows_its_project_as_text(
    clocked: tuple[Store, FakeClock],
) -> None:
    """Every review stored before the gitlab_url column existed has none: its name was
    written into the page unescaped."""
    store, clock = clocked
    _review(store, clock, MONDAY + timedelta(hours=1), project=SCRIPT, gitlab_url=None)
    report = build_report(store, WEEK, now=NOW)
    page = _Page(report_html(report))
    assert "script" not in {tag for tag, _ in page.elements}
    assert f"{SCRIPT}!1" in page.cells


def test_a_javascript_gitlab_url_makes_no_link(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    hour = MONDAY + timedelta(hours=1)
    _review(store, clock, hour, seconds=20, gitlab_url="javascript:alert(1)//")
    _review(store, clock, hour, seconds=10, iid=2, gitlab_url=" JavaScript:x//")
    _review(store, clock, hour, seconds=30, iid=3)  # https: the one link
    report = build_report(store, WEEK, now=NOW)
    assert [review["url"] for review in report["slowest_reviews"]] == [
        f"{GITLAB}/{PROJECT}/-/merge_requests/3",
        None,
        None,
    ]
    assert _Page(report_html(report)).links() == [f"{GITLAB}/{PROJECT}/-/merge_requests/3"]
    markdown = report_markdown(report)
    assert "javascript" not in markdown.lower()
    assert f"| {PROJECT}!1 |" in markdown


def test_markdown_cells_from_the_database_make_no_link(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    _review(store, clock, MONDAY + timedelta(hours=1), model="[x](javascript:alert(1))")
    markdown = report_markdown(build_report(store, WEEK, now=NOW))
    tokens = _markdown_parser().parse(markdown)
    children = [child for token in tokens for child in token.children or []]
    hrefs = [child.attrs["href"] for child in children if child.type == "link_open"]
    assert hrefs == [f"{GITLAB}/{PROJECT}/-/merge_requests/1"]
    assert "| \\[x\\](javascript:alert(1)) |" in markdown


def test_report_html_carries_a_content_security_policy_that_runs_nothing(
    clocked: tuple[Store, FakeClock],
) -> None:
    page = _Page(report_html(_sample_report(*clocked)))
    tags = [tag for tag, _ in page.elements]
    # right after the charset, before anything the policy must govern
    assert tags[:4] == ["html", "head", "meta", "meta"]
    policy = dict(page.elements[3][1])
    assert policy["http-equiv"] == "Content-Security-Policy"
    directives = {
        name: set(values)
        for name, *values in (part.split() for part in str(policy["content"]).split(";"))
    }
    assert directives == {
        "default-src": {"'none'"},  # so no script-src: no script of any kind runs
        "style-src": {"'unsafe-inline'"},
        "img-src": {"data:"},
        "base-uri": {"'none'"},
        "form-action": {"'none'"},
    }


def test_a_category_with_dollar_signs_is_text_not_a_formula(
    clocked: tuple[Store, FakeClock],
) -> None:
    """matplotlib reads "$...$" as mathtext: "$\\frac$" stopped the report with a ParseError."""
    store, clock = clocked
    category = "cost $\\frac$ and $x$"
    _review(store, clock, MONDAY + timedelta(hours=1), findings=({"category": category},))
    page = _Page(report_html(build_report(store, WEEK, now=NOW)))
    assert category in page.cells


def test_a_lone_surrogate_or_nul_is_written_as_a_replacement_character(
    clocked: tuple[Store, FakeClock], tmp_path: Path
) -> None:
    """A document whose text UTF-8 cannot hold (a lone surrogate, as a command-line argument
    that was not UTF-8 gives) is still written, in every format."""
    report = _sample_report(*clocked)
    report["window"]["project"] = "group/\udcff\x00app"
    written = write_report(report, tmp_path, ["json", "md", "html"])
    assert [path.name for path in written] == ["report.json", "report.md", "report.html"]
    assert json.loads(written[0].read_text(encoding="utf-8"))["window"]["project"] == (
        "group/\ufffd\ufffdapp"
    )
    for path in written[1:]:
        assert "group/\ufffd\ufffdapp" in path.read_text(encoding="utf-8")
