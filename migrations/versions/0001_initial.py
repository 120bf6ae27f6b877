"""Initial schema: reviews, llm_calls, findings, feedback, mr_locks.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Written out in full (no import of reviewbot.store.models) so this revision keeps meaning the
same schema whatever the models become later.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROJECT = 512
SHA = 64
LABEL = 32
NAME = 255
PATH = 1024
EVENT_KEY = 255


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _label(name: str) -> sa.Column:
    return sa.Column(name, sa.String(length=LABEL), nullable=False)


def _counter(name: str) -> sa.Column:
    return sa.Column(name, sa.Integer(), nullable=False)


def _one_of(column: str, *values: str) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    op.create_table(
        "mr_locks",
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=NAME), nullable=False),
        _timestamp("expires_at"),
        sa.PrimaryKeyConstraint("project", "mr_iid", name=op.f("pk_mr_locks")),
    )
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("head_sha", sa.String(length=SHA), nullable=False),
        sa.Column("base_sha", sa.String(length=SHA), nullable=True),
        sa.Column("start_sha", sa.String(length=SHA), nullable=True),
        _label("trigger"),
        _label("status"),
        sa.Column("model", sa.String(length=NAME), nullable=False),
        _label("prompt_version"),
        _timestamp("started_at"),
        _timestamp("finished_at", nullable=True),
        sa.Column("files_total", sa.Integer(), nullable=True),
        sa.Column("files_reviewed", sa.Integer(), nullable=True),
        sa.Column("changed_lines_total", sa.Integer(), nullable=True),
        sa.Column("changed_lines_covered", sa.Integer(), nullable=True),
        sa.Column("skipped", sa.JSON(), nullable=True),
        _counter("chunks"),
        _counter("prompt_tokens"),
        _counter("completion_tokens"),
        _counter("cached_tokens"),
        sa.Column("summary_note_id", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            _one_of("status", "running", "succeeded", "failed", "superseded"),
            name=op.f("ck_reviews_status"),
        ),
        sa.CheckConstraint(
            _one_of("trigger", "cli", "ci", "webhook", "note", "local"),
            name=op.f("ck_reviews_trigger"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reviews")),
    )
    op.create_index(op.f("ix_reviews_project_mr_iid"), "reviews", ["project", "mr_iid"])
    op.create_index(op.f("ix_reviews_started_at"), "reviews", ["started_at"])

    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("review_id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("fingerprint", sa.String(length=SHA), nullable=False),
        sa.Column("path", sa.String(length=PATH), nullable=False),
        _label("side"),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("end_line", sa.Integer(), nullable=True),
        _label("severity"),
        _label("category"),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        _label("anchor"),
        _label("state"),
        sa.Column("discussion_id", sa.String(length=SHA), nullable=True),
        sa.Column("note_id", sa.BigInteger(), nullable=True),
        _timestamp("created_at"),
        _timestamp("resolved_at", nullable=True),
        sa.CheckConstraint(
            _one_of("anchor", "exact", "reanchored", "file"), name=op.f("ck_findings_anchor")
        ),
        sa.CheckConstraint(_one_of("side", "new", "old"), name=op.f("ck_findings_side")),
        sa.CheckConstraint(
            _one_of(
                "state",
                "posted",
                "summary",
                "duplicate",
                "dry_run",
                "resolved",
                "outdated",
                "failed",
            ),
            name=op.f("ck_findings_state"),
        ),
        sa.ForeignKeyConstraint(
            ["review_id"],
            ["reviews.id"],
            name=op.f("fk_findings_review_id_reviews"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_findings")),
    )
    op.create_index(op.f("ix_findings_created_at"), "findings", ["created_at"])
    op.create_index(
        op.f("ix_findings_project_mr_iid_fingerprint"),
        "findings",
        ["project", "mr_iid", "fingerprint"],
    )
    op.create_index(op.f("ix_findings_review_id"), "findings", ["review_id"])

    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("review_id", sa.Integer(), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        _label("mode"),
        _label("outcome"),
        _counter("prompt_tokens"),
        _counter("completion_tokens"),
        _counter("cached_tokens"),
        sa.Column("ttft_ms", sa.Double(), nullable=True),
        sa.Column("latency_ms", sa.Double(), nullable=True),
        sa.Column("slot_wait_ms", sa.Double(), nullable=True),
        _counter("retries"),
        _counter("invalid_tool_calls"),
        sa.Column("error", sa.Text(), nullable=True),
        _timestamp("started_at"),
        sa.CheckConstraint(
            _one_of("mode", "tool_calls", "json_schema", "content"),
            name=op.f("ck_llm_calls_mode"),
        ),
        sa.ForeignKeyConstraint(
            ["review_id"],
            ["reviews.id"],
            name=op.f("fk_llm_calls_review_id_reviews"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_calls")),
    )
    op.create_index(op.f("ix_llm_calls_review_id"), "llm_calls", ["review_id"])

    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=True),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("note_id", sa.BigInteger(), nullable=True),
        _label("kind"),
        _label("value"),
        sa.Column("username", sa.String(length=NAME), nullable=True),
        sa.Column("event_key", sa.String(length=EVENT_KEY), nullable=False),
        _timestamp("created_at"),
        sa.CheckConstraint(
            _one_of("kind", "award", "resolution", "reply"), name=op.f("ck_feedback_kind")
        ),
        sa.ForeignKeyConstraint(
            ["finding_id"],
            ["findings.id"],
            name=op.f("fk_feedback_finding_id_findings"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
        sa.UniqueConstraint("event_key", name=op.f("uq_feedback_event_key")),
    )
    op.create_index(op.f("ix_feedback_created_at"), "feedback", ["created_at"])
    op.create_index(op.f("ix_feedback_finding_id"), "feedback", ["finding_id"])


def downgrade() -> None:
    for table in ("feedback", "llm_calls", "findings", "reviews", "mr_locks"):
        op.drop_table(table)
