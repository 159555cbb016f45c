"""The store's transactions: begun and ended on the driver connection (one BEGIN, one
COMMIT), with the Core statements run inside them joining them, on both backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import exc, insert, select

from memstore.errors import DatabaseUnavailable
from memstore.executor import run
from memstore.schema import locations
from memstore.store import MemoryStore
from tests.conftest import note

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
