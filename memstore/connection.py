"""Opening a memstore database: checks before touching a file, and the one connection.

SQLite (a file path or ``sqlite://`` URL) is the embedded default; a ``postgresql://`` URL
is a server shared by many agents (memstore.pg_connection holds what differs there: the
ephemeral tier in the connection's temporary schema, writers serialised by an advisory
lock as SQLite's ``BEGIN IMMEDIATE`` serialises them).

The ephemeral tier is an in-memory database ATTACHed to a connection. With a pool, every
pooled connection would get its own, different in-memory database, so the engine uses a
StaticPool: exactly one DBAPI connection for the life of the store. Correct by construction.

SQLite's Python driver opens transactions lazily and never for reads; memstore turns that
off (``isolation_level = None``) and begins its own: ``BEGIN IMMEDIATE`` for writes, so a
writer takes the lock up front and waits for it under the busy timeout instead of failing
with "database is locked" halfway through, and plain ``BEGIN`` for multi-statement reads.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from memstore.ddl import ephemeral_ddl
from memstore.errors import (
    NotAMemstoreDatabase,
    ReadOnlyDatabase,
    TransactionAborted,
    UnsupportedDatabase,
)
from memstore.schema import HEAD_REVISION as HEAD_REVISION  # importable from here too
from memstore.sqlite_probe import (
    folder_writable,
    judge_schema,
    probe_sqlite_file,
    read_only_uri,
)
from memstore.sqlite_session import begin_sqlite, connected, make_ephemeral_tier

DEFAULT_BUSY_TIMEOUT_S = 30.0
#: The page size of a new SQLite database (bytes). A durable supersession changes about
#: ten b-tree pages (the memory, its two indexes, its link and the link's indexes, the
#: history row and its index, the change counter), and the WAL writes each whole: 41 KiB
#: a supersession with SQLite's default 4 KiB pages, 12 KiB with 1 KiB pages, which
#: brought it from 1.55-1.60x to 1.40-1.44x the raw floor (bench/store_bench.py). The
#: cost, measured at 100,000 memories: files 11% larger, a cold read of a location 8%
#: slower, an import 3% slower; per-turn overhead unchanged (bench/game_bench.py).
PAGE_SIZE = 1024
#: how long ``check_existing`` waits for a lock that keeps it from reading a SQLite file,
#: unless told the caller's busy timeout (sqlite3's own default)
SQLITE_PROBE_TIMEOUT_S = 5.0
#: how much longer than the busy timeout (a lock wait, the longest a statement waits for
#: other agents) a server may stay silent by default before a call is abandoned
ANSWER_MARGIN_S = 60.0


def answer_limit(
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, answer_timeout_s: float | None = None
) -> float:
    """How long a PostgreSQL server may stay silent in one wait for its answer
    (memstore.pg_connection.AnswerWatch): ``answer_timeout_s``, or by default the busy
    timeout and ANSWER_MARGIN_S. Keep it above the busy timeout: a lock wait longer than
    it is cut off as a lost connection."""
    return answer_timeout_s if answer_timeout_s is not None else busy_timeout_s + ANSWER_MARGIN_S


#: info key telling the "begin" listener which BEGIN to emit
BEGIN_KEY = "memstore_begin"
#: info key of a connection's pool record: the tiers it holds (``store_tiers``)
TIERS_KEY = "memstore_tiers"
BOTH_TIERS = ("persistent", "ephemeral")


def store_tiers(target: Target, read_only: bool) -> tuple[str, ...]:
    """The tiers a store's connection holds. A read-only store on a server has no ephemeral
    tier: it could hold nothing (every write is refused), and a hot standby (a read
    replica) refuses to create even temporary tables."""
    return ("persistent",) if read_only and target.is_server else BOTH_TIERS


def connection_tiers(conn: Connection) -> tuple[str, ...]:
    """The tiers the store's connection ``conn`` holds (``store_tiers``)."""
    return conn.info.get(TIERS_KEY, BOTH_TIERS)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Target:
    """Where a store lives: a SQLAlchemy URL and, for a file, its path."""

    url: URL
    path: Path | None  # None for an in-memory main database

    @property
    def is_server(self) -> bool:
        """True for a PostgreSQL server database (shared by many processes and machines)."""
        return self.url.get_backend_name() == "postgresql"

    @property
    def location(self) -> str:
        """What opens this database again (``--db``, ``MemoryStore.open``): the file's path,
        or the URL with its password."""
        if self.path is not None:
            return str(self.path)
        return self.url.render_as_string(hide_password=False)

    @property
    def display(self) -> str:
        """The target as shown to a person: never a password, whether the URL gives it
        as ``user:password@`` or as a ``password=`` (or ``sslpassword=``) parameter."""
        if self.is_server:
            return shown_url(self.url.render_as_string(hide_password=False))
        return str(self.path) if self.path is not None else "in-memory database"

    def __repr__(self) -> str:  # a traceback or a log of it never shows the password
        return f"Target({self.display!r})"


#: a URL's password: after the user name, up to the last "@" before the path (a password
#: holding an "@" the caller did not encode included)
_PASSWORD_IN_USERINFO = re.compile(r"(://[^:/@?#]*:)[^/?#]*@")
#: a URL query parameter that holds a secret (libpq's password and sslpassword)
_SECRET_IN_QUERY = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)


def shown_url(text: str) -> str:
    """``text`` (a database URL, or what was given as one) with every password masked."""
    return _SECRET_IN_QUERY.sub(r"\1***", _PASSWORD_IN_USERINFO.sub(r"\1***@", text))


def resolve_target(path_or_url: str | Path) -> Target:
    """Accept a file path, a SQLite URL or a PostgreSQL URL (driven by psycopg 3)."""
    if "\x00" in str(path_or_url):  # the operating system's "embedded null byte" otherwise
        raise UnsupportedDatabase(
            "a database path or URL cannot hold a NUL character (\\u0000): remove it"
        )
    if isinstance(path_or_url, Path) or "://" not in str(path_or_url):
        path = _full_path(path_or_url, path_or_url)
        return Target(URL.create("sqlite", database=str(path)), path)
    try:
        url = make_url(str(path_or_url))
    except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError and ValueError alike
        raise UnsupportedDatabase(f"not a database URL: {shown_url(str(path_or_url))}") from None
    backend = url.get_backend_name()
    if backend == "postgresql":
        if url.get_driver_name() not in ("psycopg", "postgresql"):
            raise UnsupportedDatabase(
                f"memstore talks to PostgreSQL through psycopg 3: use a "
                f"postgresql+psycopg:// URL, not {url.drivername}://"
            )
        if not url.database:
            raise UnsupportedDatabase("a PostgreSQL URL must name its database (.../DBNAME)")
        return Target(url.set(drivername="postgresql+psycopg"), None)
    if backend != "sqlite":
        raise UnsupportedDatabase(
            f"memstore runs on SQLite (a path or sqlite:// URL) or PostgreSQL "
            f"(postgresql+psycopg://...); got a {backend!r} URL"
        )
    if url.host or url.port or url.username or url.password:
        raise UnsupportedDatabase(
            f"a SQLite URL names a file, not a host (got {url.host or 'a host'!r} in "
            f"{shown_url(str(path_or_url))[:80]}): write sqlite:///relative/path.db or "
            f"sqlite:////absolute/path.db, or give the path alone"
        )
    if url.query:
        # SQLAlchemy's SQLite driver ignores them (with a warning): ``?mode=ro`` would write
        raise UnsupportedDatabase(
            f"memstore takes no query options in a SQLite URL (got "
            f"?{shown_url(str(path_or_url)).partition('?')[2][:80]}): give the path alone; to "
            f"open it read-only use MemoryStore.open(path, read_only=True) (the commands that "
            f"only read, such as export, show and stats, open it so)"
        )
    if url.database in (None, "", ":memory:"):
        return Target(url.set(drivername="sqlite", database=":memory:"), None)
    path = _full_path(url.database, path_or_url)
    return Target(url.set(drivername="sqlite", database=str(path)), path)


def _full_path(path: str | Path, given: str | Path) -> Path:
    """``path`` with ``~`` expanded, made absolute, its links followed; one
    UnsupportedDatabase line (naming ``given``) for a home folder that cannot be found or a
    loop of symbolic links."""
    try:
        expanded = Path(path).expanduser()
    except RuntimeError:  # "Could not determine home directory."
        home = str(path).split("/", 1)[0]
        raise UnsupportedDatabase(
            f"cannot find the home folder of {home} in {given}: give the path without ~, "
            f"or with a user that exists"
        ) from None
    try:
        return expanded.resolve()
    except RuntimeError as exc:  # "Symlink loop from ..."
        raise UnsupportedDatabase(f"{given} cannot be opened: {exc}") from None


def check_existing(
    target: Target,
    *,
    answer_timeout_s: float | None = None,
    busy_timeout_s: float = SQLITE_PROBE_TIMEOUT_S,
) -> bool:
    """Look at an existing file without changing it. True if it is a new (empty) database.
    A server is read with each wait for its answer bounded by ``answer_timeout_s``
    (``answer_limit``'s default).

    A SQLite file another process keeps locked (an EXCLUSIVE lock, without WAL) for
    ``busy_timeout_s`` is StoreBusy.

    Raises NotAMemstoreDatabase for anything that is not an empty file, an empty SQLite
    database or a memstore database; SchemaOutOfDate / SchemaTooNew for other revisions,
    and SchemaOutOfDate ("at base") for a memstore database downgraded below its first
    revision (alembic's version table, empty, and nothing else).
    """
    if target.is_server:
        from memstore.pg_connection import server_tables

        tables, version, columns = server_tables(
            target, answer_limit(answer_timeout_s=answer_timeout_s)
        )
        return judge_schema(target.display, tables, version, kind="PostgreSQL", columns=columns)
    path = target.path
    if path is None:
        return True
    refuse_side_file(path)
    if not path.exists():
        return True
    if not path.is_file():
        raise NotAMemstoreDatabase(f"{path} is not a file")
    if path.stat().st_size == 0:
        return True
    return probe_sqlite_file(path, busy_timeout_s)


#: the files SQLite keeps beside a database ``X``: ``X-wal``, ``X-shm``, ``X-journal``
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def refuse_side_file(path: Path) -> None:
    """NotAMemstoreDatabase for a path that is a file SQLite keeps beside a database that
    is there (``d.db-wal`` beside ``d.db``): opened as a database, it would be written
    over that database's own log (review S5 B F13)."""
    for suffix in SQLITE_SIDE_FILES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            base = path.with_name(path.name[: -len(suffix)])
            if base.is_file() and _may_be_sqlite(base):
                raise NotAMemstoreDatabase(
                    f"{path} is a file SQLite keeps beside the database {base}, not a "
                    f"database: open {base.name} itself; left untouched"
                )


def _may_be_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database, or may become one (empty, or unreadable:
    nothing says it is not); another file has no side files (review S5 D F8)."""
    try:
        with path.open("rb") as file:
            head = file.read(16)
    except OSError:
        return True
    return not head or head == b"SQLite format 3\x00"


def check_writable(target: Target) -> None:
    """Refuse, in one line, to open for writing a database the process cannot write."""
    if target.is_server:
        return  # the server says so at the first write (ReadOnlyDatabase then)
    path = target.path
    if path is None:
        return
    if path.exists() and not os.access(path, os.W_OK):
        raise ReadOnlyDatabase(f"read-only database: {path} (the file cannot be written)")
    if path.parent.exists() and not folder_writable(path):
        raise ReadOnlyDatabase(
            f"read-only database: {path} (its folder cannot be written, and SQLite keeps its "
            f"journal there)"
        )


def create_store_engine(
    target: Target,
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    *,
    read_only: bool = False,
    answer_timeout_s: float | None = None,
) -> Engine:
    """An engine with exactly one connection, WAL, durable commits and the ephemeral tier.

    ``answer_timeout_s`` bounds each wait for a PostgreSQL server's answer
    (memstore.pg_connection.AnswerWatch); SQLite has no server to wait for.

    ``read_only`` opens the file for reading only (``read_only_uri``): no schema is created,
    the journal mode is left as it is, and any write fails (ReadOnlyDatabase).
    """
    if target.is_server:
        from memstore.pg_connection import create_server_engine

        return create_server_engine(
            target, busy_timeout_s, read_only=read_only, answer_timeout_s=answer_timeout_s
        )
    if read_only and target.path is not None:
        uri = read_only_uri(target.path)
        engine = create_engine(
            target.url,
            poolclass=StaticPool,
            creator=lambda: sqlite3.connect(
                uri, uri=True, check_same_thread=False, timeout=busy_timeout_s
            ),
        )
    else:
        engine = create_engine(
            target.url,
            poolclass=StaticPool,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_s},
        )
    engine = engine.execution_options(schema_translate_map=SQLITE_TRANSLATE)
    ddl = ephemeral_ddl()
    busy_ms = int(busy_timeout_s * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # memstore issues BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
        wal = False
        if target.path is not None and not read_only:
            # a new file only (an existing one keeps the size it was made with), before WAL
            cursor.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()
            wal = mode is not None and str(mode[0]).lower() == "wal"
        connected(record.info, busy_ms, wal=wal)  # (begin_sqlite waits for it in slices)
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        make_ephemeral_tier(cursor, ddl)
        cursor.close()

    watch_invalidation(engine)

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        # A Core statement run inside memstore's own transaction (begin_transaction) joins
        # it; one run outside any begins the transaction BEGIN_KEY names.
        if not in_store_transaction(connection):
            begin = connection.info.get(BEGIN_KEY, "BEGIN IMMEDIATE")
            begin_sqlite(driver_of(connection), begin, connection.connection.info)

    return engine


#: every persistent table named as ``main.`` in the statements the store runs. Unqualified,
#: a name SQLite looks up in main, then in the attached databases: while a table was gone
#: from main (a downgrade under an open store), a statement would bind to the ephemeral
#: tier's table of that name, and SQLite's cached statement kept reading and writing it
#: after the table was back (it checks only the schemas a statement uses)
SQLITE_TRANSLATE: dict[str | None, str] = {None: "main"}


class ConnectionLost(Exception):
    """The store's connection was lost inside a transaction (``failure_kind``: "gone")."""

    connection_invalidated = True


class _Open:
    """One of memstore's transactions, open: the driver connection it began on, its BEGIN,
    and whether SQLAlchemy has invalidated that connection since (``lost``)."""

    __slots__ = ("begin", "driver", "lost")

    def __init__(self, driver: Any, begin: str) -> None:
        self.driver = driver
        self.begin = begin
        self.lost = False


#: memstore's transactions open now, by the id of the SQLAlchemy connection each was begun
#: on, and by the id of its driver connection (``watch_invalidation``)
_OPEN: dict[int, _Open] = {}
_OPEN_DRIVERS: dict[int, _Open] = {}


def watch_invalidation(engine: Engine) -> None:
    """Mark a transaction lost when SQLAlchemy invalidates its connection (a Core statement
    met a lost connection, or the store dropped it): from then on SQLAlchemy would connect
    again, silently, at the next use, and a statement run there would be committed on its
    own, with the transaction and what it wrote so far gone."""

    @event.listens_for(engine, "invalidate")
    def _on_invalidate(dbapi_connection, _record, _exception) -> None:  # type: ignore[no-untyped-def]
        opened = _OPEN_DRIVERS.get(id(dbapi_connection))
        if opened is not None:
            opened.lost = True


def driver_of(conn: Connection) -> Any:
    """The driver's own connection under ``conn`` (sqlite3's or psycopg's), on which
    memstore runs its statements and transactions.

    Inside one of memstore's transactions it is the connection the transaction began on,
    or ConnectionLost once SQLAlchemy invalidated it (``watch_invalidation``). Both drivers
    are synchronous, so the driver's connection is the pooled ``dbapi_connection`` itself:
    read directly, it costs half of SQLAlchemy's ``driver_connection``, which asks the
    dialect on every call.
    """
    opened = _OPEN.get(id(conn))
    if opened is None:
        return conn.connection.dbapi_connection
    if opened.lost:
        raise ConnectionLost("the connection was lost inside the transaction")
    return opened.driver


def in_store_transaction(conn: Connection) -> bool:
    """Whether one of memstore's transactions is open on ``conn`` (ConnectionLost if its
    connection was lost): a Core statement run there joins it."""
    if id(conn) not in _OPEN:
        return False
    driver_of(conn)
    return True


def store_transaction_begin(conn: Connection) -> str:
    """The BEGIN of memstore's transaction open on ``conn`` (ConnectionLost if its
    connection was lost; KeyError if none is open)."""
    driver_of(conn)
    return _OPEN[id(conn)].begin


def begin_transaction(conn: Connection, begin: str) -> None:
    """Begin one of memstore's transactions on ``conn``'s driver connection: ``begin`` is
    "BEGIN" (a read), "BEGIN DEFERRED" (the ephemeral tier only: no lock on the file) or
    "BEGIN IMMEDIATE" (a write: the writers' lock, waited for up to the busy timeout; a
    lock held past it raises the driver's error here).

    Straight to the driver, as every statement is (memstore.executor): SQLAlchemy's own
    transaction would cost more than the BEGIN and the COMMIT. A Core statement run on
    ``conn`` inside it joins it (the engine's "begin" listener), and ``end_transaction``
    ends both. Call ``end_transaction(conn, commit=False)`` if this raises anything, a
    KeyboardInterrupt too: the BEGIN may have been made when it came."""
    conn.info[BEGIN_KEY] = begin
    driver = driver_of(conn)
    if conn.dialect.name == "postgresql":
        from memstore.pg_connection import begin_server_transaction

        begin_server_transaction(conn.connection, begin)
    else:
        begin_sqlite(driver, begin, conn.connection.info)
    _OPEN[id(conn)] = _OPEN_DRIVERS[id(driver)] = _Open(driver, begin)


def end_transaction(conn: Connection, *, commit: bool) -> None:
    """Commit (or roll back) the transaction ``begin_transaction`` began on ``conn``,
    together with the one SQLAlchemy began inside it when a Core statement ran there.

    A transaction whose connection was lost is never committed (ConnectionLost). A commit
    that fails is rolled back before its error is raised, so no transaction is left open.
    A rollback that fails (the connection was lost) is not raised: the error that made the
    caller roll back is the one to report, and a server ends a lost connection's
    transaction itself."""
    try:
        driver = driver_of(conn) if commit else None  # ConnectionLost if lost
        if driver is not None and _ended_by_the_database(conn, driver):
            if _session_gone(conn, driver):  # not invalidated: the caller caught it
                raise ConnectionLost("the server ended the session inside the transaction")
            raise TransactionAborted(
                "the transaction ended inside the block (the database rolled it back after "
                "an error the caller caught, or a COMMIT or ROLLBACK ran inside it): its end "
                "committed nothing"
            )
        opened = _OPEN.pop(id(conn), None)
        if opened is not None:
            _OPEN_DRIVERS.pop(id(opened.driver), None)
        # SQLAlchemy joined (its transaction, active or failed): it ends both, and knows it
        if conn.get_transaction() is not None:
            if commit:
                conn.commit()
                return
            conn.rollback()  # (after a failed commit it leaves the driver's open)
        elif driver is not None:
            driver.commit()
            return
        if not conn.invalidated:
            driver_of(conn).rollback()
    except Exception:
        if commit:
            end_transaction(conn, commit=False)
            raise


def _ended_by_the_database(conn: Connection, driver: Any) -> bool:
    """Did the database roll the transaction back by itself, or doom it, after an error
    inside it (one the caller caught)? SQLite ends it after some errors (a full disk);
    PostgreSQL fails it after any error, and would answer its COMMIT with a rollback."""
    if conn.dialect.name == "postgresql":
        from memstore.pg_connection import transaction_failed

        return transaction_failed(driver)
    return not driver.in_transaction


def _session_gone(conn: Connection, driver: Any) -> bool:
    """Is the server connection itself gone (closed, or broken by the server)?"""
    return conn.dialect.name == "postgresql" and bool(driver.closed or driver.broken)


def change_token(conn: Connection) -> object:
    """A value that changes whenever another connection commits to the database: SQLite's
    ``PRAGMA data_version``; on PostgreSQL, the server's current snapshot."""
    driver = driver_of(conn)
    if conn.dialect.name == "postgresql":
        from memstore.pg_connection import change_token as server_change_token

        return server_change_token(driver)
    return driver.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[union-attr]


def upgrade_to_write(conn: Connection) -> None:
    """A write nested in a transaction begun for the ephemeral tier only: SQLite takes its
    write lock at the first write by itself; PostgreSQL's writers' lock is taken here."""
    driver_of(conn)  # (ConnectionLost if the transaction's connection was lost)
    if conn.dialect.name == "postgresql":
        from memstore.pg_connection import take_write_lock

        take_write_lock(conn.connection)
    conn.info[BEGIN_KEY] = _OPEN[id(conn)].begin = "BEGIN IMMEDIATE"
