"""Initial schema: locations, their episodes, memories and supersession links.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

CATEGORIES = "category IN ('SUCCESS', 'FAILURE', 'DISCOVERY', 'DANGER', 'NOTE')"
STATUSES = "status IN ('ACTIVE', 'TENTATIVE', 'SUPERSEDED')"


def upgrade() -> None:
    op.create_table(
        "locations",
        sa.Column("id", INTEGER, autoincrement=False, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("visit_count", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("visit_count >= 0", name=op.f("ck_locations_visit_count_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_locations")),
    )
    op.create_table(
        "location_episodes",
        sa.Column("location_id", INTEGER, nullable=False),
        sa.Column("episode", INTEGER, nullable=False),
        sa.CheckConstraint("episode >= 1", name=op.f("ck_location_episodes_episode_positive")),
        sa.ForeignKeyConstraint(
            ["location_id"],
            ["locations.id"],
            ondelete="CASCADE",
            name=op.f("fk_location_episodes_location_id_locations"),
        ),
        sa.PrimaryKeyConstraint("location_id", "episode", name=op.f("pk_location_episodes")),
    )
    op.create_table(
        "memories",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("location_id", INTEGER, nullable=False),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("episode", INTEGER, nullable=False),
        sa.Column("turn_start", INTEGER, nullable=False),
        sa.Column("turn_end", INTEGER, nullable=True),
        sa.Column("score_change", INTEGER, nullable=True),
        sa.Column("persistence", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.CheckConstraint(CATEGORIES, name=op.f("ck_memories_category_known")),
        sa.CheckConstraint(STATUSES, name=op.f("ck_memories_status_known")),
        sa.CheckConstraint(
            "persistence IN ('core', 'permanent')", name=op.f("ck_memories_persistence_known")
        ),
        sa.CheckConstraint("length(trim(title)) > 0", name=op.f("ck_memories_title_not_blank")),
        sa.CheckConstraint("episode >= 1", name=op.f("ck_memories_episode_positive")),
        sa.CheckConstraint("turn_start >= 0", name=op.f("ck_memories_turn_not_negative")),
        sa.CheckConstraint(
            "turn_end IS NULL OR turn_end >= turn_start",
            name=op.f("ck_memories_turn_range_ordered"),
        ),
        sa.ForeignKeyConstraint(
            ["location_id"],
            ["locations.id"],
            ondelete="CASCADE",
            name=op.f("fk_memories_location_id_locations"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memories")),
    )
    op.create_index("ix_memories_location_id_status", "memories", ["location_id", "status"])
    op.create_index(
        "uq_memories_location_id_title_live",
        "memories",
        ["location_id", "title"],
        unique=True,
        sqlite_where=sa.text("status != 'SUPERSEDED'"),
        postgresql_where=sa.text("status != 'SUPERSEDED'"),
    )
    op.create_table(
        "memory_links",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("memory_id", INTEGER, nullable=False),
        sa.Column("superseded_by_id", INTEGER, nullable=True),
        sa.Column("episode", INTEGER, nullable=False),
        sa.Column("turn", INTEGER, nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "superseded_by_id IS NULL OR reason IS NULL",
            name=op.f("ck_memory_links_superseded_or_invalidated"),
        ),
        sa.CheckConstraint(
            "reason IS NULL OR length(trim(reason)) > 0",
            name=op.f("ck_memory_links_reason_not_blank"),
        ),
        sa.UniqueConstraint("memory_id", name=op.f("uq_memory_links_memory_id")),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            ondelete="CASCADE",
            name=op.f("fk_memory_links_memory_id_memories"),
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by_id"],
            ["memories.id"],
            ondelete="SET NULL",
            name=op.f("fk_memory_links_superseded_by_id_memories"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_links")),
    )
    op.create_index("ix_memory_links_superseded_by_id", "memory_links", ["superseded_by_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_links_superseded_by_id", table_name="memory_links")
    op.drop_table("memory_links")
    op.drop_index("uq_memories_location_id_title_live", table_name="memories")
    op.drop_index("ix_memories_location_id_status", table_name="memories")
    op.drop_table("memories")
    op.drop_table("location_episodes")
    op.drop_table("locations")
