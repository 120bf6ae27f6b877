"""Where each finding came from: findings.source (model / analyzer / both) and, for an
analyzer's finding, findings.analyzer_tool and findings.analyzer_rule. Existing rows: model and
NULL, as only the model reported findings then (issue 35).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

Written out in full (no import of reviewbot.store.models), like 0001 (issue 21).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCE_LENGTH = 32
NAME_LENGTH = 255


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(
            sa.Column("source", sa.String(SOURCE_LENGTH), nullable=False, server_default="model")
        )
        batch.add_column(sa.Column("analyzer_tool", sa.String(NAME_LENGTH), nullable=True))
        batch.add_column(sa.Column("analyzer_rule", sa.String(NAME_LENGTH), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("analyzer_rule")
        batch.drop_column("analyzer_tool")
        batch.drop_column("source")
