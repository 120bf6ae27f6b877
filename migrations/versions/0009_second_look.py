"""A second look and a reviewer to talk to: verification verdicts, team learnings, answers.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

- findings: `verdict` (keep / drop / unverified), `verdict_reason`, `verdict_confidence` from
  the verification pass; `learning_id`, the learning that suppressed it; findings.state also
  `dropped` (verification dropped it) and `suppressed_by_learning`;
- llm_calls.purpose: `review` or `verify` (the verification pass's cost is counted apart);
- learnings: a team's instructions to the reviewer, with scope, author and history;
- replies: one answer (or refusal) per human note in a bot thread; feedback.reply_id ties a
  reaction to the answer it is on;
- jobs.kind: `review` or `reply` (a reply job never supersedes a review, nor the reverse).

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

URL = 2048
MR_KEY = 2200
PROJECT = 512
NAME = 255
SHA = 64
LABEL = 32
EVENT_KEY = 255
OLD_STATES = (
    "posted",
    "summary",
    "duplicate",
    "dry_run",
    "resolved",
    "outdated",
    "failed",
    "deleted",
)
STATES = (*OLD_STATES, "dropped", "suppressed_by_learning")
JOB_KINDS = ("review", "reply")
LEARNING_STATUSES = ("proposed", "active", "rejected", "removed")
LEARNING_SOURCES = ("thread", "cli", "proposal")
REPLY_COMMANDS = ("ask", "explain", "fix", "ignore", "learn")
REPLY_STATUSES = ("queued", "posted", "dropped", "failed")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _learnings() -> None:
    op.create_table(
        "learnings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gitlab_url", sa.String(length=URL), nullable=True),
        sa.Column("project_id", sa.BigInteger(), nullable=True),
        sa.Column("project", sa.String(length=PROJECT), nullable=True),
        sa.Column("group_path", sa.String(length=PROJECT), nullable=True),
        sa.Column("path_globs", sa.JSON(), nullable=False),
        sa.Column("category", sa.String(length=LABEL), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=LABEL), nullable=False),
        sa.Column("source", sa.String(length=LABEL), nullable=False),
        sa.Column("author", sa.String(length=NAME), nullable=True),
        sa.Column("author_id", sa.BigInteger(), nullable=True),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("discussion_id", sa.String(length=SHA), nullable=True),
        sa.Column("note_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_by", sa.String(length=NAME), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("proposal_key", sa.String(length=EVENT_KEY), nullable=True),
        sa.Column("proposal_evidence", sa.JSON(), nullable=True),
        sa.Column("proposal_note_id", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(_one_of("status", LEARNING_STATUSES), name=op.f("ck_learnings_status")),
        sa.CheckConstraint(_one_of("source", LEARNING_SOURCES), name=op.f("ck_learnings_source")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learnings")),
    )
    op.create_index(
        op.f("ix_learnings_gitlab_url_project_id_status"),
        "learnings",
        ["gitlab_url", "project_id", "status"],
    )
    op.create_index(op.f("ix_learnings_proposal_key"), "learnings", ["proposal_key"], unique=True)


def _replies() -> None:
    op.create_table(
        "replies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("reply_key", sa.String(length=MR_KEY), nullable=False),
        sa.Column("gitlab_url", sa.String(length=URL), nullable=True),
        sa.Column("project_id", sa.BigInteger(), nullable=True),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("discussion_id", sa.String(length=SHA), nullable=False),
        sa.Column("trigger_note_id", sa.BigInteger(), nullable=False),
        sa.Column("author", sa.String(length=NAME), nullable=True),
        sa.Column("command", sa.String(length=LABEL), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=LABEL), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("reply_note_id", sa.BigInteger(), nullable=True),
        sa.Column("model", sa.String(length=NAME), nullable=True),
        sa.Column("model_calls", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Double(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(_one_of("command", REPLY_COMMANDS), name=op.f("ck_replies_command")),
        sa.CheckConstraint(_one_of("status", REPLY_STATUSES), name=op.f("ck_replies_status")),
        sa.ForeignKeyConstraint(
            ["finding_id"],
            ["findings.id"],
            name=op.f("fk_replies_finding_id_findings"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_replies_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replies")),
    )
    op.create_index(op.f("ix_replies_reply_key"), "replies", ["reply_key"], unique=True)
    op.create_index(
        op.f("ix_replies_gitlab_url_project_id_mr_iid"),
        "replies",
        ["gitlab_url", "project_id", "mr_iid"],
    )
    op.create_index(op.f("ix_replies_created_at"), "replies", ["created_at"])
    op.create_index(op.f("ix_replies_finding_id"), "replies", ["finding_id"])


def upgrade() -> None:
    _learnings()
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("verdict", sa.String(length=LABEL), nullable=True))
        batch.add_column(sa.Column("verdict_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("verdict_confidence", sa.Double(), nullable=True))
        batch.add_column(sa.Column("learning_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_findings_learning_id_learnings"),
            "learnings",
            ["learning_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch.create_index(op.f("ix_findings_learning_id"), ["learning_id"])
        batch.drop_constraint(op.f("ck_findings_state"), type_="check")
        batch.create_check_constraint(op.f("ck_findings_state"), _one_of("state", STATES))
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(
            sa.Column(
                "purpose",
                sa.String(length=LABEL),
                nullable=False,
                server_default=sa.text("'review'"),
            )
        )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column(
                "kind", sa.String(length=LABEL), nullable=False, server_default=sa.text("'review'")
            )
        )
        batch.create_check_constraint(op.f("ck_jobs_kind"), _one_of("kind", JOB_KINDS))
    _replies()
    with op.batch_alter_table("feedback") as batch:
        batch.add_column(sa.Column("reply_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_feedback_reply_id_replies"),
            "replies",
            ["reply_id"],
            ["id"],
            ondelete="SET NULL",
        )
        batch.create_index(op.f("ix_feedback_reply_id"), ["reply_id"])


def downgrade() -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.drop_index(op.f("ix_feedback_reply_id"))
        batch.drop_constraint(op.f("fk_feedback_reply_id_replies"), type_="foreignkey")
        batch.drop_column("reply_id")
    for index in ("finding_id", "created_at", "gitlab_url_project_id_mr_iid", "reply_key"):
        op.drop_index(op.f(f"ix_replies_{index}"), table_name="replies")
    op.drop_table("replies")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_kind"), type_="check")
        batch.drop_column("kind")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("purpose")
    with op.batch_alter_table("findings") as batch:
        batch.drop_constraint(op.f("ck_findings_state"), type_="check")
        batch.create_check_constraint(op.f("ck_findings_state"), _one_of("state", OLD_STATES))
        batch.drop_index(op.f("ix_findings_learning_id"))
        batch.drop_constraint(op.f("fk_findings_learning_id_learnings"), type_="foreignkey")
        for column in ("learning_id", "verdict_confidence", "verdict", "verdict_reason"):
            batch.drop_column(column)
    op.drop_index(op.f("ix_learnings_proposal_key"), table_name="learnings")
    op.drop_index(op.f("ix_learnings_gitlab_url_project_id_status"), table_name="learnings")
    op.drop_table("learnings")
