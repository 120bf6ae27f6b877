"""Accuracy tracking: merge requests as last synced from GitLab, and eval runs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

- merge_requests: what `reviewbot feedback sync` last read of a reviewed MR (state, merge
  time, head of the latest diff version); the report's addressed rate counts the findings
  whose MR got a later version or was merged.
- eval_runs: `reviewbot eval` scores (micro and mean per item) with the model and prompt
  version, so `reviewbot report` compares prompt versions.

Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

URL = 2048
PROJECT = 512
LABEL = 32
SHA = 64
NAME = 255
PATH = 1024
MR_STATES = ("opened", "closed", "merged", "locked")


def upgrade() -> None:
    op.create_table(
        "merge_requests",
        sa.Column("gitlab_url", sa.String(length=URL), nullable=False),
        sa.Column("project_id", sa.BigInteger(), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("state", sa.String(length=LABEL), nullable=False),
        sa.Column("web_url", sa.String(length=URL), nullable=True),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("latest_head_sha", sa.String(length=SHA), nullable=True),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            f"state IN ({', '.join(repr(state) for state in MR_STATES)})",
            name=op.f("ck_merge_requests_state"),
        ),
        sa.PrimaryKeyConstraint(
            "gitlab_url", "project_id", "mr_iid", name=op.f("pk_merge_requests")
        ),
    )
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset", sa.String(length=PATH), nullable=False),
        sa.Column("model", sa.String(length=NAME), nullable=False),
        sa.Column("prompt_version", sa.String(length=LABEL), nullable=False),
        sa.Column("tolerance", sa.Integer(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("tp", sa.Integer(), nullable=False),
        sa.Column("fp", sa.Integer(), nullable=False),
        sa.Column("fn", sa.Integer(), nullable=False),
        sa.Column("precision", sa.Double(), nullable=False),
        sa.Column("recall", sa.Double(), nullable=False),
        sa.Column("f1", sa.Double(), nullable=False),
        sa.Column("mean_precision", sa.Double(), nullable=False),
        sa.Column("mean_recall", sa.Double(), nullable=False),
        sa.Column("mean_f1", sa.Double(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_runs")),
    )
    op.create_index(op.f("ix_eval_runs_started_at"), "eval_runs", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_eval_runs_started_at"), table_name="eval_runs")
    op.drop_table("eval_runs")
    op.drop_table("merge_requests")
