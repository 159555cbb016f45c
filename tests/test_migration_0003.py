"""Revision 0003 (flagged_memories) on a populated 0002 database: up, down, up again."""

from __future__ import annotations

import argparse
import atexit
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config

from memstore.errors import SchemaOutOfDate
from memstore.flagged import FlaggedMemories
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OLD_TABLES = (
    "locations",
    "location_episodes",
    "memories",
    "memory_links",
    "synthesis_decisions",
    "turn_records",
)


def alembic_config(db: Path, *, allow_data_loss: bool = False) -> Config:
    """alembic's Config for ``db``; ``allow_data_loss`` confirms a downgrade that deletes
    stored data (``-x allow_data_loss=true``: migrations/env.py refuses it otherwise)."""
    x = ["allow_data_loss=true"] if allow_data_loss else []
    config = Config(str(ROOT / "alembic.ini"), cmd_opts=argparse.Namespace(x=x))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return config


#: an empty database at each revision, made by alembic once per test session
_AT_REVISION: dict[str, Path] = {}


def new_database_at(db: Path, revision: str) -> None:
    """Make ``db`` an empty database at ``revision``: alembic upgrades a new file from base
    once per session and revision, and later calls copy that file (the tests then fill and
    upgrade their own copy). The copies share the identity revision 0004 gives a database."""
    made = _AT_REVISION.get(revision)
    if made is None:
        folder = Path(tempfile.mkdtemp(prefix=f"memstore-at-{revision}-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        made = folder / "empty.db"
        command.upgrade(alembic_config(made), revision)
        _AT_REVISION[revision] = made
    shutil.copyfile(made, db)


def populate_0002(db: Path) -> None:
    """Location memories (one superseded), a decision log row and a turn record, by hand."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO locations (id, name, visit_count) VALUES (180, 'West of House', 3)"
        )
        conn.execute("INSERT INTO location_episodes (location_id, episode) VALUES (180, 1)")
        memory = (
            "INSERT INTO memories (id, location_id, category, title, text, episode, turn_start, "
            "turn_end, score_change, persistence, status, created_at) "
            "VALUES (?, 180, ?, ?, ?, 1, ?, NULL, 0, 'permanent', ?, '2026-01-01T00:00:00')"
        )
        conn.execute(memory, (1, "DISCOVERY", "Mailbox", "A leaflet inside.", 3, "SUPERSEDED"))
        conn.execute(memory, (2, "DISCOVERY", "Mailbox is empty", "Leaflet taken.", 7, "ACTIVE"))
        conn.execute(
            "INSERT INTO memory_links (memory_id, superseded_by_id, episode, turn, reason, "
            "created_at) VALUES (1, 2, 1, 7, NULL, '2026-01-01T00:00:01')"
        )
        conn.execute(
            "INSERT INTO synthesis_decisions (episode, turn, location_id, location_name, "
            "triggers, mode, model, raw_answer, created_at) VALUES "
            "(1, 7, 180, 'West of House', 'score_change', 'llm', 'fake', '{}', '2026-01-01')"
        )
        conn.execute(
            "INSERT INTO turn_records (run_id, episode, turn, location_id, action, score_before, "
            "score_after, location_after, state_changed, died, triggers, memory_tokens, "
            "overhead_us, created_at) VALUES "
            "('run', 1, 7, 180, 'take leaflet', 0, 0, 180, 1, 0, '', 12, 40.5, '2026-01-01')"
        )
    conn.close()


#: columns later revisions add to the old tables (0004: the change counter's stamps;
#: 0007: the turn's outcome)
LATER_COLUMNS = {"created_version", "changed_version", "outcome"}


def snapshot(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """The rows of the old tables, in the columns revision 0002 had."""
    conn = sqlite3.connect(db)
    try:
        found = {}
        for table in OLD_TABLES:
            columns = [
                row[1]
                for row in conn.execute(f"PRAGMA table_info({table})")
                if row[1] not in LATER_COLUMNS
            ]
            found[table] = conn.execute(
                f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1, 2"
            ).fetchall()
        return found
    finally:
        conn.close()


def tables(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {row[0] for row in rows}
    finally:
        conn.close()


def revision(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    new_database_at(db, "0002")
    assert revision(db) == "0002" and "flagged_memories" not in tables(db)
    populate_0002(db)
    return db


def test_open_refuses_a_0002_database_and_says_to_upgrade(old_db: Path) -> None:
    before = snapshot(old_db)
    with pytest.raises(SchemaOutOfDate, match="alembic upgrade head") as caught:
        MemoryStore.open(old_db)
    assert "0002" in str(caught.value) and HEAD_REVISION in str(caught.value)
    assert snapshot(old_db) == before and revision(old_db) == "0002"


def test_upgrade_keeps_old_data_and_flagged_memories_work(old_db: Path) -> None:
    before = snapshot(old_db)
    command.upgrade(alembic_config(old_db), "head")
    assert revision(old_db) == HEAD_REVISION
    assert snapshot(old_db) == before
    with MemoryStore.open(old_db) as store:
        assert [m.title for m in store.memories(180)] == ["Mailbox is empty"]
        assert [m.title for m in store.history(180, "Mailbox is empty")] == [
            "Mailbox",
            "Mailbox is empty",
        ]
        flagged = FlaggedMemories(store, session_id="after-upgrade")
        assert flagged.count() == 0
        assert flagged.add_flagged_memory(
            "Leaflet says ZORK is dangerous", 400, 8, 180, "West of House"
        )
        assert flagged.by_location_id(180)[0].content == "Leaflet says ZORK is dangerous"
    assert snapshot(old_db) == before


def test_downgrade_drops_only_the_flagged_table_and_upgrade_again_works(old_db: Path) -> None:
    config = alembic_config(old_db, allow_data_loss=True)  # it deletes stored data: confirmed
    before = snapshot(old_db)
    command.upgrade(config, "head")
    with MemoryStore.open(old_db) as store:
        FlaggedMemories(store).add_flagged_memory(
            "A grue lurks in the dark", 900, 9, None, "Darkness"
        )

    command.downgrade(config, "0002")
    assert revision(old_db) == "0002"
    assert "flagged_memories" not in tables(old_db)
    conn = sqlite3.connect(old_db)
    indexes = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%flagged%'"
    ).fetchall()
    conn.close()
    assert indexes == []
    assert snapshot(old_db) == before
    with pytest.raises(SchemaOutOfDate):
        MemoryStore.open(old_db)

    command.upgrade(config, "head")
    assert revision(old_db) == HEAD_REVISION
    assert snapshot(old_db) == before
    with MemoryStore.open(old_db) as store:
        flagged = FlaggedMemories(store)
        assert flagged.count() == 0  # the downgrade dropped what was flagged
        assert flagged.add_flagged_memory("A grue lurks in the dark", 900, 9, None, "Darkness")
        assert store.get_persistent_count(180) == 1


def test_migrated_table_enforces_the_same_checks_as_a_new_one(old_db: Path) -> None:
    command.upgrade(alembic_config(old_db), "head")
    conn = sqlite3.connect(old_db)
    insert = (
        "INSERT INTO flagged_memories (content, importance, turn, location_name, episode, "
        "session_id, created_at, content_key) VALUES (?1, ?2, 1, 'Here', 1, 's', 'now', ?1)"
    )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(insert, ("x", 0))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(insert, ("   ", 5))
    conn.execute(insert, ("ok", 1000))
    conn.close()
