"""The SQLite migrations of migrations/env.py: one transaction, another process's lock,
and `alembic current`.

`memstore db upgrade` SIGKILLed mid-rebuild (rollback journal and WAL) leaves 0007 and a
rerun succeeds; an upgrade waits for another process's write lock, honours
``--busy-timeout`` and says so when the lock is held past it; two upgrades over several
revisions at once both succeed; `current` reads beside a writer without waiting; an upgrade
over several revisions that fails changes nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from alembic import command

from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.migration_helpers import (
    MEMSTORE,
    db_upgrade,
    digest_before_later_tables,
    digest_of,
    leftovers,
    quiet_config,
)
from tests.test_migration_0003 import new_database_at, revision
from tests.test_migration_0008 import populated_0007
from tests.test_store_schema import schema_of


def big_0007(folder: Path, rows: int = 200_000) -> Path:
    db = populated_0007(folder)
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO memories (location_id, category, title, text, episode, turn_start, "
            "persistence, status, created_at) VALUES (180, 'NOTE', ?, ?, 1, 1, 'permanent', "
            "'SUPERSEDED', 'c')",
            [(f"t{n}", "x" * 200) for n in range(rows)],
        )
    return db


@pytest.mark.slow
@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_an_upgrade_killed_mid_rebuild_leaves_0007_and_a_rerun_succeeds(
    tmp_path: Path, journal: str
) -> None:
    """`memstore db upgrade` is SIGKILLed once its transaction has written (WAL frames: a
    file in rollback-journal mode is put in WAL mode first): the file is at 0007 with its
    schema and rows, no _alembic_tmp_ table, and the same command then upgrades it."""
    original = big_0007(tmp_path)
    if journal == "wal":
        with sqlite3.connect(original) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
    values, schema = digest_of(original), schema_of(original)
    for attempt, delay in enumerate((0.0, 0.2)):
        db = tmp_path / f"kill{attempt}.db"
        shutil.copyfile(original, db)
        # (a migration puts a rollback-journal file in WAL mode first: review S6 C F3)
        side, threshold = Path(f"{db}-wal"), 64_000
        upgrade = subprocess.Popen(
            [str(MEMSTORE), "--db", str(db), "db", "upgrade"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not (side.exists() and side.stat().st_size > threshold):
            assert time.monotonic() < deadline and upgrade.poll() is None
            time.sleep(0.001)
        time.sleep(delay)
        assert upgrade.poll() is None, "the upgrade ended before it could be killed"
        os.kill(upgrade.pid, signal.SIGKILL)
        upgrade.wait()
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert revision(db) == "0007" and leftovers(db) == []
        assert schema_of(db) == schema and digest_of(db) == values
        rerun = db_upgrade(db)
        assert rerun.returncode == 0, rerun.stderr
        assert "revision before: 0007" in rerun.stdout
        assert f"revision after: {HEAD_REVISION}" in rerun.stdout
        assert revision(db) == HEAD_REVISION and digest_before_later_tables(db) == values
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@contextmanager
def write_lock_for(db: Path, seconds: float) -> Iterator[threading.Thread]:
    """Another connection takes the write lock (BEGIN IMMEDIATE, a row written) now and
    commits after ``seconds``, in a thread; the block runs meanwhile."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO map_rooms (id, name) VALUES (5, 'held')")

    def release() -> None:
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=release)
    holder.start()
    try:
        yield holder
    finally:
        holder.join()


@pytest.mark.slow
def test_db_upgrade_waits_for_another_process_s_write_lock_then_upgrades(tmp_path: Path) -> None:
    db = populated_0007(tmp_path)
    started = time.monotonic()
    with write_lock_for(db, 2.0):
        upgrade = db_upgrade(db)
    assert upgrade.returncode == 0, upgrade.stderr
    assert time.monotonic() - started >= 2.0  # it waited for the commit
    assert upgrade.stdout.splitlines()[1:] == [
        "revision before: 0007",
        f"revision after: {HEAD_REVISION}",
    ]
    assert revision(db) == HEAD_REVISION
    with sqlite3.connect(db) as conn:  # the other process's row is there
        assert conn.execute("SELECT name FROM map_rooms WHERE id = 5").fetchall() == [("held",)]


@pytest.mark.slow
def test_db_upgrade_honours_the_busy_timeout_option(tmp_path: Path) -> None:
    # was: the option was ignored: it waited the 4 s (env.py always waited 30 s) and upgraded
    db = populated_0007(tmp_path)
    with write_lock_for(db, 4.0):
        started = time.monotonic()
        upgrade = db_upgrade(db, "--busy-timeout", "0.5")
        waited = time.monotonic() - started
    assert upgrade.returncode == 1 and "locked" in upgrade.stderr
    assert waited < 3.5
    assert revision(db) == "0007"


@pytest.mark.slow  # another connection holds the lock for seconds
def test_db_upgrade_with_the_lock_held_past_the_timeout_says_so_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The busy timeout shortened to 0.3 s: one error line, exit code 1, the file still at
    0007 with nothing left behind."""
    from memstore.cli import main

    db = populated_0007(tmp_path)
    schema = schema_of(db)
    with write_lock_for(db, 3.0):
        started = time.monotonic()
        code = main(["--db", str(db), "--busy-timeout", "0.3", "db", "upgrade"])
        waited = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 1 and 0.3 <= waited < 2.5
    assert err == (
        f"memstore: error: {db} stayed locked by another process for longer than the busy "
        f"timeout; nothing was written\n"
    )
    assert "revision after" not in out
    assert revision(db) == "0007" and schema_of(db) == schema and leftovers(db) == []


@pytest.mark.slow
def test_two_db_upgrades_at_once_over_several_revisions_both_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first upgrade (0005 to head, in this process) is paused right after alembic ends
    the transaction of its first revision, while a second `memstore db upgrade` runs: with
    the whole upgrade one transaction, the second would wait for the first and find the
    database at head."""
    # was: one transaction per revision: the second upgrade took the database to head in the
    # gap and the first failed, 'Online migration expected to match one row when updating
    # '0006' to '0007''
    from alembic.runtime import migration

    from memstore.cli import main

    db = tmp_path / "old.db"
    new_database_at(db, "0005")
    end_transaction = migration._ProxyTransaction.__exit__
    others: list[subprocess.CompletedProcess[str]] = []

    def end_then_let_another_upgrade_run(self: Any, *exc: Any) -> None:
        end_transaction(self, *exc)
        if not others:
            others.append(db_upgrade(db, "--busy-timeout", "5"))

    monkeypatch.setattr(migration._ProxyTransaction, "__exit__", end_then_let_another_upgrade_run)
    code = main(["--db", str(db), "db", "upgrade"])
    err = capsys.readouterr().err
    assert revision(db) == HEAD_REVISION  # the database itself ends whole, at head
    MemoryStore.open(tmp_path / "new.db").close()
    assert schema_of(db) == schema_of(tmp_path / "new.db")
    assert others and others[0].returncode == 0
    assert code == 0, err


@pytest.mark.slow  # another connection holds the lock for seconds
@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_alembic_current_reads_beside_a_writer_without_waiting(
    tmp_path: Path, journal: str
) -> None:
    db = populated_0007(tmp_path)
    if journal == "wal":
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
    config = quiet_config(db)
    with write_lock_for(db, 2.0):
        started = time.monotonic()
        command.current(config)
        assert time.monotonic() - started < 1.0
    assert "0007" in config.stdout.getvalue().splitlines()  # type: ignore[attr-defined]


def test_an_upgrade_over_several_revisions_that_fails_changes_nothing(tmp_path: Path) -> None:
    """From 0006 to head with a map row 0008 refuses (written with the checks off): the
    whole upgrade is one transaction, so 0007 rolls back with 0008 and the database stays
    at 0006; after the row is mended the same upgrade finishes."""
    db = tmp_path / "old.db"
    new_database_at(db, "0006")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO map_rooms VALUES (1, 'a')")
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("INSERT INTO map_pruned_exits VALUES (1, 'North', 1, 1)")
    with pytest.raises(Exception, match="CHECK constraint failed"):
        command.upgrade(quiet_config(db), "head")
    assert revision(db) == "0006" and leftovers(db) == []
    with sqlite3.connect(db) as conn:
        assert "outcome" not in {row[1] for row in conn.execute("PRAGMA table_info(turn_records)")}
        conn.execute("UPDATE map_pruned_exits SET direction = 'north'")
    command.upgrade(quiet_config(db), "head")
    assert revision(db) == HEAD_REVISION
