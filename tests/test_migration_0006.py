"""Revision 0006 (the map's four tables) on a populated 0005 database: up, down, up again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from memstore.errors import SchemaOutOfDate
from memstore.flagged import FlaggedMemories
from memstore.map_graph import MOVED, MapEvent
from memstore.map_store import MapStore
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.test_migration_0003 import alembic_config, revision, snapshot, tables
from tests.test_migration_0005 import flagged_rows, populated_0004
from tests.test_store_schema import schema_of

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

MAP_TABLES = {"map_rooms", "map_connections", "map_exit_failures", "map_pruned_exits"}


def populated_0005(tmp_path: Path) -> Path:
    """Memories, links, a decision, a turn record and flagged memories, at 0005."""
    db = populated_0004(tmp_path)
    command.upgrade(alembic_config(db), "0005")
    assert revision(db) == "0005"
    return db


def map_schema(db: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    return [row for row in schema_of(db) if "map_" in row[1]]


def moved(from_id: int, to_id: int, action: str, turn: int) -> MapEvent:
    direction = {"n": "north", "s": "south"}.get(action)
    return MapEvent(
        MOVED, from_id, f"Room {from_id}", action, direction or action, direction, to_id,
        f"Room {to_id}", 1, turn,
    )  # fmt: skip


def test_upgrade_adds_the_empty_map_tables_and_keeps_every_row(tmp_path: Path) -> None:
    db = populated_0005(tmp_path)
    before, flagged_before = snapshot(db), flagged_rows(db)
    command.upgrade(alembic_config(db), "0006")
    assert revision(db) == "0006"
    assert MAP_TABLES <= tables(db)
    assert snapshot(db) == before and flagged_rows(db) == flagged_before
    with sqlite3.connect(db) as conn:
        for table in MAP_TABLES:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


def test_an_upgraded_database_records_and_routes_a_map(tmp_path: Path) -> None:
    db = populated_0005(tmp_path)
    before = snapshot(db)
    command.upgrade(alembic_config(db), "head")
    with MemoryStore.open(db) as store:
        the_map = MapStore(store)
        the_map.record([moved(180, 79, "n", 1), moved(79, 180, "s", 2)])
        assert the_map.route(180, 79).actions == ("north",)
        assert [m.title for m in store.memories(180)] == ["Mailbox is empty"]
        assert FlaggedMemories(store).count() == len(flagged_rows(db))
    assert snapshot(db) == before


def test_downgrade_to_0005_drops_only_the_map_and_upgrade_again_works(tmp_path: Path) -> None:
    db = populated_0005(tmp_path)
    config = alembic_config(db, allow_data_loss=True)  # it deletes stored data: confirmed
    schema_0005, before, flagged_before = schema_of(db), snapshot(db), flagged_rows(db)
    command.upgrade(config, "head")
    with MemoryStore.open(db) as store:
        MapStore(store).record([moved(180, 79, "n", 1)])

    command.downgrade(config, "0005")
    assert revision(db) == "0005"
    assert not MAP_TABLES & tables(db)
    assert [row for row in schema_of(db) if "alembic" not in row[1]] == [
        row for row in schema_0005 if "alembic" not in row[1]
    ]
    assert snapshot(db) == before and flagged_rows(db) == flagged_before
    with pytest.raises(SchemaOutOfDate, match="alembic upgrade head"):
        MemoryStore.open(db)

    command.upgrade(config, "head")
    assert revision(db) == HEAD_REVISION
    assert snapshot(db) == before and flagged_rows(db) == flagged_before
    with MemoryStore.open(db) as store:
        assert MapStore(store).rooms() == []  # the downgrade dropped the map
        assert store.get_persistent_count(180) == 1


def test_the_migrated_map_tables_are_the_ones_a_new_database_gets(tmp_path: Path) -> None:
    db = populated_0005(tmp_path)
    command.upgrade(alembic_config(db), "head")
    MemoryStore.open(tmp_path / "new.db").close()
    assert map_schema(db) == map_schema(tmp_path / "new.db") != []


def test_the_migrated_tables_enforce_their_checks(tmp_path: Path) -> None:
    db = populated_0005(tmp_path)
    command.upgrade(alembic_config(db), "head")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("INSERT INTO map_rooms (id, name) VALUES (1, 'A'), (2, 'B')")
    connection = (
        "INSERT INTO map_connections (from_id, action, action_key, direction, to_id, "
        "verifications, failures, first_episode, first_turn, last_episode, last_turn) "
        "VALUES (?, ?, ?, ?, ?, 1, 0, 1, 1, 1, 1)"
    )
    conn.execute(connection, (1, "N", "north", "north", 2))
    bad = [
        (1, "n", "north", "north", 2),  # a second connection for the same room and key
        (1, "sideways", "sideways", "sideways", 2),  # not a direction
        (1, "go", "west", "north", 2),  # direction and key disagree
        (1, "pray", "pray", None, 99),  # an unknown room
    ]
    for row in bad:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(connection, row)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO map_pruned_exits (from_id, direction, pruned_episode, pruned_turn) "
            "VALUES (1, 'northish', 1, 1)"
        )
    conn.execute("DELETE FROM map_rooms WHERE id = 2")  # its connections go with it
    assert conn.execute("SELECT count(*) FROM map_connections").fetchone() == (0,)
    conn.close()
