"""`memstore db` under another process's lock, and SQLite URLs with query options.

Both are a user's situation, not a bug: one line, saying what happened and that nothing
was written (a lock), or how to do what the URL asked for (``?mode=ro``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic import command as alembic_command
from alembic.config import Config

from memstore.connection import HEAD_REVISION, resolve_target
from memstore.errors import UnsupportedDatabase
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import note

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def the_error_line(code: int, err: str) -> str:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memstore: error: "), err
    return lines[0]


def revision(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def at_revision(db: Path, rev: str) -> Path:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    alembic_command.upgrade(config, rev)
    return db


@contextmanager
def locked(db: Path, begin: str = "IMMEDIATE") -> Iterator[None]:
    """Another connection holds the database's write lock (``BEGIN EXCLUSIVE``: in a
    rollback-journal database, readers are locked out too)."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute(f"BEGIN {begin}")
    other.execute("UPDATE locations SET visit_count = visit_count")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


# --- db upgrade / current under another process's lock ------------------------------------


def test_db_upgrade_under_another_process_s_write_lock_says_nothing_was_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a database already at head has nothing to upgrade: it is reported without waiting for
    # the lock (tests/test_review_cli_db.py)
    db = at_revision(tmp_path / "old.db", "0001")
    before = revision(db)
    with locked(db):
        code, _out, err = run(capsys, "--db", str(db), "--busy-timeout", "0.2", "db", "upgrade")
    line = the_error_line(code, err)
    assert "stayed locked by another process" in line, line
    assert "nothing was written" in line, line
    assert "SQLITE_BUSY" not in line
    assert revision(db) == before


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_db_current_and_stats_on_an_exclusively_locked_file_say_it_is_locked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A rollback-journal database under an EXCLUSIVE lock cannot even be read: that is a
    lock (StoreBusy), not "cannot be read as SQLite"."""
    db = at_revision(tmp_path / "journal.db", "head")
    with sqlite3.connect(db) as conn:  # (a migration leaves WAL mode: an older file's mode)
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    with locked(db, "EXCLUSIVE"):
        for argv in (["db", "current"], ["db", "upgrade"], ["stats"]):
            code, _out, err = run(capsys, "--db", str(db), "--busy-timeout", "0.2", *argv)
            line = the_error_line(code, err)
            assert "locked by another process" in line, (argv, line)
            assert "cannot be read as SQLite" not in line
    code, out, _err = run(capsys, "--db", str(db), "db", "current")
    assert code == 0 and f"{HEAD_REVISION} (head)" in out


# --- SQLite URLs with query options --------------------------------------------------------


@pytest.mark.parametrize(
    "query", ["?mode=ro", "?mode=ro&uri=true", "?cache=shared", "?immutable=1"]
)
def test_a_sqlite_url_with_query_options_is_refused_in_one_line(tmp_path: Path, query: str) -> None:
    with pytest.raises(UnsupportedDatabase) as raised:
        resolve_target(f"sqlite:///{tmp_path / 'a.db'}{query}")
    message = str(raised.value)
    assert "\n" not in message
    assert "read_only" in message and "query" in message, message
    assert not (tmp_path / "a.db").exists()


def test_import_apply_through_a_mode_ro_url_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "a.db"
    with MemoryStore.open(db) as store:
        store.add_memory(27, "Living Room", note("Trap door", text="Under the rug."))
    exported = tmp_path / "M.md"
    code, _out, _err = run(capsys, "--db", str(db), "export", "--out", str(exported))
    assert code == 0
    exported.write_text(
        exported.read_text(encoding="utf-8").replace("Under the rug.", "Under the rug. EDIT"),
        encoding="utf-8",
    )
    with _no_warnings():
        code, _out, err = run(
            capsys, "--db", f"sqlite:///{db}?mode=ro", "import", str(exported), "--apply"
        )
    line = the_error_line(code, err)
    assert "read_only" in line or "read-only" in line, line
    with MemoryStore.open(db, read_only=True) as store:
        assert store.memories(27)[0].text == "Under the rug."


@contextmanager
def _no_warnings() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SQLAlchemy's SAWarning about ignored options too
        yield


@pytest.mark.parametrize("url", ["sqlite://a.db", "sqlite://user@host/a.db", "sqlite://:5/a.db"])
def test_a_sqlite_url_with_a_host_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite://a.db`` (two slashes) names a host, which SQLAlchemy refuses only later,
    as an internal error."""
    monkeypatch.chdir(tmp_path)
    code, _out, err = run(capsys, "--db", url, "stats")
    assert code == 1
    line = one_error_line(err, "names a file, not a host", "sqlite:///")
    assert "internal error" not in line
    assert list(tmp_path.iterdir()) == []
