"""Revision 0008 (CHECK constraints on value lists as OR chains, not IN) on populated
databases: every row kept, the same rules enforced, and the table rebuilds atomic."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from memstore.flagged import FlaggedMemories
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.test_migration_0003 import (
    ROOT,
    alembic_config,
    new_database_at,
    populate_0002,
    revision,
    snapshot,
)
from tests.test_store_schema import schema_of

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

REBUILT = (
    "memories",
    "synthesis_decisions",
    "turn_records",
    "map_connections",
    "map_exit_failures",
    "map_pruned_exits",
)


def populated_0007(tmp_path: Path) -> Path:
    """A 0007 database holding memories, a decision, a turn record and a map."""
    db = tmp_path / "old.db"
    new_database_at(db, "0007")
    populate_0002(db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO map_rooms (id, name) VALUES (180, 'West of House')")
        conn.execute("INSERT INTO map_rooms (id, name) VALUES (79, 'North of House')")
        conn.execute(
            "INSERT INTO map_connections (from_id, action, action_key, direction, to_id, "
            "verifications, failures, first_episode, first_turn, last_episode, last_turn) "
            "VALUES (180, 'n', 'north', 'north', 79, 2, 0, 1, 3, 1, 9)"
        )
        conn.execute(
            "INSERT INTO map_exit_failures (from_id, direction, count, last_episode, last_turn) "
            "VALUES (180, 'east', 1, 1, 4)"
        )
        conn.execute(
            "INSERT INTO map_pruned_exits (from_id, direction, pruned_episode, pruned_turn) "
            "VALUES (180, 'east', 1, 5)"
        )
    conn.close()
    return db


def table_rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in REBUILT}


def check_sql(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return "\n".join(
            row[0] for row in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        )


def test_upgrade_keeps_every_row_and_gives_a_new_databases_schema(tmp_path: Path) -> None:
    db = populated_0007(tmp_path)
    before, rows_before = snapshot(db), table_rows(db)
    assert " IN (" in check_sql(db)
    command.upgrade(alembic_config(db), "0008")
    assert revision(db) == "0008"
    assert snapshot(db) == before and table_rows(db) == rows_before
    assert " IN (" not in check_sql(db)
    command.upgrade(alembic_config(db), "head")  # the later revisions only add tables
    MemoryStore.open(tmp_path / "new.db").close()
    assert schema_of(db) == schema_of(tmp_path / "new.db")


@pytest.mark.parametrize(
    ("statement", "constraint"),
    [
        ("UPDATE memories SET category = 'TRIVIA'", "category_known"),
        ("UPDATE memories SET status = 'active'", "status_known"),
        ("UPDATE memories SET persistence = 'ephemeral'", "persistence_known"),
        ("UPDATE synthesis_decisions SET mode = 'human'", "mode_known"),
        ("UPDATE turn_records SET outcome = 'maybe'", "outcome_known"),
        ("UPDATE map_connections SET direction = 'up', action_key = 'n'", "direction_known"),
        ("UPDATE map_exit_failures SET direction = 'sideways'", "direction_known"),
        ("UPDATE map_pruned_exits SET direction = 'NORTH'", "direction_known"),
    ],
)
def test_the_rewritten_checks_refuse_what_the_old_ones_refused(
    tmp_path: Path, statement: str, constraint: str
) -> None:
    db = populated_0007(tmp_path)
    for target in ("0007", "0008"):
        command.upgrade(alembic_config(db), target)
        with sqlite3.connect(db) as conn, pytest.raises(sqlite3.IntegrityError, match=constraint):
            conn.execute(statement)


def test_the_rewritten_checks_accept_every_known_value_and_null_outcomes(tmp_path: Path) -> None:
    db = populated_0007(tmp_path)
    command.upgrade(alembic_config(db), "head")
    with sqlite3.connect(db) as conn:
        for category in ("SUCCESS", "FAILURE", "DISCOVERY", "DANGER", "NOTE"):
            conn.execute("UPDATE memories SET category = ? WHERE id = 1", (category,))
        for outcome in ("ok", "refused", "repeated", "died", None):
            conn.execute("UPDATE turn_records SET outcome = ?", (outcome,))
        conn.execute("UPDATE map_connections SET direction = NULL, action_key = 'pray'")


def test_downgrade_to_0007_gives_the_0007_schema_back_with_every_row(tmp_path: Path) -> None:
    db = populated_0007(tmp_path)
    schema_0007, rows_before = schema_of(db), table_rows(db)
    config = alembic_config(db)
    command.upgrade(config, "head")
    command.downgrade(config, "0007")
    assert revision(db) == "0007"
    assert schema_of(db) == schema_0007 and table_rows(db) == rows_before
    command.upgrade(config, "head")
    assert revision(db) == HEAD_REVISION and table_rows(db) == rows_before


def test_a_rebuild_that_fails_leaves_the_database_as_it_was_and_can_be_run_again(
    tmp_path: Path,
) -> None:
    """A row the rebuilt table refuses (here one written with the checks switched off) makes
    the upgrade fail: nothing of it may stay behind. Before the fix alembic created its
    temporary table outside the transaction, so the failed upgrade left
    ``_alembic_tmp_memories`` and every later upgrade failed on it ("already exists")."""
    db = populated_0007(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("UPDATE memories SET category = 'TRIVIA' WHERE id = 2")
    schema_0007 = schema_of(db)
    with pytest.raises(Exception, match="CHECK constraint failed"):
        command.upgrade(alembic_config(db), "head")
    assert revision(db) == "0007" and schema_of(db) == schema_0007

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memories SET category = 'NOTE' WHERE id = 2")
    command.upgrade(alembic_config(db), "head")
    assert revision(db) == HEAD_REVISION


WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
deadline = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < deadline:
    n += 1
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO turn_records (run_id, episode, turn, location_id, action, score_before, "
        "score_after, location_after, state_changed, died, triggers, memory_tokens, "
        "overhead_us, created_at) VALUES ('other', 1, ?, 180, 'wait', 0, 0, 180, 0, 0, '', 0, "
        "1.0, '2026-11-24')",
        (n,),
    )
    conn.execute("COMMIT")
    print(n, flush=True)
"""


@pytest.mark.slow
def test_an_upgrade_beside_another_process_writing_loses_none_of_its_rows(
    tmp_path: Path,
) -> None:
    """Another process (an agent of the older memstore) commits rows to the tables being
    rebuilt while the upgrade runs: each rebuild is one transaction that waits for the lock,
    so every row the writer saw committed is in the upgraded table."""
    db = populated_0007(tmp_path)
    with sqlite3.connect(db) as conn:  # a larger table, so the rebuild takes a while
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executemany(
            "INSERT INTO turn_records (run_id, episode, turn, location_id, action, "
            "score_before, score_after, location_after, state_changed, died, triggers, "
            "memory_tokens, overhead_us, created_at) VALUES ('bulk', 1, ?, 180, 'look', 0, 0, "
            "180, 0, 0, '', 0, 1.0, '2026-11-24')",
            [(n,) for n in range(50_000)],
        )
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "3"], stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.3)
    command.upgrade(alembic_config(db), "head")
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0
    acknowledged = {int(line) for line in out.split()}
    assert acknowledged
    with sqlite3.connect(db) as conn:
        stored = {
            row[0] for row in conn.execute("SELECT turn FROM turn_records WHERE run_id = 'other'")
        }
        bulk = conn.execute("SELECT count(*) FROM turn_records WHERE run_id = 'bulk'").fetchone()
    assert stored == acknowledged and bulk == (50_000,)
    assert revision(db) == HEAD_REVISION


# --- PostgreSQL: the id sequence revision 0005 broke, repaired -------------------------------


def pg_alembic_config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"), stdout=io.StringIO())
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def test_postgresql_upgrade_repairs_the_flagged_id_sequence_0005_left_behind(
    pg_database: str,
) -> None:
    """Revision 0005 used to rebuild flagged_memories on PostgreSQL: the new table's id
    came from a new sequence, _alembic_tmp_flagged_memories_id_seq, at 1, below the copied
    rows' ids, and the next flagged memory failed on the primary key. That state is made
    here by hand at 0007; the upgrade to 0008 repairs it."""
    command.upgrade(pg_alembic_config(pg_database), "0007")
    conninfo = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as conn:
        for n in range(3):
            conn.execute(
                "INSERT INTO flagged_memories (content, importance, turn, location_name, "
                "episode, session_id, created_at, content_key) "
                "VALUES (%s, 5, 1, 'Dark', 1, 's', 'c', %s)",
                (f"Thing {n}", f"thing {n}"),
            )
        conn.execute(
            "ALTER SEQUENCE flagged_memories_id_seq RENAME TO _alembic_tmp_flagged_memories_id_seq"
        )
        conn.execute("SELECT setval('_alembic_tmp_flagged_memories_id_seq', 1, false)")
    command.upgrade(pg_alembic_config(pg_database), "head")
    with psycopg.connect(conninfo) as conn:
        sequence = conn.execute("SELECT pg_get_serial_sequence('flagged_memories', 'id')")
        assert sequence.fetchone()[0].endswith(".flagged_memories_id_seq")
    with MemoryStore.open(pg_database) as store:
        flagged = FlaggedMemories(store, session_id="after-0008")
        assert flagged.add_flagged_memory("A new grue", 5, 1, None, "Dark")
        assert sorted(m.content for m in flagged.all()) == [
            "A new grue",
            "Thing 0",
            "Thing 1",
            "Thing 2",
        ]
