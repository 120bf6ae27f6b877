"""Merge requests keyed by GitLab instance + project id + iid; more feedback kinds.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

- reviews, findings, feedback: `gitlab_url` and `project_id` (a project path changes on rename
  and two GitLab instances can both have `group/app!1`); rows written before stay NULL there
  (their history keeps the path).
- jobs: `project_id`, so a worker asks GitLab by id.
- mr_locks: one `mr_key` column ("<gitlab url>|<project id>|<iid>") instead of path + iid.
  Locks are short-lived leases, so the table is recreated empty.
- feedback.kind: also `addressed`, `deleted`, `suggestion_applied`, `ignored` (what became of a
  posted finding); findings.state: also `deleted` (found again, not posted again: a reviewer
  had deleted its comment).

Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

URL = 2048
MR_KEY = 2200
PROJECT = 512
NAME = 255
OLD_KINDS = ("award", "resolution", "reply")
KINDS = (*OLD_KINDS, "addressed", "deleted", "suggestion_applied", "ignored")
OLD_STATES = ("posted", "summary", "duplicate", "dry_run", "resolved", "outdated", "failed")
STATES = (*OLD_STATES, "deleted")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _identity_columns(table: str) -> None:
    with op.batch_alter_table(table) as batch:
        batch.add_column(sa.Column("gitlab_url", sa.String(length=URL), nullable=True))
        batch.add_column(sa.Column("project_id", sa.BigInteger(), nullable=True))


def upgrade() -> None:
    for table in ("reviews", "findings", "feedback"):
        _identity_columns(table)
    op.create_index(
        op.f("ix_reviews_gitlab_url_project_id_mr_iid"),
        "reviews",
        ["gitlab_url", "project_id", "mr_iid"],
    )
    op.create_index(
        op.f("ix_findings_gitlab_url_project_id_mr_iid_fingerprint"),
        "findings",
        ["gitlab_url", "project_id", "mr_iid", "fingerprint"],
    )
    with op.batch_alter_table("feedback") as batch:
        batch.drop_constraint(op.f("ck_feedback_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_feedback_kind"), _one_of("kind", KINDS))
    with op.batch_alter_table("findings") as batch:
        batch.drop_constraint(op.f("ck_findings_state"), type_="check")
        batch.create_check_constraint(op.f("ck_findings_state"), _one_of("state", STATES))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("project_id", sa.BigInteger(), nullable=True))
    op.drop_table("mr_locks")
    op.create_table(
        "mr_locks",
        sa.Column("mr_key", sa.String(length=MR_KEY), nullable=False),
        sa.Column("holder", sa.String(length=NAME), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("mr_key", name=op.f("pk_mr_locks")),
    )


def downgrade() -> None:
    op.drop_table("mr_locks")
    op.create_table(
        "mr_locks",
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=NAME), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project", "mr_iid", name=op.f("pk_mr_locks")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("project_id")
    op.execute(sa.text(f"DELETE FROM findings WHERE NOT ({_one_of('state', OLD_STATES)})"))
    with op.batch_alter_table("findings") as batch:
        batch.drop_constraint(op.f("ck_findings_state"), type_="check")
        batch.create_check_constraint(op.f("ck_findings_state"), _one_of("state", OLD_STATES))
    op.execute(sa.text(f"DELETE FROM feedback WHERE NOT ({_one_of('kind', OLD_KINDS)})"))
    with op.batch_alter_table("feedback") as batch:
        batch.drop_constraint(op.f("ck_feedback_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_feedback_kind"), _one_of("kind", OLD_KINDS))
    op.drop_index(op.f("ix_findings_gitlab_url_project_id_mr_iid_fingerprint"), "findings")
    op.drop_index(op.f("ix_reviews_gitlab_url_project_id_mr_iid"), "reviews")
    for table in ("feedback", "findings", "reviews"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("project_id")
            batch.drop_column("gitlab_url")
