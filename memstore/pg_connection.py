"""A memstore database on a PostgreSQL server: what differs from SQLite, in one place.

* **One pinned connection per store** (a StaticPool, as on SQLite). The ephemeral tier is
  that connection's own temporary tables (``pg_temp.memories``, ``pg_temp.memory_links``),
  created when it connects, never visible to another agent, dropped when it closes. The
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
"""

from __future__ import annotations

import zlib
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool, StaticPool

from memstore.connection import BEGIN_KEY, Target
from memstore.errors import DatabaseUnavailable, UnsupportedDatabase
from memstore.schema import (
    EPHEMERAL_SCHEMA,
    EPHEMERAL_SCHEMA_POSTGRESQL,
    ephemeral_ddl,
)

#: the advisory locks memstore's writers take: this number's high 32 bits with the schema's
#: CRC-32 below them (one memstore database per schema: two never block each other)
WRITE_LOCK_BASE = 0x6D656D73  # "mems"
#: where the pool record keeps its connection's lock key
LOCK_KEY = "memstore_write_lock"
CONNECT_TIMEOUT_S = 10


def write_lock_key(schema: str) -> int:
    """The advisory lock key of the memstore database in ``schema`` (a signed 64-bit int)."""
    key = (WRITE_LOCK_BASE << 32) | zlib.crc32(schema.encode())
    return key - (1 << 64) if key >= 1 << 63 else key


TRANSLATE = {EPHEMERAL_SCHEMA: EPHEMERAL_SCHEMA_POSTGRESQL}


def unavailable(target: Target, exc: BaseException) -> DatabaseUnavailable:
    """A one-line error for a server that refused us (down, wrong password, no database)."""
    orig = getattr(exc, "orig", exc)
    detail = " ".join(str(orig).split()) or type(orig).__name__
    return DatabaseUnavailable(f"cannot connect to {target.display}: {detail}")


def server_tables(target: Target) -> tuple[set[str], str | None]:
    """The tables of the database's schema and its alembic revision, read without writing."""
    try:
        import psycopg  # noqa: F401 - only to say what is missing
    except ImportError:
        raise UnsupportedDatabase(
            "a PostgreSQL database needs psycopg 3: pip install 'memstore[postgres]'"
        ) from None
    engine = create_engine(
        target.url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )
    try:
        with engine.connect() as conn:
            tables = set(
                conn.execute(
                    text(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = current_schema()"
                    )
                ).scalars()
            )
            if conn.execute(text("SELECT current_schema()")).scalar() is None:
                raise DatabaseUnavailable(
                    f"cannot use {target.display}: its search_path names no schema that "
                    f"exists there (create the schema, or name one that exists)"
                )
            version = None
            if "alembic_version" in tables:
                version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            return tables, version
    except DBAPIError as exc:
        raise unavailable(target, exc) from None
    finally:
        engine.dispose()


def create_server_engine(target: Target, busy_timeout_s: float, *, read_only: bool) -> Engine:
    """An engine with exactly one connection to the server, holding the ephemeral tier."""
    engine = create_engine(
        target.url,
        poolclass=StaticPool,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
        execution_options={"schema_translate_map": TRANSLATE},
    )
    ddl = ephemeral_ddl(engine.dialect)
    busy_ms = max(1, int(busy_timeout_s * 1000))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_connection.cursor()
        schema = cursor.execute("SELECT current_schema()").fetchone()[0]
        if schema is None:
            raise DatabaseUnavailable(
                f"cannot use {target.display}: its search_path names no schema that exists"
            )
        record.info[LOCK_KEY] = write_lock_key(schema)
        cursor.execute(f'SET search_path TO "{schema}", pg_temp')
        cursor.execute(f"SET lock_timeout = {busy_ms}")
        # an acknowledged write is on disk, whatever the server's default (SQLite: FULL)
        cursor.execute("SET synchronous_commit = on")
        if read_only:
            cursor.execute("SET default_transaction_read_only = on")
        try:
            for statement in ddl:
                cursor.execute(statement)
        except Exception as exc:  # noqa: BLE001 - a server's refusal, said in one line
            dbapi_connection.rollback()
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

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        driver = connection.connection.driver_connection
        begin = connection.info.get(BEGIN_KEY, "BEGIN IMMEDIATE")
        if begin == "BEGIN":
            driver.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            return
        driver.execute("BEGIN")
        if begin == "BEGIN IMMEDIATE":
            try:
                take_write_lock(connection.connection)
            except Exception:
                driver.rollback()  # SQLAlchemy has no transaction to roll back yet
                raise
        # "BEGIN DEFERRED" (the ephemeral tier only): READ COMMITTED, no lock

    return engine


def take_write_lock(pooled: Any) -> None:
    """Take the writers' lock of the connection's schema, in its transaction (released at
    commit or rollback). ``pooled``: SQLAlchemy's pooled connection (``conn.connection``)."""
    pooled.driver_connection.execute("SELECT pg_advisory_xact_lock(%s)", (pooled.info[LOCK_KEY],))


def change_token(driver_connection: Any) -> str:
    """Changes whenever another transaction committed (or started writing) on the server."""
    return str(driver_connection.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
