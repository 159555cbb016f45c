"""Helpers shared by the tests of revision 0008 (tests/test_migration_0008_sqlite.py,
tests/test_migration_0008_postgres.py) and of the one-transaction migrations
(tests/test_migration_transaction.py): `memstore db upgrade` in another process, every
value of a SQLite file with its storage class, what a failed migration leaves behind, and
the constraints 0008 rewrites with the odd values tried on them.
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from alembic.config import Config

from tests.test_migration_0003 import alembic_config

MEMSTORE = Path(sys.executable).with_name("memstore")

#: the tables the revisions after 0008 add, as ``values_of`` reads them on a database they
#: upgraded: there, and empty
ADDED_AFTER_0008 = {
    "location_names": (["id", "location_id", "name", "replaced_version", "imported"], []),
    "write_receipts": (["receipt", "created_at"], []),
}


def and_later_tables(
    values: dict[str, tuple[list[str], list[tuple[object, ...]]]],
) -> dict[str, tuple[list[str], list[tuple[object, ...]]]]:
    """``values`` (``values_of`` a database at 0008 or before) with the tables the later
    revisions add, empty: what the same database holds once upgraded to head."""
    return {**values, **ADDED_AFTER_0008}


def db_upgrade(db: str | Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``memstore --db DB [OPTIONS] db upgrade`` in another process, its output captured."""
    return subprocess.run(
        [str(MEMSTORE), "--db", str(db), *options, "db", "upgrade"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def typed_columns(conn: sqlite3.Connection) -> Iterator[tuple[str, list[str], str]]:
    """Each table but alembic's: its name, its columns, and a select list giving each value
    with its SQLite storage class (typeof)."""
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'alembic_version'"
    ).fetchall()
    for (table,) in tables:
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
        yield table, columns, ", ".join(f'typeof("{c}"), "{c}"' for c in columns)


def values_of(db: Path) -> dict[str, tuple[list[str], list[tuple[object, ...]]]]:
    """Every row of every table, each value with its SQLite storage class (typeof), and the
    rowid where it is the table's key; rows sorted, so only the values count."""
    conn = sqlite3.connect(db)
    try:
        found = {}
        for table, columns, select in typed_columns(conn):
            rows = conn.execute(f'SELECT {select} FROM "{table}"').fetchall()  # noqa: S608
            found[table] = (columns, sorted(rows, key=repr))
        return found
    finally:
        conn.close()


def digest_of(db: Path) -> dict[str, str]:
    """values_of's content as one digest a table (rows ordered by every column in SQL): for
    tables too large to compare row by row quickly."""
    conn = sqlite3.connect(db)
    try:
        found = {}
        for table, columns, select in typed_columns(conn):
            order = ", ".join(f'"{c}"' for c in columns)
            digest = hashlib.sha256()
            for row in conn.execute(f'SELECT {select} FROM "{table}" ORDER BY {order}'):  # noqa: S608
                digest.update(repr(row).encode())
            found[table] = digest.hexdigest()
        return found
    finally:
        conn.close()


def digest_before_later_tables(db: Path) -> dict[str, str]:
    """``digest_of`` a database upgraded from 0008 or before, without the tables the later
    revisions add, which must be empty there."""
    found = digest_of(db)
    conn = sqlite3.connect(db)
    try:
        for table in ADDED_AFTER_0008:
            count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # noqa: S608
            assert count == 0, f"{table} holds {count} rows after the upgrade"
            del found[table]
        return found
    finally:
        conn.close()


def leftovers(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE '\\_alembic%' ESCAPE '\\'"
        )
        return [row[0] for row in rows]


def quiet_config(db: Path) -> Config:
    config = alembic_config(db)
    config.stdout = io.StringIO()
    return config


#: (table, column): the constraints 0008 rewrites
REWRITTEN = [
    ("memories", "category"),
    ("memories", "status"),
    ("memories", "persistence"),
    ("synthesis_decisions", "mode"),
    ("turn_records", "outcome"),
    ("map_connections", "direction"),
    ("map_exit_failures", "direction"),
    ("map_pruned_exits", "direction"),
]


#: values a user or a damaged file might hold: known ones, the same in another case or with
#: whitespace or a NUL, blobs of the same bytes, numbers, NULL, empty text
ODD_VALUES: list[object] = [
    None,
    "",
    "NOTE",
    "note",
    "Note",
    "NOTE ",
    " NOTE",
    "NOTE\x00",
    "NOTE\n",
    b"NOTE",
    "ACTIVE",
    "active",
    "SUPERSEDED ",
    "core",
    "CORE",
    "permanent",
    "ephemeral",
    "llm",
    "LLM",
    "offline",
    "ok",
    "OK",
    "died",
    "north",
    "NORTH",
    "north ",
    b"north",
    "in",
    "IN",
    1,
    0,
    1.5,
    -1,
]
