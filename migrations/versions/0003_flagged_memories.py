"""Memories the agent flags itself through its `remember` field (spec 001).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flagged_memories",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("importance", INTEGER, nullable=False),
        sa.Column("turn", INTEGER, nullable=False),
        sa.Column("location_id", INTEGER, nullable=True),
        sa.Column("location_name", sa.Text(), nullable=False),
        sa.Column("score", INTEGER, nullable=True),
        sa.Column("moves", INTEGER, nullable=True),
        sa.Column("episode", INTEGER, nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "importance BETWEEN 1 AND 1000", name=op.f("ck_flagged_memories_importance_in_range")
        ),
        sa.CheckConstraint(
            "length(trim(content)) > 0", name=op.f("ck_flagged_memories_content_not_blank")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flagged_memories")),
    )
    op.create_index("ix_flagged_memories_importance", "flagged_memories", ["importance"])
    op.create_index("ix_flagged_memories_location_id", "flagged_memories", ["location_id"])


def downgrade() -> None:
    op.drop_index("ix_flagged_memories_location_id", table_name="flagged_memories")
    op.drop_index("ix_flagged_memories_importance", table_name="flagged_memories")
    op.drop_table("flagged_memories")
