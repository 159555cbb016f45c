"""alembic's env.py guards: it refuses the files MemoryStore.open refuses, says which database
and revisions it works on, and refuses a downgrade to base (every memory deleted) unless told
``-x allow_data_loss=true``."""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError

from memstore.errors import NotAMemstoreDatabase, SchemaOutOfDate
from memstore.migrations_dir import known_revisions
from memstore.models import Memory
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore

#: schema migrations through alembic: CI runs them; the quick loop leaves them out
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ALEMBIC = Path(sys.executable).parent / "alembic"


def config(db: Path | None = None, *x: str) -> tuple[Config, io.StringIO]:
    """An alembic Config for ``db`` (or none: env.py then uses memstore's configuration),
    with ``-x`` arguments, and the buffer its messages go to."""
    out = io.StringIO()
    cfg = Config(str(ROOT / "alembic.ini"), stdout=out, cmd_opts=argparse.Namespace(x=list(x)))
    if db is not None:
        cfg.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return cfg, out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def revision(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()
    return other


@pytest.fixture
def populated(tmp_path: Path) -> Path:
    db = tmp_path / "memories.db"
    with MemoryStore.open(db) as store:
        store.add_memory(
            64,
            "West of House",
            Memory(
                category="DISCOVERY",
                title="Mailbox here",
                text="A small mailbox holds a leaflet.",
                episode=1,
                turns="1",
                persistence="permanent",
            ),
        )
    return db


def run_alembic(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The alembic command's exit code and its output (it reports FAILED on stdout)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTORE_")}
    environment.update(env or {})
    result = subprocess.run(
        [str(ALEMBIC), "-c", str(ROOT / "alembic.ini"), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stdout + result.stderr


# --- files that are not memstore's ------------------------------------------------------------


def test_upgrade_refuses_a_foreign_sqlite_database_and_leaves_it_untouched(
    foreign: Path, tmp_path: Path
) -> None:
    before = digest(foreign)
    cfg, _out = config(foreign)
    with pytest.raises(CommandError, match="not a memstore database"):
        command.upgrade(cfg, "head")
    assert digest(foreign) == before and tables(foreign) == {"users"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_x_db_names_the_database_and_a_foreign_one_is_refused(foreign: Path) -> None:
    before = digest(foreign)
    cfg, _out = config(None, f"db={foreign}")
    with pytest.raises(CommandError, match="not a memstore database"):
        command.upgrade(cfg, "head")
    assert digest(foreign) == before


def test_memstore_db_names_the_database_and_a_foreign_one_is_refused(
    foreign: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = digest(foreign)
    monkeypatch.setenv("MEMSTORE_DB", str(foreign))
    cfg, _out = config(None)
    with pytest.raises(CommandError, match="not a memstore database"):
        command.upgrade(cfg, "head")
    assert digest(foreign) == before


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("my shopping list\n")
    cfg, _out = config(notes)
    with pytest.raises(CommandError, match="not a SQLite database"):
        command.upgrade(cfg, "head")
    assert notes.read_text() == "my shopping list\n"


def test_an_empty_version_table_beside_foreign_tables_is_not_memstores(foreign: Path) -> None:
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    conn.close()
    before = digest(foreign)
    cfg, _out = config(foreign)
    with pytest.raises(CommandError, match="not a memstore database"):
        command.upgrade(cfg, "head")
    assert digest(foreign) == before
    with pytest.raises(NotAMemstoreDatabase):
        MemoryStore.open(foreign)


def test_the_alembic_command_refuses_a_foreign_file_in_one_line(foreign: Path) -> None:
    before = digest(foreign)
    code, output = run_alembic(foreign.parent, "-x", f"db={foreign}", "upgrade", "head")
    assert code != 0 and "Traceback" not in output
    [failed] = [line for line in output.splitlines() if line.startswith("FAILED")]
    assert "not a memstore database" in failed and "alembic did nothing" in failed
    assert digest(foreign) == before and tables(foreign) == {"users"}
    code, output = run_alembic(foreign.parent, "upgrade", "head", env={"MEMSTORE_DB": str(foreign)})
    assert code != 0 and "not a memstore database" in output
    assert digest(foreign) == before


# --- what it works on -------------------------------------------------------------------------


def test_upgrade_says_which_database_and_the_revisions_before_and_after(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    command.upgrade(config(db)[0], "0003")
    cfg, out = config(db)
    command.upgrade(cfg, "head")
    lines = out.getvalue().splitlines()
    assert f"database: {db.resolve()}" in lines
    assert "revision before: 0003" in lines
    assert f"revision after: {HEAD_REVISION}" in lines


def test_the_alembic_command_prints_the_database_and_revisions(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    code, output = run_alembic(tmp_path, "-x", f"db={db}", "upgrade", "head")
    assert code == 0, output
    lines = output.splitlines()
    assert f"database: {db.resolve()}" in lines
    assert "revision before: base" in lines
    assert f"revision after: {HEAD_REVISION}" in lines
    with MemoryStore.open(db) as store:
        assert store.get_status()["schema_revision"] == HEAD_REVISION


def test_an_existing_memstore_database_is_upgraded(populated: Path) -> None:
    cfg, _out = config(populated, "allow_data_loss=true")  # the downgrade deletes stored data
    command.downgrade(cfg, "0003")
    command.upgrade(cfg, "head")
    assert revision(populated) == HEAD_REVISION
    with MemoryStore.open(populated) as store:
        assert [m.title for m in store.memories(64)] == ["Mailbox here"]


# --- downgrading below the first revision -----------------------------------------------------


@pytest.mark.parametrize("target", ["base", f"-{len(known_revisions())}", "0002-2"])
def test_downgrade_to_base_is_refused_without_allow_data_loss(populated: Path, target: str) -> None:
    before = digest(populated)
    cfg, _out = config(populated)
    with pytest.raises(CommandError, match="allow_data_loss=true"):
        command.downgrade(cfg, target)
    assert digest(populated) == before and revision(populated) == HEAD_REVISION
    with MemoryStore.open(populated) as store:
        assert store.get_persistent_count() == 1


def test_downgrade_to_the_first_revision_needs_confirmation_when_it_deletes_data(
    populated: Path,
) -> None:
    """Not only `base`: every step that drops a table or column holding data is confirmed
    (memstore.downgrade_guard); the memory's change-counter stamps and store_meta go here."""
    before = digest(populated)
    cfg, _out = config(populated)
    with pytest.raises(CommandError, match=r"store_meta.*allow_data_loss=true"):
        command.downgrade(cfg, "0001")
    assert digest(populated) == before and revision(populated) == HEAD_REVISION
    cfg, _out = config(populated, "allow_data_loss=true")
    command.downgrade(cfg, "0001")
    assert revision(populated) == "0001"
    with pytest.raises(SchemaOutOfDate, match="0001"):
        MemoryStore.open(populated)


def test_allow_data_loss_downgrades_to_base_and_open_says_at_base(populated: Path) -> None:
    cfg, out = config(populated, "allow_data_loss=true")
    command.downgrade(cfg, "base")
    assert tables(populated) == {"alembic_version"} and revision(populated) is None
    assert f"revision before: {HEAD_REVISION}" in out.getvalue().splitlines()
    assert "revision after: base" in out.getvalue().splitlines()
    before = digest(populated)
    with pytest.raises(SchemaOutOfDate, match=r"at base: run `alembic upgrade head`"):
        MemoryStore.open(populated)
    assert digest(populated) == before
    # a database at base is memstore's: alembic upgrades it again
    cfg, _out = config(populated)
    command.upgrade(cfg, "head")
    with MemoryStore.open(populated) as store:
        assert store.get_persistent_count() == 0


def test_the_alembic_command_refuses_downgrade_base_then_allows_it(populated: Path) -> None:
    code, output = run_alembic(populated.parent, "-x", f"db={populated}", "downgrade", "base")
    assert code != 0 and "allow_data_loss=true" in output and "Traceback" not in output
    assert revision(populated) == HEAD_REVISION
    code, output = run_alembic(
        populated.parent,
        "-x",
        f"db={populated}",
        "-x",
        "allow_data_loss=true",
        "downgrade",
        "base",
    )
    assert code == 0, output
    assert revision(populated) is None and "revision after: base" in output.splitlines()


# --- how it takes the database's lock -------------------------------------------------------


def test_current_reads_without_waiting_for_another_processes_write(tmp_path: Path) -> None:
    """`current` only reads: it must not queue behind a writer for the busy timeout (30 s),
    as it would if it began its transaction for writing as an upgrade does."""
    db = tmp_path / "busy.db"
    MemoryStore.open(db).close()  # WAL: a reader never waits for a writer
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE locations SET visit_count = visit_count + 1")
    try:
        cfg, out = config(db)
        command.current(cfg)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert f"{HEAD_REVISION} (head)" in out.getvalue()


@pytest.mark.parametrize("given", ["soon", "-1", "nan", "inf"])
def test_a_busy_timeout_that_is_not_a_number_of_seconds_is_refused(
    tmp_path: Path, given: str
) -> None:
    db = tmp_path / "new.db"
    cfg, _out = config(db, f"busy_timeout={given}")
    with pytest.raises(CommandError, match="busy_timeout must be a number of seconds"):
        command.upgrade(cfg, "head")
    assert not db.exists()  # refused before the file was touched
