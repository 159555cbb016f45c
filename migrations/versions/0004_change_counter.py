"""The change counter, row stamps and earlier row states, for the 3-way import (issue 13).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``store_meta`` holds the database's identity (a random UUID, made here), its change
counter and the last episode number handed out. Every write that changes a persistent
memory advances the counter, stamps the rows it creates or changes
(``memories.created_version`` / ``changed_version``), and keeps the state a change
replaced in ``memory_history``. Existing rows are stamped 0: a file
exported before this revision has no base and imports 2-way, as before.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_meta",
        sa.Column("id", INTEGER, autoincrement=False, nullable=False),
        sa.Column("database_id", sa.Text(), nullable=False),
        sa.Column("change_counter", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.Column("last_episode", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_store_meta_one_row")),
        sa.CheckConstraint("change_counter >= 0", name=op.f("ck_store_meta_counter_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_store_meta")),
    )
    # episodes continue after the last one the database has seen
    largest = "greatest" if op.get_bind().dialect.name == "postgresql" else "max"
    op.execute(
        sa.text(
            "INSERT INTO store_meta (id, database_id, change_counter, last_episode) "
            f"SELECT 1, :id, 0, {largest}("
            "coalesce((SELECT max(episode) FROM location_episodes), 0), "
            "coalesce((SELECT max(episode) FROM memories), 0), "
            "coalesce((SELECT max(episode) FROM turn_records), 0), "
            "coalesce((SELECT max(episode) FROM synthesis_decisions), 0))"
        ).bindparams(id=str(uuid.uuid4()))
    )
    op.create_table(
        "memory_history",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("memory_id", INTEGER, nullable=False),
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
        sa.Column("successor_title", sa.Text(), nullable=True),
        sa.Column("link_turn", INTEGER, nullable=True),
        sa.Column("link_episode", INTEGER, nullable=True),
        sa.Column("link_reason", sa.Text(), nullable=True),
        sa.Column("created_version", INTEGER, nullable=False),
        sa.Column("replaced_version", INTEGER, nullable=False),
        sa.Column("deleted", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_history")),
    )
    op.create_index(
        "ix_memory_history_replaced_version_memory_id",
        "memory_history",
        ["replaced_version", "memory_id"],
    )
    with op.batch_alter_table("memories") as batch:
        batch.add_column(
            sa.Column("created_version", INTEGER, server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(
            sa.Column("changed_version", INTEGER, server_default=sa.text("0"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("changed_version")
        batch.drop_column("created_version")
    op.drop_index("ix_memory_history_replaced_version_memory_id", table_name="memory_history")
    op.drop_table("memory_history")
    op.drop_table("store_meta")
