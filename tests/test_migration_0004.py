"""Revision 0004 (change counter, row stamps, memory history) on a populated database."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest
from alembic import command

from exporters import parse_memories_md, render_memories_md
from memstore.models import Memory
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.test_migration_0003 import (
    alembic_config,
    new_database_at,
    populate_0002,
    revision,
    snapshot,
)

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow


def populated_0003(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    new_database_at(db, "0002")
    populate_0002(db)
    command.upgrade(alembic_config(db), "0003")
    return db


def meta(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, database_id, change_counter FROM store_meta").fetchall()


def test_upgrade_keeps_the_rows_stamps_them_0_and_gives_the_database_an_identity(
    tmp_path: Path,
) -> None:
    db = populated_0003(tmp_path)
    before = snapshot(db)
    command.upgrade(alembic_config(db), "head")
    assert revision(db) == HEAD_REVISION and snapshot(db) == before
    ((one, database_id, version),) = meta(db)
    assert one == 1 and version == 0 and uuid.UUID(str(database_id))
    with sqlite3.connect(db) as conn:
        played = max(
            conn.execute(f"SELECT coalesce(max(episode), 0) FROM {table}").fetchone()[0]
            for table in ("location_episodes", "memories", "turn_records", "synthesis_decisions")
        )
    with MemoryStore.open(db) as store:  # episodes continue after those already played
        assert store.allocate_episode() == played + 1 and played >= 1
    with sqlite3.connect(db) as conn:
        stamps = conn.execute("SELECT DISTINCT created_version, changed_version FROM memories")
        assert stamps.fetchall() == [(0, 0)]


def test_an_upgraded_database_versions_its_writes_and_imports_3_way(tmp_path: Path) -> None:
    db = populated_0003(tmp_path)
    command.upgrade(alembic_config(db), "head")
    with MemoryStore.open(db) as store:
        entries, base = store.export_snapshot()
        text = render_memories_md(entries, base)
        assert parse_memories_md(text).base == base and base.version == 0
        new = Memory(
            category="NOTE",
            title="Mailbox gone",
            text="Someone took it.",
            episode=2,
            turns="3",
            persistence="permanent",
        )
        assert store.supersede_memory(180, "West of House", "Mailbox is empty", new)
        outcome = import_memories(store, text, apply=True)  # the file from before: no revert
        assert outcome.refused is None and not outcome.plan.conflicts
        assert [m.title for m in store.memories(180)] == ["Mailbox gone"]
        assert [m.title for m in store.history(180, "Mailbox gone")] == [
            "Mailbox",
            "Mailbox is empty",
            "Mailbox gone",
        ]
    assert meta(db)[0][2] == 1


def test_downgrade_to_0003_keeps_the_memories_and_upgrade_again_works(tmp_path: Path) -> None:
    db = populated_0003(tmp_path)
    config = alembic_config(db, allow_data_loss=True)  # it deletes stored data: confirmed
    before = snapshot(db)
    command.upgrade(config, "head")
    command.downgrade(config, "0003")
    assert revision(db) == "0003" and snapshot(db) == before
    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    assert "store_meta" not in tables and "memory_history" not in tables
    assert "created_version" not in columns
    command.upgrade(config, "head")
    assert revision(db) == HEAD_REVISION and snapshot(db) == before and len(meta(db)) == 1
