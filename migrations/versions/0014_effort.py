"""Review effort: how many passes a review took, and the vote of a deep review (issue 37).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04

- reviews: `effort` (quick / standard / deep), `effort_reason` (why it was chosen: a setting,
  the trigger, or the pool's load) and `passes` (independent passes per chunk);
- findings: `votes` (how many passes reported the finding), `passes` and `confidence`
  (votes / passes); findings.state also `voted_out` (too few passes reported it: stored, never
  posted, so `eval` and the report can show what voting removed);
- reviews.trigger and jobs.trigger also `idle` (a background second look at a recent open MR
  while the model pool is idle).

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHORT_LABEL_LENGTH = 32

OLD_TRIGGERS = ("cli", "ci", "webhook", "note", "local")
TRIGGERS = (*OLD_TRIGGERS, "idle")
OLD_FINDING_STATES = (
    "posted",
    "summary",
    "duplicate",
    "dry_run",
    "resolved",
    "outdated",
    "failed",
    "deleted",
    "dropped",
    "suppressed_by_learning",
)
FINDING_STATES = (*OLD_FINDING_STATES, "voted_out")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _constraint(table: str, column: str, values: Sequence[str]) -> None:
    with op.batch_alter_table(table) as batch:
        batch.drop_constraint(op.f(f"ck_{table}_{column}"), type_="check")
        batch.create_check_constraint(op.f(f"ck_{table}_{column}"), _one_of(column, values))


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("effort", sa.String(SHORT_LABEL_LENGTH), nullable=True))
        batch.add_column(sa.Column("effort_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("passes", sa.Integer(), nullable=True))
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("votes", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("passes", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("confidence", sa.Double(), nullable=True))
    _constraint("reviews", "trigger", TRIGGERS)
    _constraint("jobs", "trigger", TRIGGERS)
    _constraint("findings", "state", FINDING_STATES)


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE trigger = 'idle'")
    op.execute("DELETE FROM reviews WHERE trigger = 'idle'")
    op.execute("DELETE FROM findings WHERE state = 'voted_out'")
    _constraint("findings", "state", OLD_FINDING_STATES)
    _constraint("jobs", "trigger", OLD_TRIGGERS)
    _constraint("reviews", "trigger", OLD_TRIGGERS)
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("confidence")
        batch.drop_column("passes")
        batch.drop_column("votes")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("passes")
        batch.drop_column("effort_reason")
        batch.drop_column("effort")
