"""The `Store`: the reads and writes of reviews, model calls, findings, feedback, MR locks and
throttles, what feedback sync read, eval runs; the report's figures through its queries.

Plain values in, plain values out (ints, strings, dicts), or the typed records of
`reviewbot.store.records` (a run's model calls, findings and ending, each mapped to its row
there once; what a caller may write is each table's columns): callers never see ORM objects or
sessions. The Engine is passed in (or built by `Store.from_url`, ``reviewbot.store.engine``)
and never global; the schema is created by `reviewbot.store.migrate`, never here. The job
queue's statements are ``reviewbot.store.job_queries``, the model slots'
``reviewbot.store.slot_queries``.

Works on SQLite (default, one file) and PostgreSQL. Where the two differ (conflict-tolerant
inserts), the dialect's own `INSERT ... ON CONFLICT DO NOTHING` is used; both support it
(SQLite >= 3.24, https://www.sqlite.org/lang_upsert.html; PostgreSQL >= 9.5).

Owns: the queries and the checks of what is written (each table's columns, the allowed
values). Must not: create or change the schema (migrations do), hold a global Engine, or
decide anything about reviews (the pipeline does; the store records it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from reviewbot.model import CallRecord
from reviewbot.redaction import instance_url, scrub_secrets
from reviewbot.states import CallMode, FeedbackKind, MergeRequestState, ReviewStatus, Trigger
from reviewbot.store import feedback_queries
from reviewbot.store.engine import make_engine
from reviewbot.store.eval_queries import insert_comparison, insert_run, latest_comparison
from reviewbot.store.figures import (
    DEFAULT_METRIC_BUCKETS,
    MetricBuckets,
    MetricsSnapshot,
    read_metrics_snapshot,
)
from reviewbot.store.models import PUBLISHED_STATES, Anchor, Base, FindingState, Side
from reviewbot.store.models import EvalRun as EvalRunRow
from reviewbot.store.models import Feedback as FeedbackRow
from reviewbot.store.models import Finding as FindingRow
from reviewbot.store.models import LLMCall as LLMCallRow
from reviewbot.store.models import MergeRequestRecord as MergeRequestRow
from reviewbot.store.models import MRLock as MRLockRow
from reviewbot.store.models import MRThrottle as MRThrottleRow
from reviewbot.store.models import Review as ReviewRow
from reviewbot.store.records import (
    ReviewEnding,
    call_columns,
    ending_columns,
    finding_columns,
    stored_finding,
    writable_columns,
)
from reviewbot.store.report_queries import (
    ReportScope,
    read_report_figures,
    read_window_summary,
    tool_calls_by_chunk,
)
from reviewbot.stored_findings import StoredFinding

Clock = Callable[[], datetime]

COVERAGE_FIELDS = frozenset(
    {"files_total", "files_reviewed", "changed_lines_total", "changed_lines_covered", "skipped"}
)
# What a caller may write: the columns of each table, less those the store fills in.
LLM_CALL_FIELDS = writable_columns(LLMCallRow, leaving_out=("id", "review_id"))
FINDING_FIELDS = writable_columns(FindingRow, leaving_out=("id", "review_id"))
FINDING_UPDATABLE_FIELDS = frozenset(
    {
        "state",
        "discussion_id",
        "note_id",
        "resolved_at",
        "line",
        "end_line",
        "side",
        "anchor",
        "body",
        "title",
        "severity",
        "category",
    }
)
FEEDBACK_FIELDS = writable_columns(FeedbackRow)
MERGE_REQUEST_IDENTITY = ("gitlab_url", "project_id", "mr_iid")
MERGE_REQUEST_FIELDS = writable_columns(
    MergeRequestRow, leaving_out=(*MERGE_REQUEST_IDENTITY, "synced_at")
)
_FINDINGS_INSERT = insert(FindingRow).returning(FindingRow.id, sort_by_parameter_order=True)
FIELD_CHOICES: dict[str, type[StrEnum]] = {
    "trigger": Trigger,
    "status": ReviewStatus,
    "mode": CallMode,
    "side": Side,
    "anchor": Anchor,
    "state": FindingState,
    "kind": FeedbackKind,
}


class RecordNotFound(LookupError):
    """Raised when a review or finding id does not exist."""


class DatabaseUnavailableError(RuntimeError):
    """The database cannot be opened; the message names it (password hidden) and why."""


@dataclass(frozen=True)
class MergeRequestKey:
    """Which merge request: GitLab instance + project id + iid (a path changes on rename, and
    two instances may both have ``group/app!1``)."""

    gitlab_url: str  # kept as instance_url() makes it: no userinfo, no trailing slash
    project_id: int
    iid: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "gitlab_url", instance_url(self.gitlab_url))

    def __str__(self) -> str:
        return f"{self.gitlab_url}|{self.project_id}|{self.iid}"

    def columns(self) -> dict[str, Any]:
        """The columns that identify the MR in reviews, findings and feedback."""
        return {
            "gitlab_url": self.gitlab_url,
            "project_id": self.project_id,
            "mr_iid": self.iid,
        }


@dataclass(frozen=True)
class NoteOwner:
    """What reviewbot posted as a given note: a finding's comment or a review's summary."""

    finding_id: int | None  # None: the note is a review's summary note
    mr_iid: int | None


def utc_now() -> datetime:
    """The default clock: the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _check_fields(given: Iterable[str], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(unknown)}")


def _check_choices(values: Mapping[str, Any]) -> None:
    for field, choices in FIELD_CHOICES.items():
        value = values.get(field)
        if value is not None and value not in {choice.value for choice in choices}:
            allowed = ", ".join(choice.value for choice in choices)
            raise ValueError(f"{field}={value!r} is not one of: {allowed}")


def _as_dict(row: Base) -> dict[str, Any]:
    return {column.key: getattr(row, column.key) for column in row.__table__.columns}


class Store:
    """Reads and writes reviews, LLM calls, findings, feedback, MR leases and throttles, what
    `feedback sync` read of each MR, eval runs; reads the report's figures."""

    def __init__(self, engine: Engine, *, clock: Clock = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = utc_now) -> Store:
        """Build the Engine for `url` (does not migrate: see `migrate.ensure_schema`)."""
        return cls(make_engine(url), clock=clock)

    @property
    def engine(self) -> Engine:
        return self._engine

    def close(self) -> None:
        """Close pooled connections."""
        self._engine.dispose()

    def ping(self) -> None:
        """Run ``SELECT 1``; raises SQLAlchemyError when the database cannot be reached."""
        with self._engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    # -- reviews -----------------------------------------------------------------------

    def start_review(
        self,
        *,
        project: str,
        mr_iid: int | None,
        head_sha: str,
        base_sha: str | None,
        start_sha: str | None,
        trigger: str,
        model: str,
        prompt_version: str,
        key: MergeRequestKey | None = None,
        dry_run: bool = False,
    ) -> int:
        """Record a review that starts now, in state `running`; return its id. ``project`` is
        the path at review time (for people); ``key`` identifies the MR; ``dry_run``: the review
        posts nothing (reports leave it out)."""
        values = {
            "project": project,
            "mr_iid": mr_iid,
            "head_sha": head_sha,
            "base_sha": base_sha,
            "start_sha": start_sha,
            "trigger": trigger,
            "model": model,
            "prompt_version": prompt_version,
            "status": ReviewStatus.RUNNING.value,
            "started_at": self._clock(),
            "dry_run": dry_run,
            **(key.columns() if key else {}),
        }
        _check_choices(values)
        with Session(self._engine) as session, session.begin():
            review = ReviewRow(**values)
            session.add(review)
            session.flush()
            return review.id

    def close_interrupted_reviews(self, key: MergeRequestKey, reason: str) -> int:
        """Mark the MR's reviews still `running` as failed with ``reason``; how many.

        Called by the one run that holds the MR's lock: a review left `running` then was
        interrupted (its process died), and must not stay `running` forever.
        """
        statement = (
            update(ReviewRow)
            .where(*self._mr_is(ReviewRow, key), ReviewRow.status == ReviewStatus.RUNNING.value)
            .values(status=ReviewStatus.FAILED.value, finished_at=self._clock(), error=reason)
        )
        with self._engine.begin() as connection:
            return connection.execute(statement).rowcount

    @staticmethod
    def _mr_is(table: Any, key: MergeRequestKey) -> list[Any]:
        columns = key.columns()
        return [
            table.gitlab_url == columns["gitlab_url"],
            table.project_id == columns["project_id"],
            table.mr_iid == columns["mr_iid"],
        ]

    def finish_review(
        self,
        review_id: int,
        *,
        status: str,
        coverage: dict[str, Any] | None = None,
        chunks: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cached_tokens: int = 0,
        summary_note_id: int | None = None,
        error: str | None = None,
        model: str | None = None,
        prompt_version: str | None = None,
        diff_digest: dict[str, Any] | None = None,
    ) -> None:
        """Close a review: final status, coverage (see COVERAGE_FIELDS), token totals.

        ``model`` and ``prompt_version``, when given, replace what ``start_review`` recorded
        (the served model is known only once the server has answered).
        """
        values = self._ending_values(
            status=status,
            coverage=coverage,
            chunks=chunks,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            summary_note_id=summary_note_id,
            error=error,
            model=model,
            prompt_version=prompt_version,
            diff_digest=diff_digest,
        )
        with self._engine.begin() as connection:
            self._update_one(connection, ReviewRow, review_id, values)

    def _ending_values(
        self,
        *,
        status: str,
        coverage: Mapping[str, Any] | None,
        model: str | None,
        prompt_version: str | None,
        diff_digest: Mapping[str, Any] | None,
        error: str | None,
        **figures: Any,
    ) -> dict[str, Any]:
        if status == ReviewStatus.RUNNING:
            raise ValueError("finish_review needs a final status, not 'running'")
        coverage = dict(coverage or {})
        _check_fields(coverage, COVERAGE_FIELDS, "coverage")
        values = {
            "status": status,
            "finished_at": self._clock(),
            **figures,
            "error": scrub_secrets(error),
            **coverage,
        }
        given = {"model": model, "prompt_version": prompt_version, "diff_digest": diff_digest}
        values.update({name: value for name, value in given.items() if value is not None})
        _check_choices(values)
        return values

    def record_run(
        self,
        review_id: int,
        *,
        calls: Sequence[CallRecord] = (),
        findings: Sequence[StoredFinding] = (),
        ending: ReviewEnding | None = None,
    ) -> list[int]:
        """What a run did, in one transaction: its model ``calls``, its ``findings`` with their
        fate on the MR, and (``ending`` given) how the review ended; the findings' new ids, in
        order. A run records its calls once the model has answered (so they are on record
        when publishing fails), then its findings and its ending once it has published."""
        call_rows = [self._llm_call_values(review_id, call_columns(call)) for call in calls]
        finding_rows = self._finding_values(review_id, [finding_columns(f) for f in findings])
        ending_values = None if ending is None else self._ending_values(**ending_columns(ending))
        with self._engine.begin() as connection:
            if call_rows:
                connection.execute(insert(LLMCallRow), call_rows)
            ids = list(connection.scalars(_FINDINGS_INSERT, finding_rows)) if finding_rows else []
            if ending_values is not None:
                self._update_one(connection, ReviewRow, review_id, ending_values)
        return ids

    def last_complete_review(
        self, key: MergeRequestKey, *, model: str, prompt_version: str
    ) -> dict[str, Any] | None:
        """The MR's newest succeeded review by ``model`` and ``prompt_version`` that recorded
        what it saw (a digest): the one an incremental review compares with. Never a dry run:
        its findings were never on the MR."""
        query = (
            select(ReviewRow)
            .where(
                *self._mr_is(ReviewRow, key),
                ReviewRow.status == ReviewStatus.SUCCEEDED.value,
                ReviewRow.dry_run.is_(False),
                ReviewRow.model == model,
                ReviewRow.prompt_version == prompt_version,
                ReviewRow.diff_digest.is_not(None),
            )
            .order_by(ReviewRow.id.desc())
            .limit(1)
        )
        rows = self._all(query)
        return rows[0] if rows else None

    def reviews(
        self, *, project: str | None = None, mr_iid: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """The newest reviews first, optionally of one project or MR."""
        query = select(ReviewRow).order_by(ReviewRow.id.desc()).limit(limit)
        if project is not None:
            query = query.where(ReviewRow.project == project)
        if mr_iid is not None:
            query = query.where(ReviewRow.mr_iid == mr_iid)
        return self._all(query)

    def review(self, review_id: int) -> dict[str, Any]:
        """The review row as a dict; RecordNotFound if it does not exist."""
        with Session(self._engine) as session:
            row = session.get(ReviewRow, review_id)
            if row is None:
                raise RecordNotFound(f"review {review_id} not found")
            return _as_dict(row)

    # -- LLM calls ---------------------------------------------------------------------

    def record_llm_calls(self, review_id: int, calls: list[dict[str, Any]]) -> None:
        """Store the calls made for one review (keys: see LLM_CALL_FIELDS)."""
        rows = [self._llm_call_values(review_id, call) for call in calls]
        if not rows:
            return
        with self._engine.begin() as connection:
            connection.execute(insert(LLMCallRow), rows)

    def _llm_call_values(self, review_id: int, call: Mapping[str, Any]) -> dict[str, Any]:
        _check_fields(call, LLM_CALL_FIELDS, "llm call")
        values = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
            "retries": 0,
            "invalid_tool_calls": 0,
            "tool_calls": None,
            "repaired_tool_calls": 0,
            "ttft_ms": None,
            "latency_ms": None,
            "slot_wait_ms": None,
            "error": None,
            "started_at": self._clock(),
            **call,
            "review_id": review_id,
        }
        values["error"] = scrub_secrets(values["error"])
        _check_choices(values)
        return values

    def llm_calls(self, review_id: int) -> list[dict[str, Any]]:
        """The calls of one review, in the order they were recorded."""
        query = select(LLMCallRow).where(LLMCallRow.review_id == review_id).order_by(LLMCallRow.id)
        return self._all(query)

    def tool_calls_by_chunk(self, review_id: int) -> list[dict[str, Any]]:
        """Per chunk of one review: tool calls, unreadable ones, ones resent readably, model
        requests (reviewbot.store.report_queries.tool_calls_by_chunk)."""
        with self._engine.connect() as connection:
            return tool_calls_by_chunk(connection, review_id)

    # -- findings ----------------------------------------------------------------------

    def record_findings(self, review_id: int, findings: list[dict[str, Any]]) -> list[int]:
        """Store findings of a review; return their ids in input order.

        `project` and `mr_iid` default to the review's; `created_at` to now.
        """
        rows = self._finding_values(review_id, findings)
        if not rows:
            return []
        with self._engine.begin() as connection:
            return list(connection.scalars(_FINDINGS_INSERT, rows))

    def _finding_values(
        self, review_id: int, findings: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        if not findings:
            return []
        review = self.review(review_id)
        defaults = {
            "project": review["project"],
            "mr_iid": review["mr_iid"],
            "gitlab_url": review["gitlab_url"],
            "project_id": review["project_id"],
            "line": None,
            "end_line": None,
            "suggestion": None,
            "discussion_id": None,
            "note_id": None,
            "resolved_at": None,
            "created_at": self._clock(),
            # every row names every column: an insert of many rows takes the first one's keys
            "source": "model",
            "analyzer_tool": None,
            "analyzer_rule": None,
        }
        rows = []
        for finding in findings:
            _check_fields(finding, FINDING_FIELDS, "finding")
            values = {**defaults, **finding, "review_id": review_id}
            _check_choices(values)
            rows.append(values)
        return rows

    def update_finding(self, finding_id: int, **fields: Any) -> None:
        """Change a finding's fate, e.g. `state="posted", discussion_id=..., note_id=...`."""
        _check_fields(fields, FINDING_UPDATABLE_FIELDS, "updatable finding")
        _check_choices(fields)
        if fields:
            with self._engine.begin() as connection:
                self._update_one(connection, FindingRow, finding_id, fields)

    def findings(self, review_id: int) -> list[dict[str, Any]]:
        """The findings of one review, in the order they were recorded."""
        query = select(FindingRow).where(FindingRow.review_id == review_id).order_by(FindingRow.id)
        return self._all(query)

    def stored_findings(self, review_id: int) -> list[StoredFinding]:
        """The findings of one review as the records they were written from, in order."""
        return [stored_finding(row) for row in self.findings(review_id)]

    def posted_findings(self, key: MergeRequestKey) -> dict[str, dict[str, Any]]:
        """Fingerprint -> latest finding recorded with a discussion on GitLab, for one MR.

        "Posted" means any of PUBLISHED_STATES (posted, resolved, outdated). This is history:
        what is on the MR is the truth for idempotency (reviewbot.publish reads the MR).
        """
        query = (
            select(FindingRow)
            .where(
                *self._mr_is(FindingRow, key),
                FindingRow.state.in_([state.value for state in PUBLISHED_STATES]),
            )
            .order_by(FindingRow.id)
        )
        return {row["fingerprint"]: row for row in self._all(query)}

    # -- MR leases ---------------------------------------------------------------------

    def acquire_mr_lock(self, mr_key: str, holder: str, ttl_s: float) -> bool:
        """Take the lease on an MR for `ttl_s` seconds; True if `holder` now holds it.

        Race-free on both backends: an INSERT that does nothing on conflict, then an UPDATE
        that only matches an expired lease (or one `holder` already holds). Under PostgreSQL
        READ COMMITTED a concurrent UPDATE re-checks its WHERE on the row version committed by
        the winner, so only one taker can succeed
        (https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED);
        SQLite runs one writer at a time. (On PostgreSQL, runs hold a session advisory lock
        instead: reviewbot.store.mr_lock.)
        """
        now = self._clock()
        expires_at = now + timedelta(seconds=ttl_s)
        claim = self._insert_ignoring_conflict(
            MRLockRow, {"mr_key": mr_key, "holder": holder, "expires_at": expires_at}, ["mr_key"]
        ).returning(MRLockRow.holder)
        take_over = (
            update(MRLockRow)
            .where(MRLockRow.mr_key == mr_key)
            .where(or_(MRLockRow.expires_at <= now, MRLockRow.holder == holder))
            .values(holder=holder, expires_at=expires_at)
        )
        with self._engine.begin() as connection:
            if connection.execute(claim).first() is not None:
                return True
            return connection.execute(take_over).rowcount == 1

    def mr_lock_holder(self, mr_key: str) -> str | None:
        """Who holds the MR's lease now (expired or not), or None."""
        with self._engine.connect() as connection:
            return connection.scalar(select(MRLockRow.holder).where(MRLockRow.mr_key == mr_key))

    def take_over_mr_lock(self, mr_key: str, dead_holder: str, holder: str, ttl_s: float) -> bool:
        """Take the lease from ``dead_holder`` (known to be gone) before it expires."""
        expires_at = self._clock() + timedelta(seconds=ttl_s)
        take_over = (
            update(MRLockRow)
            .where(MRLockRow.mr_key == mr_key, MRLockRow.holder == dead_holder)
            .values(holder=holder, expires_at=expires_at)
        )
        with self._engine.begin() as connection:
            return connection.execute(take_over).rowcount == 1

    def renew_mr_lock(self, mr_key: str, holder: str, ttl_s: float) -> bool:
        """Extend `holder`'s lease by `ttl_s` from now; False if someone else holds it."""
        expires_at = self._clock() + timedelta(seconds=ttl_s)
        renew = (
            update(MRLockRow)
            .where(MRLockRow.mr_key == mr_key, MRLockRow.holder == holder)
            .values(expires_at=expires_at)
        )
        with self._engine.begin() as connection:
            return connection.execute(renew).rowcount == 1

    def release_mr_lock(self, mr_key: str, holder: str) -> None:
        """Give the lease back; does nothing if `holder` no longer holds it."""
        release = delete(MRLockRow).where(MRLockRow.mr_key == mr_key, MRLockRow.holder == holder)
        with self._engine.begin() as connection:
            connection.execute(release)

    # -- MR throttles ------------------------------------------------------------------

    def claim_mr_action(
        self, project: str, mr_iid: int, action: str, min_interval_s: float
    ) -> bool:
        """True when `action` may run on the MR now, and record that it does.

        False when it already ran less than `min_interval_s` seconds ago (per the database,
        so across every process using it). One statement, race-free on both backends: an
        INSERT that, on conflict, moves `last_at` to now only when the previous one is old
        enough, returning a row only then (PostgreSQL re-checks the condition on the row
        version a concurrent winner committed; SQLite runs one writer at a time).
        """
        now = self._clock()
        statement = self._insert(MRThrottleRow).values(
            project=project, mr_iid=mr_iid, action=action, last_at=now
        )
        statement = statement.on_conflict_do_update(
            index_elements=["project", "mr_iid", "action"],
            set_={"last_at": statement.excluded.last_at},
            where=MRThrottleRow.last_at <= now - timedelta(seconds=min_interval_s),
        ).returning(MRThrottleRow.action)
        with self._engine.begin() as connection:
            return connection.execute(statement).first() is not None

    # -- feedback ----------------------------------------------------------------------

    def record_feedback(self, **fields: Any) -> bool:
        """Store one feedback event; False when its `event_key` was already recorded.

        Required: project, kind, value, event_key. Optional: finding_id, mr_iid, gitlab_url,
        project_id, note_id, username, created_at (defaults to now).
        """
        statement = self._feedback_insert(fields)
        with self._engine.begin() as connection:
            return connection.execute(statement).first() is not None

    def _feedback_insert(self, fields: Mapping[str, Any]) -> Any:
        _check_fields(fields, FEEDBACK_FIELDS, "feedback")
        values = {
            "finding_id": None,
            "mr_iid": None,
            "gitlab_url": None,
            "project_id": None,
            "note_id": None,
            "username": None,
            "created_at": self._clock(),
            **fields,
        }
        _check_choices(values)
        statement = self._insert_ignoring_conflict(FeedbackRow, values, ["event_key"])
        return statement.returning(FeedbackRow.id)

    def feedback(self, *, project: str, mr_iid: int | None = None) -> list[dict[str, Any]]:
        """Feedback recorded for a project (optionally one MR), oldest first."""
        query = select(FeedbackRow).where(FeedbackRow.project == project)
        if mr_iid is not None:
            query = query.where(FeedbackRow.mr_iid == mr_iid)
        return self._all(query.order_by(FeedbackRow.id))

    def note_owner(self, note_id: int) -> NoteOwner | None:
        """The finding (or else the review summary) reviewbot posted as note `note_id`.

        A re-run records the same note again (state `duplicate`): the row that posted it
        (a published state) wins, else the newest; None when reviewbot did not write the note.
        """
        published = [state.value for state in PUBLISHED_STATES]
        finding_query = (
            select(FindingRow.id, FindingRow.mr_iid)
            .where(FindingRow.note_id == note_id)
            .order_by(FindingRow.state.in_(published).desc(), FindingRow.id.desc())
            .limit(1)
        )
        summary_query = (
            select(ReviewRow.mr_iid)
            .where(ReviewRow.summary_note_id == note_id)
            .order_by(ReviewRow.id.desc())
            .limit(1)
        )
        with self._engine.connect() as connection:
            finding = connection.execute(finding_query).first()
            if finding is not None:
                return NoteOwner(finding_id=finding.id, mr_iid=finding.mr_iid)
            summary = connection.execute(summary_query).first()
        return None if summary is None else NoteOwner(finding_id=None, mr_iid=summary.mr_iid)

    # -- feedback sync -----------------------------------------------------------------

    def reviewed_merge_requests(
        self, gitlab_url: str, since: datetime, project: str | None = None
    ) -> list[dict[str, Any]]:
        """MRs of ``gitlab_url`` reviewed since ``since`` (project_id, mr_iid, newest path)."""
        with self._engine.connect() as connection:
            return feedback_queries.reviewed_merge_requests(connection, gitlab_url, since, project)

    def posted_findings_with_heads(self, key: MergeRequestKey) -> list[dict[str, Any]]:
        """Every finding posted on the MR (one row each) with the head its review saw."""
        with self._engine.connect() as connection:
            return feedback_queries.published_findings(
                connection, key.gitlab_url, key.project_id, key.iid
            )

    def votes_in_force(self, finding_ids: Iterable[int]) -> set[tuple[int, str, str]]:
        """(finding id, username, thumbsup|thumbsdown) of every vote not revoked."""
        with self._engine.connect() as connection:
            return feedback_queries.votes_in_force(connection, list(finding_ids))

    def outcomes_on_record(self, finding_ids: Iterable[int]) -> dict[int, set[str]]:
        """Finding id -> feedback kinds recorded about it."""
        with self._engine.connect() as connection:
            return feedback_queries.outcomes_on_record(connection, list(finding_ids))

    def record_merge_request_sync(
        self,
        key: MergeRequestKey,
        merge_request: Mapping[str, Any],
        feedback: Iterable[Mapping[str, Any]],
    ) -> int:
        """In one transaction: what sync read of the MR (see MERGE_REQUEST_FIELDS) and its
        feedback events (see record_feedback); how many events were new."""
        _check_fields(merge_request, MERGE_REQUEST_FIELDS, "merge request")
        if merge_request.get("state") not in {state.value for state in MergeRequestState}:
            raise ValueError(f"state={merge_request.get('state')!r} is not an MR state")
        identity = {
            "gitlab_url": key.gitlab_url.rstrip("/"),
            "project_id": key.project_id,
            "mr_iid": key.iid,
        }
        values = {
            "web_url": None,
            "merged_at": None,
            "latest_head_sha": None,
            **merge_request,
            **identity,
            "synced_at": self._clock(),
        }
        upsert = self._insert(MergeRequestRow).values(**values)
        upsert = upsert.on_conflict_do_update(
            index_elements=["gitlab_url", "project_id", "mr_iid"],
            set_={name: upsert.excluded[name] for name in values if name not in identity},
        )
        added = 0
        with self._engine.begin() as connection:
            connection.execute(upsert)
            for event in feedback:
                statement = self._feedback_insert({**event, **key.columns()})
                added += connection.execute(statement).first() is not None
        return added

    # -- report and eval ---------------------------------------------------------------

    def report_figures(self, scope: ReportScope, **options: Any) -> dict[str, Any]:
        """Every figure of the report's window: report_queries.read_report_figures, whose
        keywords (slowest, eval_limit, weeks_from) ``options`` are."""
        with self._engine.connect() as connection:
            return read_report_figures(connection, scope, **options)

    def window_summary(self, scope: ReportScope) -> dict[str, Any]:
        """Totals, latency and outcomes of a window (the report's previous window)."""
        with self._engine.connect() as connection:
            return read_window_summary(connection, scope)

    def record_eval_run(self, **fields: Any) -> int:
        """Store one eval run (store.eval_queries.RUN_FIELDS); its id."""
        with self._engine.begin() as connection:
            return insert_run(connection, fields)

    def record_eval_comparison(
        self, comparison: dict[str, Any], runs: Sequence[dict[str, Any]]
    ) -> tuple[int, list[int]]:
        """One `eval --compare` run and its configurations' eval runs, in one transaction."""
        with self._engine.begin() as connection:
            return insert_comparison(connection, comparison, runs)

    def latest_eval_comparison(self, until: datetime) -> dict[str, Any] | None:
        """The newest eval comparison started before ``until`` with its runs, or None."""
        with self._engine.connect() as connection:
            return latest_comparison(connection, until)

    def eval_run(self, run_id: int) -> dict[str, Any]:
        """One eval run as a dict; RecordNotFound if it does not exist."""
        with Session(self._engine) as session:
            row = session.get(EvalRunRow, run_id)
            if row is None:
                raise RecordNotFound(f"eval run {run_id} not found")
            return _as_dict(row)

    # -- metrics -----------------------------------------------------------------------

    def metrics_snapshot(self, buckets: MetricBuckets = DEFAULT_METRIC_BUCKETS) -> MetricsSnapshot:
        """Histograms, token sums and counts over all reviews, calls and findings (see figures)."""
        with self._engine.connect() as connection:
            return read_metrics_snapshot(connection, buckets)

    # -- helpers -----------------------------------------------------------------------

    def _insert(self, model: type[Base]) -> Any:
        """The dialect's INSERT, which has ON CONFLICT clauses."""
        dialect_insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}.get(
            self._engine.dialect.name
        )
        if dialect_insert is None:
            raise NotImplementedError(f"unsupported database: {self._engine.dialect.name}")
        return dialect_insert(model)

    def _insert_ignoring_conflict(
        self, model: type[Base], values: dict[str, Any], conflict_columns: list[str]
    ) -> Any:
        # Callers add RETURNING and test for a row: rowcount is not reliable for INSERTs
        # that SQLAlchemy may compile with an implicit RETURNING (it reads 0 on psycopg).
        return (
            self._insert(model)
            .values(**values)
            .on_conflict_do_nothing(index_elements=conflict_columns)
        )

    @staticmethod
    def _update_one(
        connection: Connection, model: type[Base], row_id: int, values: dict[str, Any]
    ) -> None:
        statement = update(model).where(model.id == row_id).values(**values)  # type: ignore[attr-defined]
        if connection.execute(statement).rowcount != 1:
            raise RecordNotFound(f"{model.__tablename__} {row_id} not found")

    def _all(self, query: Any) -> list[dict[str, Any]]:
        with Session(self._engine) as session:
            return [_as_dict(row) for row in session.scalars(query)]
