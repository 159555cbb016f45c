"""Whether a store's write lock is free right now, without waiting for it (for
memstore.busy_buffer's backoff in a busy stretch).

* A SQLite file: its write lock tried (``BEGIN IMMEDIATE``, no busy timeout) from a
  second connection, rolled back at once. The connection is kept for the busy stretch and
  closed at its end or when the manager closes (``close``).
* PostgreSQL: memstore's writers' lock (``pg_try_advisory_xact_lock``) and, in the same
  transaction, the lock a write takes on each of memstore's tables (``LOCK TABLE ... IN
  ROW EXCLUSIVE MODE NOWAIT``): a table lock another session holds (``CREATE INDEX``'s
  SHARE, ``VACUUM FULL``'s or ``ALTER TABLE``'s ACCESS EXCLUSIVE) refuses a write just as
  the advisory lock does. Both are the probe's transaction's: gone when it ends.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from memstore.errors import DatabaseUnavailable, refusal_counter

if TYPE_CHECKING:
    from memstore.store import MemoryStore

__all__ = ["READ_TABLES", "LockProbe", "WriteGate"]


class _Held(Exception):
    """A table lock was not granted at once (inside the probe's transaction)."""


#: the tables a turn's reads use (``get_location_memory``, with the map's exits line, and
#: the synthesis's ``memories``): the ones ``readable`` asks about (review S6 F F3: a lock
#: on the decision log, which no read uses, kept the agent from its memories)
READ_TABLES = (
    "memories", "memory_links", "locations", "location_episodes", "store_meta", "map_rooms",
    "map_connections", "map_exit_failures", "map_pruned_exits",
)  # fmt: skip


class LockProbe:
    """Whether the store's write lock is free right now, without waiting for it.

    ``tables``: the tables the writes it stands for use (on a server, a lock another
    session holds on one of them refuses them); by default those of a turn's waiting rows
    (``_table_list``)."""

    def __init__(self, store: MemoryStore, tables: tuple[str, ...] | None = None) -> None:
        self.store = store
        self._file: sqlite3.Connection | None = None
        self._tables: str | None = None if tables is None else _listed(tables)

    def free(self) -> bool | None:
        """True or False; None when this store cannot tell (in memory, closed, or the probe
        failed: the caller's clock decides then). Never waits; raises DatabaseUnavailable
        only (the session gone, which the caller counts: review S6 L F1)."""
        target = self.store.target
        try:
            if self.store.closed:
                return None
            if target.is_server:
                return self._server_free()
            if target.path is None:
                return None
            return self._file_free(target.path.as_uri())
        except DatabaseUnavailable:
            raise
        except Exception:  # the probe's own failure: the real write will say what it is
            return None

    def _file_free(self, uri: str) -> bool:
        if self._file is None:
            self._file = sqlite3.connect(
                f"{uri}?mode=rw", uri=True, timeout=0, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
        try:
            self._file.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise
        self._file.execute("ROLLBACK")
        return True

    def _server_free(self) -> bool:
        """The writers' lock and a write's lock of ``tables``, each granted at once."""
        return self._granted(f"LOCK TABLE {self._table_list()} IN ROW EXCLUSIVE MODE NOWAIT")

    def readable(self) -> bool | None:
        """Whether a turn's read would be answered now, without waiting: on a server, False
        while another session holds a lock that blocks reads of memstore's tables (ACCESS
        EXCLUSIVE: ``ALTER TABLE``, ``VACUUM FULL``, ``LOCK TABLE``), tried as ``LOCK TABLE
        ... IN ACCESS SHARE MODE NOWAIT``; None for SQLite (a writer never blocks its
        readers) and when this cannot be told. Never waits; raises DatabaseUnavailable only
        (a lost connection, which the caller counts as its read's)."""
        try:
            if self.store.closed or not self.store.target.is_server:
                return None
            lock = f"LOCK TABLE {_listed(READ_TABLES)} IN ACCESS SHARE MODE NOWAIT"
            return self._granted(lock, writers=False)
        except DatabaseUnavailable:  # the session is gone: the caller says so (review S6 F
            raise  # F8: swallowed, the loss of the ephemeral tier was never counted)
        except Exception:  # the probe's own failure: the read will say what it is
            return None

    def _granted(self, lock: str, *, writers: bool = True) -> bool:
        """Whether, in a transaction of the probe's own (rolled back), memstore's writers'
        lock (``writers``: ``pg_try_advisory_xact_lock``) and then ``lock`` (a ``LOCK
        TABLE ... NOWAIT``) are granted at once. Both are the transaction's: gone with it."""
        import psycopg

        from memstore.connection import driver_of
        from memstore.pg_connection import LOCK_KEY

        try:
            with self.store.transaction(write=False) as conn:
                driver = driver_of(conn)
                if writers:
                    key = conn.connection.info[LOCK_KEY]
                    row = driver.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()
                    if not row[0]:
                        return False
                try:
                    driver.execute(lock)
                except psycopg.errors.LockNotAvailable:
                    raise _Held from None  # rolls the probe's transaction back
        except _Held:
            return False
        return True

    def _table_list(self) -> str:
        """The tables a turn's waiting rows are written to: memstore's tables (the
        ephemeral tier's are each connection's own) but alembic's and the flagged
        memories (an agent's tool writes those itself, never through the turn's buffer):
        a lock on a table no waiting row needs keeps no stretch going."""
        if self._tables is None:
            from memstore.schema import metadata

            outside = ("alembic_version", "flagged_memories")
            names = [t.name for t in metadata.sorted_tables if t.name not in outside]
            self._tables = _listed(names)
        return self._tables

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _listed(names: Iterable[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


class WriteGate:
    """Whether to try a write now, once the database refused one: the busy stretch of a
    writer that keeps nothing waiting (``MemoryToolkit.add_memory``), so that only its
    first refused write waits the busy timeout.

    After a refusal, the next write is tried only when the probe does not see the lock held
    (``LockProbe``), or, after a lost connection (DatabaseUnavailable: the probe would
    connect), at once (a session the server ended is back at the next connect). A write
    refused again after that is tried again only after a backoff, doubling from 1 s to at
    most 30 s. A write that goes through ends the stretch."""

    FIRST_BACKOFF_S = 1.0
    MAX_BACKOFF_S = 30.0

    def __init__(self, store: MemoryStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.probe = LockProbe(store, tables=("flagged_memories",))  # (F F3)
        self._clock = clock
        #: the kind of the last refusal (memstore.errors.refusal_counter), None outside a
        #: stretch
        self.kind: str | None = None
        self._unavailable = False
        self._backoff = 0.0
        self._next_at = 0.0

    def may_write(self) -> bool:
        if self.kind is None:
            return True
        if self._clock() < self._next_at:
            return False
        try:
            return self._unavailable or self.probe.free() is not False
        except DatabaseUnavailable:  # (the session is gone: the write reconnects)
            return True

    def refused(self, exc: BaseException) -> None:
        tried_again = self.kind is not None
        self.kind = refusal_counter(exc)
        self._unavailable = isinstance(exc, DatabaseUnavailable)
        if tried_again:
            self._backoff = min(max(2 * self._backoff, self.FIRST_BACKOFF_S), self.MAX_BACKOFF_S)
            self._next_at = self._clock() + self._backoff

    def written(self) -> None:
        if self.kind is not None:
            self.kind, self._unavailable, self._backoff, self._next_at = None, False, 0.0, 0.0
            self.probe.close()
