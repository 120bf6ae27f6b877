"""The report benchmark's generator and bulk loader, end to end at a tiny scale (SQLite)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reviewbot.report.document import build_report
from reviewbot.store import Store
from reviewbot.window import Window
from tests.bench.bench_report import CALLS_PER_REVIEW, FINDINGS_PER_REVIEW, Generator, load
from tests.store_fixtures import migrated_sqlite_url

pytestmark = pytest.mark.slow  # measured: see docs/development.md

SMOKE_SCALE = 0.002  # 100 reviews, 2,000 calls, 1,000 findings, 200 feedback events
NOW = datetime(2026, 3, 18, tzinfo=UTC)


def test_a_tiny_year_loads_and_reports(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = migrated_sqlite_url(tmp_path_factory, tmp_path / "bench.db")
    counts = load(url, Generator(SMOKE_SCALE, seed=3, end=NOW), NOW)
    assert counts["reviews"] == 100
    assert counts["llm_calls"] == 100 * CALLS_PER_REVIEW
    assert counts["findings"] == 100 * FINDINGS_PER_REVIEW
    assert counts["feedback"] == 200
    store = Store.from_url(url)
    try:
        report = build_report(store, Window(NOW - timedelta(days=366), NOW), now=NOW)
    finally:
        store.close()
    assert report["totals"]["reviews"] == 100
    assert report["totals"]["model_calls"] == 100 * CALLS_PER_REVIEW
    assert report["latency"]["ttft_ms"]["count"] == 100 * CALLS_PER_REVIEW
    assert 0 < report["totals"]["findings_posted"] < report["totals"]["findings"]
    assert report["feedback"]["thumbs_up"] > 0
