"""The GitLab request budgets every worker shares: gitlab_budgets, one token bucket per GitLab
instance and kind of request (note creation, every API request), issue 38.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

URL_LENGTH = 2048
LABEL_LENGTH = 32


def upgrade() -> None:
    op.create_table(
        "gitlab_budgets",
        sa.Column("gitlab_url", sa.String(length=URL_LENGTH), nullable=False),
        sa.Column("kind", sa.String(length=LABEL_LENGTH), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("gitlab_url", "kind", name=op.f("pk_gitlab_budgets")),
    )


def downgrade() -> None:
    op.drop_table("gitlab_budgets")
