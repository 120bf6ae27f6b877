"""The weekly report's "By source" group (reviewbot report, docs/analyzers.md): findings,
votes, acceptance and addressed rate per source (model, analyzer, both), from stored findings
of each source, in the JSON, the Markdown and the HTML.

Store tests run on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from reviewbot.report.document import build_report, report_markdown
from reviewbot.report.html import report_html
from reviewbot.store import MergeRequestKey, Store
from reviewbot.window import Window
from tests.builders import MONDAY, FakeClock, clocked, finding_row  # noqa: F401
from tests.store_fixtures import migrated_sqlite_url, migrated_store, store_url  # noqa: F401

pytestmark = pytest.mark.slow  # a migrated store per test

PROJECT = "group/app"
GITLAB = "https://gitlab.example.com"
WEEK = Window(MONDAY, MONDAY + timedelta(days=7))
NOW = MONDAY + timedelta(days=8)


def _review(
    store: Store, clock: FakeClock, at: datetime, head: str, findings: list[dict]
) -> list[int]:
    clock.now = at
    review_id = store.start_review(
        project=PROJECT,
        mr_iid=1,
        head_sha=head * 40,
        base_sha=None,
        start_sha=None,
        trigger="webhook",
        model="qwen",
        prompt_version="v1",
        key=MergeRequestKey(GITLAB, 7, 1),
    )
    ids = store.record_findings(review_id, [finding_row(**f) for f in findings])
    clock.now = at + timedelta(seconds=10)
    store.finish_review(review_id, status="succeeded")
    return ids


def _vote(store: Store, finding_id: int, user: str, value: str, key: str) -> None:
    store.record_feedback(
        finding_id=finding_id,
        project=PROJECT,
        kind="award",
        value=value,
        username=user,
        event_key=key,
        created_at=MONDAY + timedelta(hours=3),
    )


def _analyzer(fingerprint: str, **extra: Any) -> dict[str, Any]:
    return {
        "fingerprint": fingerprint,
        "source": "analyzer",
        "analyzer_tool": "ruff",
        "analyzer_rule": "F401",
        **extra,
    }


def test_the_by_source_group_splits_findings_votes_and_rates_by_source(
    clocked: tuple[Store, FakeClock],  # noqa: F811
) -> None:
    store, clock = clocked
    m1, m2, m3, a1, a2, b1 = _review(
        store,
        clock,
        MONDAY + timedelta(hours=1),
        "a",
        [
            {"fingerprint": "m1"},
            {"fingerprint": "m2"},
            {"fingerprint": "m3", "state": "summary"},
            _analyzer("a1"),
            _analyzer("a2", analyzer_rule="E711"),
            _analyzer("b1", source="both", analyzer_tool="semgrep", analyzer_rule="eval"),
        ],
    )
    _vote(store, m1, "alice", "thumbsup", "v1")
    _vote(store, m2, "bob", "thumbsdown", "v2")
    _vote(store, a1, "alice", "thumbsup", "v3")
    _vote(store, a2, "bob", "thumbsup", "v4")
    _vote(store, b1, "carol", "thumbsup", "v5")
    store.record_feedback(
        finding_id=a1, project=PROJECT, kind="addressed", value="addressed", event_key="ad1"
    )
    # a later version of the MR (the addressed rate needs one); a duplicate counts once
    _review(store, clock, MONDAY + timedelta(hours=4), "b", [_analyzer("a2", state="duplicate")])

    report = build_report(store, WEEK, now=NOW)

    rows = {row["source"]: row for row in report["by_source"]}
    assert set(rows) == {"model", "analyzer", "both"}
    figures = {
        source: (row["findings"], row["findings_posted"], row["thumbs_up"], row["thumbs_down"])
        for source, row in rows.items()
    }
    assert figures == {"model": (3, 2, 1, 1), "analyzer": (2, 2, 2, 0), "both": (1, 1, 1, 0)}
    assert rows["model"]["acceptance"] == pytest.approx(1 / 2)
    assert rows["analyzer"]["acceptance"] == rows["both"]["acceptance"] == 1.0
    assert (rows["analyzer"]["addressed"], rows["analyzer"]["addressed_rate"]) == (1, 0.5)
    assert [row["source"] for row in report["by_source"]] == ["model", "analyzer", "both"]
    markdown = report_markdown(report)
    table = markdown.split("## By source", 1)[1].split("\n## ", 1)[0]
    assert "| model | 3 | 2 | 1 | 1 | 50% |" in table
    assert "| analyzer | 2 | 2 | 2 | 0 | 100% | 1 | 50% |" in table
    assert "| both | 1 | 1 | 1 | 0 | 100% |" in table
    assert "By source" in report_html(report)
    assert m3 and b1  # every source's row counted its stored findings
