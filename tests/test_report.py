"""`reviewbot report`: figures from the store (window bounds, percentiles, votes), the JSON,
Markdown and HTML documents, the report issue on GitLab, and the command's bad inputs.

Store tests run on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from reviewbot.commands import main
from reviewbot.findings import Severity
from reviewbot.gitlab import GitLabClient, GitLabSettings
from reviewbot.report import build_report, post_report_issue, report_markdown
from reviewbot.report_html import (
    CHART_IDS,
    SLO_LINE_ID,
    findings_series_id,
    report_html,
    ttft_line_id,
)
from reviewbot.store import MergeRequestKey, Store
from reviewbot.window import Window
from tests.fakes.gitlab_server import FakeGitLab
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

PROJECT = "group/app"
PROJECT_ID = 7
OTHER_PROJECT = "group/lib"
OTHER_PROJECT_ID = 8
GITLAB = "https://gitlab.example.com"
MONDAY = datetime(2026, 3, 9, tzinfo=UTC)  # ISO week 2026-W11
WEEK = Window(MONDAY, MONDAY + timedelta(days=7))
NEXT_WEEK = Window(WEEK.until, WEEK.until + timedelta(days=7))
LAST_INSTANT = MONDAY + timedelta(days=7, microseconds=-1)  # Sunday 23:59:59.999999
NOW = MONDAY + timedelta(days=8)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _review(
    store: Store,
    clock: Clock,
    started: datetime,
    *,
    seconds: float = 10.0,
    iid: int = 1,
    head: str = "a",
    ttfts: tuple[float | None, ...] = (),
    findings: tuple[dict[str, Any], ...] = (),
    model: str = "qwen",
    prompt_version: str = "v1",
    project: str = PROJECT,
    project_id: int = PROJECT_ID,
) -> list[int]:
    clock.now = started
    key = MergeRequestKey(GITLAB, project_id, iid)
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
    ids = store.record_findings(review_id, [_finding(**f) for f in findings])
    clock.now = started + timedelta(seconds=seconds)
    store.finish_review(review_id, status="succeeded")
    return ids


def _finding(**overrides: Any) -> dict[str, Any]:
    base = {
        "fingerprint": "fp",
        "path": "app.py",
        "side": "new",
        "line": 3,
        "severity": "major",
        "category": "bug",
        "title": "t",
        "body": "b",
        "anchor": "exact",
        "state": "posted",
        "note_id": None,
    }
    return {**base, **overrides}


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


@pytest.fixture
def clocked(migrated_store: Store) -> tuple[Store, Clock]:  # noqa: F811
    clock = Clock(MONDAY)
    return Store(migrated_store.engine, clock=clock), clock


def test_window_bounds_are_exact(clocked: tuple[Store, Clock]) -> None:
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
    clocked: tuple[Store, Clock],
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


def test_votes_count_once_and_revoked_votes_not_at_all(clocked: tuple[Store, Clock]) -> None:
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
    clocked: tuple[Store, Clock],
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
    clocked: tuple[Store, Clock], tmp_path: Path
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


def _sample_report(store: Store, clock: Clock) -> dict[str, Any]:
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
    clocked: tuple[Store, Clock],
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
    clocked: tuple[Store, Clock],
) -> None:
    html = report_html(_sample_report(*clocked))
    assert html.count("<svg") == 3
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
    clocked: tuple[Store, Clock], target_ms: float
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


def test_findings_chart_has_one_series_per_severity_found(clocked: tuple[Store, Clock]) -> None:
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


def test_report_issue_is_created_once_then_edited(clocked: tuple[Store, Clock]) -> None:
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


def test_report_of_one_project_leaves_the_others_out(
    clocked: tuple[Store, Clock],
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
