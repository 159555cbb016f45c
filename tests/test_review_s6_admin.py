"""Review S6 C: schema changes and database administration.

Was: argparse took abbreviated options, so ``db downgrade base --allow`` dropped every
table and ``import --apply --prune --f`` deleted every memory the file left out, each
confirmed without the word the refusal names (F4). A write cut short on a database in
rollback-journal mode (a killed ``db upgrade``) left a hot journal that every command
refused the database for, and that a read where it could not be rolled back read past,
half written (F1). ``db current`` called a blank or made-up revision "newer" (F6).
``db upgrade`` on tables that do not match their recorded revision ended in an internal
error, or in an upgrade reported done into a database every command refused (F2). A
reader held a migration up for about three times the busy timeout (F3).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstore import MemoryStore, sqlite_probe
from memstore.cli import main
from memstore.errors import NotAMemstoreDatabase, ReadOnlyDatabase, SchemaTooNew
from memstore.sqlite_probe import hot_journal
from tests.conftest import note


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["db", "downgrade", "base", "--allow"], "unrecognized arguments: --allow"),
        (["db", "downgrade", "base", "--allow-data"], "unrecognized arguments: --allow-data"),
        (["import", "Memories.md", "--apply", "--prune", "--f"], "unrecognized arguments: --f"),
        (["import", "Memories.md", "--apply", "--prune", "--forc"], "arguments: --forc"),
        (["--busy", "3", "stats"], "invalid choice: '3'"),
    ],
)
def test_an_abbreviated_option_is_a_usage_error_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    db = tmp_path / "m.db"
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", note("Mailbox"))
    (tmp_path / "Memories.md").write_text("# Location Memories\n")

    with pytest.raises(SystemExit) as ended:
        main(["--db", str(db), *[str(tmp_path / a) if a == "Memories.md" else a for a in argv]])

    assert ended.value.code == 2
    assert error in capsys.readouterr().err
    with MemoryStore.open(db) as store:
        assert [m.title for m in store.memories(64)] == ["Mailbox"]


#: a process that dies inside a write on a database in rollback-journal mode (as a killed
#: ``db upgrade`` does: alembic leaves a file it made in that mode), leaving a hot journal
CUT_SHORT = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=delete")
c.execute("PRAGMA cache_size=1")  # the changed pages spill into the file before COMMIT
c.execute("BEGIN")
c.execute("UPDATE memories SET text = text || ' changed, never committed'")
os.kill(os.getpid(), signal.SIGKILL)
"""


def cut_short(db: Path) -> None:
    with MemoryStore.open(db) as store:
        for n in range(200):
            store.add_memory(64, "West of House", note(f"Fact {n}", text="x" * 500))
    subprocess.run([sys.executable, "-c", CUT_SHORT, str(db)], check=False)
    assert hot_journal(Path(f"{db}-journal"))


@pytest.mark.slow  # (it starts a process, killed in its write)
def test_a_write_cut_short_in_rollback_journal_mode_is_rolled_back_at_the_next_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # F1: every command refused the sound database: "cannot be read as SQLite (attempt to
    # write a readonly database)", and `db upgrade` run again too
    db = tmp_path / "m.db"
    cut_short(db)

    assert main(["--db", str(db), "db", "upgrade"]) == 0

    with MemoryStore.open(db) as store:
        texts = {memory.text for memory in store.memories(64)}
        assert texts == {"x" * 500} and len(store.memories(64)) == 200
    assert not hot_journal(Path(f"{db}-journal"))
    assert "cannot be read" not in capsys.readouterr().err


@pytest.mark.slow  # (it starts a process, killed in its write)
def test_a_write_cut_short_is_never_read_half_written_where_it_cannot_be_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # F1: in a folder the process cannot write, the file was read `immutable`, its
    # half-written pages as they were ("not a memstore database")
    db = tmp_path / "m.db"
    cut_short(db)
    monkeypatch.setattr(sqlite_probe, "folder_writable", lambda _path: False)

    with pytest.raises(ReadOnlyDatabase, match=r"m\.db-journal holds a write that was cut short"):
        sqlite_probe.read_only_uri(db)
    assert hot_journal(Path(f"{db}-journal"))  # left as it was


@pytest.mark.parametrize("stored", ["", "0003 ", "zzzz", "0x12"])
def test_a_revision_no_memstore_wrote_is_damage_not_a_newer_memstore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stored: str
) -> None:
    # F6: `db current` called a blank, padded or made-up revision "newer than this memstore
    # knows" and exited 0
    db = tmp_path / "m.db"
    MemoryStore.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (stored,))
    conn.close()

    assert main(["--db", str(db), "db", "current"]) == 1
    error = capsys.readouterr().err
    assert "is damaged, not a sound memstore database: its alembic_version table holds" in error
    assert "newer" not in error
    with pytest.raises(NotAMemstoreDatabase, match="no revision of memstore's"):
        MemoryStore.open(db)


def test_a_later_memstore_s_revision_is_still_newer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.db"
    MemoryStore.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    conn.close()

    assert main(["--db", str(db), "db", "current"]) == 0
    assert "0099 (newer than this memstore knows" in capsys.readouterr().out
    with pytest.raises(SchemaTooNew, match="use a newer memstore"):
        MemoryStore.open(db)


@pytest.mark.slow  # (schema migrations)
def test_tables_ahead_of_the_recorded_revision_are_damage_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # F2: stamped back by hand, `db upgrade` ended in "internal error: ... table
    # location_names already exists"
    db = tmp_path / "m.db"
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", note("Mailbox"))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0008'")
    conn.close()
    before = db.read_bytes()

    assert main(["--db", str(db), "db", "upgrade"]) == 1

    error = capsys.readouterr().err
    assert "is damaged, not a sound memstore database: its tables do not match its revision" in (
        error
    )
    assert "internal error" not in error and "alembic did nothing" in error
    assert db.read_bytes() == before


@pytest.mark.slow  # (schema migrations)
def test_an_upgrade_into_a_schema_still_missing_a_table_is_refused_and_rolled_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # F2: a table of its own revision dropped, `db upgrade` reported success, and every
    # command then refused the database as damaged, downgrade included
    db = tmp_path / "m.db"
    assert main(["--db", str(db), "db", "upgrade", "0005"]) == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE flagged_memories")
    conn.close()
    capsys.readouterr()

    assert main(["--db", str(db), "db", "upgrade"]) == 1

    assert "upgraded to 0011, it would still have no flagged_memories" in capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.close()
    assert revision == "0005"


@pytest.mark.slow  # (schema migrations)
def test_a_long_reader_never_holds_a_migration_up(tmp_path: Path) -> None:
    # F3: in rollback-journal mode, as `db upgrade` left a file it made, a reader held the
    # migration up for about three times --busy-timeout (4 s gave 13.5 s), then refused it
    db = tmp_path / "m.db"
    assert main(["--db", str(db), "db", "upgrade", "0005"]) == 0
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchall()  # a read transaction, held
        started = time.monotonic()

        assert main(["--db", str(db), "--busy-timeout", "1", "db", "upgrade"]) == 0

        assert time.monotonic() - started < 1
    finally:
        reader.close()


@pytest.mark.slow  # (it starts a process, killed in its write)
def test_another_application_s_cut_short_write_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review S6 F F6: `db current`, a read, rolled another application's write back (its
    # file went from 1.5 MB to 8 KB) and said "left untouched"
    db = tmp_path / "app.db"
    script = (
        "import os, signal, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('CREATE TABLE t (x)'); c.execute('INSERT INTO t VALUES (1)')\n"
        "c.execute('PRAGMA cache_size=2'); c.execute('BEGIN IMMEDIATE')\n"
        "c.executemany('INSERT INTO t VALUES (?)', [(os.urandom(500),) for _ in range(3000)])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db)], check=False)
    journal = Path(f"{db}-journal")
    assert hot_journal(journal)
    before = (db.read_bytes(), journal.read_bytes())

    assert main(["--db", str(db), "db", "current"]) == 1

    assert "is a SQLite database but not a memstore database (tables: t)" in (
        capsys.readouterr().err
    )
    assert (db.read_bytes(), journal.read_bytes()) == before


@pytest.mark.slow  # (it starts a process, killed in its write)
def test_a_write_cut_short_beside_a_read_only_file_is_said_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review S6 K F4: a read-only file in a writable folder, with a hot journal, was
    # "cannot be read as SQLite (attempt to write a readonly database)"
    db = tmp_path / "m.db"
    cut_short(db)
    real_access = os.access
    monkeypatch.setattr(
        sqlite_probe.os,
        "access",
        lambda path, mode: (
            False if Path(path) == db and mode == os.W_OK else real_access(path, mode)
        ),
    )

    with pytest.raises(ReadOnlyDatabase, match=r"the file or its folder is read-only"):
        sqlite_probe.read_only_uri(db)
