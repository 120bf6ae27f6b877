"""Dry runs are marked: reviews.dry_run (a `--dry-run` review posted nothing; the report leaves
it out, issue 32). Existing rows are taken as posting reviews (false), as they were counted.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(
            sa.Column("dry_run", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("dry_run")
