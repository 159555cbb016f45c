"""Whether an import made a location's rename (``location_names.imported``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24

The 3-way merge of location names (memstore.name_merge) keeps the database's name when the
file's name is one an import already set since the export (the same file imported again,
after the game named the room as before), but takes the file's name when only an agent
used that name for a while. So each kept name says whether an import replaced it: 1 for an
import, 0 for an agent's visit. Names kept before this revision read as an agent's.

The column is added only where it is missing (a development build of 0009 had it). The
downgrade drops the column, and nothing else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("location_names")}
    if "imported" in columns:
        return
    with op.batch_alter_table("location_names") as batch:
        batch.add_column(
            sa.Column("imported", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("location_names") as batch:
        batch.drop_column("imported")
