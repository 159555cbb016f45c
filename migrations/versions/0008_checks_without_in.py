"""CHECK constraints on lists of values written as ``=`` tests joined by OR, not ``IN (...)``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

SQLite 3.40 evaluates ``column IN ('a', 'b', ...)`` inside a CHECK by building a temporary
b-tree for the list, each time a row is written: the three such checks of ``memories`` cost
an import of 1,100 memories 4 ms, more than the rows' own insert, and every durable add or
supersede a few microseconds. ``column = 'a' OR column = 'b' ...`` accepts exactly the same
values (NULL included: neither form rejects it) and costs a few comparisons.

Every row already satisfies the new checks (they are the same rules), so nothing is
rewritten but the constraints; on SQLite each table is rebuilt by alembic's batch mode with
its rows as they are. The downgrade puts the ``IN`` forms back.

On PostgreSQL it also repairs what revision 0005 did there until this revision: it rebuilt
``flagged_memories``, and the rebuilt table's id came from a new sequence
(``_alembic_tmp_flagged_memories_id_seq``) starting at 1, below the ids of the rows it
copied, so the next flagged memory failed on the primary key. Every table's id sequence is
moved past the table's largest id where it is behind, and that sequence gets its usual name.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The value lists as of this revision (a migration keeps its own copy).
CATEGORIES = ["SUCCESS", "FAILURE", "DISCOVERY", "DANGER", "NOTE"]
STATUSES = ["ACTIVE", "TENTATIVE", "SUPERSEDED"]
PERSISTENCES = ["core", "permanent"]
MODES = ["llm", "offline"]
OUTCOMES = ["ok", "refused", "repeated", "died"]
DIRECTIONS = "north south east west northeast northwest southeast southwest up down in out".split()


def one_of(column: str, values: list[str]) -> str:
    return "(" + " OR ".join(f"{column} = {v!r}" for v in values) + ")"


def in_list(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def checks(form) -> dict[str, dict[str, str]]:  # noqa: ANN001 - one_of or in_list
    """The constraints this revision rewrites, by table and name, in one form."""
    return {
        "memories": {
            "category_known": form("category", CATEGORIES),
            "status_known": form("status", STATUSES),
            "persistence_known": form("persistence", PERSISTENCES),
        },
        "synthesis_decisions": {"mode_known": form("mode", MODES)},
        "turn_records": {"outcome_known": "outcome IS NULL OR " + form("outcome", OUTCOMES)},
        "map_connections": {
            "direction_known": (
                f"direction IS NULL OR ({form('direction', DIRECTIONS)} AND action_key = direction)"
            )
        },
        "map_exit_failures": {"direction_known": form("direction", DIRECTIONS)},
        "map_pruned_exits": {"direction_known": form("direction", DIRECTIONS)},
    }


def rewrite(form) -> None:  # noqa: ANN001 - one_of or in_list
    for table, constraints in checks(form).items():
        with op.batch_alter_table(table) as batch:  # SQLite: rebuilt; PostgreSQL: ALTER
            for name, sqltext in constraints.items():
                batch.drop_constraint(op.f(f"ck_{table}_{name}"), type_="check")
                batch.create_check_constraint(op.f(f"ck_{table}_{name}"), sqltext)


#: the tables whose id comes from a sequence on PostgreSQL (as of this revision)
SERIAL_TABLES = (
    "memories",
    "memory_links",
    "synthesis_decisions",
    "turn_records",
    "flagged_memories",
    "memory_history",
    "map_connections",
)


def repair_sequences() -> None:
    """PostgreSQL: each table's id sequence past its largest id, under its usual name."""
    conn = op.get_bind()
    for table in SERIAL_TABLES:
        sequence = conn.execute(
            sa.text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table}
        ).scalar()
        if sequence is None:
            continue
        usual = f"{table}_id_seq"
        if "_alembic_tmp_" in sequence:
            free = conn.execute(sa.text("SELECT to_regclass(:name) IS NULL"), {"name": usual})
            if free.scalar():
                conn.execute(sa.text(f'ALTER SEQUENCE {sequence} RENAME TO "{usual}"'))
                sequence = conn.execute(
                    sa.text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table}
                ).scalar()
        last, called = conn.execute(sa.text(f"SELECT last_value, is_called FROM {sequence}")).one()
        largest = conn.execute(sa.text(f'SELECT max(id) FROM "{table}"')).scalar()  # noqa: S608
        following = last + 1 if called else last
        if largest is not None and following <= largest:
            conn.execute(
                sa.text("SELECT setval(:sequence, :value, false)"),
                {"sequence": sequence, "value": largest + 1},
            )


def upgrade() -> None:
    rewrite(one_of)
    if op.get_bind().dialect.name == "postgresql":
        repair_sequences()


def downgrade() -> None:
    rewrite(in_list)
