"""The reviewer's context: review rules, repository tool rounds, and eval comparisons.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

- findings.rule: the name of the review rule a finding applies (NULL: none named), so the
  report scores findings, 👍/👎 and the addressed rate per rule;
- llm_calls.tool_round: 0 for a chunk's first request, n for the request that carries the
  answers of its n-th round of repository tool calls; llm_calls.repo_tool_calls: the
  repository tool calls (read_file, search_code, …) its answer held; llm_calls.
  tool_answer_tokens: the tokens of the tool answers sent back after it;
- eval_comparisons: one `reviewbot eval --compare` run (configurations, pairwise differences
  with their bootstrap intervals); eval_runs.comparison_id and eval_runs.configuration tie a
  run to it, and eval_runs gain the cost of a run (model calls, tokens, wall time).

Written out in full (no import of reviewbot.store.models), like 0001 (issue 20).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
PATH = 1024


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("rule", sa.String(length=NAME), nullable=True))
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(
            sa.Column("tool_round", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(
            sa.Column("repo_tool_calls", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(
            sa.Column(
                "tool_answer_tokens", sa.Integer(), nullable=False, server_default=sa.text("0")
            )
        )
    op.create_table(
        "eval_comparisons",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset", sa.String(length=PATH), nullable=False),
        sa.Column("configurations", sa.JSON(), nullable=False),
        sa.Column("pairs", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_comparisons")),
    )
    op.create_index(op.f("ix_eval_comparisons_started_at"), "eval_comparisons", ["started_at"])
    with op.batch_alter_table("eval_runs") as batch:
        batch.add_column(sa.Column("comparison_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("configuration", sa.String(length=NAME), nullable=True))
        batch.add_column(sa.Column("model_calls", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("prompt_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("completion_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("wall_s", sa.Double(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_eval_runs_comparison_id_eval_comparisons"),
            "eval_comparisons",
            ["comparison_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch.create_index(op.f("ix_eval_runs_comparison_id"), ["comparison_id"])


def downgrade() -> None:
    with op.batch_alter_table("eval_runs") as batch:
        batch.drop_index(op.f("ix_eval_runs_comparison_id"))
        batch.drop_constraint(
            op.f("fk_eval_runs_comparison_id_eval_comparisons"), type_="foreignkey"
        )
        for column in (
            "wall_s",
            "completion_tokens",
            "cached_tokens",
            "prompt_tokens",
            "model_calls",
            "configuration",
            "comparison_id",
        ):
            batch.drop_column(column)
    op.drop_index(op.f("ix_eval_comparisons_started_at"), table_name="eval_comparisons")
    op.drop_table("eval_comparisons")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("tool_answer_tokens")
        batch.drop_column("repo_tool_calls")
        batch.drop_column("tool_round")
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("rule")
