"""What memstore does on a SQLite connection besides its statements: the ephemeral tier
(``make_ephemeral_tier``), and a write's ``BEGIN IMMEDIATE`` waited for in slices that a
Ctrl-C can end (``begin_immediate``).

SQLite waits for another process's write lock inside its own C code, for up to the busy
timeout (memstore's default 30 s, a command's ``--busy-timeout`` up to a day); Python runs
its signal handlers only between two of its own steps, so a Ctrl-C pressed meanwhile was
acted on only when the wait ended. The writers' lock is waited for here in slices of at
most SLICE_MS instead: between two, Python runs, and a Ctrl-C ends the wait at once. The
connection's busy timeout is the slice only for this BEGIN (two PRAGMAs, a few
microseconds beside the commit's fsync); every other statement keeps the whole of it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from memstore.ddl import ephemeral_ddl
from memstore.schema import EPHEMERAL_SCHEMA

__all__ = ["SLICE_MS", "begin_immediate", "make_ephemeral_tier"]

#: the longest one wait inside SQLite for the writers' lock lasts
SLICE_MS = 100
_SQLITE_BUSY = 5  # (its extended codes share the low byte)


def begin_immediate(driver: Any, busy_ms: int) -> None:
    """``BEGIN IMMEDIATE`` on the sqlite3 connection ``driver``, whose busy timeout is
    ``busy_ms``: the writers' lock waited for up to that long in all, in slices; SQLite's
    "database is locked" raised when it is still held then."""
    if busy_ms <= SLICE_MS:
        driver.execute("BEGIN IMMEDIATE")
        return
    deadline = time.monotonic() + busy_ms / 1000
    driver.execute(f"PRAGMA busy_timeout = {SLICE_MS}")
    try:
        while True:
            try:
                driver.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) != _SQLITE_BUSY or left_ms <= 0:
                    raise
                if left_ms < SLICE_MS:  # the last slice: what is left of the whole
                    driver.execute(f"PRAGMA busy_timeout = {left_ms}")
    finally:
        driver.execute(f"PRAGMA busy_timeout = {busy_ms}")


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
