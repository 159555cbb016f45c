"""The names a location had, so an import merges a location's name 3-way.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

``location_names`` keeps the name a location had before a change renamed it (an agent's
visit under another name, or an import), with the change counter's value of that change
(``replaced_version``), as ``memory_history`` does for memories. An import of a file
exported at change V reads the name each location had at V: a name only the database
changed since is kept (the file still has the old one), a name only the file changed is
taken, and a name both changed differently is a conflict. Locations renamed before this
revision have no earlier name: their name at any change is the one they have now, as before.
The downgrade drops the table (the earlier names), and nothing else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

#: a 64-bit integer on every database (SQLite's INTEGER is; PostgreSQL's would be 32)
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "location_names",
        sa.Column("id", INTEGER, nullable=False),
        sa.Column("location_id", INTEGER, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("replaced_version", INTEGER, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_location_names")),
    )
    op.create_index(
        "ix_location_names_replaced_version_location_id",
        "location_names",
        ["replaced_version", "location_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_location_names_replaced_version_location_id", table_name="location_names")
    op.drop_table("location_names")
