"""The busy timeout a SQLite connection has for each BEGIN (memstore.sqlite_session).

A write's BEGIN IMMEDIATE waits for the writers' lock in slices of SLICE_MS (a Ctrl-C
ends the wait: test_review_p_cli.py). The slice stays set from one write to the next (no
PRAGMA between writes); every other BEGIN gets the whole busy timeout back, and so does a
write on a database that is not in WAL mode, whose commit may wait for readers.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from conftest import MakeMemory

from memstore.sqlite_session import SLICE_MS, begin_sqlite, connected
from memstore.store import MemoryStore


def busy_ms(driver: sqlite3.Connection) -> int:
    return int(driver.execute("PRAGMA busy_timeout").fetchone()[0])


def new_connection(path: Path, whole_ms: int, *, wal: bool) -> tuple[sqlite3.Connection, dict]:
    driver = sqlite3.connect(path, isolation_level=None)
    driver.execute(f"PRAGMA busy_timeout = {whole_ms}")
    if wal:
        driver.execute("PRAGMA journal_mode = WAL")
    info: dict = {}
    connected(info, whole_ms, wal=wal)
    return driver, info


def test_writes_keep_the_slice_and_a_read_gets_the_whole_busy_timeout_back(
    tmp_path: Path,
) -> None:
    driver, info = new_connection(tmp_path / "w.db", 7000, wal=True)
    for _ in range(2):
        begin_sqlite(driver, "BEGIN IMMEDIATE", info)
        assert busy_ms(driver) == SLICE_MS  # (inside the write: SQLite waits for no lock)
        driver.execute("COMMIT")
    for begin in ("BEGIN", "BEGIN DEFERRED"):
        begin_sqlite(driver, begin, info)
        assert busy_ms(driver) == 7000
        driver.execute("COMMIT")
        begin_sqlite(driver, "BEGIN IMMEDIATE", info)
        driver.execute("COMMIT")


def test_a_database_not_in_wal_mode_gets_the_whole_busy_timeout_for_its_commit(
    tmp_path: Path,
) -> None:
    driver, info = new_connection(tmp_path / "d.db", 7000, wal=False)
    begin_sqlite(driver, "BEGIN IMMEDIATE", info)
    assert busy_ms(driver) == 7000
    driver.execute("COMMIT")


def test_a_short_busy_timeout_is_never_sliced(tmp_path: Path) -> None:
    driver, info = new_connection(tmp_path / "s.db", SLICE_MS - 1, wal=True)
    begin_sqlite(driver, "BEGIN IMMEDIATE", info)
    assert busy_ms(driver) == SLICE_MS - 1
    driver.execute("COMMIT")


def test_a_read_after_a_write_waits_the_whole_busy_timeout_for_a_lock(tmp_path: Path) -> None:
    # A reader waits for a lock in rollback-journal mode (while a writer commits); the
    # connection is noted as in WAL mode, so that its write leaves the slice set
    path = tmp_path / "r.db"
    driver, _ = new_connection(path, 3000, wal=False)
    info: dict = {}
    connected(info, 3000, wal=True)
    driver.execute("CREATE TABLE t (x)")
    begin_sqlite(driver, "BEGIN IMMEDIATE", info)
    driver.execute("COMMIT")
    assert busy_ms(driver) == SLICE_MS
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # keeps every reader out
    release = threading.Timer(4 * SLICE_MS / 1000, holder.execute, ("COMMIT",))
    release.start()
    started = time.monotonic()
    begin_sqlite(driver, "BEGIN", info)
    assert driver.execute("SELECT count(*) FROM t").fetchone() == (0,)
    driver.execute("COMMIT")
    release.join()
    assert time.monotonic() - started >= 3 * SLICE_MS / 1000  # it waited, past a slice


def test_a_store_s_writes_in_a_row_set_the_busy_timeout_once(
    db_path: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=9) as store:
        store.add_memory(1, "Hall", mem("First"))
        seen: list[str] = []
        with store.trace_sql(seen.append):
            for title in ("A", "B", "C"):
                store.add_memory(1, "Hall", mem(title))
            assert not [sql for sql in seen if "busy_timeout" in sql]
            assert store.memories(1)  # a read (its cached view is gone): the whole again
        assert [sql for sql in seen if "busy_timeout" in sql] == ["PRAGMA busy_timeout = 9000"]
        with store.transaction(write=False) as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 9000


def test_the_agent_s_read_after_a_write_has_the_whole_busy_timeout(
    db_path: Path, mem: MakeMemory
) -> None:
    # review A F1: get_location_memory read its view outside any transaction, so after a
    # write it had the 100 ms slice
    with MemoryStore.open(db_path, busy_timeout_s=9) as store:
        with store.transaction(write=False) as conn:
            driver = conn.connection.dbapi_connection
        store.add_memory(1, "Hall", mem("First"))  # (its view is not kept: read again)
        seen: list[tuple[str, bool]] = []

        def look(sql: str) -> None:
            seen.append((sql, driver.in_transaction))

        with store.trace_sql(look):
            assert "First" in store.get_location_memory(1)
        selects = [inside for sql, inside in seen if sql.startswith("SELECT")]
        assert selects and all(selects)
        assert ("PRAGMA busy_timeout = 9000", False) in seen
