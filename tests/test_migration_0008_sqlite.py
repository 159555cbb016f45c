"""Revision 0008 (CHECKs as OR chains) on SQLite: rows and schema.

Real populated databases (one written through the store as an agent would, one made at
0001 and upgraded a revision at a time with values at the edges of their columns) go down
to 0007 and up again keeping every value, its storage class and the schema of a new
database; the rewritten checks accept and refuse exactly what the IN lists did; a rebuild
SQLite refuses at its last step rolls the whole revision back.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from memstore.flagged import FlaggedMemories
from memstore.rows import Bookkeeping, SupersedeOutcome
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.conftest import note
from tests.map_helpers import record_sample
from tests.migration_helpers import (
    ODD_VALUES,
    REWRITTEN,
    and_later_tables,
    leftovers,
    quiet_config,
    values_of,
)
from tests.test_migration_0003 import revision
from tests.test_migration_0008 import populated_0007
from tests.test_store_schema import schema_of

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow


def has_integer_key(conn: sqlite3.Connection, table: str) -> bool:
    """Is the table's rowid its INTEGER PRIMARY KEY (so a rebuild must keep it)?"""
    columns = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    keys = [c for c in columns if c[5]]
    return len(keys) == 1 and keys[0][2].upper() == "INTEGER"


def table_details(db: Path) -> dict[str, object]:
    """Columns in order (type, NOT NULL, default, key), foreign keys (as a set: SQLite
    numbers them in the order of the CREATE statement) and indexes with their columns."""
    conn = sqlite3.connect(db)
    try:
        found: dict[str, object] = {}
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (table,) in tables:
            indexes = []
            for _seq, name, unique, origin, partial in conn.execute(
                f'PRAGMA index_list("{table}")'
            ):
                info = conn.execute(f'PRAGMA index_xinfo("{name}")').fetchall()
                indexes.append((name, unique, origin, partial, info))
            found[table] = (
                conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall(),
                sorted(row[2:] for row in conn.execute(f'PRAGMA foreign_key_list("{table}")')),
                sorted(indexes),
            )
        found["index sql"] = sorted(
            conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall(),
            key=repr,
        )
        return found
    finally:
        conn.close()


def real_store_database(db: Path) -> None:
    """A head database written through the store as an agent would: memories of every
    persistence and status, supersessions and invalidations (links, history), an ephemeral
    memory upgraded to a permanent one, a synthesis with its decision log, a turn record
    and a visit, a flagged memory, and the sample map."""
    with MemoryStore.open(db) as store:
        store.add_memory(180, "West of House", note("Mailbox"))
        store.add_memory(180, "West of House", note("Grue ", category="DANGER"))
        store.add_memory(180, "West of House", note("ünïcødé ☃ 𝄞", "core", category="SUCCESS"))
        store.add_memory(180, "West of House", note("mailbox"))  # differs only by case
        outcome = store.supersede_memory(
            180, "West of House", "Mailbox", note("Mailbox", turns="6-9")
        )
        assert outcome is SupersedeOutcome.SUPERSEDED
        assert store.invalidate_memory(180, "Grue ", "it was a lamp", 10, episode=1)
        store.add_memory(180, "West of House", note("Window ajar", "ephemeral"))
        outcome = store.supersede_memory(
            180, "West of House", "Window ajar", note("Window opens", turns="11")
        )
        assert outcome is SupersedeOutcome.SUPERSEDED
        turn = {
            "run_id": "run-1",
            "episode": 1,
            "turn": 12,
            "location_id": 79,
            "action": "north",
            "score_before": 0,
            "score_after": 5,
            "location_after": 79,
            "state_changed": 1,
            "outcome": "refused",
            "died": 0,
            "triggers": "location_changed",
            "memory_tokens": 17,
            "overhead_us": 12.345678901234567,
            "created_at": "2026-11-24T00:00:00",
        }
        store.apply_synthesis(
            79,
            "North of House",
            new_memory=note("Path north", status="TENTATIVE"),
            episode=1,
            turn=12,
            log={
                "triggers": "location_changed",
                "mode": "llm",
                "model": "fake",
                "latency_ms": 1.25,
                "raw_answer": '{"x": 1}',
                "cost_usd": 1e-7,
                "prompt_tokens": 3,
            },
            bookkeeping=Bookkeeping(visits=[(79, "North of House", 1)], turns=[turn]),
        )
        FlaggedMemories(store, session_id="s1").add_flagged_memory(
            "A grue lurks  HERE", 900, 9, None, "Darkness"
        )
        record_sample(store)


def populated_0001_to_0007(db: Path) -> None:
    """A database made at 0001 and upgraded one revision at a time to 0007, rows written at
    each step by hand, as older memstores did, with values at the edges of their columns:
    64-bit extremes, a float's last digits, trailing spaces, NUL characters, a blob and a
    float stored by hand in TEXT and INTEGER columns, NULLs where allowed."""
    config = quiet_config(db)
    command.upgrade(config, "0001")
    conn = sqlite3.connect(db)
    big = 2**63 - 1
    memory = (
        "INSERT INTO memories (id, location_id, category, title, text, episode, turn_start, "
        "turn_end, score_change, persistence, status, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    with conn:
        conn.execute("INSERT INTO locations VALUES (180, 'West of House ', 3)")
        conn.execute("INSERT INTO locations VALUES (?, 'Far away', 0)", (big,))
        conn.execute("INSERT INTO location_episodes VALUES (180, 1)")
        rows = [
            (1, 180, "NOTE", "A", "t", 1, 0, None, None, "permanent", "SUPERSEDED", "2026"),
            (2, 180, "DANGER", "A", b"blob", 1, 3, 5, 1.5, "core", "ACTIVE", b"\x00\x01"),
            (
                3,
                180,
                "SUCCESS",
                "a\x00b ",
                "nul\x00in",
                big,
                0,
                big,
                -(2**63),
                "permanent",
                "TENTATIVE",
                "2026",
            ),
            (7, big, "FAILURE", "x", "y", 2, 1, 1, 0, "permanent", "ACTIVE", "c"),
        ]
        conn.executemany(memory, rows)
        conn.execute(
            "INSERT INTO memory_links (memory_id, superseded_by_id, episode, turn, reason, "
            "created_at) VALUES (1, 2, 1, 3, NULL, 'x')"
        )
    command.upgrade(config, "0002")
    with conn:
        conn.execute(
            "INSERT INTO synthesis_decisions (episode, turn, location_id, location_name, "
            "triggers, mode, model, raw_answer, latency_ms, cost_usd, prompt_tokens, created_at) "
            "VALUES (1, 2, 180, 'W', '', 'offline', NULL, x'ff00', 0.1, 1e-300, 7, 'c')"
        )
        conn.execute(
            "INSERT INTO synthesis_decisions (episode, turn, location_id, location_name, "
            "triggers, mode, model, raw_answer, latency_ms, created_at) "
            "VALUES (1, 3, 180, 'W', 'death', 'llm', 'gpt', '{}', 3, 'c')"
        )
        conn.execute(
            "INSERT INTO turn_records (run_id, episode, turn, location_id, action, "
            "score_before, score_after, location_after, state_changed, died, triggers, "
            "memory_tokens, overhead_us, created_at) VALUES "
            "('r', 1, 1, 180, 'look', 0, 0, NULL, 0, 0, '', 0, 12.345678901234567, 'c')"
        )
    command.upgrade(config, "0003")
    with conn:
        conn.execute(
            "INSERT INTO flagged_memories (content, importance, turn, location_id, "
            "location_name, score, moves, episode, session_id, created_at) VALUES "
            "('Grue  HERE', 1000, 1, NULL, 'Dark', NULL, NULL, 1, 's', 'c')"
        )
    command.upgrade(config, "0006")
    with conn:
        conn.execute("INSERT INTO map_rooms VALUES (180, '')")
        conn.execute("INSERT INTO map_rooms VALUES (79, 'North of House')")
        connection = (
            "INSERT INTO map_connections (from_id, action, action_key, direction, to_id, "
            "verifications, failures, first_episode, first_turn, last_episode, last_turn) "
            "VALUES (180, ?, ?, ?, 79, 1, 0, 1, 1, 1, 1)"
        )
        conn.execute(connection, ("n", "north", "north"))
        conn.execute(connection, ("Pray", "pray", None))
        for count, direction in enumerate(["up", "down", "in", "out", "southwest"]):
            conn.execute(
                "INSERT INTO map_exit_failures VALUES (180, ?, ?, 1, 1)", (direction, count)
            )
        conn.execute("DELETE FROM map_exit_failures WHERE direction = 'down'")  # a rowid gap
        conn.execute("INSERT INTO map_pruned_exits VALUES (79, 'in', 1, 2)")
    command.upgrade(config, "0007")
    with conn:
        conn.execute(
            "INSERT INTO turn_records (run_id, episode, turn, location_id, action, "
            "score_before, score_after, location_after, state_changed, died, triggers, "
            "memory_tokens, overhead_us, created_at, outcome) VALUES "
            "('r', 1, 2, 180, 'jump', 0, 0, NULL, 0, 1, '', 0, 1, 'c', 'died')"
        )
    conn.close()


def test_a_real_store_database_down_to_0007_and_up_again_keeps_every_value_and_its_type(
    tmp_path: Path,
) -> None:
    db, new = tmp_path / "real.db", tmp_path / "new.db"
    real_store_database(db)
    MemoryStore.open(new).close()
    values, details = values_of(db), table_details(db)
    assert details == table_details(new)
    command.downgrade(quiet_config(db), "0007")
    assert revision(db) == "0007" and and_later_tables(values_of(db)) == values
    assert leftovers(db) == []
    command.upgrade(quiet_config(db), "head")
    assert revision(db) == HEAD_REVISION
    assert values_of(db) == values
    assert table_details(db) == details and schema_of(db) == schema_of(new)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    with MemoryStore.open(db) as store:
        assert [m.title for m in store.memories(180)] == [
            "ünïcødé ☃ 𝄞",
            "mailbox",
            "Mailbox",
            "Window opens",
        ]
        # the ephemeral "Window ajar" went with its connection; the supersession stays
        assert [(m.title, m.turns) for m in store.history(180, "Mailbox")] == [
            ("Mailbox", "5"),
            ("Mailbox", "6-9"),
        ]


def test_a_database_made_at_0001_upgraded_step_by_step_keeps_every_value_byte_for_byte(
    tmp_path: Path,
) -> None:
    """Up to 0007 with rows written at each step, then 0008, down to 0007 and up again:
    every value (with its storage class) of every table stays as it was, rowid keys too
    (map_exit_failures' rowids are not its key: the rebuild renumbers them past the gap,
    which no reader sees), and the schema is a new database's."""
    db, new = tmp_path / "old.db", tmp_path / "new.db"
    populated_0001_to_0007(db)
    values, schema_0007 = values_of(db), schema_of(db)
    command.upgrade(quiet_config(db), "head")
    assert revision(db) == HEAD_REVISION and values_of(db) == and_later_tables(values)
    MemoryStore.open(new).close()
    assert schema_of(db) == schema_of(new) and table_details(db) == table_details(new)
    with sqlite3.connect(db) as conn:
        assert " IN (" not in "".join(
            row[0] for row in conn.execute("SELECT sql FROM sqlite_master WHERE sql NOT NULL")
        )
        rowids = {
            table: conn.execute(f'SELECT rowid FROM "{table}" ORDER BY rowid').fetchall()
            for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if has_integer_key(conn, table)
        }
        assert rowids["memories"] == [(1,), (2,), (3,), (7,)]
    command.downgrade(quiet_config(db), "0007")
    assert values_of(db) == values and schema_of(db) == schema_0007 and leftovers(db) == []
    command.upgrade(quiet_config(db), "head")
    assert values_of(db) == and_later_tables(values) and schema_of(db) == schema_of(new)


def what_the_checks_accept(db: Path) -> dict[tuple[str, str, str], str]:
    """For each rewritten column and odd value: "accepted" or the kind of SQLite's error
    (NOT NULL or CHECK), each UPDATE rolled back."""
    conn = sqlite3.connect(db, isolation_level=None)
    found = {}
    try:
        for table, column in REWRITTEN:
            for value in ODD_VALUES:
                conn.execute("BEGIN")
                try:
                    if table == "map_connections":  # its check ties action_key to direction
                        conn.execute(
                            f"UPDATE {table} SET {column} = ?, action_key = coalesce(?, 'pray')",  # noqa: S608
                            (value, value),
                        )
                    else:
                        conn.execute(f"UPDATE {table} SET {column} = ?", (value,))  # noqa: S608
                    outcome = "accepted"
                except sqlite3.Error as exc:
                    # which constraint SQLite names first when two fail depends on their
                    # order in the CREATE statement, which a rebuild changes: the kind only
                    outcome = f"{type(exc).__name__}: {str(exc).split(':')[0]}"
                conn.execute("ROLLBACK")
                found[(table, column, repr(value))] = outcome
    finally:
        conn.close()
    return found


def test_the_rewritten_checks_accept_and_refuse_exactly_what_the_in_lists_did(
    tmp_path: Path,
) -> None:
    db = populated_0007(tmp_path)
    before = what_the_checks_accept(db)
    command.upgrade(quiet_config(db), "head")
    after = what_the_checks_accept(db)
    assert after == before
    command.downgrade(quiet_config(db), "0007")
    assert what_the_checks_accept(db) == before
    accepted = {key for key, outcome in after.items() if outcome == "accepted"}
    assert ("memories", "category", "'note'") not in accepted
    assert ("memories", "category", "b'NOTE'") not in accepted
    assert ("map_exit_failures", "direction", "'north '") not in accepted
    assert ("turn_records", "outcome", "None") in accepted
    assert ("map_connections", "direction", "None") in accepted
    assert after[("memories", "category", "1")] == "IntegrityError: CHECK constraint failed"
    assert after[("memories", "category", "None")] == "IntegrityError: NOT NULL constraint failed"


def test_a_rebuild_failing_at_its_rename_after_the_drop_leaves_the_table_and_0007(
    tmp_path: Path,
) -> None:
    """A view of the user's own over memories makes SQLite refuse the rebuild's last step
    (ALTER TABLE _alembic_tmp_memories RENAME TO memories), after the old table was
    dropped: the whole revision rolls back, the table with its rows, the view and the
    user's index are there, at 0007."""
    db = populated_0007(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE VIEW live AS SELECT title FROM memories WHERE status = 'ACTIVE'")
        conn.execute("CREATE INDEX my_created_at ON memories (created_at)")
    values, schema = values_of(db), schema_of(db)
    with pytest.raises(Exception, match="error in view live"):
        command.upgrade(quiet_config(db), "head")
    assert revision(db) == "0007" and leftovers(db) == []
    assert values_of(db) == values and schema_of(db) == schema
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM live").fetchall() == [("Mailbox is empty",)]
        conn.execute("DROP VIEW live")
    command.upgrade(quiet_config(db), "head")
    assert revision(db) == HEAD_REVISION and values_of(db) == and_later_tables(values)
    with sqlite3.connect(db) as conn:  # the user's index rebuilt with the table
        assert conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'my_created_at'"
        ).fetchall() == [("CREATE INDEX my_created_at ON memories (created_at)",)]
