"""A memstore database on a PostgreSQL server: what differs from SQLite, in one place.

* **One pinned connection per store** (a StaticPool, as on SQLite). The ephemeral tier is
  that connection's own temporary tables (``pg_temp.memories``, ``pg_temp.memory_links``),
  created when it connects, never visible to another agent, dropped when it closes. A
  read-only store has none (``connection.store_tiers``), so it can read a hot standby. The
  statements name the tier's schema ``ephemeral``; the engine translates it to ``pg_temp``,
  and the search path puts ``pg_temp`` last so unqualified names are the shared tables.
* **Writers one at a time, as on SQLite.** Every write transaction starts by taking one
  transaction-scoped advisory lock (``pg_advisory_xact_lock``), the equivalent of SQLite's
  ``BEGIN IMMEDIATE``: the store's checks (exact-title dedup, "is it still live", the
  change counter the 3-way import relies on) are made and acted on with no other writer in
  between. A lock not granted within the busy timeout (``lock_timeout``) is StoreBusy.
  Reads run in REPEATABLE READ transactions: one snapshot for all their statements.
* **Whether another process wrote:** ``pg_current_snapshot()`` changes whenever any
  transaction commits or starts writing; the store's caches key on it as SQLite's on
  ``PRAGMA data_version``.
* **No wait without bound.** ``lock_timeout`` bounds waits for locks, but a server whose
  process stops answering (stopped, swapped out, a network that drops packets without a
  reset) leaves a call waiting forever: the kernel keeps acknowledging, so no TCP timeout
  fires. Every wait for the server's answer is watched (``AnswerWatch``): one that lasts
  longer than the answer timeout has its connection shut down, so the call fails with
  DatabaseUnavailable and the next call connects again. That connect is bounded by the
  answer timeout too (``connect_timeout_s``: libpq's whole seconds, at least 2 s).
"""

from __future__ import annotations

import math
import os
import select
import socket
import struct
import threading
import time
import weakref
import zlib
from functools import cache
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool, StaticPool

from memstore.connection import (
    BEGIN_KEY,
    TIERS_KEY,
    Target,
    answer_limit,
    in_store_transaction,
    store_tiers,
    watch_invalidation,
)
from memstore.ddl import ephemeral_ddl
from memstore.errors import DatabaseUnavailable, ReadOnlyDatabase, UnsupportedDatabase
from memstore.schema import EPHEMERAL_SCHEMA, EPHEMERAL_SCHEMA_POSTGRESQL, metadata
from memstore.sqlite_probe import single_revision

#: the advisory locks memstore's writers take: this number's high 32 bits with the schema's
#: CRC-32 below them (one memstore database per schema: two never block each other)
WRITE_LOCK_BASE = 0x6D656D73  # "mems"
#: where the pool record keeps its connection's lock key
LOCK_KEY = "memstore_write_lock"
#: the most a connect waits for the server, per address (``connect_timeout_s``)
CONNECT_TIMEOUT_S = 10
#: the least connect timeout libpq and psycopg keep (they take 1 s for 2 s)
MIN_CONNECT_TIMEOUT_S = 2


def connect_timeout_s(answer_timeout_s: float) -> int:
    """libpq's ``connect_timeout`` for a store whose answer timeout is ``answer_timeout_s``.

    A connect is not one wait the answer watch sees (psycopg waits for it itself), so the
    answer timeout bounds it through libpq's connect_timeout: whole seconds (psycopg, as
    libpq, rounds a value down and takes anything under 2 s for 2 s), so the answer
    timeout rounded down, at least MIN_CONNECT_TIMEOUT_S and at most CONNECT_TIMEOUT_S.
    A (re)connect to a server that accepts the connection but never answers (stopped,
    swapped out, a network that drops packets) then gives up after max(2 s, the answer
    timeout), capped at 10 s; the limit applies to each address the URL's host names
    resolve to (psycopg tries them in turn), as libpq's does."""
    whole = math.floor(answer_timeout_s) if math.isfinite(answer_timeout_s) else CONNECT_TIMEOUT_S
    return max(MIN_CONNECT_TIMEOUT_S, min(CONNECT_TIMEOUT_S, whole))


class AnswerWatch:
    """Bounds every wait of one store's connection for its server's answer.

    The driver marks each wait (``_WatchedConnection.wait``: every statement and commit
    waits there); a thread of the watch's own looks a few times a second, and shuts down
    the socket of a wait older than ``limit_s`` whose server has sent nothing for as long
    (Linux says when a TCP socket last received data: a bulk write's pipeline, one long
    wait that the server answers all along, is not cut off). The driver then sees the
    connection closed (an OperationalError that SQLAlchemy takes for a disconnect), so the
    call ends with DatabaseUnavailable and the next call connects again. ``fired`` says
    that it was this watch that closed it.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.fired = False
        self._waiting: tuple[float, int] | None = None  # (since, socket) of the wait now
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="memstore-answer", daemon=True)
        self._thread.start()

    def begin(self, fileno: int) -> None:
        self._waiting = (time.monotonic(), fileno)

    def end(self) -> None:
        self._waiting = None

    def close(self) -> None:
        self._closed.set()

    def _watch(self) -> None:
        period = min(0.5, max(0.02, self.limit_s / 10))
        while not self._closed.wait(period):
            waiting = self._waiting
            if waiting is None or time.monotonic() - waiting[0] <= self.limit_s:
                continue
            silent = _silent_s(waiting[1])
            if silent is not None and silent <= self.limit_s:
                continue  # still answering
            if _unread(waiting[1]):  # the answer came; this process was not there to read
                continue  # it (paused: SIGSTOP, a debugger, a suspend: review S6 D F2)
            self._waiting = None
            self.fired = True
            try:  # on a duplicate of the descriptor: the driver still owns (and closes) its own
                with socket.socket(fileno=os.dup(waiting[1])) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed: the wait has ended
                pass


def _silent_s(fileno: int) -> float | None:
    """Seconds since the server last sent data on this TCP socket (Linux's TCP_INFO,
    ``tcpi_last_data_recv``), or None where that is not known (a Unix socket, another
    system)."""
    try:
        with socket.socket(fileno=os.dup(fileno)) as sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                return None
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    except (OSError, AttributeError):  # closed meanwhile; no TCP_INFO here
        return None
    if len(info) < _LAST_DATA_RECV + 4:
        return None
    return int(struct.unpack_from("=I", info, _LAST_DATA_RECV)[0]) / 1000


def _unread(fileno: int) -> bool:
    """Whether the socket has something to read now (data, or the server's close)."""
    try:
        poll = select.poll()
        poll.register(fileno, select.POLLIN)
        return bool(poll.poll(0))
    except (OSError, ValueError):  # closed meanwhile
        return False


#: struct tcp_info (linux/tcp.h): 8 one-byte fields, then 32-bit ones; the 12th of those,
#: at byte 52, is tcpi_last_data_recv (milliseconds)
_LAST_DATA_RECV = 52
_TCP_INFO_SIZE = 104

#: each engine's watch (create_server_engine)
_WATCHES: weakref.WeakKeyDictionary[Engine, AnswerWatch] = weakref.WeakKeyDictionary()


def answer_watch(engine: Engine) -> AnswerWatch | None:
    """The watch of a server engine's connection; None for an engine of SQLite."""
    return _WATCHES.get(engine)


def write_lock_key(schema: str) -> int:
    """The advisory lock key of the memstore database in ``schema`` (a signed 64-bit int)."""
    key = (WRITE_LOCK_BASE << 32) | zlib.crc32(schema.encode())
    return key - (1 << 64) if key >= 1 << 63 else key


TRANSLATE = {EPHEMERAL_SCHEMA: EPHEMERAL_SCHEMA_POSTGRESQL}


def quoted_identifier(name: str) -> str:
    """``name`` as a PostgreSQL identifier in SQL: double-quoted, a ``"`` in it doubled."""
    return '"' + name.replace('"', '""') + '"'


def unavailable(target: Target, exc: BaseException) -> DatabaseUnavailable:
    """A one-line error for a server that refused us (down, wrong password, no database)."""
    orig = getattr(exc, "orig", exc)
    detail = " ".join(str(orig).split()) or type(orig).__name__
    return DatabaseUnavailable(f"cannot connect to {target.display}: {detail}")


#: the tables (and views) of the session's schema, and their columns, as the catalog has
#: them whatever this role may read
_TABLES = (
    "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
    "AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
)
_COLUMNS = (
    "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
    "AND a.attnum > 0 AND NOT a.attisdropped"
)


def server_tables(
    target: Target, answer_timeout_s: float
) -> tuple[set[str], str | None, dict[str, set[str]]]:
    """The tables of the database's schema, its alembic revision (``single_revision``: an
    alembic_version holding two rows, or no name, is NotAMemstoreDatabase) and the column
    names of those of its tables that memstore's schema has, read without writing (each
    wait for the server's answer bounded by ``answer_timeout_s``)."""
    try:
        import psycopg  # noqa: F401 - only to say what is missing
    except ImportError:
        raise UnsupportedDatabase(
            "a PostgreSQL database needs psycopg 3: pip install 'memstore[postgres]'"
        ) from None
    engine = create_engine(
        target.url,
        poolclass=NullPool,
        connect_args={"connect_timeout": connect_timeout_s(answer_timeout_s)},
    )
    watch = watched(engine, answer_timeout_s)
    try:
        with engine.connect() as conn:
            # pg_catalog, not information_schema: that shows only what this role may read,
            # and a table or column it may not would be taken for one missing (damage)
            tables = set(conn.execute(text(_TABLES)).scalars())
            if conn.execute(text("SELECT current_schema()")).scalar() is None:
                raise DatabaseUnavailable(
                    f"cannot use {target.display}: its search_path names no schema that "
                    f"exists there (create the schema, or name one that exists)"
                )
            columns: dict[str, set[str]] = {}
            for table, column in conn.execute(text(_COLUMNS)):
                if table in metadata.tables:
                    columns.setdefault(table, set()).add(column)
            version = None
            if "alembic_version" in tables:
                version = single_revision(
                    target.display,
                    list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars()),
                )
            return tables, version, columns
    except DBAPIError as exc:
        raise unavailable(target, exc) from None
    finally:
        engine.dispose()
        watch.close()


def watched(engine: Engine, limit_s: float) -> AnswerWatch:
    """Watch every wait of ``engine``'s connections for the server's answer (AnswerWatch);
    the watch stops with the engine, or at its ``close()``."""
    watch = AnswerWatch(limit_s)
    _WATCHES[engine] = watch
    weakref.finalize(engine, watch.close)

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams) -> Any:  # type: ignore[no-untyped-def]
        # the dialect's own arguments, to psycopg's Connection with its waits watched
        driver = _watched_connection_class().connect(*cargs, **cparams)
        driver.memstore_watch = watch
        return driver

    return watch


@cache
def _watched_connection_class() -> Any:
    """psycopg's Connection, with every wait for the server's answer marked for its watch."""
    import psycopg

    class _WatchedConnection(psycopg.Connection):  # type: ignore[type-arg]
        memstore_watch: AnswerWatch | None = None

        def wait(self, *args: Any, **kwargs: Any) -> Any:
            watch = self.memstore_watch
            try:
                fileno = self.fileno()
            except psycopg.OperationalError:  # the connection is lost: the driver says so
                watch = None
            if watch is None:
                return super().wait(*args, **kwargs)
            watch.begin(fileno)
            try:
                return super().wait(*args, **kwargs)
            finally:
                watch.end()

    return _WatchedConnection


#: the server's TCP keepalives for a memstore session: first probe after 30 s of silence,
#: then every 10 s, the session ended after 3 unanswered (a live client's system answers
#: them whatever its program is doing): about a minute. An outage longer than that ends an
#: idle agent's session, and its ephemeral memories with it, as a reconnect does
SERVER_KEEPALIVES = (
    ("tcp_keepalives_idle", 30),
    ("tcp_keepalives_interval", 10),
    ("tcp_keepalives_count", 3),
    # and an answer of the server's left unacknowledged that long (milliseconds): the
    # keepalives wait while TCP retransmits it
    ("tcp_user_timeout", 60_000),
)


#: the least time a memstore session may sit idle inside a transaction before the server
#: ends it (``idle_in_transaction_session_timeout``; twice the answer timeout if more): an
#: agent frozen in its write (SIGSTOP, a debugger) held the writers' lock for as long as it
#: stayed frozen, and no other agent of the fleet could write (its system still answers
#: the keepalives: review S6 D F3). Far above any gap memstore leaves between the
#: statements of one transaction (an import plans a 100,000-memory file in seconds).
IDLE_IN_TRANSACTION_MIN_S = 60.0


def idle_in_transaction_ms(answer_limit_s: float) -> int:
    """``idle_in_transaction_session_timeout`` for a session of this answer timeout."""
    seconds = max(IDLE_IN_TRANSACTION_MIN_S, 2 * answer_limit_s)
    return int(min(seconds, 86_400) * 1000)


def create_server_engine(
    target: Target, busy_timeout_s: float, *, read_only: bool, answer_timeout_s: float | None
) -> Engine:
    """An engine with exactly one connection to the server, holding the ephemeral tier.

    ``answer_timeout_s`` bounds each wait for the server's answer (default: connection.
    answer_limit's): see AnswerWatch."""
    limit = answer_limit(busy_timeout_s, answer_timeout_s)
    engine = create_engine(
        target.url,
        poolclass=StaticPool,
        connect_args={"connect_timeout": connect_timeout_s(limit)},
        execution_options={"schema_translate_map": TRANSLATE},
    )
    watched(engine, limit)
    ddl = ephemeral_ddl(engine.dialect)
    busy_ms = max(1, int(busy_timeout_s * 1000))
    idle_ms = idle_in_transaction_ms(limit)

    #: the schema the first connection found (current_schema()): every later connection
    #: of the store works in it too, whatever its search_path finds then (a schema named
    #: after the role made since, a changed default), so its statements, its writers' lock
    #: and its probe never part ways
    pinned: list[str] = []

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_connection.cursor()
        if pinned:
            schema = pinned[0]
        else:
            schema = cursor.execute("SELECT current_schema()").fetchone()[0]
            if schema is None:
                raise DatabaseUnavailable(
                    f"cannot use {target.display}: its search_path names no schema that exists"
                )
            pinned.append(schema)
            # every persistent table named in its schema: unqualified, a name the session's
            # temporary schema also has (the ephemeral tier's memory_links, memories) is
            # found there while the persistent one is gone (a downgrade under an open
            # store), and a persistent row written there is lost with the session. (Set
            # before the store's connection copies the engine's options.)
            engine.update_execution_options(schema_translate_map={None: schema, **TRANSLATE})
        record.info[LOCK_KEY] = write_lock_key(schema)
        cursor.execute(f"SET search_path TO {quoted_identifier(schema)}, pg_temp")
        cursor.execute(f"SET lock_timeout = {busy_ms}")
        # a session whose client is gone (a network cut, a killed host) ends within about
        # a minute, and with it a transaction it held the writers' lock in: another agent's
        # writes wait for it no longer than that (without, until the server's own default,
        # often the operating system's two hours)
        for setting, seconds in SERVER_KEEPALIVES:
            if setting != "tcp_user_timeout" or dbapi_connection.info.server_version >= 120000:
                cursor.execute(f"SET {setting} = {seconds}")  # (tcp_user_timeout: 12 and later)
        cursor.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
        # an acknowledged write is on disk, whatever the server's default (SQLite: FULL)
        cursor.execute("SET synchronous_commit = on")
        if read_only:
            cursor.execute("SET default_transaction_read_only = on")
        record.info[TIERS_KEY] = tiers = store_tiers(target, read_only)
        try:
            for statement in ddl if "ephemeral" in tiers else ():
                cursor.execute(statement)
        except Exception as exc:  # noqa: BLE001 - a server's refusal, said in one line
            dbapi_connection.rollback()
            if getattr(exc, "sqlstate", None) == "25006":  # read_only_sql_transaction
                raise ReadOnlyDatabase(
                    f"read-only database: {target.display} accepts no writes (a hot "
                    f"standby?); open it read-only to read it"
                ) from None
            raise DatabaseUnavailable(
                f"cannot use {target.display}: the ephemeral tier (this agent's temporary "
                f"tables) could not be made: {' '.join(str(exc).split())} (the role needs "
                f"the TEMP privilege on the database)"
            ) from None
        cursor.close()
        dbapi_connection.commit()
        # as on SQLite (isolation_level None): a statement outside memstore's transactions
        # is its own, and memstore begins its transactions itself (commit() then commits)
        dbapi_connection.autocommit = True

    from psycopg.pq import TransactionStatus

    watch_invalidation(engine)

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        # as on SQLite: a Core statement inside memstore's own transaction joins it
        if in_store_transaction(connection):
            return
        pooled = connection.connection
        if pooled.driver_connection.info.transaction_status == TransactionStatus.IDLE:
            begin_server_transaction(pooled, connection.info.get(BEGIN_KEY, "BEGIN IMMEDIATE"))

    return engine


def begin_server_transaction(pooled: Any, begin: str) -> None:
    """memstore.connection.begin_transaction on a server: "BEGIN" reads one snapshot
    (REPEATABLE READ); "BEGIN IMMEDIATE" takes the writers' lock (up to lock_timeout);
    "BEGIN DEFERRED" (the ephemeral tier only) is READ COMMITTED, with no lock.
    ``pooled``: SQLAlchemy's pooled connection (``conn.connection``)."""
    driver = pooled.driver_connection
    if begin == "BEGIN":
        driver.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        return
    # READ COMMITTED whatever the server's default: each statement sees what was committed
    # before it, so a write sees what the writer it waited for behind the lock committed
    # (a default of REPEATABLE READ would take the snapshot as the lock is asked for)
    driver.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
    if begin == "BEGIN IMMEDIATE":
        try:
            take_write_lock(pooled)
        except Exception:
            driver.rollback()  # nothing of the transaction is left open
            raise


def take_write_lock(pooled: Any) -> None:
    """Take the writers' lock of the connection's schema, in its transaction (released at
    commit or rollback). ``pooled``: SQLAlchemy's pooled connection (``conn.connection``)."""
    pooled.driver_connection.execute("SELECT pg_advisory_xact_lock(%s)", (pooled.info[LOCK_KEY],))


def transaction_failed(driver_connection: Any) -> bool:
    """Is the connection's transaction failed (an error inside it, which the server will
    only roll back), or gone?"""
    from psycopg.pq import TransactionStatus

    status = driver_connection.info.transaction_status
    return status not in (TransactionStatus.INTRANS, TransactionStatus.ACTIVE)


def change_token(driver_connection: Any) -> str:
    """Changes whenever another transaction committed (or started writing) on the server."""
    return str(driver_connection.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
