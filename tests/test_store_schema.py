"""The schema: alembic's migrations and the library's metadata agree, and open() guards files."""

from __future__ import annotations

import argparse
import hashlib
import socket
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from memstore.connection import PAGE_SIZE
from memstore.errors import (
    DatabaseUnavailable,
    NotAMemstoreDatabase,
    SchemaTooNew,
    UnsupportedDatabase,
)
from memstore.migrations_dir import known_revisions
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from tests.conftest import note

ROOT = Path(__file__).resolve().parents[1]


def alembic_config(db: Path) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{db}")
    return config


def _elements(sql: str | None) -> tuple[str, ...]:
    """A CREATE statement as its sorted column and constraint definitions.

    alembic's batch mode (a table rebuilt to add columns) writes the same constraints in
    another order and quotes the table's name: the schema is the same.
    """
    if sql is None:
        return ()
    head, _, body = sql.partition("(")
    parts = [part.strip() for part in body.rsplit(")", 1)[0].split(", \n")]
    return (head.replace('"', "").strip(), *sorted(parts))


def schema_of(db: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return sorted((kind, name, _elements(sql)) for kind, name, sql in rows)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_alembic_upgrade_head_and_open_give_the_same_schema(tmp_path: Path) -> None:
    migrated, created = tmp_path / "migrated.db", tmp_path / "created.db"
    command.upgrade(alembic_config(migrated), "head")
    MemoryStore.open(created).close()
    assert schema_of(migrated) == schema_of(created)
    for db in (migrated, created):  # `memstore db upgrade` makes a new file as open() does
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA page_size").fetchone() == (PAGE_SIZE,)
    with sqlite3.connect(created) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]


def test_head_revision_constant_is_alembics_head() -> None:
    script = ScriptDirectory.from_config(alembic_config(Path("unused.db")))
    assert script.get_current_head() == HEAD_REVISION
    history = [rev.revision for rev in script.walk_revisions()]
    assert tuple(reversed(history)) == known_revisions()


def test_metadata_has_no_drift_from_migrations(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from memstore.schema import metadata

    db = tmp_path / "migrated.db"
    command.upgrade(alembic_config(db), "head")
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == []


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_downgrade_to_base_and_upgrade_again(tmp_path: Path) -> None:
    db = tmp_path / "cycle.db"
    config = alembic_config(db)
    command.upgrade(config, "head")
    before = schema_of(db)
    config.cmd_opts = argparse.Namespace(x=["allow_data_loss=true"])  # base deletes everything
    command.downgrade(config, "base")
    assert [row for row in schema_of(db) if "alembic_version" not in row[1]] == []
    command.upgrade(config, "head")
    assert schema_of(db) == before


def test_text_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("my shopping list\n")
    before = digest(notes)
    with pytest.raises(NotAMemstoreDatabase, match="not a SQLite database"):
        MemoryStore.open(notes)
    assert digest(notes) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    before = digest(other)
    with pytest.raises(NotAMemstoreDatabase, match="not a memstore database"):
        MemoryStore.open(other)
    assert digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_unknown_newer_revision_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    MemoryStore.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(SchemaTooNew, match="9999"):
        MemoryStore.open(db)


def test_empty_file_becomes_a_new_database(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    with MemoryStore.open(db) as store:
        assert store.get_status()["schema_revision"] == HEAD_REVISION


def test_a_new_database_has_small_pages_and_an_older_one_keeps_its_own(tmp_path: Path) -> None:
    """New files get PAGE_SIZE pages (less written a durable write); a database made
    with SQLite's default 4 KiB pages (every memstore database before) keeps them and
    works as before."""
    new, older = tmp_path / "new.db", tmp_path / "older.db"
    with MemoryStore.open(new) as store:
        store.add_memory(1, "Room", note("Small pages"))
    with sqlite3.connect(older) as conn:
        conn.execute("PRAGMA page_size = 4096")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE made_first (x)")  # fixes the page size, as a file would
        conn.execute("DROP TABLE made_first")
    with MemoryStore.open(older) as store:
        store.add_memory(1, "Room", note("Default pages"))
        assert store.supersede_memory(1, "Room", "Default pages", note("Still default"))
    sizes = {}
    for db in (new, older):
        with sqlite3.connect(db) as conn:
            sizes[db.name] = conn.execute("PRAGMA page_size").fetchone()[0]
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert sizes == {"new.db": PAGE_SIZE, "older.db": 4096}
    assert PAGE_SIZE == 1024


def test_sqlalchemy_urls_are_accepted(tmp_path: Path) -> None:
    with MemoryStore.open(f"sqlite:///{tmp_path / 'url.db'}") as store:
        assert store.target.path == (tmp_path / "url.db").resolve()
    with MemoryStore.open("sqlite://") as store:
        assert store.target.path is None
        assert store.get_persistent_count() == 0


def test_a_url_of_another_database_is_refused() -> None:
    with pytest.raises(UnsupportedDatabase, match="'mysql'"):
        MemoryStore.open("mysql://localhost/memories")
    with pytest.raises(UnsupportedDatabase, match="psycopg"):
        MemoryStore.open("postgresql+asyncpg://localhost/memories")


def test_a_server_that_is_not_there_is_one_line() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DatabaseUnavailable, match="cannot connect to postgresql") as caught:
        MemoryStore.open(f"postgresql://memstore:secret@127.0.0.1:{port}/memories")
    assert "\n" not in str(caught.value)
    assert "secret" not in str(caught.value)  # the password is never printed


def test_missing_parent_folder_is_created(tmp_path: Path) -> None:
    db = tmp_path / "game_files" / "nested" / "memories.db"
    with MemoryStore.open(db):
        pass
    assert db.is_file()


def test_a_new_databases_ddl_is_compiled_once_a_process_not_once_an_engine() -> None:
    # every engine has its own dialect object; the cache was keyed by it and never hit
    from sqlalchemy import create_engine

    from memstore.ddl import ephemeral_ddl, persistent_ddl

    first, second = (create_engine("sqlite://").dialect for _ in range(2))
    assert first is not second
    assert persistent_ddl(first) is persistent_ddl(second)
    assert ephemeral_ddl(first) == ephemeral_ddl(second)
    assert any(statement.startswith("CREATE TABLE") for statement in persistent_ddl(first))
