"""The schema changed under an open store (a confirmed downgrade while an agent ran, a table
altered by hand): a one-line refusal (SchemaChanged, a StoreBusy) that the agent loop rides
out like a lock held too long, and no persistent row ever read from or written to the
ephemeral tier's table of the same name."""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_cluster import PgCluster
from sqlalchemy import create_engine, text

from memstore import (
    DatabaseUnavailable,
    MemoryStore,
    SchemaChanged,
    SimpleMemoryManager,
    StoreBusy,
)
from memstore.cli import main
from tests.conftest import MakeMemory, note


def alter(database: str | Path, *statements: str) -> None:
    """Run ``statements`` through a connection of another process's kind (not the store's)."""
    if isinstance(database, Path):
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys = OFF")
            for statement in statements:
                conn.execute(statement)
        finally:
            conn.close()
        return
    engine = create_engine(database)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture
def own_database(pg_cluster: PgCluster) -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database of the test's own: (its name, its URL); dropped after."""
    name = f"db_{uuid.uuid4().hex[:12]}"
    yield name, pg_cluster.create_database(name)
    pg_cluster.drop_database(name)


def end_sessions(pg_cluster: PgCluster, name: str, *statements: str) -> None:
    """Run ``statements`` as an administrator of database ``name``, then end every other
    session of it (as a server restart or a killed connection does)."""
    import psycopg

    with psycopg.connect(pg_cluster.conninfo(name), autocommit=True) as admin:
        for statement in statements:
            admin.execute(statement)
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )


def test_a_column_dropped_under_an_open_store_is_a_one_line_refusal(
    database: str | Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(database) as store:
        assert store.add_memory(3, "Kitchen", mem("Sack on the table"))
        alter(database, "ALTER TABLE memories DROP COLUMN changed_version")
        with pytest.raises(SchemaChanged) as raised:
            store.add_memory(3, "Kitchen", mem("Window ajar"))
        message = str(raised.value)
        assert isinstance(raised.value, StoreBusy)
        assert "\n" not in message
        assert "changed while this store had it open" in message
        assert "changed_version" in message and "nothing was written" in message
        assert "memstore db upgrade" in message
    alter(database, "ALTER TABLE memories ADD COLUMN changed_version INTEGER DEFAULT 0 NOT NULL")
    with MemoryStore.open(database) as store:
        assert [m.title for m in store.memories(3)] == ["Sack on the table"]


def test_a_supersession_never_goes_to_the_ephemeral_tier_while_the_links_table_is_gone(
    database: str | Path, mem: MakeMemory
) -> None:
    # unqualified, ``memory_links`` named the ephemeral tier's table once the persistent
    # one was gone (SQLite's attached database, PostgreSQL's pg_temp): the acknowledged
    # link was written there and went with the episode or the session
    ephemeral = "ephemeral" if isinstance(database, Path) else "pg_temp"
    with MemoryStore.open(database) as store:
        assert store.add_memory(3, "Kitchen", mem("Sack closed"))
        alter(database, "DROP TABLE memory_links")
        with pytest.raises(SchemaChanged, match="memory_links"):
            store.supersede_memory(3, "Kitchen", "Sack closed", mem("Sack open"))
        with store.transaction(write=False) as conn:
            for table in ("memory_links", "memories"):
                count = conn.exec_driver_sql(f"SELECT count(*) FROM {ephemeral}.{table}")
                assert count.scalar() == 0, table
    alter(
        database,
        "CREATE TABLE memory_links (id INTEGER PRIMARY KEY, memory_id INTEGER NOT NULL, "
        "superseded_by_id INTEGER, episode INTEGER NOT NULL, turn INTEGER NOT NULL, "
        "reason TEXT, created_at TEXT NOT NULL)",
    )
    with MemoryStore.open(database) as store:
        assert [(m.title, m.status.value) for m in store.memories(3)] == [("Sack closed", "ACTIVE")]


def turn(manager: SimpleMemoryManager, action: str, moves: int) -> object:
    """One refused action at West of House (the offline recorder keeps a FAILURE)."""
    return manager.record_action_outcome(
        5, "West of House", action, "You can't go that way.", {"score": 0, "moves": moves}
    )


def test_the_agent_loop_rides_out_a_downgrade_to_base_and_reads_its_memories_after_the_upgrade(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore.open(db_path)
    manager = SimpleMemoryManager(store)
    try:
        turn(manager, "go north", 1)
        assert "'go north' is no exit" in manager.get_location_memory(5)
        assert main(["--db", str(db_path), "db", "downgrade", "base", "--allow-data-loss"]) == 0
        caplog.set_level(logging.WARNING)
        # nothing raises into the loop: each call is refused, counted and logged
        assert turn(manager, "go east", 2) is None
        assert manager.get_location_memory(5) == ""
        status = manager.get_status()
        assert status["store_schema_changed"] >= 2
        assert status["store_busy"] >= status["store_schema_changed"]
        assert status["memories_by_tier"] is None
        manager.reset_episode()
        with pytest.raises(SchemaChanged, match="what waits stays in this manager"):
            manager.flush()  # the call that asks for the write says why, in one line
        assert "the database's schema changed" in caplog.text
        assert main(["--db", str(db_path), "db", "upgrade"]) == 0
        assert manager.flush() is True
        turn(manager, "go south", 3)
        # read from main's table again, not from the ephemeral tier's statement SQLite kept
        assert "'go south' is no exit" in manager.get_location_memory(5)
        assert manager.get_status()["memories_by_tier"] is not None
    finally:
        manager.close()
        store.close()
    with MemoryStore.open(db_path) as again:
        assert "'go south' is no exit" in [m.title for m in again.memories(5)]


def test_a_lost_ephemeral_tier_is_a_lost_connection_and_the_next_call_makes_it_anew(
    database: str | Path,
) -> None:
    # review K1 M2: the session's tier gone (PostgreSQL: a pooler's DISCARD TEMP) was taken
    # for a schema change: every turn refused for good ("memstore db upgrade"), nothing
    # stored again, and reset_episode raised SchemaChanged into the agent loop
    store = MemoryStore.open(database)
    manager = SimpleMemoryManager(store)
    try:
        turn(manager, "go north", 1)
        with store.transaction() as conn:
            if isinstance(database, Path):
                conn.exec_driver_sql("DROP TABLE ephemeral.memory_links")
                conn.exec_driver_sql("DROP TABLE ephemeral.memories")
            else:
                conn.exec_driver_sql("DISCARD TEMP")
        manager.reset_episode()  # drops the tier's memories: never raises
        assert manager.get_status()["store_unavailable"] == 1
        assert manager.get_status()["store_schema_changed"] == 0
        turn(manager, "go east", 1)
        assert manager.flush() is True  # (at once, whatever the backoff) on a new connection
        turn(manager, "go south", 2)
        shown = manager.get_location_memory(5)
        assert "'go east' is no exit" in shown and "'go south' is no exit" in shown
        assert store.add_memory(5, "West of House", note("Session fact", "ephemeral"))
        assert store.get_ephemeral_count(5) == 1
    finally:
        manager.close()
        store.close()


def test_a_store_keeps_the_schema_it_opened_in_after_a_reconnect(
    pg_cluster: PgCluster, own_database: tuple[str, str]
) -> None:
    # review K1 M1: a reconnect took the schema current_schema() found then (a database
    # default changed since): the rows still went to the first schema, but the writers'
    # lock was taken in the other, so another writer's lock did not hold this one back
    name, url = own_database
    with MemoryStore.open(url, busy_timeout_s=0.5) as store:
        assert store.add_memory(3, "Kitchen", note("Sack"))
        end_sessions(
            pg_cluster,
            name,
            "CREATE SCHEMA other",
            f"ALTER DATABASE {name} SET search_path = other",
        )
        with pytest.raises(DatabaseUnavailable):
            store.add_memory(3, "Kitchen", note("Window"))  # the connection was lost
        public = url + "?options=-csearch_path%3Dpublic"
        with MemoryStore.open(public) as other, other.transaction():  # its writers' lock
            with pytest.raises(StoreBusy):
                store.add_memory(3, "Kitchen", note("Window"))
        assert store.add_memory(3, "Kitchen", note("Window"))
        assert [m.title for m in store.memories(3)] == ["Sack", "Window"]
    with MemoryStore.open(public) as again:
        assert [m.title for m in again.memories(3)] == ["Sack", "Window"]


def test_a_schema_whose_name_holds_a_double_quote_opens(
    pg_cluster: PgCluster, own_database: tuple[str, str]
) -> None:
    # review K1 L1: the name went into SET search_path unescaped (a raw ProgrammingError)
    import psycopg

    name, url = own_database
    with psycopg.connect(pg_cluster.conninfo(name), autocommit=True) as admin:
        admin.execute('CREATE SCHEMA "quo""te"')
    quoted = url + "?options=-csearch_path%3D%22quo%22%22te%22"
    with MemoryStore.open(quoted) as store:
        assert store.add_memory(3, "Kitchen", note("Sack"))
    with psycopg.connect(pg_cluster.conninfo(name), autocommit=True) as admin:
        titles = admin.execute('SELECT title FROM "quo""te".memories').fetchall()
    assert titles == [("Sack",)]


def test_an_in_memory_store_makes_its_lost_tier_anew_and_keeps_what_it_stored() -> None:
    # review L2 H1: the tier's loss reconnected, and an in-memory database went with its
    # connection: every acknowledged write gone, then "schema changed" for ever
    with MemoryStore.open("sqlite://") as store:
        assert store.add_memory(3, "Kitchen", note("Sack"))
        with store.transaction() as conn:
            conn.exec_driver_sql("DROP TABLE ephemeral.memory_links")
            conn.exec_driver_sql("DROP TABLE ephemeral.memories")
        with pytest.raises(DatabaseUnavailable, match="it was made anew"):
            store.add_memory(3, "Kitchen", note("Session", "ephemeral"))
        assert [m.title for m in store.memories(3)] == ["Sack"]
        assert store.add_memory(3, "Kitchen", note("Session", "ephemeral"))
        assert store.get_ephemeral_count(3) == 1


def test_a_command_ending_with_the_schema_short_says_its_last_turns_are_lost(
    db_path: Path,
) -> None:
    # review L2 L2: the demo's last line said "flush again", and the process then ended
    store = MemoryStore.open(db_path)
    manager = SimpleMemoryManager(store)
    try:
        turn(manager, "go north", 1)
        assert main(["--db", str(db_path), "db", "downgrade", "0003", "--allow-data-loss"]) == 0
        turn(manager, "go east", 2)
        with pytest.raises(SchemaChanged) as raised:
            manager.close_final("nothing was exported")
        message = str(raised.value)
        assert "\n" not in message and "flush again" not in message
        assert message.endswith(
            "the last turns could not be written and are lost: nothing was exported"
        )
        assert "memstore db upgrade" in message
    finally:
        store.close()


def test_a_servers_dropped_prepared_statements_are_a_lost_connection(pg_database: str) -> None:
    # review L2 M1: a pooler's DEALLOCATE ALL (or DISCARD ALL) left psycopg's prepared
    # statements unknown to the session: a raw InvalidSqlStatementName on every call, for ever
    from memstore.connection import driver_of
    from memstore.memory_tools import MemoryToolkit

    store = MemoryStore.open(pg_database)
    manager = SimpleMemoryManager(store)
    toolkit = MemoryToolkit(store)
    try:
        for moves in range(12):  # past psycopg's prepare threshold (5)
            turn(manager, f"go north {moves}", moves)
            manager.get_location_memory(5)
        with store.transaction(write=False) as conn:
            pgconn = driver_of(conn).pgconn
        pgconn.exec_(b"DEALLOCATE ALL")  # behind psycopg's back, as a pooler does
        pgconn.exec_(b"DISCARD TEMP")
        for moves in range(12, 16):
            turn(manager, f"go east {moves}", moves)  # never raises
            manager.get_location_memory(5)
        assert toolkit.add_memory("A leaflet in the mailbox", 500, 16, 5, "West of House") in (
            True,
            False,
        )
        manager.reset_episode()
        assert manager.flush() is True
        turn(manager, "go south", 1)
        assert "'go south' is no exit" in manager.get_location_memory(5)
        assert manager.get_status()["store_unavailable"] >= 1
    finally:
        manager.close()
        store.close()


def test_the_toolkit_answers_false_for_a_lost_connection(
    pg_cluster: PgCluster, own_database: tuple[str, str]
) -> None:
    # review L2 L1: MemoryToolkit.add_memory raised DatabaseUnavailable where the manager's
    # add_memory answers False
    from memstore.memory_tools import MemoryToolkit

    name, url = own_database
    with MemoryStore.open(url) as store:
        toolkit = MemoryToolkit(store)
        assert toolkit.add_memory("The trophy case is empty", 500, 1, 5, "Living Room")
        end_sessions(pg_cluster, name)
        assert toolkit.add_memory("A sword above the mantel", 600, 2, 5, "Living Room") is False
        assert toolkit.failures["store_unavailable"] == 1
        assert toolkit.add_memory("A sword above the mantel", 600, 2, 5, "Living Room")


def test_a_lost_tier_that_cannot_be_made_anew_is_still_a_one_line_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # making the lost tier anew inside the refusal failed with the driver's own error, raised
    # instead of memstore's one line; the next call that needs the tier tries again
    import sqlite3

    from memstore import store_core

    def cannot(cursor: object) -> None:
        raise sqlite3.OperationalError("database table is locked")

    with MemoryStore.open("sqlite://") as store:
        assert store.add_memory(3, "Kitchen", note("Sack"))
        with store.transaction() as conn:
            conn.exec_driver_sql("DROP TABLE ephemeral.memory_links")
            conn.exec_driver_sql("DROP TABLE ephemeral.memories")
        monkeypatch.setattr(store_core, "make_ephemeral_tier", cannot)
        with pytest.raises(DatabaseUnavailable, match="could not be made anew") as raised:
            store.add_memory(3, "Kitchen", note("Session", "ephemeral"))
        assert "\n" not in str(raised.value) and "database table is locked" in str(raised.value)
        monkeypatch.undo()
        with pytest.raises(DatabaseUnavailable, match="it was made anew"):
            store.add_memory(3, "Kitchen", note("Session", "ephemeral"))
        assert store.add_memory(3, "Kitchen", note("Session", "ephemeral"))
        assert [m.title for m in store.memories(3)] == ["Sack", "Session"]
