"""The store's read-only queries for the listener: note owners, `/metrics` figures, the ping.

Every test runs on SQLite and, when REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL (see
tests/store_fixtures.py). Review durations take a different SQL path on each backend
(julianday() on SQLite, the interval's epoch on PostgreSQL): the seeded durations check both.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.exc import SQLAlchemyError

from reviewbot.store import HistogramCounts, MetricBuckets, NoteOwner, Store, TokenTotals
from tests.builders import finding_row
from tests.store_fixtures import migrated_store, store_url  # noqa: F401

PROJECT = "group/app"
START = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
NOTE_ID = 3_000_000_001  # GitLab note ids exceed 32 bits
SUMMARY_NOTE_ID = 3_000_000_002
# Durations (seconds) of the seeded finished reviews; none sits on a bucket bound, so the
# tiny rounding of julianday() arithmetic cannot move one across.
REVIEW_DURATIONS_S = (3.25, 42.5, 4000.0)
SMALL_BUCKETS = MetricBuckets(
    review_duration_s=(5.0, 60.0, 3600.0), llm_ttft_s=(0.5, 1.0), llm_latency_s=(2.0, 10.0)
)
DURATION_TOLERANCE_S = 1e-3


class SteppingClock:
    """Returns the times it is given, in order (start and finish of each review)."""

    def __init__(self, times: list[datetime]) -> None:
        self._times = iter(times)

    def __call__(self) -> datetime:
        return next(self._times)


def _start_review(store: Store, **overrides: Any) -> int:
    args = {
        "project": PROJECT,
        "mr_iid": 42,
        "head_sha": "a" * 40,
        "base_sha": None,
        "start_sha": None,
        "trigger": "webhook",
        "model": "qwen",
        "prompt_version": "1",
    }
    return store.start_review(**{**args, **overrides})


def _call(**values: Any) -> dict[str, Any]:
    return {"chunk_index": 0, "mode": "tool_calls", "outcome": "ok", "started_at": START, **values}


# -- note owners ----------------------------------------------------------------------------


@pytest.mark.slow
def test_note_owner_is_the_newest_finding_with_that_note(migrated_store: Store) -> None:  # noqa: F811
    first = _start_review(migrated_store)
    migrated_store.record_findings(first, [finding_row(note_id=NOTE_ID)])
    rerun = _start_review(migrated_store, mr_iid=43)
    (newest,) = migrated_store.record_findings(rerun, [finding_row(note_id=NOTE_ID)])
    assert migrated_store.note_owner(NOTE_ID) == NoteOwner(finding_id=newest, mr_iid=43)


def test_note_owner_of_a_summary_note_has_no_finding(migrated_store: Store) -> None:  # noqa: F811
    review_id = _start_review(migrated_store, mr_iid=9)
    migrated_store.finish_review(review_id, status="succeeded", summary_note_id=SUMMARY_NOTE_ID)
    assert migrated_store.note_owner(SUMMARY_NOTE_ID) == NoteOwner(finding_id=None, mr_iid=9)


def test_note_owner_of_someone_elses_note_is_none(migrated_store: Store) -> None:  # noqa: F811
    review_id = _start_review(migrated_store)
    migrated_store.record_findings(review_id, [finding_row(note_id=NOTE_ID)])
    assert migrated_store.note_owner(NOTE_ID + 100) is None


# -- metrics figures ------------------------------------------------------------------------


def test_snapshot_of_an_empty_database_is_all_zero(migrated_store: Store) -> None:  # noqa: F811
    snapshot = migrated_store.metrics_snapshot(SMALL_BUCKETS)
    assert snapshot.review_duration_s == HistogramCounts((5.0, 60.0, 3600.0), (0, 0, 0), 0, 0.0)
    assert snapshot.llm_ttft_s == HistogramCounts((0.5, 1.0), (0, 0), 0, 0.0)
    assert snapshot.tokens == TokenTotals(prompt=0, completion=0, cached=0)
    assert (snapshot.findings_by_severity, snapshot.reviews_by_status) == ({}, {})


def test_review_durations_are_exact_on_each_backend(migrated_store: Store) -> None:  # noqa: F811
    times = []
    for duration in REVIEW_DURATIONS_S:
        times += [START, START + timedelta(seconds=duration)]
    store = Store(migrated_store.engine, clock=SteppingClock([*times, START]))
    for _ in REVIEW_DURATIONS_S:
        store.finish_review(_start_review(store), status="succeeded")
    _start_review(store)  # still running: no duration yet
    durations = store.metrics_snapshot(SMALL_BUCKETS).review_duration_s
    assert durations.bounds == (5.0, 60.0, 3600.0)
    assert durations.cumulative_counts == (1, 2, 2)
    assert durations.count == len(REVIEW_DURATIONS_S)
    assert durations.total == pytest.approx(sum(REVIEW_DURATIONS_S), abs=DURATION_TOLERANCE_S)


def test_snapshot_counts_calls_tokens_findings_and_statuses(migrated_store: Store) -> None:  # noqa: F811
    review_id = _start_review(migrated_store)
    migrated_store.record_llm_calls(
        review_id,
        [
            _call(
                prompt_tokens=1000,
                completion_tokens=200,
                cached_tokens=600,
                ttft_ms=500.0,
                latency_ms=1500.0,
            ),
            _call(
                chunk_index=1,
                prompt_tokens=500,
                completion_tokens=50,
                ttft_ms=750.0,
                latency_ms=9000.0,
            ),
            _call(
                chunk_index=2, prompt_tokens=7, outcome="error", ttft_ms=None, latency_ms=60_000.0
            ),
        ],
    )
    migrated_store.record_findings(
        review_id,
        [
            finding_row(severity="major"),
            finding_row(severity="major"),
            finding_row(severity="info"),
        ],
    )
    migrated_store.finish_review(review_id, status="failed")
    _start_review(migrated_store)
    snapshot = migrated_store.metrics_snapshot(SMALL_BUCKETS)
    # 0.5 s sits on the first bound: buckets are "less than or equal" (Prometheus' le)
    assert snapshot.llm_ttft_s == HistogramCounts((0.5, 1.0), (1, 2), 2, 1.25)
    assert snapshot.llm_latency_s == HistogramCounts((2.0, 10.0), (1, 2), 3, 70.5)
    assert snapshot.tokens == TokenTotals(prompt=1507, completion=250, cached=600)
    assert snapshot.findings_by_severity == {"info": 1, "major": 2}
    assert snapshot.reviews_by_status == {"failed": 1, "running": 1}


def test_default_buckets_are_the_documented_ones(migrated_store: Store) -> None:  # noqa: F811
    snapshot = migrated_store.metrics_snapshot()
    assert snapshot.review_duration_s.bounds[0] == 5.0
    assert snapshot.review_duration_s.bounds[-1] == 3600.0
    assert snapshot.llm_ttft_s.bounds == MetricBuckets().llm_ttft_s


def test_histogram_counts_reject_decreasing_counts() -> None:
    with pytest.raises(ValueError, match="decrease"):
        HistogramCounts(bounds=(1.0, 2.0), cumulative_counts=(2, 1), count=2, total=1.0)
    with pytest.raises(ValueError, match="ascending"):
        HistogramCounts(bounds=(2.0, 1.0), cumulative_counts=(0, 0), count=0, total=0.0)
    with pytest.raises(ValueError, match="one cumulative count per bound"):
        HistogramCounts(bounds=(1.0,), cumulative_counts=(), count=0, total=0.0)


def test_histogram_counts_from_null_aggregates() -> None:
    empty = HistogramCounts.from_aggregates((1, 2), (None, None), None, None)
    assert empty == HistogramCounts((1.0, 2.0), (0, 0), 0, 0.0)


# -- ping -----------------------------------------------------------------------------------


def test_ping_succeeds_on_a_live_database(migrated_store: Store) -> None:  # noqa: F811
    assert migrated_store.ping() is None


def test_ping_raises_when_the_database_is_gone() -> None:
    store = Store.from_url("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    try:
        with pytest.raises(SQLAlchemyError):
            store.ping()
    finally:
        store.close()
