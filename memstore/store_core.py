"""The store's connection and transactions: opening, closing, the caches' freshness.

``StoreCore`` is the base of ``MemoryStore`` (memstore.store, its writes) and of its reads
(memstore.store_reads). It owns the one connection (memstore.connection: SQLite with the
ephemeral tier attached, or a PostgreSQL server with it in temporary tables) and the one
way to run a transaction on it: ``transaction()`` (public, nestable) and the private
begins the store's own writes and reads use. Every public write is one transaction,
committed durably before the call returns. A transaction is begun and ended on the driver
connection, as every statement is run (memstore.connection.begin_transaction,
memstore.executor); a Core statement run inside it joins it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Connection, event, func, insert, inspect, select

from memstore.config import MemstoreConfig, load_config
from memstore.connection import (
    DEFAULT_BUSY_TIMEOUT_S,
    Target,
    answer_limit,
    begin_transaction,
    change_token,
    check_existing,
    check_writable,
    create_store_engine,
    driver_of,
    end_transaction,
    resolve_target,
    store_tiers,
    store_transaction_begin,
    upgrade_to_write,
)
from memstore.db_file import OpenedFile
from memstore.ddl import persistent_ddl
from memstore.dialect import holds_integer
from memstore.errors import (
    DatabaseUnavailable,
    NotAMemstoreDatabase,
    ReadOnlyDatabase,
    SchemaChanged,
    StorageFull,
    StoreClosed,
    UnstorableText,
)
from memstore.executor import TRACERS, run
from memstore.location_views import LocationViews
from memstore.map_sql import forget_cached_maps
from memstore.pg_connection import answer_watch
from memstore.refusals import failure_kind, first_line, one_line, storage_full, store_busy
from memstore.retrieval import EXITS_RESERVE
from memstore.schema import (
    HEAD_REVISION,
    alembic_version,
    location_episodes,
    memories,
)
from memstore.shown_memories import ShownMemories
from memstore.sqlite_session import make_ephemeral_tier
from memstore.versions import create_identity

__all__ = ["ALL", "IN_DOUBT", "StoreCore"]

#: what a lost connection's refusal says of a write whose COMMIT may have been sent
IN_DOUBT = (
    "what this call was writing may or may not have been committed (look before writing it again)"
)

#: "every location" for the cache-invalidation argument of the write transactions
ALL = object()
#: the latest episode each table holds, of its values that are integers
_LATEST_EPISODE = tuple(
    select(func.max(table.c.episode)).where(holds_integer(table.c.episode))
    for table in (location_episodes, memories)
)


class StoreCore:
    """The connection and the transactions of a MemoryStore (use ``MemoryStore.open``)."""

    def __init__(
        self,
        target: Target,
        *,
        config: MemstoreConfig | None = None,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
        answer_timeout_s: float | None = None,
    ) -> None:
        """Use ``MemoryStore.open``; this assumes the target was checked."""
        if not isinstance(target, Target):  # (a path or URL: what ``open`` takes)
            raise TypeError(
                f"MemoryStore() takes a checked target, not {type(target).__name__}: open a "
                f"store with MemoryStore.open({target!r})"
            )
        if answer_timeout_s is not None and not (
            type(answer_timeout_s) in (int, float) and 0 < answer_timeout_s < math.inf
        ):
            raise ValueError(
                f"answer_timeout_s must be a finite number of seconds above 0, "
                f"got {answer_timeout_s!r}"
            )
        self.target = target
        self.read_only = read_only
        #: the tiers this store's connection holds (its reads leave out a tier it has not)
        self.tiers = store_tiers(target, read_only)
        self.config = config or MemstoreConfig()
        self._lock = threading.RLock()
        self._depth = 0  # transactions open on this store (nested ones join the outer)
        # Per-location caches of what changes only when the database does: dropped after
        # every write through this store, and when PRAGMA data_version says another
        # connection committed.
        self._data_version: object = None
        self._views = LocationViews(
            self.config.token_budget, EXITS_RESERVE if self.config.map_exits_line else 0
        )
        self._live_cache: dict[int, ShownMemories] = {}
        self._file: OpenedFile | None = None  # (set once open: below)
        limit = answer_limit(busy_timeout_s, answer_timeout_s)
        is_new = check_existing(target, answer_timeout_s=limit, busy_timeout_s=busy_timeout_s)
        if read_only and is_new and (target.path is not None or target.is_server):
            raise NotAMemstoreDatabase(f"no memstore database at {target.display}")
        if not read_only:
            check_writable(target)
        if is_new and target.path is not None:
            target.path.parent.mkdir(parents=True, exist_ok=True)
        self._engine = create_store_engine(
            target, busy_timeout_s, read_only=read_only, answer_timeout_s=limit
        )
        self._watch = answer_watch(self._engine)
        try:
            try:
                self._conn: Connection = self._engine.connect()
            except Exception as exc:
                refused = self.refusal(exc, connected=False)
                if refused is None:
                    raise
                raise refused from None
            #: the clock used for links when a caller gives no turn; the manager keeps it
            #: current (1 until the tables are read)
            self.current_episode = 1
            if is_new:
                self._create_schema()
            self.current_episode = self._max_episode()
            #: the database file this store opened (memstore.db_file): each write checks it
            self._file = None if target.path is None else OpenedFile(target.path, target.display)
        except BaseException:
            self._dispose()  # a store that failed to open keeps no connection or thread
            raise
        self.current_turn = 0

    def _max_episode(self) -> int:
        """The latest episode the tables hold (1 when none); a damaged value (not an
        integer) is passed over here and reported by ``memstore check``."""
        found = [1]
        with self._read() as conn:
            for statement in _LATEST_EPISODE:
                latest = run(conn, statement, {}).fetchone()[0]
                if latest is not None:
                    found.append(int(latest))
        return max(found)

    # --- opening and closing -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path_or_url: str | Path | None = None,
        *,
        config: MemstoreConfig | None = None,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        read_only: bool = False,
        answer_timeout_s: float | None = None,
    ) -> Self:
        """Open (or create, at the head schema revision) a memstore database.

        ``path_or_url`` is a file path or a SQLAlchemy SQLite URL (``sqlite://`` is an
        in-memory database); None means the configured one. Without ``config`` the
        configuration is ``load_config()``'s (``MEMSTORE_DB``, ``MEMSTORE_MODEL``, ...,
        ``[tool.memstore]``, defaults), so a manager over this store sees the configured
        model too. A database behind the head
        revision is refused (SchemaOutOfDate: run ``alembic upgrade head``), and a file that
        is not a memstore database is refused (NotAMemstoreDatabase) and left untouched.

        ``read_only`` opens an existing database for reading only (it works in a read-only
        folder too; every write raises ReadOnlyDatabase). A database the process cannot
        write is refused when opened for writing (ReadOnlyDatabase: "read-only database").

        On a PostgreSQL server, ``busy_timeout_s`` bounds the wait for another agent's
        write and ``answer_timeout_s`` (default: the busy timeout and 60 s; keep it above
        the busy timeout) how long the server may stay silent in one wait for its answer:
        a server that stops answering ends the call with DatabaseUnavailable, and the next
        call connects again.
        """
        config = config or load_config()
        target = resolve_target(path_or_url if path_or_url is not None else config.db)
        return cls(
            target,
            config=config,
            busy_timeout_s=busy_timeout_s,
            read_only=read_only,
            answer_timeout_s=answer_timeout_s,
        )

    def close(self) -> None:
        """Close the connection; the ephemeral tier goes with it."""
        with self._lock:
            self._conn.close()
            self._dispose()

    def _dispose(self) -> None:
        self._engine.dispose()
        if self._watch is not None:
            self._watch.close()

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self._conn.closed

    def _check_open(self) -> None:
        """StoreClosed, one line, for a call on a store after ``close()``."""
        if self._conn.closed:
            raise StoreClosed(
                f"the store of {self.target.display} was closed: open it again "
                f"(MemoryStore.open) to use it; nothing was read or written"
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_schema(self) -> None:
        """Create the schema of a new database, unless another process did it first: the
        check and the creation are one write transaction, so of several processes opening
        a new file at once exactly one creates it and the others find it."""
        with self._write() as conn:
            made = inspect(conn).has_table("alembic_version")
            if not made:
                for statement in persistent_ddl(conn.dialect):
                    conn.exec_driver_sql(statement)
                create_identity(conn)
                alembic_version.create(conn, checkfirst=False)
                conn.execute(insert(alembic_version).values(version_num=HEAD_REVISION))
        if made:  # the other process's schema: the same revision?
            limit = self._watch.limit_s if self._watch is not None else None
            check_existing(self.target, answer_timeout_s=limit)

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def _transaction(
        self, begin: str, forget: object = ALL, *, writes: bool = True
    ) -> Iterator[Connection]:
        """One transaction. A write then drops the cached views it may have changed:
        ``forget`` is a location id, None (no memory changed) or ALL (the default). A
        write rolled back drops everything this store keeps from the database, as it may
        have been filled inside the transaction (``_rolled_back``)."""
        with self._lock:
            self._check_open()
            if self._depth:  # inside another transaction of this store: part of it
                try:
                    outer = store_transaction_begin(self._conn)
                except Exception as exc:  # the connection was lost inside the transaction
                    refused = self.refusal(exc, writing=True)
                    if refused is None:
                        raise
                    raise refused from exc
                if begin != "BEGIN" and outer == "BEGIN":
                    raise RuntimeError("a write cannot run inside a read-only transaction")
                if begin == "BEGIN IMMEDIATE" and outer == "BEGIN DEFERRED":
                    upgrade_to_write(self._conn)
                self._depth += 1
                try:
                    yield self._conn
                finally:
                    self._depth -= 1
                return
            if self.read_only and begin != "BEGIN":
                raise ReadOnlyDatabase(
                    f"read-only database: {self.target.display} was opened read-only; "
                    f"nothing was written"
                )
            self._depth = 1
            conn = self._conn
            episode = self.current_episode
            committed = False
            try:
                try:
                    begin_transaction(conn, begin)
                    if self._file is not None and begin != "BEGIN":
                        self._file.check()
                    yield conn
                except BaseException:  # a KeyboardInterrupt too, even right after BEGIN
                    end_transaction(conn, commit=False)
                    raise
                end_transaction(conn, commit=True)
                committed = True
            except Exception as exc:
                refused = self.refusal(exc, writing=writes and begin != "BEGIN")
                if refused is None:
                    raise
                raise refused from exc
            finally:
                self._depth = 0
                if begin != "BEGIN":
                    if committed:
                        self._forget(forget)
                    else:
                        self._rolled_back(episode)

    def _rolled_back(self, episode: int) -> None:
        """After a write transaction was rolled back: what was cached inside it (the views,
        the map's, the episode it allocated) may show what was never committed."""
        self._forget()
        forget_cached_maps()
        self.current_episode = episode

    def refusal(
        self, exc: BaseException, *, connected: bool = True, writing: bool = False
    ) -> Exception | None:
        """memstore's one-line error for what the database refused (None: not a refusal,
        raise it as it is). Nothing was written: the transaction was rolled back."""
        kind = failure_kind(exc)
        if kind is None:
            full = storage_full(exc)
            if full is None:
                return None
            self._forget()
            room = "has no room" if "FULL" in full or "53100" in full else "could not do its I/O"
            return StorageFull(f"{full}: {self.target.display} {room}; nothing was written")
        self._forget()
        where = self.target.display
        why = one_line(exc) if self.target.is_server else ""
        if kind == "schema" and self.target.is_server and not self._tier_present():
            kind = "tier-gone"  # (asked of the catalog: the server's message is localised)
        if kind == "tier-gone":  # the connection's own tier, not the database's schema
            if self.target.is_server:  # a new session makes it (and its prepared statements)
                self._invalidate()
                anew = "the next call connects again"
            else:  # on the same connection: an in-memory database goes with its connection
                try:
                    make_ephemeral_tier(driver_of(self._conn).cursor())
                    anew = "it was made anew"
                except Exception as failed:  # (the next call that needs it tries again)
                    anew = (
                        f"it could not be made anew ({first_line(failed)}); the next call "
                        f"tries again"
                    )
            return DatabaseUnavailable(
                f"the ephemeral tier of {where} was gone ({first_line(exc)}: a connection "
                f"pooler's session reset, DISCARD TEMP?); nothing was written; this agent's "
                f"ephemeral memories went with it; {anew}"
            )
        if kind == "gone":
            if self._watch is not None and self._watch.fired:
                self._watch.fired = False
                why = f"it did not answer within {self._watch.limit_s:g} s"
            if not connected:
                return DatabaseUnavailable(f"cannot connect to {where}: {why}")
            self._invalidate()
            # lost in the middle of a commit, a write may have reached the disk: say so
            outcome = IN_DOUBT if writing else "nothing was written"
            return DatabaseUnavailable(
                f"lost the connection to {where} ({why}); {outcome}; this agent's "
                f"ephemeral memories went with the connection; the next call connects again"
            )
        if kind == "nul":
            return UnstorableText(
                f"{where} cannot store the NUL character (\\x00) in text (PostgreSQL); "
                f"nothing was written"
            )
        if kind == "too-long":
            return UnstorableText(
                f"{where} cannot index text this long ({why}); nothing was written"
            )
        if kind == "overflow":
            return OverflowError(
                f"a number does not fit in {where}'s 64-bit integers ({why}); nothing was written"
            )
        if kind == "read-only":
            because = f" ({why})" if why else ""
            return ReadOnlyDatabase(f"read-only database: {where}{because}; nothing was written")
        if kind == "schema":
            return SchemaChanged(
                f"the schema of {where} changed while this store had it open ({first_line(exc)}: "
                f"a downgrade, or a table altered by hand?); nothing was written; "
                f"`memstore db current` says where it is, `memstore db upgrade` brings it back"
            )
        return store_busy(where, kind, why)

    def _tier_present(self) -> bool:
        """Whether the server session's ephemeral tier still has its tables (True when
        that cannot be told: a schema change is the safer answer)."""
        from psycopg.pq import TransactionStatus

        try:
            driver = driver_of(self._conn)
            if driver.info.transaction_status == TransactionStatus.INERROR:  # it failed
                driver.rollback()
            found = driver.execute(
                "SELECT to_regclass('pg_temp.memories') IS NOT NULL"
                " AND to_regclass('pg_temp.memory_links') IS NOT NULL"
            ).fetchone()
        except Exception:  # noqa: BLE001 - no answer: not taken as the tier's loss
            return True
        return bool(found[0])

    def _invalidate(self) -> None:
        """The next call connects again (and makes a new ephemeral tier)."""
        try:
            self._conn.invalidate()
        except Exception:  # noqa: BLE001, S110 - already invalidated by SQLAlchemy
            pass
        self._data_version = None
        if self._file is not None:  # (the new connection's -wal may be a new file)
            self._file.wal = None

    @contextmanager
    def trace_sql(self, callback: Any) -> Iterator[None]:
        """Call ``callback(sql)`` with every statement the store's connection runs while
        the block runs (SQLite: with its parameters expanded); for tests and debugging."""
        self._check_open()
        driver = driver_of(self._conn)
        if self._conn.dialect.name == "sqlite":
            driver.set_trace_callback(callback)  # type: ignore[union-attr]
            try:
                yield
            finally:
                driver.set_trace_callback(None)  # type: ignore[union-attr]
            return

        def core_statement(*args: Any) -> None:  # SQLAlchemy's before_cursor_execute
            callback(args[2])

        event.listen(self._engine, "before_cursor_execute", core_statement)
        TRACERS[id(driver)] = callback
        try:
            yield
        finally:
            TRACERS.pop(id(driver), None)
            event.remove(self._engine, "before_cursor_execute", core_statement)

    def _forget(self, location_id: object = ALL) -> None:
        if location_id is ALL:
            self._views.forget()
            self._live_cache.clear()
        elif location_id is not None:
            self._views.forget(location_id)  # type: ignore[arg-type]
            self._live_cache.pop(location_id, None)  # type: ignore[call-overload]

    def _check_cache(self) -> None:
        """Drop the caches if another connection committed since they were filled."""
        self._check_open()
        try:
            version = change_token(self._conn)
        except Exception as exc:
            refused = self.refusal(exc)
            if refused is None:
                raise
            raise refused from exc
        if version != self._data_version:
            self._forget()
            self._data_version = version

    @contextmanager
    def transaction(
        self, *, write: bool = True, changes_memories: bool = True
    ) -> Iterator[Connection]:
        """One transaction on the store's connection, for the store layer's other modules
        (the importer, flagged memories, the map): ``BEGIN IMMEDIATE`` when ``write``; a
        lock held past the busy timeout is StoreBusy. Transactions nest: an inner one is
        part of the outer. After a write that ``changes_memories``, every cached view of
        the location memories is dropped; writes to other tables keep them."""
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        with self._transaction(begin, ALL if changes_memories else None) as conn:
            yield conn

    def _write(self, forget: object = ALL, *, writes: bool = True) -> Any:
        """A write transaction (the writers' lock); ``writes`` False: one that only reads
        under the lock, so a connection lost in it left nothing in doubt."""
        return self._transaction("BEGIN IMMEDIATE", forget, writes=writes)

    def _session_write(self, forget: object = ALL) -> Any:
        """A write to the ephemeral tier only. A deferred BEGIN takes no lock on the file
        (only a snapshot to read it), so session work never waits for another process's
        write, whatever the busy timeout."""
        return self._transaction("BEGIN DEFERRED", forget)

    def _read(self) -> Any:
        return self._transaction("BEGIN")
