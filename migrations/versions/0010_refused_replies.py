"""A refused reply: an answer that says why the change asked for was not made.

Revision ID: 0010
Revises: 0009
Create Date: 2027-01-04

- replies.status also `refused`: a note asked for a change (`/reviewbot ignore`, `learn`)
  its author may not make (Developer role or above, reviewbot.permission); the refusal is
  answered in the thread and kept apart from the answers (`posted`) and the notes that got
  none (`dropped`).

Written out in full (no import of reviewbot.store.models), like 0001 (issue 32).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("queued", "posted", "dropped", "failed")
STATUSES = (*OLD_STATUSES, "refused")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def _statuses(values: Sequence[str]) -> None:
    with op.batch_alter_table("replies") as batch:
        batch.drop_constraint(op.f("ck_replies_status"), type_="check")
        batch.create_check_constraint(op.f("ck_replies_status"), _one_of("status", values))


def upgrade() -> None:
    _statuses(STATUSES)


def downgrade() -> None:
    op.execute("UPDATE replies SET status = 'posted' WHERE status = 'refused'")
    _statuses(OLD_STATUSES)
