"""Review C (install and CLI) and review A defect 4, on `memstore db`, `rom fetch` and `show`.

- `rom fetch --dest` never replaces the database's own file, nor (without --force) an
  existing file that is not a story file; a URL with a control character is one line.
- A downgrade step that drops a table or column holding data needs the confirmation
  (`-x allow_data_loss=true`, `memstore db downgrade --allow-data-loss`); one that drops
  only empty tables and columns, or nothing, does not; the list of what each revision's
  downgrade drops is checked against the migrations themselves.
- `db upgrade` creates a missing folder, names the path when the database is read-only,
  refuses unknown revisions and revisions behind the database's in one line, works on a
  path that is not UTF-8, reports a failed write of its output, and finds a database
  already at head without waiting for another process's write lock.
- `db current` on a database newer than this memstore says to use a newer memstore.
- `show` with no argument is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError

from memstore.migrations_dir import known_revisions
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.read_only_paths import read_only
from tests.test_cli_db_guards import at_revision, locked
from tests.test_installed_upgrade import _memstore, installed  # noqa: F401 - a fixture
from tests.test_migration_0008 import populated_0007

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ROM = Path(os.environ.get("MEMSTORE_ROM", ROOT / "roms" / "zork1.z3"))
needs_rom = pytest.mark.skipif(not ROM.is_file(), reason="no Zork I story file (MEMSTORE_ROM)")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def revision(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.close()
    return row[0] if row else None


def config(db: Path, *x: str) -> tuple[Config, io.StringIO]:
    out = io.StringIO()
    cfg = Config(str(ROOT / "alembic.ini"), stdout=out, cmd_opts=argparse.Namespace(x=list(x)))
    cfg.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return cfg, out


def full_at_head(tmp_path: Path) -> Path:
    """A head database where every table and column a downgrade drops holds data: memories
    (and the change counter's row), a decision, a turn record with its outcome, a map and
    an agent-flagged memory."""
    db = populated_0007(tmp_path)
    command.upgrade(config(db)[0], "head")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE turn_records SET outcome = 'ok'")
        conn.execute(
            "INSERT INTO flagged_memories (content, content_key, importance, turn, location_id, "
            "location_name, score, moves, episode, session_id, created_at) VALUES "
            "('Troll eats swords', 'troll eats swords', 5, 3, 180, 'West', 0, 3, 1, 's', 'c')"
        )
    conn.close()
    return db


def subprocess_memstore(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTORE_")}
    environment["PYTHONPATH"] = str(ROOT)
    if "stdout" not in kwargs:
        kwargs["capture_output"] = True
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "memstore.cli", *argv],
        env=environment,
        cwd=ROOT,
        timeout=120,
        **kwargs,
    )


# --- C1: rom fetch --dest ------------------------------------------------------------------


@needs_rom
@pytest.mark.parametrize("suffix", ["", "-wal"])
@pytest.mark.parametrize("force", [False, True])
def test_rom_fetch_never_writes_over_the_database_s_own_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str, force: bool
) -> None:
    db = tmp_path / "mem.db"
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", _memory())
    dest = Path(f"{db}{suffix}")
    before = digest(dest) if dest.exists() else None
    argv = ["--db", str(db), "rom", "fetch", "--url", ROM.as_uri(), "--dest", str(dest)]
    code, _out, err = run(capsys, *argv, *(["--force"] if force else []))
    assert code == 1
    one_error_line(err, str(dest), "database's own file")
    assert (digest(dest) if dest.exists() else None) == before
    with MemoryStore.open(db) as store:
        assert store.get_persistent_count() == 1


@needs_rom
def test_rom_fetch_refuses_an_existing_file_that_is_not_a_story_file_unless_forced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    argv = ["--db", str(tmp_path / "m.db"), "rom", "fetch", "--url", ROM.as_uri()]
    code, _out, err = run(capsys, *argv, "--dest", str(notes))
    assert code == 1
    one_error_line(err, str(notes), "not a Z-machine story file", "--force")
    assert notes.read_text() == "precious\n"
    other_db = tmp_path / "other.db"  # another memstore database, not this one: SQLite
    MemoryStore.open(other_db).close()
    before = digest(other_db)
    code, _out, err = run(capsys, *argv, "--dest", str(other_db))
    assert code == 1 and digest(other_db) == before
    code, _out, err = run(capsys, *argv, "--dest", str(notes), "--force")
    assert code == 0, err
    assert notes.read_bytes() == ROM.read_bytes()


@needs_rom
def test_rom_fetch_replaces_a_story_file_or_an_empty_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--db", str(tmp_path / "m.db"), "rom", "fetch", "--url", ROM.as_uri()]
    story = tmp_path / "old.z3"
    story.write_bytes(ROM.read_bytes())
    empty = tmp_path / "empty.z3"
    empty.write_bytes(b"")
    for dest in (story, empty, tmp_path / "new" / "zork1.z3"):
        code, out, err = run(capsys, *argv, "--dest", str(dest))
        assert code == 0, err
        assert str(dest) in out and dest.read_bytes() == ROM.read_bytes()


def test_rom_fetch_of_a_url_with_a_control_character_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dest = tmp_path / "zork1.z3"
    code, _out, err = run(capsys, "rom", "fetch", "--url", "http://\x01", "--dest", str(dest))
    assert code == 1
    one_error_line(err, "Could not download")
    assert "internal error" not in err and not dest.exists()


def _memory() -> object:
    from memstore.models import Memory

    return Memory(
        category="DISCOVERY",
        title="Mailbox here",
        text="A small mailbox.",
        episode=1,
        turns="1",
        persistence="permanent",
    )


# --- C2 / C20: downgrades that drop data ---------------------------------------------------


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("0006", "turn_records.outcome"),
        ("0005", "map_rooms"),
        ("0004", "flagged_memories.content_key"),
        ("0003", "store_meta"),
        ("0002", "flagged_memories"),
        ("0001", "synthesis_decisions"),
    ],
)
def test_a_downgrade_that_drops_data_needs_allow_data_loss(
    tmp_path: Path, target: str, named: str
) -> None:
    db = full_at_head(tmp_path)
    before = digest(db)
    cfg, _out = config(db)
    with pytest.raises(CommandError, match="allow_data_loss=true") as refused:
        command.downgrade(cfg, target)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert digest(db) == before and revision(db) == HEAD_REVISION
    cfg, _out = config(db, "allow_data_loss=true")
    command.downgrade(cfg, target)
    assert revision(db) == target


def test_a_downgrade_that_drops_only_empty_tables_and_columns_needs_no_confirmation(
    tmp_path: Path,
) -> None:
    db = tmp_path / "fresh.db"
    MemoryStore.open(db).close()  # no map, no turn records
    cfg, _out = config(db)
    command.downgrade(cfg, "0005")
    assert revision(db) == "0005"
    with pytest.raises(CommandError, match="store_meta"):  # the database's identity row
        command.downgrade(cfg, "0003")
    assert revision(db) == "0005"


def test_the_0008_downgrade_drops_nothing_and_needs_no_confirmation(tmp_path: Path) -> None:
    db = full_at_head(tmp_path)
    command.downgrade(config(db)[0], "0007")
    assert revision(db) == "0007"


def _columns(db: Path) -> set[tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        names = [
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if row[0] != "alembic_version" and not row[0].startswith("sqlite_")
        ]
        found: set[tuple[str, str | None]] = {(name, None) for name in names}
        for name in names:
            found |= {(name, row[1]) for row in conn.execute(f'PRAGMA table_info("{name}")')}
    conn.close()
    return found


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_every_revision_s_listed_drops_are_exactly_what_its_downgrade_drops(
    tmp_path: Path,
) -> None:
    """memstore.downgrade_guard.DOWNGRADE_DROPS against the migrations: each revision is
    upgraded to, then downgraded one step, and what disappeared is compared with the list
    (a dropped table's columns go with it)."""
    from memstore.downgrade_guard import DOWNGRADE_DROPS

    revisions = known_revisions()
    assert set(DOWNGRADE_DROPS) == set(revisions) - {revisions[0]}
    for below, revision_id in zip(revisions, revisions[1:], strict=False):
        db = tmp_path / f"{revision_id}.db"
        cfg, _out = config(db, "allow_data_loss=true")
        command.upgrade(cfg, revision_id)
        at = _columns(db)
        command.downgrade(cfg, below)
        gone = at - _columns(db)
        tables = {table for table, column in gone if column is None}
        columns = {(table, column) for table, column in gone if table not in tables}
        expected = columns | {(table, None) for table in tables}
        assert set(DOWNGRADE_DROPS[revision_id]) == expected, revision_id


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_db_downgrade_needs_allow_data_loss_for_a_step_that_drops_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = full_at_head(tmp_path)
    before = digest(db)
    code, _out, err = run(capsys, "--db", str(db), "db", "downgrade", "0005")
    assert code == 1
    one_error_line(err, "--allow-data-loss", "map_rooms")
    assert digest(db) == before
    code, out, err = run(capsys, "--db", str(db), "db", "downgrade", "0005", "--allow-data-loss")
    assert code == 0, err
    assert "revision after: 0005" in out and revision(db) == "0005"
    code, out, err = run(capsys, "--db", str(db), "db", "upgrade")
    assert code == 0 and revision(db) == HEAD_REVISION


@pytest.mark.slow
def test_an_installed_memstore_downgrades_from_another_directory_when_confirmed(
    installed: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    db = full_at_head(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = _memstore(installed, elsewhere, "--db", str(db), "db", "downgrade", "0005")
    assert refused.returncode == 1 and "--allow-data-loss" in refused.stderr
    assert revision(db) == HEAD_REVISION
    argv = ["--db", str(db), "db", "downgrade", "0005", "--allow-data-loss"]
    done = _memstore(installed, elsewhere, *argv)
    assert done.returncode == 0, done.stderr
    assert revision(db) == "0005"


def test_db_downgrade_to_base_always_needs_allow_data_loss(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "fresh.db"
    at_revision(db, "0001")  # no rows at all
    code, _out, err = run(capsys, "--db", str(db), "db", "downgrade", "base")
    assert code == 1
    one_error_line(err, "--allow-data-loss")
    assert revision(db) == "0001"


def test_a_downgrade_that_drops_write_receipts_asks_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # review H: a receipt is what a running manager asks for after a lost COMMIT answer;
    # dropping it unasked would let that manager store the write twice
    db = tmp_path / "receipt.db"
    MemoryStore.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO write_receipts VALUES ('r1', '2026-11-25T00:00:00+00:00')")
    code, _out, err = run(capsys, "--db", str(db), "db", "downgrade", "0010")
    assert code == 1
    one_error_line(err, "--allow-data-loss", "write_receipts (1 row)")
    assert revision(db) == HEAD_REVISION


def test_db_downgrade_without_a_revision_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", str(tmp_path / "a.db"), "db", "downgrade")
    assert exited.value.code == 2


# --- C6: a missing folder, a read-only database --------------------------------------------


def test_db_upgrade_creates_a_missing_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "no" / "such" / "folder" / "memories.db"
    code, out, err = run(capsys, "--db", str(db), "db", "upgrade")
    assert code == 0, err
    assert f"revision after: {HEAD_REVISION}" in out and revision(db) == HEAD_REVISION


def test_db_upgrade_of_a_read_only_file_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = at_revision(tmp_path / "old.db", "0001")
    before = digest(db)
    with read_only(db):
        code, _out, err = run(capsys, "--db", str(db), "db", "upgrade")
    assert code == 1
    one_error_line(err, f"read-only database: {db}")
    assert digest(db) == before


def test_db_upgrade_in_a_read_only_folder_names_the_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    old = at_revision(folder / "old.db", "0001")
    head = at_revision(folder / "head.db", "head")
    new = folder / "new.db"
    with read_only(folder):
        for db in (old, new):
            code, _out, err = run(capsys, "--db", str(db), "db", "upgrade")
            assert code == 1, db
            one_error_line(err, f"read-only database: {db}")
        # a database already at head needs no write: reported, not refused
        code, out, err = run(capsys, "--db", str(head), "db", "upgrade")
        assert code == 0, err
        assert f"revision after: {HEAD_REVISION}" in out
    assert revision(old) == "0001" and not new.exists()


def test_db_upgrade_under_a_read_only_folder_it_cannot_create_names_the_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "missing" / "memories.db"
    with read_only(folder):
        code, _out, err = run(capsys, "--db", str(db), "db", "upgrade")
    assert code == 1
    one_error_line(err, str(db))
    assert "SQLITE_CANTOPEN" not in err and not db.parent.exists()


# --- C7: a database newer than this memstore ------------------------------------------------


def test_db_current_on_a_newer_database_says_to_use_a_newer_memstore(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = at_revision(tmp_path / "new.db", "head")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    conn.close()
    code, out, _err = run(capsys, "--db", str(db), "db", "current")
    assert code == 0
    [line] = [line for line in out.splitlines() if line.startswith("0099")]
    assert "newer memstore" in line and "db upgrade" not in line, line


# --- C8 / C9: revisions db upgrade cannot go to ---------------------------------------------


@pytest.mark.parametrize("given", ["", f"{HEAD_REVISION}+1", "  "])
def test_db_upgrade_to_an_unknown_revision_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: str
) -> None:
    db = at_revision(tmp_path / "a.db", "0005")
    before = digest(db)
    code, _out, err = run(capsys, "--db", str(db), "db", "upgrade", given)
    assert code == 1
    one_error_line(err, "unknown revision")
    assert digest(db) == before


@pytest.mark.parametrize("given", ["0001", "base", "0005", "head-1"])
def test_db_upgrade_to_a_revision_behind_the_database_s_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: str
) -> None:
    db = at_revision(tmp_path / "a.db", "head")
    before = digest(db)
    code, _out, err = run(capsys, "--db", str(db), "db", "upgrade", given)
    assert code == 1
    one_error_line(err, "behind", HEAD_REVISION)
    assert digest(db) == before


def test_db_upgrade_to_the_database_s_own_revision_is_done(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = at_revision(tmp_path / "a.db", "0005")
    for given in ("0005", "0005+0"):
        code, out, err = run(capsys, "--db", str(db), "db", "upgrade", given)
        assert code == 0, err
        assert "revision after: 0005" in out


# --- C10: a path that is not UTF-8 ----------------------------------------------------------


@pytest.mark.slow
def test_db_upgrade_and_current_work_on_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    db = os.fsencode(tmp_path) + b"/\xff.db"
    done = subprocess_memstore("--db", os.fsdecode(db), "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert os.path.exists(db)
    done = subprocess_memstore("--db", os.fsdecode(db), "db", "current")
    assert done.returncode == 0, done.stderr
    assert f"{HEAD_REVISION} (head)".encode() in done.stdout


# --- C18: output that cannot be written -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["db", "history"], ["db", "upgrade"]])
def test_db_commands_whose_output_cannot_be_written_exit_1(tmp_path: Path, argv: list[str]) -> None:
    db = tmp_path / "a.db"
    with open("/dev/full", "wb") as full:
        done = subprocess_memstore("--db", str(db), *argv, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], lines


# --- C16: show without a location -----------------------------------------------------------


def test_show_without_a_location_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "a.db"
    MemoryStore.open(db).close()
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--db", str(db), "show")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "give a location number, or --flagged" in err


# --- A4: a database already at head under another process's write lock ----------------------


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_db_upgrade_of_a_database_at_head_does_not_wait_for_a_writer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, journal: str
) -> None:
    db = at_revision(tmp_path / "head.db", "head")
    if journal == "wal":
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    with locked(db):
        started = time.monotonic()
        code, out, err = run(capsys, "--db", str(db), "--busy-timeout", "5", "db", "upgrade")
        elapsed = time.monotonic() - started
    assert code == 0, err
    assert f"revision after: {HEAD_REVISION}" in out and "nothing to do" in out
    assert elapsed < 4, elapsed
    assert revision(db) == HEAD_REVISION


def test_db_downgrade_on_postgresql_needs_allow_data_loss_for_a_map_and_not_without_one(
    capsys: pytest.CaptureFixture[str], pg_database: str
) -> None:
    from sqlalchemy import create_engine

    url = pg_database
    code, _out, err = run(capsys, "--db", url, "db", "upgrade")
    assert code == 0, err
    code, out, err = run(capsys, "--db", url, "db", "upgrade")  # at head: nothing to do
    assert code == 0 and "nothing to do" in out, err
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO map_rooms (id, name) VALUES (180, 'West of House')")
    code, _out, err = run(capsys, "--db", url, "db", "downgrade", "0005")
    assert code == 1
    one_error_line(err, "map_rooms (1 row)", "--allow-data-loss")
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM map_rooms")
    code, out, err = run(capsys, "--db", url, "db", "downgrade", "0005")  # the map is empty
    assert code == 0, err
    assert "revision after: 0005" in out
    engine.dispose()
