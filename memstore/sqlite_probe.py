"""Looking at an existing SQLite file before memstore opens it: part of the connection
layer (memstore.connection.check_existing), which reads it here without changing it.

A file that is refused (not SQLite, damaged, another application's database) is left as it
was found: the read-only probe may have made SQLite's ``-wal`` and ``-shm`` files beside
it (a WAL database needs them even to be read), and those are removed again when they
were not there before.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

from memstore.errors import (
    NotAMemstoreDatabase,
    ReadOnlyDatabase,
    SchemaOutOfDate,
    SchemaTooNew,
    StorageFull,
)
from memstore.migrations_dir import known_revisions, newer_revision
from memstore.refusals import failure_kind, storage_full, store_busy
from memstore.schema import HEAD_REVISION, metadata

__all__ = [
    "folder_writable",
    "hot_journal",
    "judge_schema",
    "missing_at_head",
    "probe_sqlite_file",
    "read_only_uri",
    "single_revision",
    "upgrade_command",
]

#: the files SQLite keeps beside a WAL database while it is open
SIDE_SUFFIXES = ("-wal", "-shm")


def folder_writable(path: Path) -> bool:
    return os.access(path.parent, os.W_OK)


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` for reading only and never writes beside it.

    ``mode=ro`` still needs the WAL's shared-memory file beside the database, which a
    read-only folder cannot hold: there the file is opened ``immutable`` (SQLite then reads
    it without locks, which is right for a folder nobody can write to). But ``immutable``
    reads only the database file: commits still in its ``-wal`` would be left out, and a
    stale database read as if it were whole, so a ``-wal`` that holds any is refused
    (ReadOnlyDatabase, one line); so is a ``-journal`` holding a write cut short, in such a
    folder or beside a file that cannot be written (SQLite cannot roll it back there).
    """
    shm = Path(f"{path}-shm")
    journal = Path(f"{path}-journal")
    writable = folder_writable(path) and os.access(path, os.W_OK)
    if (folder_writable(path) or shm.exists()) and (writable or not hot_journal(journal)):
        return f"{path.as_uri()}?mode=ro"
    if hot_journal(journal):  # ``immutable`` would read the half-written pages as they are
        raise ReadOnlyDatabase(
            f"{journal} holds a write that was cut short, which SQLite rolls back when it "
            f"opens the database for writing; it cannot here (the file or its folder is "
            f"read-only), and {path.name} read without it would be half written: open it "
            f"once where it can be written (copy it with its -journal)"
        )
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise ReadOnlyDatabase(
            f"{wal} holds commits that cannot be read here: its folder cannot be written, "
            f"so SQLite cannot make {shm.name} to read them; open the database where its "
            f"folder can be written (copy it with its -wal), or let the writer that left "
            f"them close it"
        )
    return f"{path.as_uri()}?immutable=1"


#: the first 8 bytes of a rollback journal that holds a write (SQLite's file format, 4.1)
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def hot_journal(journal: Path) -> bool:
    """Whether ``journal`` (a database's ``-journal``) holds a write cut short: SQLite
    rolls it back when it next opens the database for writing."""
    try:
        with journal.open("rb") as file:
            return file.read(8) == _JOURNAL_MAGIC
    except OSError:
        return False


def _roll_back_journal(path: Path, busy_timeout_s: float) -> None:
    """Let SQLite roll back the write a process cut short (a killed ``db upgrade`` on a
    database in rollback-journal mode leaves its ``-journal``): what any writer opening
    the file does first, and what a read-only probe cannot (review S6 C F1: every command
    refused the sound database as "cannot be read as SQLite")."""
    recover = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=busy_timeout_s)
    try:
        recover.execute("SELECT count(*) FROM sqlite_master").fetchall()
    finally:
        recover.close()


def _roll_back_if_ours(path: Path, busy_timeout_s: float) -> None:
    """``_roll_back_journal`` for a memstore database only: another application's file, as
    its tables read without the journal say (``immutable``), is left as it is (review S6 F
    F6: a read-only command rolled another application's write back), and refused."""
    try:
        seen = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
        try:
            tables = {row[0] for row in seen.execute("SELECT name FROM sqlite_master")}
        finally:
            seen.close()
    except sqlite3.DatabaseError:
        tables = set()  # (unreadable so: the read below says what the file is)
    if tables and not {"alembic_version", "memories"} <= tables:
        shown = ", ".join(sorted(name for name in tables if not name.startswith("sqlite_")))
        raise NotAMemstoreDatabase(
            f"{path} is a SQLite database but not a memstore database (tables: {shown}), "
            f"with a write cut short in its -journal; left untouched"
        )
    try:
        _roll_back_journal(path, busy_timeout_s)
    except sqlite3.DatabaseError:
        pass  # the read below says what the file is


def probe_sqlite_file(path: Path, busy_timeout_s: float) -> bool:
    """``check_existing`` for an existing, non-empty SQLite file: True if it is an empty
    SQLite database, False at the head revision; otherwise ``judge_schema``'s error, or
    NotAMemstoreDatabase for a file SQLite cannot read, StoreBusy for a lock held longer
    than ``busy_timeout_s``, StorageFull for a full or failing disk (SQLite could not even
    make its side files to read it: the file is not judged). A file refused, either way,
    is left without the side files the probe made beside it."""
    had = {suffix for suffix in SIDE_SUFFIXES if Path(f"{path}{suffix}").exists()}
    try:
        if folder_writable(path) and hot_journal(Path(f"{path}-journal")):
            _roll_back_if_ours(path, busy_timeout_s)
        tables, version, columns = _read_schema(path, busy_timeout_s)
        return judge_schema(str(path), tables, version, columns=columns)
    except (NotAMemstoreDatabase, StorageFull):
        if not had:
            _remove_side_files(path)
        raise


def _read_schema(
    path: Path, busy_timeout_s: float
) -> tuple[set[str], str | None, dict[str, set[str]]]:
    """The tables (and views: never its indexes or triggers) of the SQLite file ``path``,
    its alembic revision, and the columns of those of its tables that memstore's schema
    has, read only."""
    # Only SQLite opens the file: closing a descriptor of our own would release every
    # POSIX lock this process holds on it, the SHARED locks of its open WAL connections
    # among them, and another process closing its connection would then delete the WAL
    # under them (tests/test_posix_locks.py). SQLite keeps such descriptors until its locks
    # are gone, and says "file is not a database" for a file that is not one.
    try:
        probe = sqlite3.connect(read_only_uri(path), uri=True, timeout=busy_timeout_s)
        try:
            tables = {
                row[0]
                for row in probe.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                )
            }
            rows: list[tuple[object, ...]] = []
            if "alembic_version" in tables:
                rows = probe.execute("SELECT version_num FROM alembic_version LIMIT 3").fetchall()
            columns = {
                table: {
                    row[0]
                    for row in probe.execute("SELECT name FROM pragma_table_info(?)", (table,))
                }
                for table in sorted(tables.intersection(metadata.tables))
            }
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        if failure_kind(exc) == "busy":  # a writer's EXCLUSIVE lock (no WAL): not damage
            raise store_busy(str(path)) from exc
        full = storage_full(exc)
        if full is not None:  # no room for the -shm file, an I/O error: not damage either
            raise StorageFull(
                f"{path} could not be read: the disk is full or failing ({full}); the "
                f"database was not judged and is left untouched: make room, or check the "
                f"disk, and try again"
            ) from exc
        if "file is not a database" in str(exc):
            raise NotAMemstoreDatabase(
                f"{path} is not a SQLite database (so not a memstore database); left untouched"
            ) from exc
        raise NotAMemstoreDatabase(
            f"{path} cannot be read as SQLite ({exc}); left untouched"
        ) from exc
    except UnicodeDecodeError as exc:
        # SQLite's message quotes schema text that is not UTF-8 ("malformed database
        # schema (...) - near ..."), and Python's sqlite3 cannot decode its own error
        raise NotAMemstoreDatabase(
            f"{path} cannot be read as SQLite (malformed database schema: its text is not "
            f"UTF-8); left untouched"
        ) from exc
    return tables, single_revision(str(path), [row[0] for row in rows]), columns


def single_revision(path: str, revisions: list[object]) -> str | None:
    """The one revision of an ``alembic_version`` table's rows (None for none: an empty
    table, which ``judge_schema`` judges with the tables), or the NotAMemstoreDatabase line
    that says the table is damaged: alembic keeps exactly one row there, a revision's name.
    """
    if not revisions:
        return None
    if len(revisions) > 1 or not isinstance(revisions[0], str):
        shown = ", ".join(repr(revision)[:40] for revision in revisions[:2])
        what = "more than one revision" if len(revisions) > 1 else "a revision that is no name"
        raise NotAMemstoreDatabase(
            f"{path} is damaged, not a sound memstore database: its alembic_version table "
            f"holds {what} ({shown}), where memstore keeps exactly one; left untouched"
        )
    return revisions[0]


def _remove_side_files(path: Path) -> None:
    """Remove the ``-wal`` and ``-shm`` files the read-only probe made beside ``path``
    (none was there before it): a read-only connection writes nothing to the WAL, so an
    empty one is the probe's. A WAL that is not empty was written by someone else since:
    both are left."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    try:
        if wal.stat().st_size:
            return
        wal.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        shm.unlink(missing_ok=True)
    except OSError:
        pass


def upgrade_command(shown: object) -> str:
    """How to upgrade the database shown as ``shown``, to paste into a shell: the command
    with a file's path quoted, or, for a server URL (shown with its password masked, and
    a ``?`` the shell would glob), the command with the same --db or MEMSTORE_DB."""
    text = str(shown)
    if "://" in text:
        return "`memstore db upgrade` with the same --db or MEMSTORE_DB"
    return f"`memstore --db {shlex.quote(text)} db upgrade`"


def missing_at_head(tables: set[str], columns: dict[str, set[str]]) -> str:
    """The tables and columns of the head revision's schema that ``tables`` (and, for
    those read, ``columns``: each table's column names) lack, for a message ("" if none)."""
    missing = sorted(set(metadata.tables) - tables)
    missing += [
        f"{table}.{column.name}"
        for table in sorted(columns)
        for column in metadata.tables[table].columns
        if column.name not in columns[table]
    ]
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return ", ".join(missing[:5]) + more if missing else ""


def judge_schema(
    path: str,
    tables: set[str],
    version: str | None,
    kind: str = "SQLite",
    *,
    columns: dict[str, set[str]] | None = None,
) -> bool:
    """What the tables of a database and its alembic revision make it: True when it is new
    (no tables), False at the head revision; otherwise the one-line error that says why
    memstore will not open it.

    At base (SchemaOutOfDate: `db upgrade` makes it memstore's again): alembic_version
    empty and nothing else. Beside other tables it is not told from another application's
    database at its own base (every alembic project's version table looks the same), so it
    is refused as not memstore's and left untouched (a memstore database downgraded to base
    beside tables of the user's own is refused too: move those tables out first).

    A database altered around memstore is damaged (NotAMemstoreDatabase, never advice to
    upgrade): memstore's tables with alembic_version emptied (``version`` None), or at the
    head revision a table of memstore's schema missing, or a column of one (``columns``,
    each table's column names, where the caller read them: the SQLite probe does)."""
    if not tables:
        return True
    own = {name for name in tables if not name.startswith("sqlite_")}
    if version is None and own == {"alembic_version"}:
        raise SchemaOutOfDate(
            f"{path} is at base: run `alembic upgrade head` ({upgrade_command(path)}); its "
            f"schema was downgraded below the first revision, so it holds no memories"
        )
    if "alembic_version" not in tables or "memories" not in tables:
        raise NotAMemstoreDatabase(
            f"{path} is a {kind} database but not a memstore database "
            f"(tables: {', '.join(sorted(own or tables))}); left untouched"
        )
    if version is None:  # memstore's tables, and alembic_version emptied
        raise NotAMemstoreDatabase(
            f"{path} is damaged, not a sound memstore database: its alembic_version table "
            f"holds no revision; left untouched"
        )
    if version == HEAD_REVISION:
        shown = missing_at_head(tables, columns or {})
        if shown:  # a table dropped, a column renamed or dropped around memstore
            raise NotAMemstoreDatabase(
                f"{path} is damaged, not a sound memstore database: it is at revision "
                f"{version} but has no {shown} (a table or column of its schema); left "
                f"untouched"
            )
        return False
    if version in known_revisions():
        raise SchemaOutOfDate(
            f"{path} is at schema revision {version}, this memstore needs {HEAD_REVISION}: "
            f"run {upgrade_command(path)} (alembic upgrade head)"
        )
    if not newer_revision(version):
        raise NotAMemstoreDatabase(
            f"{path} is damaged, not a sound memstore database: its alembic_version table "
            f"holds {version!r:.60}, no revision of memstore's; left untouched"
        )
    raise SchemaTooNew(
        f"{path} is at schema revision {version!r}, which this memstore does not know "
        f"(it knows up to {HEAD_REVISION}); use a newer memstore"
    )
