"""The map: rooms by location id, connections, exit failures and pruned exits (issue 16).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

Four new tables, all on disk so the map outlives episodes (memstore.map_graph says what the
rows mean): ``map_rooms`` (the Z-machine location id and a display name),
``map_connections`` (one per room and action key: the action as first typed, its canonical
direction when it is one, where it led, verifications and failures, first and last
episode/turn seen), ``map_exit_failures`` (directions that did not move the player, with a
count) and ``map_pruned_exits`` (directions that failed too often and never succeeded). No
existing table changes; the downgrade drops the four tables and nothing else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# memstore.map_graph.DIRECTIONS as of this revision (a migration keeps its own copy)
KNOWN_DIRECTION = (
    "direction IN ('north', 'south', 'east', 'west', 'northeast', 'northwest', 'southeast', "
    "'southwest', 'up', 'down', 'in', 'out')"
)


def _room_key(table: str, column: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        ["map_rooms.id"],
        name=op.f(f"fk_{table}_{column}_map_rooms"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "map_rooms",
        sa.Column("id", INTEGER, autoincrement=False, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_map_rooms")),
    )
    op.create_table(
        "map_connections",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("from_id", INTEGER, nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("action_key", sa.Text(), nullable=False),
        sa.Column("direction", sa.Text(), nullable=True),
        sa.Column("to_id", INTEGER, nullable=False),
        sa.Column("verifications", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.Column("failures", INTEGER, server_default=sa.text("0"), nullable=False),
        sa.Column("first_episode", INTEGER, nullable=False),
        sa.Column("first_turn", INTEGER, nullable=False),
        sa.Column("last_episode", INTEGER, nullable=False),
        sa.Column("last_turn", INTEGER, nullable=False),
        sa.CheckConstraint(
            f"direction IS NULL OR ({KNOWN_DIRECTION} AND action_key = direction)",
            name=op.f("ck_map_connections_direction_known"),
        ),
        sa.CheckConstraint(
            "length(trim(action_key)) > 0", name=op.f("ck_map_connections_action_key_not_blank")
        ),
        sa.CheckConstraint(
            "verifications >= 0 AND failures >= 0",
            name=op.f("ck_map_connections_counts_not_negative"),
        ),
        _room_key("map_connections", "from_id"),
        _room_key("map_connections", "to_id"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_map_connections")),
        sa.UniqueConstraint(
            "from_id", "action_key", name=op.f("uq_map_connections_from_id_action_key")
        ),
    )
    op.create_table(
        "map_exit_failures",
        sa.Column("from_id", INTEGER, nullable=False),
        sa.Column("direction", sa.Text(), nullable=False),
        sa.Column("count", INTEGER, nullable=False),
        sa.Column("last_episode", INTEGER, nullable=False),
        sa.Column("last_turn", INTEGER, nullable=False),
        sa.CheckConstraint(KNOWN_DIRECTION, name=op.f("ck_map_exit_failures_direction_known")),
        sa.CheckConstraint("count >= 0", name=op.f("ck_map_exit_failures_count_not_negative")),
        _room_key("map_exit_failures", "from_id"),
        sa.PrimaryKeyConstraint("from_id", "direction", name=op.f("pk_map_exit_failures")),
    )
    op.create_table(
        "map_pruned_exits",
        sa.Column("from_id", INTEGER, nullable=False),
        sa.Column("direction", sa.Text(), nullable=False),
        sa.Column("pruned_episode", INTEGER, nullable=False),
        sa.Column("pruned_turn", INTEGER, nullable=False),
        sa.CheckConstraint(KNOWN_DIRECTION, name=op.f("ck_map_pruned_exits_direction_known")),
        _room_key("map_pruned_exits", "from_id"),
        sa.PrimaryKeyConstraint("from_id", "direction", name=op.f("pk_map_pruned_exits")),
    )


def downgrade() -> None:
    op.drop_table("map_pruned_exits")
    op.drop_table("map_exit_failures")
    op.drop_table("map_connections")
    op.drop_table("map_rooms")
