"""Incremental reviews: what each review saw, and findings' suggestions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

- reviews.diff_digest: per file and hunk, the text hashes and line ranges a review saw, and the
  key of the settings that shaped its findings (reviewbot.interdiff); the next review of the
  MR compares against it and sends only new or changed hunks to the model.
- findings.suggestion: a finding carried over to a later version can be posted again whole.

Written out in full (no import of reviewbot.store.models), like 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("diff_digest", sa.JSON(), nullable=True))
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("suggestion", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("suggestion")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("diff_digest")
