"""What memstore does on a SQLite connection besides its statements: the ephemeral tier
(``make_ephemeral_tier``), and its transactions' BEGINs (``begin_sqlite``), a write's
``BEGIN IMMEDIATE`` waited for in slices that a Ctrl-C can end.

SQLite waits for another process's write lock inside its own C code, for up to the busy
timeout (memstore's default 30 s, a command's ``--busy-timeout`` up to a day); Python runs
its signal handlers only between two of its own steps, so a Ctrl-C pressed meanwhile was
acted on only when the wait ended. The writers' lock is waited for here in slices of at
most SLICE_MS instead: between two, Python runs, and a Ctrl-C ends the wait at once.

The connection's busy timeout is the slice from a ``BEGIN IMMEDIATE`` until the next
BEGIN of a read (which gives it back the whole busy timeout): inside a write transaction
of a WAL database SQLite waits for no lock (the writer holds the writers' lock, and its
commit waits for no reader), so only the lock's wait itself sees the slice. Writes one
after another pay for no PRAGMA (two were 5 µs of a supersession's 65 µs of work). A
database that is not in WAL mode (its readers can keep a commit waiting) gets the whole
busy timeout back right after each BEGIN IMMEDIATE, as before.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from memstore.ddl import ephemeral_ddl
from memstore.schema import EPHEMERAL_SCHEMA

__all__ = ["SLICE_MS", "begin_sqlite", "connected", "make_ephemeral_tier"]

#: the longest one wait inside SQLite for the writers' lock lasts
SLICE_MS = 100
#: keys of a SQLite connection's pool record ``info``: its busy timeout (ms), whether it
#: is in WAL mode, and the busy timeout SQLite has now when it is not the connection's own
_BUSY_MS_KEY = "memstore_busy_ms"
_WAL_KEY = "memstore_wal"
_NOW_MS_KEY = "memstore_busy_ms_now"
_SQLITE_BUSY = 5  # (its extended codes share the low byte)


def connected(info: dict[str, Any], busy_ms: int, *, wal: bool) -> None:
    """Note in a new SQLite connection's pool record ``info`` the busy timeout it was given
    (ms) and whether it is in WAL mode (a record outlives a connection made again)."""
    info[_BUSY_MS_KEY] = info[_NOW_MS_KEY] = busy_ms
    info[_WAL_KEY] = wal


def begin_sqlite(driver: Any, begin: str, info: dict[str, Any]) -> None:
    """``begin`` ("BEGIN", "BEGIN DEFERRED" or "BEGIN IMMEDIATE") on the sqlite3 connection
    ``driver``, whose pool record's ``info`` holds its busy timeout (_BUSY_MS_KEY), whether
    it is in WAL mode (_WAL_KEY) and the busy timeout SQLite has now when a BEGIN IMMEDIATE
    left it at a slice (_NOW_MS_KEY). A BEGIN IMMEDIATE waits for the writers' lock up to
    the busy timeout in all, in slices, and raises SQLite's "database is locked" when it is
    still held then; every other BEGIN has the whole busy timeout."""
    busy_ms = info.get(_BUSY_MS_KEY, 0)
    if begin == "BEGIN IMMEDIATE" and busy_ms > SLICE_MS:
        try:
            _begin_in_slices(driver, busy_ms, info)
        finally:
            if not info.get(_WAL_KEY):  # its commit may wait for readers: the whole of it
                _set_busy_ms(driver, busy_ms, info)
        return
    if info.get(_NOW_MS_KEY, busy_ms) != busy_ms:
        _set_busy_ms(driver, busy_ms, info)
    driver.execute(begin)


def _begin_in_slices(driver: Any, busy_ms: int, info: dict[str, Any]) -> None:
    deadline = time.monotonic() + busy_ms / 1000
    if info.get(_NOW_MS_KEY) != SLICE_MS:
        _set_busy_ms(driver, SLICE_MS, info)
    while True:
        try:
            driver.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) != _SQLITE_BUSY or left_ms <= 0:
                raise
            if left_ms < SLICE_MS:  # the last slice: what is left of the whole
                _set_busy_ms(driver, left_ms, info)


def _set_busy_ms(driver: Any, busy_ms: int, info: dict[str, Any]) -> None:
    """Set the connection's busy timeout and note it, in the order that leaves a Ctrl-C
    between the two harmless: a note of a slice over the whole busy timeout (a BEGIN of a
    read sets the whole again), never a note of the whole over a slice."""
    if busy_ms < info.get(_NOW_MS_KEY, busy_ms):  # shorter: noted first
        info[_NOW_MS_KEY] = busy_ms
        driver.execute(f"PRAGMA busy_timeout = {busy_ms}")
    else:  # longer: set first
        driver.execute(f"PRAGMA busy_timeout = {busy_ms}")
        info[_NOW_MS_KEY] = busy_ms


def make_ephemeral_tier(cursor: Any, ddl: list[str] | None = None) -> None:
    """The ephemeral tier of a SQLite connection: an in-memory database attached as
    ``ephemeral``, with its tables; made anew (what it held is gone) when it was lost (a
    table dropped, the database detached)."""
    # (the name only: the file column holds the path, which need not be UTF-8)
    attached = {row[0] for row in cursor.execute("SELECT name FROM pragma_database_list")}
    if EPHEMERAL_SCHEMA in attached:
        cursor.execute(f"DETACH DATABASE {EPHEMERAL_SCHEMA}")
    cursor.execute(f"ATTACH DATABASE ':memory:' AS {EPHEMERAL_SCHEMA}")
    for statement in ephemeral_ddl() if ddl is None else ddl:
        cursor.execute(statement)
