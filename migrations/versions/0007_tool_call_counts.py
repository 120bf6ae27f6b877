"""Model tool calls per answer: how many, and how many were resent readably.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

- llm_calls.tool_calls: the report_finding calls the answer held, readable or not (NULL for
  calls recorded before: the invalid-call rate counts only calls that know it);
- llm_calls.repaired_tool_calls: on a repair turn (the model told why its calls could not be
  read), the unreadable calls it resent readably; 0 for every earlier call.

With invalid_tool_calls (0001) they give the invalid-call rate per chunk, review, model and
prompt version (issue 17). Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("tool_calls", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column(
                "repaired_tool_calls", sa.Integer(), nullable=False, server_default=sa.text("0")
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("repaired_tool_calls")
        batch.drop_column("tool_calls")
