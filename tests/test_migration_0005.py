"""Revision 0005 (flagged_memories.content_key, indexed) on a populated 0004 database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from memstore.errors import SchemaOutOfDate
from memstore.flagged import FlaggedMemories, normalise
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.test_migration_0003 import (
    alembic_config,
    new_database_at,
    populate_0002,
    revision,
    snapshot,
)
from tests.test_store_schema import schema_of

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

#: contents flagged before 0005, as an agent wrote them: case, runs of whitespace (tabs,
#: newlines, a no-break space), letters whose lower case is not ASCII
FLAGGED = [
    ("Mailbox contains a LEAFLET", 300, 180),
    ("The  troll\tblocks the\neast passage", 800, 12),
    ("ÜBER-grue\u00a0lurks   HERE", 950, None),
    ("Lamp is in the living room", 500, 193),
]
FLAGGED_COLUMNS = (
    "id, content, importance, turn, location_id, location_name, score, moves, episode, "
    "session_id, created_at"
)


def populated_0004(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    new_database_at(db, "0004")
    populate_0002(db)
    conn = sqlite3.connect(db)
    with conn:
        conn.executemany(
            "INSERT INTO flagged_memories (content, importance, turn, location_id, "
            "location_name, score, moves, episode, session_id, created_at) "
            "VALUES (?, ?, 3, ?, 'Somewhere', 5, 9, 1, 'before-0005', '2026-11-01T00:00:00')",
            FLAGGED,
        )
    conn.close()
    return db


def flagged_rows(db: Path) -> list[tuple[object, ...]]:
    """The flagged memories in the columns revision 0004 had."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            f"SELECT {FLAGGED_COLUMNS} FROM flagged_memories ORDER BY id"
        ).fetchall()


def keys(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT content, content_key FROM flagged_memories ORDER BY id"
        ).fetchall()


def flagged_schema(db: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    return [row for row in schema_of(db) if "flagged" in row[1]]


def test_upgrade_backfills_the_normalised_text_and_keeps_every_row(tmp_path: Path) -> None:
    db = populated_0004(tmp_path)
    before, flagged_before = snapshot(db), flagged_rows(db)
    command.upgrade(alembic_config(db), "0005")
    assert revision(db) == "0005"
    assert snapshot(db) == before and flagged_rows(db) == flagged_before
    assert keys(db) == [(content, normalise(content)) for content, _, _ in FLAGGED]
    assert keys(db)[2][1] == "über-grue lurks here"
    with sqlite3.connect(db) as conn:
        indexes = conn.execute("PRAGMA index_list(flagged_memories)").fetchall()
        notnull = {row[1]: row[3] for row in conn.execute("PRAGMA table_info(flagged_memories)")}
    assert "ix_flagged_memories_content_key" in {row[1] for row in indexes}
    assert notnull["content_key"] == 1


def test_an_upgraded_database_finds_old_duplicates_through_the_index(tmp_path: Path) -> None:
    db = populated_0004(tmp_path)
    command.upgrade(alembic_config(db), "head")
    with MemoryStore.open(db) as store:
        flagged = FlaggedMemories(store, session_id="after-0005")
        assert not flagged.add_flagged_memory("mailbox contains a leaflet", 700, 9, 5, "Elsewhere")
        assert not flagged.add_flagged_memory("über-grue lurks here", 10, 9, None, "Dark")
        assert flagged.add_flagged_memory("The cellar door slams shut", 400, 9, 180, "Cellar")
        importance = {m.content: m.importance for m in flagged.all()}
    assert importance["Mailbox contains a LEAFLET"] == 700
    assert importance["ÜBER-grue\u00a0lurks   HERE"] == 950
    assert keys(db)[-1] == ("The cellar door slams shut", "the cellar door slams shut")


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_downgrade_to_0004_drops_only_the_column_and_its_index(tmp_path: Path) -> None:
    db = populated_0004(tmp_path)
    config = alembic_config(db, allow_data_loss=True)  # it deletes stored data: confirmed
    schema_0004, before, flagged_before = flagged_schema(db), snapshot(db), flagged_rows(db)
    command.upgrade(config, "head")
    command.downgrade(config, "0004")
    assert revision(db) == "0004"
    assert flagged_schema(db) == schema_0004  # same columns, checks and indexes as before
    assert snapshot(db) == before and flagged_rows(db) == flagged_before
    with pytest.raises(SchemaOutOfDate, match="alembic upgrade head"):
        MemoryStore.open(db)

    command.upgrade(config, "head")
    assert revision(db) == HEAD_REVISION
    assert flagged_rows(db) == flagged_before
    assert keys(db) == [(content, normalise(content)) for content, _, _ in FLAGGED]


def test_the_migrated_table_is_the_one_a_new_database_gets(tmp_path: Path) -> None:
    db = populated_0004(tmp_path)
    command.upgrade(alembic_config(db), "head")
    MemoryStore.open(tmp_path / "new.db").close()
    assert flagged_schema(db) == flagged_schema(tmp_path / "new.db")
