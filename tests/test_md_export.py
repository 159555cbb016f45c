"""memstore export's text from plain rows (memstore.md_store) is the text of the models' path."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from exporters import parse_memories_md, render_memories_md
from memstore.errors import DamagedDatabase
from memstore.md_rows import location_memories_of_rows
from memstore.md_store import export_memories_md, export_snapshot_rows
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory


def _populate(store: MemoryStore, mem: MakeMemory) -> None:
    store.record_visit(15, "West of House", 1)
    store.record_visit(15, "West of House", 3)
    store.record_visit(2, "Nowhere *special*", 2)  # a location with no memory
    store.add_memory(15, "West of House", mem("Mailbox", turns="1-2", score_change=-5))
    store.add_memory(15, "West of House", mem("Window [open]", persistence="core"))
    store.add_memory(15, "West of House", mem("Leaflet", text="line one\n\n  line three\\"))
    store.supersede_memory(15, "West of House", "Mailbox", mem("Mailbox, open", turns="9"))
    store.invalidate_memory(15, "Leaflet", 'it was "wrong"', turn=12, episode=2)
    store.add_memory(79, "Kitchen", mem("Sack", persistence="ephemeral"))  # never exported


def test_the_export_from_rows_is_the_export_from_the_models(
    store: MemoryStore, mem: MakeMemory
) -> None:
    _populate(store, mem)

    text = export_memories_md(store)

    assert text == render_memories_md(*store.export_snapshot())
    rows, base = export_snapshot_rows(store)
    models, same_base = store.export_snapshot()
    assert base == same_base
    assert [location_memories_of_rows(entry) for entry in rows] == models
    assert parse_memories_md(text).locations == tuple(models)


def test_an_import_of_the_export_changes_nothing(store: MemoryStore, mem: MakeMemory) -> None:
    _populate(store, mem)
    text = export_memories_md(store)

    outcome = import_memories(store, text, apply=True)

    assert outcome.plan.ok and not outcome.plan.has_changes and not outcome.applied
    assert export_memories_md(store) == text


@pytest.mark.parametrize(
    ("column", "value"),
    [("episode", "abc"), ("turn_start", 1.5), ("score_change", "x"), ("category", "LORE")],
)
def test_a_damaged_row_is_the_same_one_line_error_as_on_the_models_path(
    tmp_path: Path, mem: MakeMemory, column: str, value: object
) -> None:
    db = tmp_path / "damaged.db"
    with MemoryStore.open(db) as store:
        store.add_memory(79, "Kitchen", mem("Sack"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(f"UPDATE memories SET {column} = ?", (value,))

    with MemoryStore.open(db) as store:
        with pytest.raises(DamagedDatabase) as from_models:
            store.export_snapshot()
        with pytest.raises(DamagedDatabase) as from_rows:
            export_memories_md(store)

    assert str(from_rows.value) == str(from_models.value)
    assert str(from_rows.value).startswith("a stored memory cannot be read")
    assert "\n" not in str(from_rows.value)
