"""Durable job queue: the jobs table (reviewbot.queue).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROJECT = 512
SHA = 64
LABEL = 32
NAME = 255
DEDUPE_KEY = 255
TRIGGERS = ("cli", "ci", "webhook", "note", "local")
STATUSES = ("queued", "running", "succeeded", "failed", "superseded", "cancelled")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(length=SHA), nullable=True),
        sa.Column("trigger", sa.String(length=LABEL), nullable=False),
        sa.Column("status", sa.String(length=LABEL), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        _timestamp("run_after"),
        sa.Column("lease_owner", sa.String(length=NAME), nullable=True),
        _timestamp("lease_expires_at", nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("dedupe_key", sa.String(length=DEDUPE_KEY), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.CheckConstraint(_one_of("status", STATUSES), name=op.f("ck_jobs_status")),
        sa.CheckConstraint(_one_of("trigger", TRIGGERS), name=op.f("ck_jobs_trigger")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_status_run_after"), "jobs", ["status", "run_after"])
    op.create_index(op.f("ix_jobs_project_mr_iid"), "jobs", ["project", "mr_iid"])
    # NULL keys never collide (both SQLite and PostgreSQL treat NULLs as distinct here).
    op.create_index(op.f("ix_jobs_dedupe_key"), "jobs", ["dedupe_key"], unique=True)


def downgrade() -> None:
    op.drop_table("jobs")
