"""Looking at an existing SQLite file before memstore opens it: part of the connection
layer (memstore.connection.check_existing), which reads it here without changing it.

A file that is refused (not SQLite, damaged, another application's database) is left as it
was found: the read-only probe may have made SQLite's ``-wal`` and ``-shm`` files beside
it (a WAL database needs them even to be read), and those are removed again when they
were not there before.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memstore.errors import NotAMemstoreDatabase, SchemaOutOfDate, SchemaTooNew
from memstore.migrations_dir import known_revisions
from memstore.refusals import failure_kind, store_busy
from memstore.schema import HEAD_REVISION

__all__ = ["folder_writable", "judge_schema", "probe_sqlite_file", "read_only_uri"]

#: the files SQLite keeps beside a WAL database while it is open
SIDE_SUFFIXES = ("-wal", "-shm")


def folder_writable(path: Path) -> bool:
    return os.access(path.parent, os.W_OK)


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` for reading only and never writes beside it.

    ``mode=ro`` still needs the WAL's shared-memory file beside the database, which a
    read-only folder cannot hold: there the file is opened ``immutable`` (SQLite then reads
    it without locks, which is right for a folder nobody can write to).
    """
    shm = Path(f"{path}-shm")
    if folder_writable(path) or shm.exists():
        return f"{path.as_uri()}?mode=ro"
    return f"{path.as_uri()}?immutable=1"


def probe_sqlite_file(path: Path, busy_timeout_s: float) -> bool:
    """``check_existing`` for an existing, non-empty SQLite file: True if it is an empty
    SQLite database, False at the head revision; otherwise ``judge_schema``'s error, or
    NotAMemstoreDatabase for a file SQLite cannot read, StoreBusy for a lock held longer
    than ``busy_timeout_s``. A file refused as not a memstore database is left without
    the side files the probe made beside it."""
    had = {suffix for suffix in SIDE_SUFFIXES if Path(f"{path}{suffix}").exists()}
    try:
        tables, version = _read_schema(path, busy_timeout_s)
        return judge_schema(str(path), tables, version)
    except NotAMemstoreDatabase:
        if not had:
            _remove_side_files(path)
        raise


def _read_schema(path: Path, busy_timeout_s: float) -> tuple[set[str], str | None]:
    """The tables of the SQLite file ``path`` and its alembic revision, read only."""
    # Only SQLite opens the file: closing a descriptor of our own would release every
    # POSIX lock this process holds on it, the SHARED locks of its open WAL connections
    # among them, and another process closing its connection would then delete the WAL
    # under them (tests/test_posix_locks.py). SQLite keeps such descriptors until its locks
    # are gone, and says "file is not a database" for a file that is not one.
    try:
        probe = sqlite3.connect(read_only_uri(path), uri=True, timeout=busy_timeout_s)
        try:
            tables = {row[0] for row in probe.execute("SELECT name FROM sqlite_master")}
            version = None
            if "alembic_version" in tables:
                row = probe.execute("SELECT version_num FROM alembic_version").fetchone()
                version = row[0] if row else None
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        if failure_kind(exc) == "busy":  # a writer's EXCLUSIVE lock (no WAL): not damage
            raise store_busy(str(path)) from exc
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
    return tables, version


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


def judge_schema(path: str, tables: set[str], version: str | None, kind: str = "SQLite") -> bool:
    """What the tables of a database and its alembic revision make it: True when it is new
    (no tables), False at the head revision; otherwise the one-line error that says why
    memstore will not open it."""
    if not tables:
        return True
    if version is None and {n for n in tables if not n.startswith("sqlite_")} == {
        "alembic_version"
    }:
        raise SchemaOutOfDate(
            f"{path} is at base: run `alembic upgrade head` (`memstore --db {path} db "
            f"upgrade`); its schema was downgraded below the first revision, so it holds no "
            f"memories"
        )
    if "alembic_version" not in tables or "memories" not in tables:
        raise NotAMemstoreDatabase(
            f"{path} is a {kind} database but not a memstore database "
            f"(tables: {', '.join(sorted(tables))}); left untouched"
        )
    if version == HEAD_REVISION:
        return False
    if version in known_revisions():
        raise SchemaOutOfDate(
            f"{path} is at schema revision {version}, this memstore needs {HEAD_REVISION}: "
            f"run `memstore --db {path} db upgrade` (alembic upgrade head)"
        )
    raise SchemaTooNew(
        f"{path} is at schema revision {version!r}, which this memstore does not know "
        f"(it knows up to {HEAD_REVISION}); use a newer memstore"
    )
