"""MemstoreConfig refuses settings no part of memstore could keep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from memstore import config
from memstore.config import MemstoreConfig, load_config


@pytest.mark.parametrize("timeout", [float("inf"), 1e10, float("nan"), 0, -1])
def test_a_timeout_no_call_could_keep_is_refused(timeout: float) -> None:
    """Was: ``timeout = inf`` was accepted and every LLM call then failed without reaching
    the server (a provider_error: "cannot convert float NaN to integer")."""
    with pytest.raises(ValidationError, match="timeout"):
        MemstoreConfig(timeout=timeout)


def test_a_timeout_of_a_day_is_kept() -> None:
    assert MemstoreConfig(timeout=86_400).timeout == 86_400


def test_a_pyproject_is_parsed_again_only_when_its_bytes_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``MemoryStore.open`` reads ``[tool.memstore]``; a file whose bytes did not
    change is not parsed again, and one rewritten within the same modification time and
    size is (a cache keyed by the file's status would have kept the old settings)."""
    pyproject = tmp_path / "pyproject.toml"
    monkeypatch.delenv("MEMSTORE_MODEL", raising=False)
    pyproject.write_text('[tool.memstore]\nmodel = "model-a"\n', encoding="utf-8")
    parsed: list[str] = []
    real_loads = config.tomllib.loads

    def counting_loads(text: str) -> dict[str, object]:
        parsed.append(text)
        return real_loads(text)

    monkeypatch.setattr(config.tomllib, "loads", counting_loads)
    first = load_config(pyproject)
    second = load_config(pyproject)
    assert first.model == second.model == "model-a"
    assert len(parsed) == 1
    stat = pyproject.stat()
    pyproject.write_text('[tool.memstore]\nmodel = "model-b"\n', encoding="utf-8")
    os.utime(pyproject, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert pyproject.stat().st_size == stat.st_size
    assert load_config(pyproject).model == "model-b"
    assert len(parsed) == 2


def test_a_setting_the_environment_overrode_once_is_the_file_s_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one load did with the file's settings changes nothing the next load sees."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.memstore]\nmodel = "model-a"\n', encoding="utf-8")
    monkeypatch.setenv("MEMSTORE_MODEL", "from-the-environment")
    assert load_config(pyproject).model == "from-the-environment"
    monkeypatch.delenv("MEMSTORE_MODEL")
    assert load_config(pyproject).model == "model-a"


def test_a_pyproject_that_cannot_be_read_is_refused_every_time(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.memstore]\nmodel = "a\n', encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ValueError, match="cannot read"):
            load_config(pyproject)


def test_a_relative_db_in_the_pyproject_is_beside_that_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review S5 B F1: the path was taken from the working directory, so a command run in
    a subfolder of the project read "no database", and one that writes created a second,
    empty database there."""
    monkeypatch.delenv("MEMSTORE_DB", raising=False)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.memstore]\ndb = "game_files/memories.db"\n', encoding="utf-8"
    )
    deeper = tmp_path / "sub" / "deeper"
    deeper.mkdir(parents=True)
    expected = str(tmp_path.resolve() / "game_files" / "memories.db")
    for where in (tmp_path, deeper):
        monkeypatch.chdir(where)
        assert load_config().db == expected


@pytest.mark.parametrize(
    "db",
    [
        "/abs/memories.db",
        "sqlite:////abs/m.db",
        "sqlite:///:memory:",
        "postgresql+psycopg://h/zork",
        "sqlite://",
        "~/m.db",
    ],
)
def test_an_absolute_path_or_a_url_in_the_pyproject_is_kept_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    monkeypatch.delenv("MEMSTORE_DB", raising=False)
    (tmp_path / "pyproject.toml").write_text(f'[tool.memstore]\ndb = "{db}"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_config().db == db


def test_a_relative_db_from_the_environment_or_an_argument_follows_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.memstore]\ndb = "a.db"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMSTORE_DB", "from-env.db")
    assert load_config().db == "from-env.db"
    assert load_config(db="given.db").db == "given.db"


@pytest.mark.parametrize(
    ("db", "expected"),
    [
        ("sqlite:///data/m.db", "sqlite:///{root}/data/m.db"),
        ("sqlite+pysqlite:///m.db?timeout=5", "sqlite+pysqlite:///{root}/m.db?timeout=5"),
    ],
)
def test_a_relative_sqlite_url_in_the_pyproject_is_beside_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str, expected: str
) -> None:
    # review S5 D F7: written as a URL, the path was still from the working directory
    monkeypatch.delenv("MEMSTORE_DB", raising=False)
    (tmp_path / "pyproject.toml").write_text(f'[tool.memstore]\ndb = "{db}"\n', encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert load_config().db == expected.format(root=tmp_path.resolve())


def test_a_pyproject_that_is_a_symbolic_link_puts_the_db_beside_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review S5 D F7: the path was resolved beside the link's target, outside the project
    monkeypatch.delenv("MEMSTORE_DB", raising=False)
    shared = tmp_path / "shared_cfg"
    shared.mkdir()
    (shared / "pyproject.toml").write_text('[tool.memstore]\ndb = "data/m.db"\n', encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").symlink_to(shared / "pyproject.toml")
    monkeypatch.chdir(project)
    assert load_config().db == str(project.resolve() / "data" / "m.db")


@pytest.mark.parametrize("name", ["q?mark", "pct%41dir", "space dir", "hash#dir"])
def test_a_relative_sqlite_url_beside_a_folder_with_url_characters_names_that_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # review S5 E F5: the folder went into the URL unquoted ("q?mark" opened a database
    # named "q" in the parent folder, "pct%41dir" one in a new folder "pctAdir")
    from memstore.connection import resolve_target

    monkeypatch.delenv("MEMSTORE_DB", raising=False)
    project = tmp_path / name
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.memstore]\ndb = "sqlite:///data/m.db"\n', encoding="utf-8"
    )
    monkeypatch.chdir(project)
    assert resolve_target(load_config().db).path == project.resolve() / "data" / "m.db"
