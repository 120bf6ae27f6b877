"""The report's "Second look" part (issue 37, docs/effort.md): the window's second looks while
idle (reviews with trigger ``idle``), the findings they added and how those were received, read
from stored rows on SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

import re
from datetime import timedelta

from reviewbot.report.document import build_report, report_markdown
from reviewbot.report.html import report_html
from reviewbot.store import Store
from reviewbot.store.store import MergeRequestKey
from reviewbot.window import Window
from tests.builders import MONDAY, FakeClock, finding_row

PROJECT = "group/app"
GITLAB = "https://gitlab.example.com"
WEEK = Window(MONDAY, MONDAY + timedelta(days=7))
NOW = MONDAY + timedelta(days=8)
CALL_MS = 1500.0


def _review(store: Store, clock: FakeClock, trigger: str, hours: int, fingerprints: list[str]):
    clock.now = MONDAY + timedelta(hours=hours)
    review_id = store.start_review(
        project=PROJECT,
        mr_iid=1,
        head_sha="a" * 40,
        base_sha=None,
        start_sha=None,
        trigger=trigger,
        model="qwen",
        prompt_version="v1",
        key=MergeRequestKey(GITLAB, 7, 1),
    )
    call = {"chunk_index": 0, "mode": "tool_calls", "outcome": "ok", "started_at": clock.now}
    store.record_llm_calls(review_id, [{**call, "latency_ms": CALL_MS}])
    ids = store.record_findings(review_id, [finding_row(fingerprint=f) for f in fingerprints])
    store.finish_review(review_id, status="succeeded")
    return ids


def _feedback(store: Store, finding_id: int, kind: str, value: str, key: str) -> None:
    store.record_feedback(
        finding_id=finding_id,
        project=PROJECT,
        kind=kind,
        value=value,
        username="bob",
        event_key=key,
        created_at=NOW,
    )


def test_the_second_look_part_counts_what_idle_reviews_added_and_its_reception(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    first = _review(store, clock, "webhook", 1, ["a", "b"])
    added = _review(store, clock, "idle", 2, ["c", "d"])
    _feedback(store, first[0], "award", "thumbsdown", "k0")  # not the second look's
    _feedback(store, added[0], "award", "thumbsup", "k1")
    _feedback(store, added[1], "award", "thumbsdown", "k2")
    _feedback(store, added[0], "addressed", "addressed", "k3")
    report = build_report(store, WEEK, now=NOW)
    assert report["second_look"] == {
        "reviews": 1,
        "mrs": 1,
        "model_seconds": CALL_MS / 1000,
        "findings_added": 2,
        "thumbs_up": 1,
        "thumbs_down": 1,
        "addressed": 1,
        "resolved_by_human": 0,
    }
    markdown = report_markdown(report)
    part = markdown.split("## Second look")[1]
    assert "1 second look(s) at 1 MR(s) while the pool was idle, 1.5 s of model time." in part
    assert "| 2 | 1 | 1 | 1 | 0 |" in part
    html = report_html(report).split("Second looks while idle</h2>")[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert cells == ["1", "1", "1.5 s", "2", "1", "1", "1"]


def test_no_second_look_no_part(clocked: tuple[Store, FakeClock]) -> None:
    store, clock = clocked
    _review(store, clock, "webhook", 1, ["a"])
    report = build_report(store, WEEK, now=NOW)
    assert report["second_look"]["reviews"] == 0
    assert "## Second look" not in report_markdown(report)
    assert "Second looks while idle" not in report_html(report)
