"""Revision 0010: ``location_names.imported``, added where it is missing.

Was: the column was added by editing revision 0009, so a database already at 0009 never
got it ("0009 (head)", ``check`` ok) and the first visit under a new room name failed with
"table location_names has no column named imported", losing that write's transaction.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.util import CommandError

from exporters import render_memories_md
from memstore.models import Memory
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.test_alembic_guards import config
from tests.test_migration_0003 import alembic_config, revision
from tests.test_store_schema import schema_of

pytestmark = pytest.mark.slow  # migration round trips: CI runs them


def at_0009_with_a_rename(db: Path) -> None:
    command.upgrade(alembic_config(db), "0009")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO locations (id, name, visit_count) VALUES (7, 'Galley', 1)")
        conn.execute(
            "INSERT INTO location_names (location_id, name, replaced_version) "
            "VALUES (7, 'Kitchen', 0)"
        )


def test_a_database_at_0009_gets_the_column_and_keeps_its_renames(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    at_0009_with_a_rename(db)
    command.upgrade(alembic_config(db), "head")
    assert revision(db) == HEAD_REVISION
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT location_id, name, imported FROM location_names"
        ).fetchall() == [(7, "Kitchen", 0)]
    with MemoryStore.open(db) as store:
        store.record_visit(7, "Scullery", 2)  # was: OperationalError, no column imported
        assert {i.id: i.name for i in store.locations()} == {7: "Scullery"}
    MemoryStore.open(tmp_path / "new.db").close()
    assert schema_of(db) == schema_of(tmp_path / "new.db")


def test_the_column_already_there_is_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    MemoryStore.open(db).close()
    with sqlite3.connect(db) as conn:  # a development build's 0009: the column, at 0009
        conn.execute("DROP TABLE write_receipts")  # (a later revision's table)
        conn.execute("UPDATE alembic_version SET version_num = '0009'")
    command.upgrade(alembic_config(db), "head")
    assert revision(db) == HEAD_REVISION
    with MemoryStore.open(db) as store:
        store.record_visit(3, "Attic", 1)
        store.add_memory(3, "Attic", note("Rope"))
        text = render_memories_md(*store.export_snapshot())
        reviewed = text.replace("## Location 3: Attic\n", "## Location 3: Loft\n")
        assert import_memories(store, reviewed, apply=True).applied
        assert {i.id: i.name for i in store.locations()} == {3: "Loft"}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name, imported FROM location_names").fetchall() == [
            ("Attic", 1)
        ]


def note(title: str) -> Memory:
    return Memory(
        category="NOTE", title=title, text="t", episode=1, turns="1", persistence="permanent"
    )


def test_the_downgrade_drops_only_the_column(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    at_0009_with_a_rename(db)
    command.upgrade(alembic_config(db), "head")
    with pytest.raises(CommandError, match="location_names.imported"):
        command.downgrade(alembic_config(db), "0009")  # the column holds values
    confirmed, _out = config(db, "allow_data_loss=true")
    command.downgrade(confirmed, "0009")
    assert revision(db) == "0009"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT location_id, name FROM location_names").fetchall() == [
            (7, "Kitchen")
        ]
