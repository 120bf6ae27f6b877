"""SQLAlchemy tables for reviews, LLM calls, findings, feedback, MR locks, MR throttles, jobs,
merge requests as last synced from GitLab, team learnings, answers in threads, eval runs, and
the GitLab request budgets every worker shares.

The schema is shaped for the weekly accuracy report: every review keeps its coverage and
token totals, every LLM call its latency figures, every finding its fate on GitLab
(posted, resolved, outdated...) and every thumbs up/down or resolution lands in `feedback`.

The tables here are the *target* of the Alembic migrations in the top-level `migrations/`
folder; the database is never created from this module directly (no `create_all`).
A test migrates a blank database and compares it with this metadata, so the two never drift.

Owns: every table, column and allowed value, declared once (what the store accepts is read
from here). Must not: query, or define the enums the pipeline produces (the states of
reviewbot.states; Side, AnchorKind and FindingState are the core's, used here).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reviewbot.diff import Side as DiffSide
from reviewbot.findings import AnchorKind, FindingState
from reviewbot.learnings.learning import LearningSource, LearningStatus
from reviewbot.states import (
    CallMode,
    CallPurpose,
    FeedbackKind,
    JobKind,
    JobStatus,
    MergeRequestState,
    ReplyCommand,
    ReplyStatus,
    ReviewStatus,
    Trigger,
)

# Deterministic constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PROJECT_LENGTH = 512
SHA_LENGTH = 64  # SHA-1 is 40 hex digits, SHA-256 repositories use 64
SHORT_LABEL_LENGTH = 32
NAME_LENGTH = 255
PATH_LENGTH = 1024
EVENT_KEY_LENGTH = 255
URL_LENGTH = 2048
MR_KEY_LENGTH = 2200  # "<gitlab url>|<project id>|<iid>"


# Which side of the diff a finding is on, how precisely it could be placed and what happened to
# it on GitLab: the core's own enums, so the stored values are the ones the pipeline produces.
Side = DiffSide
Anchor = AnchorKind


# Findings in these states have a discussion on GitLab: a re-run must not post them again.
PUBLISHED_STATES: tuple[FindingState, ...] = (
    FindingState.POSTED,
    FindingState.RESOLVED,
    FindingState.OUTDATED,
)


def _one_of(column: str, choices: type[StrEnum]) -> str:
    """SQL condition accepting only the values of `choices` (NULL passes, as in SQL)."""
    quoted = ", ".join(f"'{choice.value}'" for choice in choices)
    return f"{column} IN ({quoted})"


NUL = "\x00"
NUL_STORED_AS = "\ufffd"  # U+FFFD: the reader still sees that something was there


class StoredString(TypeDecorator[str]):
    """A ``VARCHAR`` that any text can be written to: PostgreSQL refuses NUL in text
    ("invalid byte sequence for encoding UTF8: 0x00"), SQLite keeps it, so NUL is stored as
    U+FFFD on every backend. Text comes from outside (model answers, GitLab, error messages):
    a write must never fail on what it holds."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return value.replace(NUL, NUL_STORED_AS) if isinstance(value, str) else value


class StoredText(StoredString):
    """A ``TEXT`` column with the same rule as :class:`StoredString`."""

    impl = Text
    cache_ok = True


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every backend.

    PostgreSQL stores `timestamptz`; SQLite has no time zones, so values are stored as UTC
    and handed back with `tzinfo=UTC`. Naive datetimes are refused: they are always a bug.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware value")
        utc_value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return utc_value.replace(tzinfo=None)
        return utc_value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base carrying the shared metadata and naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


class Review(Base):
    """One run of the review pipeline on one MR head (or a local diff)."""

    __tablename__ = "reviews"
    __table_args__ = (
        CheckConstraint(_one_of("trigger", Trigger), name="trigger"),
        CheckConstraint(_one_of("status", ReviewStatus), name="status"),
        Index(None, "project", "mr_iid"),
        Index(None, "gitlab_url", "project_id", "mr_iid"),
        Index(None, "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))  # path at review time
    mr_iid: Mapped[int | None]
    # An MR is GitLab instance + project id + iid (paths change on rename); None: a local diff.
    gitlab_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    project_id: Mapped[int | None] = mapped_column(BigInteger)
    head_sha: Mapped[str] = mapped_column(StoredString(SHA_LENGTH))
    base_sha: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    start_sha: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    trigger: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    status: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    model: Mapped[str] = mapped_column(StoredString(NAME_LENGTH))
    prompt_version: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    files_total: Mapped[int | None]
    files_reviewed: Mapped[int | None]
    changed_lines_total: Mapped[int | None]
    changed_lines_covered: Mapped[int | None]
    skipped: Mapped[list[dict[str, str]] | None] = mapped_column(JSON)
    chunks: Mapped[int] = mapped_column(default=0)
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    cached_tokens: Mapped[int] = mapped_column(default=0)
    summary_note_id: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(StoredText)
    # What the review saw, hunk by hunk (reviewbot.interdiff): the next one compares with it.
    diff_digest: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # A dry run (`--dry-run`): reviewed, nothing posted; never counted in reports.
    dry_run: Mapped[bool] = mapped_column(default=False)
    # The review effort used (quick / standard / deep, reviewbot.effort) and why it was chosen;
    # passes: how many independent passes each chunk got (NULL: before efforts existed).
    effort: Mapped[str | None] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    effort_reason: Mapped[str | None] = mapped_column(StoredText)
    passes: Mapped[int | None]


class LLMCall(Base):
    """One request to the model server (one chunk attempt, or a repair turn).

    ``tool_calls``: the calls its answer held, readable or not (NULL: recorded before this was
    counted); ``invalid_tool_calls``: those that could not be read; ``repaired_tool_calls``: on
    a repair turn, the unreadable calls of the chunk's earlier answer resent readably;
    ``recovered_tool_calls``: readable calls the server's parsers left in the content or the
    thinking; ``reasoning_tokens``: completion tokens spent thinking (NULL: not told);
    ``thinking_off``: asked with thinking off. Per chunk: group by ``chunk_index``.
    """

    __tablename__ = "llm_calls"
    __table_args__ = (CheckConstraint(_one_of("mode", CallMode), name="mode"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id", ondelete="CASCADE"), index=True)
    chunk_index: Mapped[int]
    mode: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    outcome: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    cached_tokens: Mapped[int] = mapped_column(default=0)
    ttft_ms: Mapped[float | None]
    latency_ms: Mapped[float | None]
    slot_wait_ms: Mapped[float | None]
    retries: Mapped[int] = mapped_column(default=0)
    invalid_tool_calls: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(StoredText)
    started_at: Mapped[datetime]
    tool_calls: Mapped[int | None]
    repaired_tool_calls: Mapped[int] = mapped_column(default=0)
    tool_round: Mapped[int] = mapped_column(default=0)
    repo_tool_calls: Mapped[int] = mapped_column(default=0)
    tool_answer_tokens: Mapped[int] = mapped_column(default=0)
    purpose: Mapped[str] = mapped_column(
        StoredString(SHORT_LABEL_LENGTH), default=CallPurpose.REVIEW.value
    )
    recovered_tool_calls: Mapped[int] = mapped_column(default=0)
    reasoning_tokens: Mapped[int | None]
    thinking_off: Mapped[bool] = mapped_column(default=False)


class Finding(Base):
    """One comment the model made, anchored to the diff, and what became of it."""

    __tablename__ = "findings"
    __table_args__ = (
        CheckConstraint(_one_of("side", Side), name="side"),
        CheckConstraint(_one_of("anchor", Anchor), name="anchor"),
        CheckConstraint(_one_of("state", FindingState), name="state"),
        Index(None, "project", "mr_iid", "fingerprint"),
        Index(None, "gitlab_url", "project_id", "mr_iid", "fingerprint"),
        Index(None, "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    review_id: Mapped[int] = mapped_column(ForeignKey("reviews.id", ondelete="CASCADE"), index=True)
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))
    mr_iid: Mapped[int | None]
    gitlab_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    project_id: Mapped[int | None] = mapped_column(BigInteger)
    fingerprint: Mapped[str] = mapped_column(StoredString(SHA_LENGTH))
    path: Mapped[str] = mapped_column(StoredString(PATH_LENGTH))
    side: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    line: Mapped[int | None]
    end_line: Mapped[int | None]
    severity: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    category: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    title: Mapped[str] = mapped_column(StoredText)
    body: Mapped[str] = mapped_column(StoredText)
    suggestion: Mapped[str | None] = mapped_column(StoredText)
    anchor: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    state: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    discussion_id: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    note_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    rule: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    # The verification pass (NULL: not verified: below VERIFY_MIN_SEVERITY, or VERIFY=off).
    verdict: Mapped[str | None] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    verdict_reason: Mapped[str | None] = mapped_column(StoredText)
    verdict_confidence: Mapped[float | None]
    # The learning that suppressed it (state suppressed_by_learning).
    learning_id: Mapped[int | None] = mapped_column(
        ForeignKey("learnings.id", ondelete="SET NULL"), index=True
    )
    # Where it came from (model / analyzer / both) and, for an analyzer's, its tool and rule.
    source: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH), server_default="model")
    analyzer_tool: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    analyzer_rule: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    # A deep review's vote: how many of its passes reported the finding (votes of passes);
    # confidence is votes / passes. NULL: a single-pass review.
    votes: Mapped[int | None]
    passes: Mapped[int | None]
    confidence: Mapped[float | None]


class Feedback(Base):
    """A human reaction to a finding: award emoji, resolution or reply."""

    __tablename__ = "feedback"
    __table_args__ = (
        CheckConstraint(_one_of("kind", FeedbackKind), name="kind"),
        Index(None, "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    finding_id: Mapped[int | None] = mapped_column(
        ForeignKey("findings.id", ondelete="SET NULL"), index=True
    )
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))
    mr_iid: Mapped[int | None]
    gitlab_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    project_id: Mapped[int | None] = mapped_column(BigInteger)
    note_id: Mapped[int | None] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    value: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    username: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    event_key: Mapped[str] = mapped_column(StoredString(EVENT_KEY_LENGTH), unique=True)
    created_at: Mapped[datetime]
    # A reaction to one of the bot's answers in a thread (finding_id: the thread's finding).
    reply_id: Mapped[int | None] = mapped_column(
        ForeignKey("replies.id", ondelete="SET NULL"), index=True
    )


class MRLock(Base):
    """A lease serialising review runs on one MR across processes (SQLite; on PostgreSQL a
    session advisory lock does it: reviewbot.store.mr_lock)."""

    __tablename__ = "mr_locks"

    mr_key: Mapped[str] = mapped_column(StoredString(MR_KEY_LENGTH), primary_key=True)
    holder: Mapped[str] = mapped_column(StoredString(NAME_LENGTH))
    expires_at: Mapped[datetime]


class MRThrottle(Base):
    """When an action that must not repeat too often (a help answer) last ran on one MR."""

    __tablename__ = "mr_throttles"

    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH), primary_key=True)
    mr_iid: Mapped[int] = mapped_column(Integer, primary_key=True)
    action: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH), primary_key=True)
    last_at: Mapped[datetime]


class MergeRequestRecord(Base):
    """What `reviewbot feedback sync` last read of a reviewed MR: its state and latest version
    (the report's addressed rate counts findings whose MR got a later version or was merged)."""

    __tablename__ = "merge_requests"
    __table_args__ = (CheckConstraint(_one_of("state", MergeRequestState), name="state"),)

    gitlab_url: Mapped[str] = mapped_column(StoredString(URL_LENGTH), primary_key=True)
    project_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    mr_iid: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))  # path when synced
    state: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    web_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    merged_at: Mapped[datetime | None]
    latest_head_sha: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    synced_at: Mapped[datetime]


class Learning(Base):
    """A team's instruction to the reviewer, with its scope (project or group, path globs,
    category) and its history (who made it, when, from which thread, who accepted it)."""

    __tablename__ = "learnings"
    __table_args__ = (
        CheckConstraint(_one_of("status", LearningStatus), name="status"),
        CheckConstraint(_one_of("source", LearningSource), name="source"),
        Index(None, "gitlab_url", "project_id", "status"),
        Index(None, "proposal_key", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gitlab_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    project_id: Mapped[int | None] = mapped_column(BigInteger)  # NULL: a group's learning
    project: Mapped[str | None] = mapped_column(StoredString(PROJECT_LENGTH))  # path when made
    group_path: Mapped[str | None] = mapped_column(StoredString(PROJECT_LENGTH))
    path_globs: Mapped[list[str]] = mapped_column(JSON)  # empty: every path
    category: Mapped[str | None] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    text: Mapped[str] = mapped_column(StoredText)
    status: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    source: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    author: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    author_id: Mapped[int | None] = mapped_column(BigInteger)
    mr_iid: Mapped[int | None]
    discussion_id: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    note_id: Mapped[int | None] = mapped_column(BigInteger)  # the note it was made from
    created_at: Mapped[datetime]
    accepted_by: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    accepted_at: Mapped[datetime | None]
    removed_at: Mapped[datetime | None]
    # A proposal: what it was proposed from (one proposal per key) and the note proposing it.
    proposal_key: Mapped[str | None] = mapped_column(StoredString(EVENT_KEY_LENGTH))
    proposal_evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    proposal_note_id: Mapped[int | None] = mapped_column(BigInteger)


class Reply(Base):
    """One answer (or refusal) to a human's note in a thread the bot started."""

    __tablename__ = "replies"
    __table_args__ = (
        CheckConstraint(_one_of("command", ReplyCommand), name="command"),
        CheckConstraint(_one_of("status", ReplyStatus), name="status"),
        Index(None, "reply_key", unique=True),
        Index(None, "gitlab_url", "project_id", "mr_iid"),
        Index(None, "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # "<gitlab url>|<project id>|<triggering note id>": one answer per triggering note.
    reply_key: Mapped[str] = mapped_column(StoredString(MR_KEY_LENGTH))
    gitlab_url: Mapped[str | None] = mapped_column(StoredString(URL_LENGTH))
    project_id: Mapped[int | None] = mapped_column(BigInteger)
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))
    mr_iid: Mapped[int]
    discussion_id: Mapped[str] = mapped_column(StoredString(SHA_LENGTH))
    trigger_note_id: Mapped[int] = mapped_column(BigInteger)
    author: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    command: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    finding_id: Mapped[int | None] = mapped_column(
        ForeignKey("findings.id", ondelete="SET NULL"), index=True
    )
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    reason: Mapped[str | None] = mapped_column(StoredText)  # why dropped or failed
    reply_note_id: Mapped[int | None] = mapped_column(BigInteger)
    model: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    model_calls: Mapped[int] = mapped_column(default=0)
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    cached_tokens: Mapped[int] = mapped_column(default=0)
    latency_ms: Mapped[float | None]
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


class EvalComparison(Base):
    """One `reviewbot eval --compare` run: its configurations (names, files, settings) and,
    for each pair, the per-item F1 differences with their paired bootstrap interval."""

    __tablename__ = "eval_comparisons"
    __table_args__ = (Index(None, "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(StoredString(PATH_LENGTH))
    configurations: Mapped[list[Any]] = mapped_column(JSON)
    pairs: Mapped[list[Any]] = mapped_column(JSON)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]


class EvalRun(Base):
    """One `reviewbot eval` run: the pipeline scored on a labelled dataset. A run of
    `eval --compare` names its ``comparison_id`` and ``configuration``; the cost columns
    (model calls, tokens, wall time) are NULL for runs recorded before they were counted."""

    __tablename__ = "eval_runs"
    __table_args__ = (Index(None, "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(StoredString(PATH_LENGTH))
    model: Mapped[str] = mapped_column(StoredString(NAME_LENGTH))
    prompt_version: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    tolerance: Mapped[int]
    items: Mapped[int]
    tp: Mapped[int]
    fp: Mapped[int]
    fn: Mapped[int]
    precision: Mapped[float]
    recall: Mapped[float]
    f1: Mapped[float]
    mean_precision: Mapped[float]
    mean_recall: Mapped[float]
    mean_f1: Mapped[float]
    results: Mapped[dict[str, Any]] = mapped_column(JSON)  # per item and per category
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    comparison_id: Mapped[int | None] = mapped_column(
        ForeignKey("eval_comparisons.id", ondelete="CASCADE"), index=True
    )
    configuration: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    model_calls: Mapped[int | None]
    prompt_tokens: Mapped[int | None]
    cached_tokens: Mapped[int | None]
    completion_tokens: Mapped[int | None]
    wall_s: Mapped[float | None]
    reasoning_tokens: Mapped[
        int | None
    ]  # of completion_tokens, those the server says were thinking


class GitLabBudget(Base):
    """One GitLab instance's token bucket for one kind of request (reviewbot.gitlab_budget):
    the tokens left when it was last taken from, and when (epoch seconds of the taker's clock)."""

    __tablename__ = "gitlab_budgets"

    gitlab_url: Mapped[str] = mapped_column(StoredString(URL_LENGTH), primary_key=True)
    kind: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at_s: Mapped[float] = mapped_column(Float)


class Job(Base):
    """A review waiting for, or handled by, a worker (the durable queue, reviewbot.queue)."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_one_of("trigger", Trigger), name="trigger"),
        CheckConstraint(_one_of("kind", JobKind), name="kind"),
        CheckConstraint(_one_of("status", JobStatus), name="status"),
        Index(None, "status", "run_after"),
        Index(None, "project", "mr_iid"),
        Index(None, "dedupe_key", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(StoredString(PROJECT_LENGTH))
    mr_iid: Mapped[int]
    project_id: Mapped[int | None] = mapped_column(BigInteger)  # what the worker asks GitLab by
    head_sha: Mapped[str | None] = mapped_column(StoredString(SHA_LENGTH))
    trigger: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    status: Mapped[str] = mapped_column(StoredString(SHORT_LABEL_LENGTH))
    attempts: Mapped[int]
    max_attempts: Mapped[int]
    run_after: Mapped[datetime]
    lease_owner: Mapped[str | None] = mapped_column(StoredString(NAME_LENGTH))
    lease_expires_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(StoredText)
    dedupe_key: Mapped[str | None] = mapped_column(StoredString(EVENT_KEY_LENGTH))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(
        StoredString(SHORT_LABEL_LENGTH), default=JobKind.REVIEW.value
    )
