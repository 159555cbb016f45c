"""The store's transactions: begun and ended on the driver connection (one BEGIN, one
COMMIT), with the Core statements run inside them joining them, on both backends."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, exc, insert, literal_column, select

from memstore import store_core
from memstore.errors import DatabaseUnavailable, TransactionAborted
from memstore.executor import run
from memstore.map_store import MapStore
from memstore.schema import locations
from memstore.store import MemoryStore
from tests.conftest import note
from tests.map_helpers import NORTH, WEST, map_event

INSERT_LOCATION = insert(locations)


def names(store: MemoryStore) -> list[str]:
    with store.transaction(write=False) as conn:
        return [name for (name,) in conn.execute(select(locations.c.name).order_by("id"))]


def test_a_core_statement_and_an_executor_statement_commit_together(store: MemoryStore) -> None:
    with store.transaction() as conn:
        run(conn, INSERT_LOCATION, {"id": 1, "name": "by the executor", "visit_count": 0})
        conn.execute(INSERT_LOCATION.values(id=2, name="by Core", visit_count=0))
        assert conn.in_transaction()  # SQLAlchemy joined the store's transaction
    assert not store._conn.in_transaction()  # noqa: SLF001 - and it ended with it
    assert names(store) == ["by the executor", "by Core"]
    assert store.add_memory(1, "Room", note("Still writable"))


@pytest.mark.parametrize("core_first", [True, False], ids=["Core first", "executor first"])
def test_an_error_rolls_back_the_core_and_the_executor_statements_alike(
    store: MemoryStore, core_first: bool
) -> None:
    with pytest.raises(KeyError, match="a caller's bug"), store.transaction() as conn:
        if core_first:
            conn.execute(INSERT_LOCATION.values(id=2, name="by Core", visit_count=0))
        run(conn, INSERT_LOCATION, {"id": 1, "name": "by the executor", "visit_count": 0})
        if not core_first:
            conn.execute(INSERT_LOCATION.values(id=2, name="by Core", visit_count=0))
        raise KeyError("a caller's bug")
    assert names(store) == []
    assert store.add_memory(1, "Room", note("Written after the rollback"))
    assert "Written after the rollback" in store.get_location_memory(1)


@pytest.mark.parametrize("with_core", [False, True], ids=["executor only", "a Core statement too"])
def test_a_commit_that_fails_is_rolled_back_and_the_store_stays_usable(
    db_path: Path, with_core: bool
) -> None:
    """SQLite checks deferred foreign keys at COMMIT, which then fails and leaves the
    transaction open: it is rolled back, so the next write can begin."""
    with MemoryStore.open(db_path) as store:
        # the driver's error, or SQLAlchemy's around it when SQLAlchemy committed
        with pytest.raises((sqlite3.IntegrityError, exc.IntegrityError), match="FOREIGN KEY"):
            with store.transaction() as conn:
                driver = conn.connection.driver_connection
                driver.execute("PRAGMA defer_foreign_keys = ON")  # type: ignore[union-attr]
                driver.execute(  # type: ignore[union-attr]
                    "INSERT INTO location_episodes (location_id, episode) VALUES (999, 1)"
                )
                run(conn, INSERT_LOCATION, {"id": 1, "name": "lost with it", "visit_count": 0})
                if with_core:
                    conn.execute(INSERT_LOCATION.values(id=2, name="by Core", visit_count=0))
        assert not store._conn.connection.driver_connection.in_transaction  # noqa: SLF001
        assert names(store) == []
        assert store.add_memory(3, "Room", note("Written after the failed commit"))
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("SELECT id FROM locations").fetchall() == [(3,)]
    finally:
        raw.close()


def test_nested_transactions_are_one(store: MemoryStore) -> None:
    with pytest.raises(RuntimeError, match="outer"), store.transaction() as outer:
        with store.transaction() as inner:
            assert inner is outer
            run(inner, INSERT_LOCATION, {"id": 1, "name": "inner", "visit_count": 0})
        raise RuntimeError("outer")
    assert names(store) == []


def test_a_transaction_sqlite_rolled_back_itself_is_not_reported_committed(
    db_path: Path,
) -> None:
    """SQLite rolls a whole transaction back on its own after some errors (a full disk).
    A caller that caught that error inside ``store.transaction()`` must not see the
    transaction's end succeed: the memory it was told was added is gone with it."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(1, "Room", note("Before"))
        driver = store._conn.connection.driver_connection  # noqa: SLF001
        with pytest.raises(TransactionAborted, match="the database rolled it back") as raised:
            with store.transaction():
                assert store.add_memory(1, "Room", note("Acknowledged inside"))
                (pages,) = driver.execute("PRAGMA page_count").fetchone()  # type: ignore[union-attr]
                driver.execute(f"PRAGMA max_page_count = {pages}")  # type: ignore[union-attr]
                with contextlib.suppress(sqlite3.OperationalError):  # the caller's own catch
                    for n in range(400):
                        store.add_memory(1, "Room", note(f"Filler {n}", text="z" * 5000))
                assert not driver.in_transaction  # type: ignore[union-attr]
        assert "\n" not in str(raised.value)
        driver.execute("PRAGMA max_page_count = 1073741823")  # type: ignore[union-attr]
        assert [m.title for m in store.memories(1)] == ["Before"]
        assert store.add_memory(1, "Room", note("After"))
    with MemoryStore.open(db_path, read_only=True) as again:
        assert [m.title for m in again.memories(1)] == ["Before", "After"]


def test_a_caught_error_inside_a_transaction(store: MemoryStore) -> None:
    """A statement refused inside ``store.transaction()`` and caught by the caller: SQLite
    undoes the statement alone, so the rest commits; PostgreSQL aborts the whole
    transaction, so its end says so (TransactionAborted) instead of committing nothing."""
    duplicate = {"id": 1, "name": "twice", "visit_count": 0}
    server = store.target.is_server
    with contextlib.ExitStack() as outcome:
        if server:
            outcome.enter_context(
                pytest.raises(TransactionAborted, match="the database rolled it back")
            )
        with store.transaction() as conn:
            assert store.add_memory(2, "Room", note("Acknowledged inside"))
            run(conn, INSERT_LOCATION, duplicate)
            with contextlib.suppress(Exception):  # the driver's own error, whichever driver
                run(conn, INSERT_LOCATION, duplicate)  # the primary key refuses it
    titles = [m.title for m in store.memories(2)]
    assert titles == ([] if server else ["Acknowledged inside"])
    assert names(store) == ([] if server else ["twice", "Room"])
    assert store.add_memory(3, "Room", note("Written after it"))


def test_a_connection_lost_inside_a_transaction_is_never_committed_on_a_new_one(
    store: MemoryStore,
) -> None:
    """Invalidated inside the store's transaction (as SQLAlchemy does when a Core statement
    finds the connection gone): the commit must not run on the connection made again."""
    with pytest.raises(DatabaseUnavailable, match="may or may not have been committed"):
        with store.transaction() as conn:
            run(conn, INSERT_LOCATION, {"id": 1, "name": "never committed", "visit_count": 0})
            conn.invalidate()
    assert names(store) == []  # the next call connects again
    assert store.add_memory(2, "Room", note("Written on the new connection"))
    assert names(store) == ["Room"]


def _lost_then(kind: str, store: MemoryStore, conn: Connection) -> None:
    """Lose the transaction's connection, then go on writing as a caller might."""
    conn.invalidate()
    if kind == "executor":
        run(conn, INSERT_LOCATION, {"id": 2, "name": "after the loss", "visit_count": 0})
    elif kind == "Core":
        conn.execute(INSERT_LOCATION.values(id=2, name="after the loss", visit_count=0))
    else:
        store.record_visit(2, "after the loss", 1)


@pytest.mark.parametrize("then", ["executor", "Core", "a store call"])
def test_nothing_written_after_a_lost_connection_is_committed_on_a_new_one(
    store: MemoryStore, then: str
) -> None:
    """SQLAlchemy connects again, silently, when asked for a connection it invalidated: a
    statement run there would be committed on its own, and the transaction would end
    'normally' with its first half gone."""
    with pytest.raises(DatabaseUnavailable):
        with store.transaction() as conn:
            run(conn, INSERT_LOCATION, {"id": 1, "name": "before the loss", "visit_count": 0})
            _lost_then(then, store, conn)
    assert names(store) == []
    assert store.add_memory(3, "Room", note("Written on the new connection"))
    assert names(store) == ["Room"]


def _interrupted_begin(monkeypatch: pytest.MonkeyPatch, store: MemoryStore) -> None:
    """Ctrl-C arriving as the BEGIN returns (the signal waited while it waited for the
    lock); on PostgreSQL the transaction has also failed (psycopg cancelled the wait)."""
    begin = store_core.begin_transaction

    def interrupted(conn: Connection, how: str) -> None:
        begin(conn, how)
        if conn.dialect.name == "postgresql":
            with contextlib.suppress(Exception):
                run(conn, FAILING, {})
        raise KeyboardInterrupt

    monkeypatch.setattr(store_core, "begin_transaction", interrupted)


FAILING = select(literal_column("1") / literal_column("0"))


def test_ctrl_c_right_after_begin_leaves_no_transaction_open(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        _interrupted_begin(patched, store)
        with pytest.raises(KeyboardInterrupt):
            store.add_memory(1, "Room", note("Interrupted"))
    assert store.add_memory(2, "Kitchen", note("Written after Ctrl-C"))
    assert store.reset_episode() == 0
    assert names(store) == ["Kitchen"]


def test_a_rolled_back_write_leaves_nothing_in_the_views_or_the_map(store: MemoryStore) -> None:
    """What a transaction wrote, read inside it, is cached by the store and the map; a
    rollback drops it (a write on the store's own connection changes no data_version)."""
    maps = MapStore(store)
    store.add_memory(1, "Room", note("Committed"))
    assert "Committed" in store.get_location_memory(1)
    with pytest.raises(RuntimeError, match="rolled back"):
        with store.transaction(changes_memories=False):
            store.add_memory(1, "Room", note("Ghost"))
            maps.record([map_event(WEST, "n", NORTH)])
            assert "Ghost" in store.get_location_memory(1)
            assert [room.id for room in maps.rooms()] == [WEST, NORTH]
            raise RuntimeError("rolled back")
    assert "Ghost" not in store.get_location_memory(1)
    assert "Committed" in store.get_location_memory(1)
    assert maps.rooms() == []


def test_an_episode_allocated_in_a_rolled_back_transaction_is_not_kept(
    store: MemoryStore,
) -> None:
    """Otherwise this store plays an episode the database never handed out, and another
    agent is handed the same one."""
    store.allocate_episode()
    before = store.allocate_episode()
    with pytest.raises(RuntimeError, match="rolled back"), store.transaction():
        rolled_back = store.allocate_episode()
        assert store.current_episode == rolled_back == before + 1
        raise RuntimeError("rolled back")
    assert store.current_episode == before
    assert store.allocate_episode() == rolled_back


def _hold_the_lock(path: Path, locked: Any, seconds: float) -> None:
    with MemoryStore.open(path) as holder, holder.transaction():
        holder.add_memory(1, "Room", note("Held"))
        locked.set()
        time.sleep(seconds)


@pytest.mark.slow
def test_ctrl_c_while_a_write_waits_for_another_process_leaves_the_store_usable(
    db_path: Path,
) -> None:
    """The real thing: SIGINT while BEGIN IMMEDIATE waits for another process's lock."""
    MemoryStore.open(db_path).close()
    with MemoryStore.open(db_path) as store:
        locked = multiprocessing.get_context("spawn").Event()
        holder = multiprocessing.get_context("spawn").Process(
            target=_hold_the_lock, args=(db_path, locked, 1.5)
        )
        holder.start()
        try:
            assert locked.wait(30)
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            with pytest.raises(KeyboardInterrupt):
                store.add_memory(2, "Kitchen", note("Interrupted"))
        finally:
            holder.join(30)
        assert store.add_memory(3, "Attic", note("Written after Ctrl-C"))
    with MemoryStore.open(db_path, read_only=True) as again:
        assert [m.title for m in again.memories(3)] == ["Written after Ctrl-C"]
        assert again.memories(2) == []


def test_a_server_ending_the_session_inside_a_transaction_is_a_lost_connection(
    pg_cluster: Any, pg_database: str
) -> None:
    """The server ends the session (a restart, an administrator) inside
    ``store.transaction()``; the caller catches the error of the statement that met it. The
    end of the block says the connection was lost (not that an error rolled it back), and
    the next call connects again."""
    import psycopg

    with MemoryStore.open(pg_database) as store:
        store.add_memory(1, "Room", note("Before"))
        with pytest.raises(DatabaseUnavailable, match="lost the connection") as raised:
            with store.transaction():
                assert store.add_memory(1, "Room", note("Inside"))
                pid = store._conn.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]  # noqa: SLF001
                with psycopg.connect(pg_cluster.conninfo(pg_database.rsplit("/", 1)[1])) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                with contextlib.suppress(Exception):  # the caller's own catch
                    store.add_memory(1, "Room", note("Meets the ended session"))
        assert "\n" not in str(raised.value)
        assert store.add_memory(2, "Room", note("After"))  # the next call connects again
        assert [m.title for m in store.memories(1)] == ["Before"]
        assert [m.title for m in store.memories(2)] == ["After"]
