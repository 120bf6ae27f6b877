"""Tests for reviewbot.store: migrations, round-trips, MR leases and feedback dedupe.

Every test taking `store_url` / `migrated_store` runs on SQLite and, when
REVIEWBOT_TEST_POSTGRES_URL is set, on PostgreSQL too (see tests/store_fixtures.py).
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError, StatementError

from reviewbot.config import Settings
from reviewbot.diff import Side
from reviewbot.findings import AnchorKind, Category, FindingState, Severity
from reviewbot.model import CallRecord
from reviewbot.states import ReviewStatus
from reviewbot.store import (
    MergeRequestKey,
    RecordNotFound,
    Store,
    current_revision,
    ensure_schema,
    head_revision,
    normalize_database_url,
    redact_url,
    upgrade,
)
from reviewbot.store.models import Base
from reviewbot.store.records import ReviewEnding
from reviewbot.store.store import FINDING_FIELDS, LLM_CALL_FIELDS
from reviewbot.stored_findings import StoredFinding
from tests.builders import CLOCK_START, FakeClock, finding_row
from tests.store_fixtures import blank_store_url, migrated_store, store_url  # noqa: F401

PROJECT = "group/app"
MR_IID = 42
GITLAB = "https://gitlab.example.com"
PROJECT_ID = 7
KEY = MergeRequestKey(GITLAB, PROJECT_ID, MR_IID)
LOCK = str(KEY)
OTHER_LOCK = str(MergeRequestKey(GITLAB, PROJECT_ID, MR_IID + 1))
LEASE_TTL_S = 30
CONTENDERS = 4
START = CLOCK_START


def _review_args(**overrides: Any) -> dict[str, Any]:
    args = {
        "project": PROJECT,
        "mr_iid": MR_IID,
        "head_sha": "a" * 40,
        "base_sha": "b" * 40,
        "start_sha": "c" * 40,
        "trigger": "webhook",
        "model": "Qwen/Qwen3.5-35B-A3B",
        "prompt_version": "2026-01",
        "key": KEY,
    }
    args.update(overrides)
    if "mr_iid" in overrides and "key" not in overrides:
        args["key"] = MergeRequestKey(GITLAB, PROJECT_ID, overrides["mr_iid"])
    return args


# A finding over two lines with real text, so that a round trip compares every field it has.
ROUND_TRIP_FINDING = {
    "fingerprint": "fp-1",
    "path": "src/app.py",
    "line": 10,
    "end_line": 12,
    "title": "Off by one",
    "body": "The loop skips the last item.",
}


def _finding(**overrides: Any) -> dict[str, Any]:
    return finding_row(**{**ROUND_TRIP_FINDING, **overrides})


@pytest.fixture
def clocked_store(migrated_store: Store, clock: FakeClock) -> Store:  # noqa: F811
    return Store(migrated_store.engine, clock=clock)


# -- migrations ---------------------------------------------------------------------------


@pytest.mark.slow
def test_blank_database_has_no_revision(blank_store_url: str) -> None:  # noqa: F811
    assert current_revision(blank_store_url) is None


@pytest.mark.slow
def test_migrated_schema_matches_models(blank_store_url: str) -> None:  # noqa: F811
    upgrade(blank_store_url)
    engine = Store.from_url(blank_store_url).engine
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


@pytest.mark.slow
def test_upgrade_twice_keeps_schema_and_data(blank_store_url: str) -> None:  # noqa: F811
    upgrade(blank_store_url)
    store = Store.from_url(blank_store_url)
    try:
        review_id = store.start_review(**_review_args())
        upgrade(blank_store_url)
        ensure_schema(blank_store_url)
        assert current_revision(blank_store_url) == head_revision()
        assert store.review(review_id)["project"] == PROJECT
    finally:
        store.close()


@pytest.mark.slow
def test_ensure_schema_migrates_a_blank_database(blank_store_url: str) -> None:  # noqa: F811
    ensure_schema(blank_store_url)
    assert current_revision(blank_store_url) == head_revision()
    engine = Store.from_url(blank_store_url).engine
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert set(Base.metadata.tables) <= tables


@pytest.mark.slow
def test_concurrent_upgrades_do_not_collide(blank_store_url: str) -> None:  # noqa: F811
    errors: list[BaseException] = []
    barrier = threading.Barrier(CONTENDERS)

    def migrate() -> None:
        barrier.wait()
        try:
            upgrade(blank_store_url)
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=migrate) for _ in range(CONTENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert current_revision(blank_store_url) == head_revision()


# -- reviews ------------------------------------------------------------------------------


@pytest.mark.slow
def test_review_round_trip(clocked_store: Store, clock: FakeClock) -> None:
    review_id = clocked_store.start_review(**_review_args())
    started = clocked_store.review(review_id)
    assert started["status"] == "running"
    assert started["started_at"] == clock.now
    assert started["finished_at"] is None

    clock.advance(90)
    skipped = [{"path": "package-lock.json", "reason": "generated"}]
    coverage = {
        "files_total": 5,
        "files_reviewed": 4,
        "changed_lines_total": 120,
        "changed_lines_covered": 100,
        "skipped": skipped,
    }
    clocked_store.finish_review(
        review_id,
        status="succeeded",
        coverage=coverage,
        chunks=3,
        prompt_tokens=9000,
        completion_tokens=700,
        cached_tokens=4000,
        summary_note_id=2_500_000_000,
    )

    finished = clocked_store.review(review_id)
    assert finished["status"] == "succeeded"
    assert finished["finished_at"] == clock.now
    assert finished["finished_at"].tzinfo is not None
    assert {key: finished[key] for key in coverage} == coverage
    assert finished["summary_note_id"] == 2_500_000_000  # GitLab note ids exceed 32 bits
    assert (finished["chunks"], finished["cached_tokens"]) == (3, 4000)


def test_any_text_can_be_stored_nul_included(migrated_store: Store) -> None:  # noqa: F811
    """PostgreSQL refuses NUL in text: it is stored as U+FFFD on every backend, so a write
    never fails on text from a model, GitLab or an error message."""
    review_id = migrated_store.start_review(**_review_args())
    migrated_store.record_findings(review_id, [_finding(title="t\x00x", body="b\x00")])
    migrated_store.finish_review(review_id, status="failed", error="server said \x00")
    (finding,) = migrated_store.findings(review_id)
    assert (finding["title"], finding["body"]) == ("t\ufffdx", "b\ufffd")
    assert migrated_store.review(review_id)["error"] == "server said \ufffd"


def test_local_review_has_no_mr(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args(mr_iid=None, trigger="local"))
    assert migrated_store.review(review_id)["mr_iid"] is None


def test_timestamps_come_back_in_utc(migrated_store: Store) -> None:  # noqa: F811
    paris_winter = timezone(timedelta(hours=1))
    local_time = datetime(2026, 1, 5, 10, 30, tzinfo=paris_winter)
    store = Store(migrated_store.engine, clock=lambda: local_time)
    review_id = store.start_review(**_review_args())
    started_at = store.review(review_id)["started_at"]
    assert started_at == local_time
    assert started_at.utcoffset() == timedelta(0)


def test_naive_datetimes_are_refused(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    naive_call = {
        "chunk_index": 0,
        "mode": "content",
        "outcome": "ok",
        "started_at": datetime(2026, 1, 5, 9, 30),
    }
    with pytest.raises(StatementError) as raised:
        migrated_store.record_llm_calls(review_id, [naive_call])
    assert isinstance(raised.value.orig, ValueError)


def test_invalid_values_are_refused(migrated_store: Store) -> None:  # noqa: F811
    with pytest.raises(ValueError, match="trigger"):
        migrated_store.start_review(**_review_args(trigger="cron"))
    review_id = migrated_store.start_review(**_review_args())
    with pytest.raises(ValueError, match="coverage"):
        migrated_store.finish_review(review_id, status="succeeded", coverage={"files": 1})
    with pytest.raises(ValueError, match="status"):
        migrated_store.finish_review(review_id, status="done")
    with pytest.raises(ValueError, match="running"):
        migrated_store.finish_review(review_id, status="running")


def test_unknown_ids_raise_record_not_found(migrated_store: Store) -> None:  # noqa: F811
    with pytest.raises(RecordNotFound):
        migrated_store.review(999)
    with pytest.raises(RecordNotFound):
        migrated_store.finish_review(999, status="failed")
    with pytest.raises(RecordNotFound):
        migrated_store.update_finding(999, state="resolved")


def test_secrets_never_reach_the_database(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    password, token = "hunter2pass", "glpat-abcdefghijklmnopqrst"
    error = (
        f"connect postgresql://bot:{password}@db/reviews failed; "
        f"PRIVATE-TOKEN: {token}; Authorization: Bearer sk-{password}"
    )
    migrated_store.finish_review(review_id, status="failed", error=error)
    migrated_store.record_llm_calls(
        review_id, [{"chunk_index": 0, "mode": "content", "outcome": "error", "error": error}]
    )
    [call] = migrated_store.llm_calls(review_id)
    for text_stored in (migrated_store.review(review_id)["error"], call["error"]):
        assert password not in text_stored
        assert token not in text_stored
        assert "failed" in text_stored


# -- LLM calls ----------------------------------------------------------------------------


def test_llm_calls_round_trip_in_order(clocked_store: Store, clock: FakeClock) -> None:
    review_id = clocked_store.start_review(**_review_args())
    calls = [
        {
            "chunk_index": 0,
            "mode": "tool_calls",
            "outcome": "split",
            "prompt_tokens": 70000,
            "error": "maximum context length exceeded",
        },
        {
            "chunk_index": 0,
            "mode": "tool_calls",
            "outcome": "ok",
            "prompt_tokens": 30000,
            "completion_tokens": 400,
            "cached_tokens": 2000,
            "ttft_ms": 850.5,
            "latency_ms": 12000.0,
            "slot_wait_ms": 30.0,
            "retries": 1,
            "invalid_tool_calls": 2,
        },
        {"chunk_index": 1, "mode": "content", "outcome": "ok", "started_at": START},
    ]
    clocked_store.record_llm_calls(review_id, calls)
    clocked_store.record_llm_calls(review_id, [])

    stored = clocked_store.llm_calls(review_id)
    assert [call["outcome"] for call in stored] == [call["outcome"] for call in calls]
    for call, row in zip(calls, stored, strict=True):
        assert {key: row[key] for key in call} == call
        assert row["review_id"] == review_id
    assert stored[0]["retries"] == 0
    assert stored[0]["ttft_ms"] is None
    assert stored[0]["started_at"] == clock.now


def test_tool_call_counts_per_chunk(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    base = {"mode": "tool_calls", "started_at": START}
    migrated_store.record_llm_calls(
        review_id,
        [
            {
                **base,
                "chunk_index": 0,
                "outcome": "invalid_calls",
                "tool_calls": 3,
                "invalid_tool_calls": 2,
            },
            {
                **base,
                "chunk_index": 0,
                "outcome": "repair",
                "tool_calls": 2,
                "repaired_tool_calls": 2,
            },
            {**base, "chunk_index": 1, "outcome": "ok", "tool_calls": 4},
            # recorded before calls were counted: no tool_calls, left out of the counts
            {**base, "chunk_index": 2, "outcome": "ok", "invalid_tool_calls": 1},
        ],
    )
    stored = migrated_store.llm_calls(review_id)
    assert [c["tool_calls"] for c in stored] == [3, 2, 4, None]
    assert [c["repaired_tool_calls"] for c in stored] == [0, 2, 0, 0]
    assert migrated_store.tool_calls_by_chunk(review_id) == [
        {
            "chunk_index": 0,
            "tool_calls": 5,
            "invalid_tool_calls": 2,
            "repaired_tool_calls": 2,
            "model_calls": 2,
        },
        {
            "chunk_index": 1,
            "tool_calls": 4,
            "invalid_tool_calls": 0,
            "repaired_tool_calls": 0,
            "model_calls": 1,
        },
        {
            "chunk_index": 2,
            "tool_calls": 0,
            "invalid_tool_calls": 0,
            "repaired_tool_calls": 0,
            "model_calls": 1,
        },
    ]


def test_llm_call_with_unknown_field_is_refused(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    call = {"chunk_index": 0, "mode": "content", "outcome": "ok", "api_key": "x"}
    with pytest.raises(ValueError, match="api_key"):
        migrated_store.record_llm_calls(review_id, [call])
    assert migrated_store.llm_calls(review_id) == []


# -- findings -----------------------------------------------------------------------------


def test_findings_round_trip(clocked_store: Store, clock: FakeClock) -> None:
    review_id = clocked_store.start_review(**_review_args())
    findings = [_finding(fingerprint=f"fp-{index}", line=index + 1) for index in range(3)]
    ids = clocked_store.record_findings(review_id, findings)

    stored = clocked_store.findings(review_id)
    assert [row["id"] for row in stored] == ids
    for finding, row in zip(findings, stored, strict=True):
        assert {key: row[key] for key in finding} == finding
        assert (row["project"], row["mr_iid"]) == (PROJECT, MR_IID)
        assert row["created_at"] == clock.now
    assert clocked_store.record_findings(review_id, []) == []


def test_update_finding(clocked_store: Store, clock: FakeClock) -> None:
    review_id = clocked_store.start_review(**_review_args())
    [finding_id] = clocked_store.record_findings(review_id, [_finding(state="failed")])
    clocked_store.update_finding(finding_id, state="posted", discussion_id="d" * 40, note_id=7)
    clock.advance(3600)
    clocked_store.update_finding(finding_id, state="resolved", resolved_at=clock.now)

    [row] = clocked_store.findings(review_id)
    assert (row["state"], row["discussion_id"], row["note_id"]) == ("resolved", "d" * 40, 7)
    assert row["resolved_at"] == clock.now
    with pytest.raises(ValueError, match="review_id"):
        clocked_store.update_finding(finding_id, review_id=review_id + 1)
    with pytest.raises(ValueError, match="state"):
        clocked_store.update_finding(finding_id, state="vanished")


def test_posted_findings_keeps_latest_published_row_per_fingerprint(
    migrated_store: Store,  # noqa: F811
) -> None:
    first_run = migrated_store.start_review(**_review_args())
    migrated_store.record_findings(
        first_run,
        [
            _finding(fingerprint="kept", discussion_id="d1"),
            _finding(fingerprint="dry", state="dry_run"),
        ],
    )
    second_run = migrated_store.start_review(**_review_args(head_sha="e" * 40))
    [latest_id, _summary_id] = migrated_store.record_findings(
        second_run,
        [
            _finding(fingerprint="kept", discussion_id="d2", state="resolved"),
            _finding(fingerprint="in-summary", state="summary"),
        ],
    )
    other_mr = migrated_store.start_review(**_review_args(mr_iid=MR_IID + 1))
    migrated_store.record_findings(other_mr, [_finding(fingerprint="elsewhere")])

    # the same path and iid on another GitLab instance is another MR
    elsewhere = migrated_store.start_review(
        **_review_args(key=MergeRequestKey("https://other.example.com", PROJECT_ID, MR_IID))
    )
    migrated_store.record_findings(elsewhere, [_finding(fingerprint="other-instance")])

    posted = migrated_store.posted_findings(KEY)
    assert set(posted) == {"kept"}
    assert posted["kept"]["id"] == latest_id
    assert posted["kept"]["discussion_id"] == "d2"


# -- a run, from typed records ---------------------------------------------------------------


def _call(**overrides: Any) -> CallRecord:
    values: dict[str, Any] = {
        "chunk_index": 0,
        "mode": "tool_calls",
        "outcome": "ok",
        "prompt_tokens": 1200,
        "completion_tokens": 80,
        "cached_tokens": None,
        "ttft_ms": 95.5,
        "latency_ms": 900.0,
        "slot_wait_ms": 3.0,
        "retries": 1,
        "invalid_tool_calls": 0,
        "error": None,
        "started_at": START,
        "tool_calls": 2,
        "repaired_tool_calls": 0,
    }
    return CallRecord(**{**values, **overrides})


def _stored(**overrides: Any) -> StoredFinding:
    values: dict[str, Any] = {
        "fingerprint": "fp-1",
        "path": "src/app.py",
        "side": Side.NEW,
        "line": 10,
        "end_line": 12,
        "severity": Severity.MAJOR,
        "category": Category.BUG,
        "title": "Off by one",
        "body": "The loop skips the last item.",
        "suggestion": "for item in items:",
        "anchor": AnchorKind.EXACT,
        "state": FindingState.POSTED,
        "discussion_id": "d" * 40,
        "note_id": 7,
    }
    return StoredFinding(**{**values, **overrides})


def test_the_typed_records_are_the_tables_columns() -> None:
    """A CallRecord is an llm_calls row; a StoredFinding is a findings row but what the
    review gives (its MR) and the store fills in (when)."""
    assert {f.name for f in dataclasses.fields(CallRecord)} == LLM_CALL_FIELDS
    from_review = {"project", "mr_iid", "gitlab_url", "project_id", "created_at", "resolved_at"}
    assert {f.name for f in dataclasses.fields(StoredFinding)} == FINDING_FIELDS - from_review


def test_a_run_is_recorded_from_typed_records(clocked_store: Store, clock: FakeClock) -> None:
    review_id = clocked_store.start_review(**_review_args())
    calls = [_call(), _call(chunk_index=1, cached_tokens=512, error="server said 500")]
    assert clocked_store.record_run(review_id, calls=calls) == []
    assert clocked_store.review(review_id)["status"] == "running"  # no ending yet
    findings = [_stored(), _stored(fingerprint="fp-2", line=None, end_line=None, note_id=None)]
    findings.append(_stored(fingerprint="fp-3", state=FindingState.SUMMARY, suggestion=None))
    clock.advance(60)
    ending = ReviewEnding(
        ReviewStatus.SUCCEEDED,
        coverage={"files_total": 2, "files_reviewed": 2},
        chunks=2,
        prompt_tokens=2400,
        summary_note_id=99,
        model="served-model",
        diff_digest={"version": 1, "settings": "k", "files": []},
    )
    ids = clocked_store.record_run(review_id, findings=findings, ending=ending)

    assert clocked_store.stored_findings(review_id) == findings
    assert [row["id"] for row in clocked_store.findings(review_id)] == ids
    stored_calls = clocked_store.llm_calls(review_id)
    assert [c["cached_tokens"] for c in stored_calls] == [0, 512]  # no figure: 0
    assert {key: stored_calls[1][key] for key in ("ttft_ms", "retries", "tool_calls")} == {
        "ttft_ms": 95.5,
        "retries": 1,
        "tool_calls": 2,
    }
    review = clocked_store.review(review_id)
    assert (review["status"], review["chunks"], review["prompt_tokens"]) == ("succeeded", 2, 2400)
    assert (review["files_total"], review["summary_note_id"]) == (2, 99)
    assert (review["model"], review["prompt_version"]) == ("served-model", "2026-01")  # kept
    assert review["diff_digest"] == {"version": 1, "settings": "k", "files": []}
    assert review["finished_at"] == clock.now


def test_a_failed_run_records_its_error_without_secrets(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    token = "glpat-abcdefghijklmnopqrst"
    failure = ReviewEnding.failure(RuntimeError(f"PRIVATE-TOKEN: {token} refused"))
    migrated_store.record_run(review_id, calls=[_call(error=f"token {token}")], ending=failure)
    review = migrated_store.review(review_id)
    assert review["status"] == "failed" and review["error"].startswith("RuntimeError: ")
    assert token not in review["error"]
    [call] = migrated_store.llm_calls(review_id)
    assert token not in call["error"]


def test_a_run_with_a_bad_ending_records_nothing(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    still_running = ReviewEnding(ReviewStatus.RUNNING)
    with pytest.raises(ValueError, match="running"):
        migrated_store.record_run(
            review_id, calls=[_call()], findings=[_stored()], ending=still_running
        )
    assert migrated_store.llm_calls(review_id) == []
    assert migrated_store.findings(review_id) == []


# -- MR leases ----------------------------------------------------------------------------


def test_lock_excludes_a_second_holder(clocked_store: Store) -> None:
    assert clocked_store.acquire_mr_lock(LOCK, "worker-a", LEASE_TTL_S)
    assert not clocked_store.acquire_mr_lock(LOCK, "worker-b", LEASE_TTL_S)
    assert clocked_store.acquire_mr_lock(OTHER_LOCK, "worker-b", LEASE_TTL_S)
    assert clocked_store.acquire_mr_lock(LOCK, "worker-a", LEASE_TTL_S)  # re-entrant

    assert not clocked_store.renew_mr_lock(LOCK, "worker-b", LEASE_TTL_S)
    assert clocked_store.renew_mr_lock(LOCK, "worker-a", LEASE_TTL_S)

    clocked_store.release_mr_lock(LOCK, "worker-b")  # not its lease: no effect
    assert not clocked_store.acquire_mr_lock(LOCK, "worker-b", LEASE_TTL_S)
    clocked_store.release_mr_lock(LOCK, "worker-a")
    assert clocked_store.acquire_mr_lock(LOCK, "worker-b", LEASE_TTL_S)


def test_expired_lock_is_taken_over(clocked_store: Store, clock: FakeClock) -> None:
    assert clocked_store.acquire_mr_lock(LOCK, "crashed", LEASE_TTL_S)
    clock.advance(LEASE_TTL_S - 1)
    assert not clocked_store.acquire_mr_lock(LOCK, "worker-b", LEASE_TTL_S)
    assert clocked_store.renew_mr_lock(LOCK, "crashed", LEASE_TTL_S)

    clock.advance(LEASE_TTL_S + 1)
    assert clocked_store.acquire_mr_lock(LOCK, "worker-b", LEASE_TTL_S)
    assert not clocked_store.renew_mr_lock(LOCK, "crashed", LEASE_TTL_S)
    assert not clocked_store.acquire_mr_lock(LOCK, "crashed", LEASE_TTL_S)


def _race_for_lock(store_url: str, clock: FakeClock) -> list[str]:  # noqa: F811
    """Let CONTENDERS threads, each with its own engine, acquire one lease at once."""
    stores = [Store.from_url(store_url, clock=clock) for _ in range(CONTENDERS)]
    barrier = threading.Barrier(CONTENDERS)
    winners: list[str] = []

    def contend(index: int) -> None:
        holder = f"worker-{index}"
        barrier.wait()
        if stores[index].acquire_mr_lock(LOCK, holder, LEASE_TTL_S):
            winners.append(holder)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(CONTENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    return winners


@pytest.mark.slow
def test_concurrent_acquire_has_one_winner(
    migrated_store: Store,  # noqa: F811
    store_url: str,  # noqa: F811
    clock: FakeClock,
) -> None:
    assert len(_race_for_lock(store_url, clock)) == 1


@pytest.mark.slow
def test_concurrent_takeover_of_expired_lock_has_one_winner(
    migrated_store: Store,  # noqa: F811
    store_url: str,  # noqa: F811
    clock: FakeClock,
) -> None:
    Store(migrated_store.engine, clock=clock).acquire_mr_lock(LOCK, "gone", 1)
    clock.advance(LEASE_TTL_S)
    winners = _race_for_lock(store_url, clock)
    assert len(winners) == 1
    assert "gone" not in winners


# -- MR throttles -------------------------------------------------------------------------

THROTTLE_S = 600


def test_mr_action_runs_once_per_interval(clocked_store: Store, clock: FakeClock) -> None:
    assert clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)
    assert not clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)
    assert clocked_store.claim_mr_action(PROJECT, MR_IID + 1, "help", THROTTLE_S)
    assert clocked_store.claim_mr_action(PROJECT, MR_IID, "other", THROTTLE_S)
    clock.advance(THROTTLE_S - 1)
    assert not clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)
    clock.advance(1)
    assert clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)
    # the interval counts from the last time the action ran, not from a refused attempt
    clock.advance(THROTTLE_S - 1)
    assert not clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)
    clock.advance(1)
    assert clocked_store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S)


def test_concurrent_mr_action_claims_have_one_winner(
    migrated_store: Store,  # noqa: F811
    store_url: str,  # noqa: F811
    clock: FakeClock,
) -> None:
    stores = [Store.from_url(store_url, clock=clock) for _ in range(CONTENDERS)]
    barrier = threading.Barrier(CONTENDERS)
    results: list[bool] = []

    def contend(store: Store) -> None:
        barrier.wait()
        results.append(store.claim_mr_action(PROJECT, MR_IID, "help", THROTTLE_S))

    for round_ in range(2):  # a first claim (insert), then one after the interval (update)
        results.clear()
        threads = [threading.Thread(target=contend, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [False] * (CONTENDERS - 1) + [True], round_
        clock.advance(THROTTLE_S)
    for store in stores:
        store.close()


# -- feedback -----------------------------------------------------------------------------


@pytest.mark.slow
def test_feedback_redelivery_is_ignored(migrated_store: Store) -> None:  # noqa: F811
    review_id = migrated_store.start_review(**_review_args())
    [finding_id] = migrated_store.record_findings(review_id, [_finding()])
    event = {
        "finding_id": finding_id,
        "project": PROJECT,
        "mr_iid": MR_IID,
        "note_id": 5,
        "kind": "award",
        "value": "thumbsup",
        "username": "ana",
        "event_key": "award:5:thumbsup:ana",
    }

    assert migrated_store.record_feedback(**event)
    assert not migrated_store.record_feedback(**event)
    assert migrated_store.record_feedback(
        **{**event, "value": "thumbsdown", "event_key": "award:5:thumbsdown:ana"}
    )

    stored = migrated_store.feedback(project=PROJECT, mr_iid=MR_IID)
    assert [row["value"] for row in stored] == ["thumbsup", "thumbsdown"]
    assert all(row["finding_id"] == finding_id for row in stored)


def test_feedback_without_finding_and_bad_reference(migrated_store: Store) -> None:  # noqa: F811
    assert migrated_store.record_feedback(
        project=PROJECT, mr_iid=MR_IID, kind="reply", value="reply", event_key="reply:1"
    )
    with pytest.raises(IntegrityError):
        migrated_store.record_feedback(
            finding_id=12345,
            project=PROJECT,
            kind="resolution",
            value="resolved",
            event_key="resolution:12345",
        )
    with pytest.raises(ValueError, match="kind"):
        migrated_store.record_feedback(project=PROJECT, kind="emoji", value="x", event_key="k")


# -- URLs and engines ---------------------------------------------------------------------


def test_from_url_creates_sqlite_directory_with_wal(tmp_path: Path) -> None:
    database = tmp_path / "nested" / "dir" / "reviewbot.db"
    store = Store.from_url(f"sqlite:///{database}")
    try:
        with store.engine.connect() as connection:
            journal_mode = connection.execute(text("PRAGMA journal_mode")).scalar_one()
            busy_timeout = connection.execute(text("PRAGMA busy_timeout")).scalar_one()
    finally:
        store.close()
    assert database.parent.is_dir()
    assert journal_mode == "wal"
    assert busy_timeout > 0


def test_both_postgres_url_spellings_use_psycopg() -> None:
    for spelling in ("postgresql", "postgres", "postgresql+psycopg"):
        url = normalize_database_url(f"{spelling}://u@127.0.0.1:5432/db")
        assert url.drivername == "postgresql+psycopg"
        assert create_engine(url).dialect.driver == "psycopg"
    assert normalize_database_url("sqlite:///x.db").drivername == "sqlite"


def test_redact_url_hides_passwords() -> None:
    assert "s3cret" not in redact_url("postgresql://bot:s3cret@db:5432/reviews")
    assert "bot@db" in redact_url("postgresql://bot@db:5432/reviews")
    assert "s3cret" not in redact_url("not a url but has ://bot:s3cret@db in it")


@pytest.mark.slow
def test_default_database_url_is_a_sqlite_file_in_user_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    url = normalize_database_url(Settings().database_url)
    assert url.drivername == "sqlite"
    assert Path(url.database).is_absolute()
    assert Path(url.database).is_relative_to(tmp_path)
