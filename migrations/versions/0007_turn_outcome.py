"""Each turn record says whether the action failed, by the game's own evidence (issue 17).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

``turn_records.outcome``: ``ok``, ``refused`` (a refusal of the game, such as "You can't go
that way."), ``repeated`` (word for word the answer the same action got the last time at
the same place in the episode, with nothing tracked changed) or ``died``
(memstore.outcome). It cannot be worked out afterwards (the answers are not stored), so
turns recorded before this revision keep NULL, and the metrics count them by the older
definition ("changed no score, location or inventory", the ``state_changed`` column).
The downgrade drops the column and nothing else.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# memstore.outcome.Outcome as of this revision (a migration keeps its own copy)
KNOWN_OUTCOME = "outcome IS NULL OR outcome IN ('ok', 'refused', 'repeated', 'died')"


def upgrade() -> None:
    with op.batch_alter_table("turn_records") as batch:
        batch.add_column(sa.Column("outcome", sa.Text(), nullable=True))
        batch.create_check_constraint(op.f("ck_turn_records_outcome_known"), KNOWN_OUTCOME)


def downgrade() -> None:
    with op.batch_alter_table("turn_records") as batch:
        batch.drop_constraint(op.f("ck_turn_records_outcome_known"), type_="check")
        batch.drop_column("outcome")
