"""What a schema downgrade would delete, so that it runs only when confirmed.

``DOWNGRADE_DROPS`` lists, for each revision, the tables and columns its downgrade drops
(tests/test_review_cli_db.py downgrades every revision one step and checks the list
against what disappears). migrations/env.py asks ``data_at_risk`` about the steps it is
about to run, inside the migration's transaction (on SQLite under the write lock), and
refuses them unless confirmed (``alembic -x allow_data_loss=true``, ``memstore db downgrade
--allow-data-loss``) when a step:

- is the first revision's (the downgrade to ``base``: every table goes, confirmed always);
- is a revision this list does not know (assumed to drop data);
- drops a table that holds a row, or a column that holds a value (not NULL), or the
  database cannot be looked at (``alembic downgrade --sql``).

A step that drops nothing (0008 only rewrites constraints) or only empty tables and
columns (a map never recorded) runs without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, inspect

from memstore.migrations_dir import known_revisions

#: (table, column): a column the downgrade drops; (table, None): the whole table
Drop = tuple[str, str | None]

#: what each revision's downgrade drops (the first revision's is "every table": not listed)
DOWNGRADE_DROPS: dict[str, tuple[Drop, ...]] = {
    "0002": (("synthesis_decisions", None), ("turn_records", None)),
    "0003": (("flagged_memories", None),),
    "0004": (
        ("memories", "created_version"),
        ("memories", "changed_version"),
        ("memory_history", None),
        ("store_meta", None),
    ),
    "0005": (("flagged_memories", "content_key"),),
    "0006": (
        ("map_rooms", None),
        ("map_connections", None),
        ("map_exit_failures", None),
        ("map_pruned_exits", None),
    ),
    "0007": (("turn_records", "outcome"),),
    "0008": (),
    "0009": (("location_names", None),),
    "0010": (("location_names", "imported"),),
    "0011": (("write_receipts", None),),
}


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def _held(connection: Connection, drop: Drop) -> str | None:
    """What ``drop`` would delete from the database now ("map_rooms (30 rows)"), or None
    when that table or column is empty (or not there)."""
    table, column = drop
    found = inspect(connection)
    if not found.has_table(table):
        return None
    if column is None:
        count = connection.exec_driver_sql(f'SELECT count(*) FROM "{table}"').scalar() or 0
        return f"{table} ({_plural(count, 'row', 'rows')})" if count else None
    if column not in {c["name"] for c in found.get_columns(table)}:
        return None
    count = (
        connection.exec_driver_sql(
            f'SELECT count(*) FROM "{table}" WHERE "{column}" IS NOT NULL'  # noqa: S608
        ).scalar()
        or 0
    )
    return f"{table}.{column} ({_plural(count, 'value', 'values')})" if count else None


def data_at_risk(connection: Connection | None, revisions: Sequence[str]) -> list[str]:
    """What the downgrades of ``revisions`` (the steps about to run) would delete, one
    description each; empty when they delete nothing stored. ``connection`` None: the
    database cannot be looked at, so whatever a step drops counts as data."""
    first = known_revisions()[0]
    lost: list[str] = []
    for revision in revisions:
        if revision == first:
            lost.append("every memstore table and every memory (the downgrade to base)")
            continue
        drops = DOWNGRADE_DROPS.get(revision)
        if drops is None:
            lost.append(f"whatever revision {revision}'s downgrade drops (unknown to this list)")
            continue
        for drop in drops:
            if connection is None:
                lost.append(".".join(part for part in drop if part is not None))
                continue
            held = _held(connection, drop)
            if held is not None:
                lost.append(held)
    return lost
