"""Revision 0008 (CHECKs as OR chains) on PostgreSQL.

`memstore db upgrade` from 0007 and a downgrade keep every row, the constraints accept and
refuse what they did, and the schema matches a new database's (the id sequences' names
too); flagged memories are added after an upgrade through 0005 (whose rebuild once gave
the id a new sequence starting at 1).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from memstore.flagged import FlaggedMemories
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.migration_helpers import ODD_VALUES, REWRITTEN, db_upgrade

ROOT = Path(__file__).resolve().parents[1]


def pg_config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", url)
    config.stdout = io.StringIO()
    return config


def pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def pg_schema(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Columns, constraints (as PostgreSQL prints them) and indexes of the public schema."""
    with psycopg.connect(pg_conninfo(url)) as conn:
        return {
            "columns": conn.execute(
                "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, "
                "column_default FROM information_schema.columns WHERE table_schema = 'public' "
                "ORDER BY 1, 2"
            ).fetchall(),
            "constraints": conn.execute(
                "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
            ).fetchall(),
            "indexes": conn.execute(
                "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = 'public' ORDER BY 1, 2"
            ).fetchall(),
        }


def same_pg_schema(migrated: str, created: str) -> bool:
    """The same columns (with their defaults: the id sequences' names), constraints and
    indexes. (Was: flagged_memories.id's sequence was _alembic_tmp_flagged_memories_id_seq
    after revision 0005's rebuild on PostgreSQL; 0005 alters the column now, and 0008
    repairs a database upgraded the old way.)"""
    return pg_schema(migrated) == pg_schema(created)


def pg_rows(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(pg_conninfo(url)) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename != 'alembic_version'"
        ).fetchall()
        return {
            table: sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)  # noqa: S608
            for (table,) in tables
        }


def pg_populate_0007(url: str) -> None:
    with psycopg.connect(pg_conninfo(url)) as conn:
        conn.execute("INSERT INTO locations VALUES (180, 'West of House ', 3)")
        conn.execute("INSERT INTO location_episodes VALUES (180, 1)")
        memory = (
            "INSERT INTO memories (location_id, category, title, text, episode, turn_start, "
            "turn_end, score_change, persistence, status, created_at) "
            "VALUES (180, %s, %s, %s, 1, 3, NULL, 0, %s, %s, 'c') RETURNING id"
        )
        old = conn.execute(memory, ("NOTE", "Mailbox", "t", "permanent", "SUPERSEDED")).fetchone()
        new = conn.execute(memory, ("DANGER", "Mailbox", "ü ☃", "core", "ACTIVE")).fetchone()
        conn.execute(memory, ("SUCCESS", "Grue ", "x", "permanent", "TENTATIVE"))
        assert old is not None and new is not None
        conn.execute(
            "INSERT INTO memory_links (memory_id, superseded_by_id, episode, turn, created_at) "
            "VALUES (%s, %s, 1, 3, 'c')",
            (old[0], new[0]),
        )
        conn.execute(
            "INSERT INTO synthesis_decisions (episode, turn, location_id, location_name, "
            "triggers, mode, latency_ms, cost_usd, created_at) "
            "VALUES (1, 2, 180, 'W', '', 'offline', 0.1, 1e-300, 'c')"
        )
        for turn, outcome in enumerate([None, "ok", "died"]):
            conn.execute(
                "INSERT INTO turn_records (run_id, episode, turn, location_id, action, "
                "score_before, score_after, state_changed, died, triggers, memory_tokens, "
                "overhead_us, created_at, outcome) "
                "VALUES ('r', 1, %s, 180, 'look', 0, 0, 0, 0, '', 0, 12.345678901234567, 'c', %s)",
                (turn, outcome),
            )
        conn.execute(
            "INSERT INTO flagged_memories (content, importance, turn, location_name, episode, "
            "session_id, created_at, content_key) VALUES ('Grue', 5, 1, 'D', 1, 's', 'c', 'grue')"
        )
        conn.execute("INSERT INTO map_rooms VALUES (180, ''), (79, 'N')")
        conn.execute(
            "INSERT INTO map_connections (from_id, action, action_key, direction, to_id, "
            "first_episode, first_turn, last_episode, last_turn) VALUES "
            "(180, 'n', 'north', 'north', 79, 1, 1, 1, 1), "
            "(180, 'Pray', 'pray', NULL, 79, 1, 1, 1, 1)"
        )
        conn.execute("INSERT INTO map_exit_failures VALUES (180, 'east', 2, 1, 1)")
        conn.execute("INSERT INTO map_pruned_exits VALUES (180, 'east', 1, 2)")


def pg_what_the_checks_accept(url: str) -> dict[tuple[str, str, str], str]:
    found = {}
    with psycopg.connect(pg_conninfo(url)) as conn:
        for table, column in REWRITTEN:
            for value in ODD_VALUES:
                if not (value is None or isinstance(value, str)) or "\x00" in str(value):
                    continue  # PostgreSQL refuses these before any check
                try:
                    with conn.transaction(force_rollback=True):
                        if table == "map_connections":
                            conn.execute(
                                f"UPDATE {table} SET {column} = %s, "  # noqa: S608
                                f"action_key = coalesce(%s, 'pray')",
                                (value, value),
                            )
                        else:
                            conn.execute(f"UPDATE {table} SET {column} = %s", (value,))  # noqa: S608
                    outcome = "accepted"
                except psycopg.errors.IntegrityError as exc:
                    outcome = f"{type(exc).__name__}: {exc.diag.constraint_name}"
                found[(table, column, repr(value))] = outcome
    return found


#: the tables the revisions after 0008 add (0009's, 0011's): empty after an upgrade
LATER_TABLES: dict[str, list[Any]] = {"location_names": [], "write_receipts": []}


@pytest.fixture
def fresh_pg_database(pg_cluster: Any) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex[:16]}"
    yield pg_cluster.create_database(name)
    pg_cluster.drop_database(name)


def test_postgresql_db_upgrade_from_0007_and_downgrade_keep_rows_and_match_a_new_database(
    pg_database: str, fresh_pg_database: str
) -> None:
    command.upgrade(pg_config(pg_database), "0007")
    pg_populate_0007(pg_database)
    rows, schema_0007 = pg_rows(pg_database), pg_schema(pg_database)
    accepts_0007 = pg_what_the_checks_accept(pg_database)
    upgrade = db_upgrade(pg_database)
    assert upgrade.returncode == 0, upgrade.stderr
    assert upgrade.stdout.splitlines()[1:] == [
        "revision before: 0007",
        f"revision after: {HEAD_REVISION}",
    ]
    MemoryStore.open(fresh_pg_database).close()
    assert same_pg_schema(pg_database, fresh_pg_database)
    assert pg_rows(pg_database) == {**rows, **LATER_TABLES}
    constraints = "".join(row[3] for row in pg_schema(pg_database)["constraints"])
    assert "ANY (ARRAY" not in constraints  # PostgreSQL's own spelling of IN (...)
    assert pg_what_the_checks_accept(pg_database) == accepts_0007
    assert accepts_0007[("memories", "category", "'note'")] == (
        "CheckViolation: ck_memories_category_known"
    )
    with MemoryStore.open(pg_database) as store:
        assert [m.title for m in store.memories(180)] == ["Mailbox", "Grue "]

    command.downgrade(pg_config(pg_database), "0007")
    assert pg_schema(pg_database) == schema_0007 and pg_rows(pg_database) == rows
    command.upgrade(pg_config(pg_database), "head")
    assert same_pg_schema(pg_database, fresh_pg_database)
    assert pg_rows(pg_database) == {**rows, **LATER_TABLES}


def test_postgresql_flagged_memories_are_added_after_an_upgrade_through_0005(
    pg_database: str,
) -> None:
    # was: UniqueViolation on pk_flagged_memories, Key (id)=(1) already exists (0005's
    # rebuild on PostgreSQL gave the id a new sequence at 1)
    command.upgrade(pg_config(pg_database), "0004")
    with psycopg.connect(pg_conninfo(pg_database)) as conn:
        for n in range(3):
            conn.execute(
                "INSERT INTO flagged_memories (content, importance, turn, location_name, "
                "episode, session_id, created_at) VALUES (%s, 5, 1, 'Dark', 1, 's', 'c')",
                (f"thing {n}",),
            )
    command.upgrade(pg_config(pg_database), "head")
    with MemoryStore.open(pg_database) as store:
        flagged = FlaggedMemories(store, session_id="after-upgrade")
        assert flagged.add_flagged_memory("A new grue", 5, 1, None, "Dark")
        assert flagged.count() == 4
