"""An installed (not editable) memstore upgrades a database from any directory:
`memstore db upgrade` runs the migrations shipped inside the package."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command

from memstore.schema import HEAD_REVISION
from tests.test_migration_0003 import alembic_config, populate_0002

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _revision(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memstore built and installed (no dependencies) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"pip install . failed:\n{done.stderr[-2000:]}")
    assert (target / "memstore" / "migrations" / "versions" / "0001_initial.py").is_file()
    return target


def _memstore(installed: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); import memstore.cli as cli; "
        "assert cli.__file__.startswith(sys.path[0]), cli.__file__; "
        "sys.exit(cli.main(sys.argv[1:]))"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTORE_")}
    environment["PYTHONPATH"] = ""
    return subprocess.run(
        [sys.executable, "-c", code, str(installed), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def test_an_installed_memstore_upgrades_a_0001_database_from_another_directory(
    installed: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.db"
    command.upgrade(alembic_config(db), "0002")
    populate_0002(db)
    command.downgrade(alembic_config(db, allow_data_loss=True), "0001")  # deletes rows
    assert _revision(db) == "0001"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _memstore(installed, elsewhere, "--db", str(db), "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert "revision before: 0001" in done.stdout
    assert f"revision after: {HEAD_REVISION}" in done.stdout
    assert _revision(db) == HEAD_REVISION
    current = _memstore(installed, elsewhere, "--db", str(db), "db", "current")
    assert current.returncode == 0 and HEAD_REVISION in current.stdout
    history = _memstore(installed, elsewhere, "db", "history")
    assert history.returncode == 0 and "0001" in history.stdout
    shown = _memstore(installed, elsewhere, "--db", str(db), "show", "180")
    assert shown.returncode == 0 and "Mailbox is empty" in shown.stdout


def test_db_upgrade_refuses_a_file_that_is_not_memstores(installed: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    before = other.read_bytes()
    done = _memstore(installed, tmp_path, "--db", str(other), "db", "upgrade")
    assert done.returncode == 1 and "not a memstore database" in done.stderr
    assert done.stderr.count("\n") == 1 and other.read_bytes() == before
