"""Receipts of writes whose COMMIT's answer a lost connection may have swallowed.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

When the connection to a PostgreSQL server is lost during a COMMIT, the writer cannot
tell whether the transaction was committed. The agent's memory manager writes a receipt
in each write transaction on a server (``write_receipts``) and, after such a loss, looks
for it before writing the same turn records, decision rows, visits and map events again
(memstore.synthesis_runner). A writer deletes its receipt in its next transaction. The
downgrade drops the table, and nothing else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "write_receipts",
        sa.Column("receipt", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("receipt", name=op.f("pk_write_receipts")),
    )


def downgrade() -> None:
    op.drop_table("write_receipts")
