"""What the model's thinking did to each call: llm_calls.recovered_tool_calls (calls read from
where vLLM's parsers should have taken them out: the content of a tool-calls answer, or the
thinking), llm_calls.reasoning_tokens (of the completion tokens, those spent thinking, when the
server says; NULL otherwise) and llm_calls.thinking_off (asked with thinking off after an
answer cut off while thinking), and eval_runs.reasoning_tokens (an eval run's tokens of
thinking, summed). Existing rows: 0, NULL and false, as nothing was counted then (issue 34).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(
            sa.Column("recovered_tool_calls", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("reasoning_tokens", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("thinking_off", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("eval_runs") as batch:
        batch.add_column(sa.Column("reasoning_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("eval_runs") as batch:
        batch.drop_column("reasoning_tokens")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("thinking_off")
        batch.drop_column("reasoning_tokens")
        batch.drop_column("recovered_tool_calls")
