"""Per-MR throttles: when an action (answering `/reviewbot help`) last ran on an MR.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROJECT = 512
LABEL = 32


def upgrade() -> None:
    op.create_table(
        "mr_throttles",
        sa.Column("project", sa.String(length=PROJECT), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=LABEL), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project", "mr_iid", "action", name=op.f("pk_mr_throttles")),
    )


def downgrade() -> None:
    op.drop_table("mr_throttles")
