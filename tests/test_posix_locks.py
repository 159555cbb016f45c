"""Opening a database never drops the locks SQLite holds on it in this process.

POSIX advisory locks belong to a process and a file: closing ANY descriptor of the file
releases all of them, including the SHARED lock each of SQLite's WAL connections holds on
the database file for as long as it is open. Another process that then closes its own
connection believes it is the last one, checkpoints and deletes the WAL under the
connections this process still has open, whose next read fails with "disk I/O error"
(SQLITE_IOERR_SHORT_READ). The review loop met this: a reviewer's `memstore export` (in
the process that holds the agents' store) read the file's header with Python's open().
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.connection import check_existing, resolve_target
from memstore.errors import NotAMemstoreDatabase
from memstore.models import Memory
from memstore.store import MemoryStore

#: another process: one write through its own connection, then it closes (the last?)
WRITE_AND_CLOSE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("INSERT INTO locations (id, name, visit_count) VALUES (99, 'Elsewhere', 0)")
conn.close()
"""


def note(title: str) -> Memory:
    return Memory(
        category="NOTE", title=title, text="x", episode=1, turns="1", persistence="permanent"
    )


def test_looking_at_an_open_database_keeps_this_process_s_locks(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        assert store.add_memory(1, "Here", note("Before"))
        wal = Path(f"{db_path}-wal")
        assert wal.exists()
        check_existing(resolve_target(db_path))  # what every open and command does first
        subprocess.run([sys.executable, "-c", WRITE_AND_CLOSE, str(db_path)], check=True)
        # the other process was not the last connection: the WAL is still there
        assert wal.exists()
        assert store.add_memory(1, "Here", note("After"))
        assert [m.title for m in store.memories(1)] == ["Before", "After"]


def test_a_file_that_is_not_sqlite_is_still_refused_and_left_untouched(tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_bytes(b"my shopping list\n" * 300)
    before = notes.read_bytes()
    with pytest.raises(NotAMemstoreDatabase, match="is not a SQLite database"):
        check_existing(resolve_target(notes))
    assert notes.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_short_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    stub = tmp_path / "stub.db"
    stub.write_bytes(b"SQLite")  # a header cut short
    with pytest.raises(NotAMemstoreDatabase):
        check_existing(resolve_target(stub))
    assert stub.read_bytes() == b"SQLite"


def test_sqlite_itself_agrees_a_text_file_is_not_a_database(tmp_path: Path) -> None:
    text = tmp_path / "t.db"
    text.write_text("hello\n" * 200)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(f"{text.as_uri()}?mode=ro", uri=True).execute(
            "SELECT name FROM sqlite_master"
        ).fetchall()
