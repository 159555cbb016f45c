"""Read-only databases: read commands work, write commands say so in one line.

As root, permission bits do not stop a write: the tests make the folder or the file
immutable (``chattr +i``) instead, and as another user they remove the write bits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.errors import ReadOnlyDatabase
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory
from tests.read_only_paths import lock, unlock


@pytest.fixture
def database(tmp_path: Path, mem: MakeMemory) -> Path:
    db = tmp_path / "ro" / "memories.db"
    with MemoryStore.open(db) as store:
        store.add_memory(15, "West of House", mem("Mailbox"))
        store.add_memory(15, "West of House", mem("Leaflet", turns="6"))
        (tmp_path / "Memories.md").write_text(
            render_memories_md(*store.export_snapshot()), encoding="utf-8"
        )
    return db


@pytest.fixture(params=["folder", "file"])
def locked(request: pytest.FixtureRequest, database: Path) -> Iterator[Path]:
    target = database.parent if request.param == "folder" else database
    lock(target)
    try:
        yield database
    finally:
        unlock(target)


def test_read_commands_work_on_a_read_only_database(
    locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(locked)
    reviewed = locked.parent.parent / "Memories.md"
    for argv in (
        ("stats",),
        ("show", "15"),
        ("history", "15", "Mailbox"),
        ("check",),
        ("export", "--check", "--out", str(reviewed)),
        ("import", str(reviewed)),
    ):
        code, out, err = run(capsys, "--db", db, *argv)
        assert (code, err) == (0, ""), (argv, out, err)
    assert "Mailbox" in run(capsys, "--db", db, "show", "15")[1]


def test_a_write_command_on_a_read_only_database_says_so_in_one_line(
    locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviewed = locked.parent.parent / "Memories.md"
    reviewed.write_text(
        reviewed.read_text(encoding="utf-8").replace("Mailbox.", "Mailbox, reviewed."),
        encoding="utf-8",
    )
    code, _out, err = run(capsys, "--db", str(locked), "import", str(reviewed), "--apply")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"memstore: error: read-only database: {locked}")
    assert "[SQL" not in err and "INSERT" not in err and "UPDATE" not in err


def test_a_store_opened_read_only_reads_and_refuses_writes(database: Path, mem: MakeMemory) -> None:
    with MemoryStore.open(database, read_only=True) as store:
        assert [m.title for m in store.memories(15)] == ["Mailbox", "Leaflet"]
        with pytest.raises(ReadOnlyDatabase, match="read-only database"):
            store.add_memory(15, "West of House", mem("Window"))
        assert store.get_persistent_count() == 2
    with MemoryStore.open(database) as store:
        assert store.get_persistent_count() == 2


def test_opening_a_read_only_database_for_writing_is_refused(locked: Path, mem: MakeMemory) -> None:
    with pytest.raises(ReadOnlyDatabase, match=f"read-only database: {locked}"):
        MemoryStore.open(locked)
