"""Flagged memories: the normalised content in an indexed column, for de-duplication.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

``flagged_memories.content_key`` holds the content lower-cased with every run of whitespace
one space (``memstore.flagged.normalise``), under ``ix_flagged_memories_content_key``: an
exact duplicate is then one index lookup instead of a read of every row. Existing rows are
backfilled here; the downgrade drops the index and the column and keeps every row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TABLE = "flagged_memories"
INDEX = "ix_flagged_memories_content_key"


def normalise(text: str) -> str:
    """memstore.flagged.normalise as of this revision (a migration keeps its own copy, so a
    later change to the library cannot change what this revision writes)."""
    return " ".join(text.lower().split())


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("content_key", sa.Text(), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text(f"SELECT id, content FROM {TABLE}")).all()
    if rows:
        conn.execute(
            sa.text(f"UPDATE {TABLE} SET content_key = :key WHERE id = :id"),
            [{"id": row_id, "key": normalise(content)} for row_id, content in rows],
        )
    # NOT NULL, as in a new database's table: SQLite rebuilds the table for it; PostgreSQL
    # alters the column (a rebuild there would give the id a new sequence, starting at 1)
    with op.batch_alter_table(TABLE, recreate=_rebuild()) as batch:
        batch.alter_column("content_key", existing_type=sa.Text(), nullable=False)
    op.create_index(INDEX, TABLE, ["content_key"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    with op.batch_alter_table(TABLE, recreate=_rebuild()) as batch:
        batch.drop_column("content_key")


def _rebuild() -> str:
    """alembic's batch mode: rebuild the table on SQLite, ALTER it elsewhere. (This revision
    rebuilt it on PostgreSQL too, until revision 0008 found that the rebuilt table's id
    sequence started again at 1; 0008 repairs a database upgraded that way.)"""
    return "always" if op.get_bind().dialect.name == "sqlite" else "auto"
