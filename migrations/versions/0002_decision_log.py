"""Decision log of every synthesis call, and per-turn records for the success metrics.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "synthesis_decisions",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("episode", INTEGER, nullable=False),
        sa.Column("turn", INTEGER, nullable=False),
        sa.Column("location_id", INTEGER, nullable=False),
        sa.Column("location_name", sa.Text(), nullable=False),
        sa.Column("triggers", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("raw_answer", sa.Text(), nullable=True),
        sa.Column("decision", sa.Text(), nullable=True),
        sa.Column("applied", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", INTEGER, nullable=True),
        sa.Column("completion_tokens", INTEGER, nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "mode IN ('llm', 'offline')", name=op.f("ck_synthesis_decisions_mode_known")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_synthesis_decisions")),
    )
    op.create_index(
        "ix_synthesis_decisions_episode_turn", "synthesis_decisions", ["episode", "turn"]
    )
    op.create_table(
        "turn_records",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("episode", INTEGER, nullable=False),
        sa.Column("turn", INTEGER, nullable=False),
        sa.Column("location_id", INTEGER, nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("score_before", INTEGER, nullable=False),
        sa.Column("score_after", INTEGER, nullable=False),
        sa.Column("location_after", INTEGER, nullable=True),
        sa.Column("state_changed", INTEGER, nullable=False),
        sa.Column("died", INTEGER, nullable=False),
        sa.Column("triggers", sa.Text(), nullable=False),
        sa.Column("memory_tokens", INTEGER, nullable=False),
        sa.Column("overhead_us", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turn_records")),
    )
    op.create_index(
        "ix_turn_records_run_id_episode_turn", "turn_records", ["run_id", "episode", "turn"]
    )


def downgrade() -> None:
    op.drop_index("ix_turn_records_run_id_episode_turn", table_name="turn_records")
    op.drop_table("turn_records")
    op.drop_index("ix_synthesis_decisions_episode_turn", table_name="synthesis_decisions")
    op.drop_table("synthesis_decisions")
