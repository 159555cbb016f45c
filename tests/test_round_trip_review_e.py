"""Review E of the round trip (a new user attacking export and import): a new location
section the import would store is an edit an export must not overwrite; a file compared
2-way (another database's export, or this one's restored from a backup) has no deletions
in it, so neither the export's refusal nor an import with --prune may take the memories
only the database has for the reviewer's removals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West of House", mem("Mailbox here", text="A small mailbox."))
        store.add_memory(79, "Kitchen", mem("Sack on table", text="Brown sack."))
        for n in range(12):  # so that one deletion stays under --prune's 10% guard
            store.add_memory(27, "Living Room", mem(f"Fact {n}", text="Known."))
    return db_path


def titles(db: Path, location_id: int) -> list[str]:
    with MemoryStore.open(db, read_only=True) as store:
        return [m.title for m in store.memories(location_id)]


def test_export_refuses_a_file_whose_new_location_section_was_not_imported(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    assert run(capsys, "--db", str(db), "export", "--out", str(out))[0] == 0
    with out.open("a", encoding="utf-8") as f:
        f.write("\n## Location 90: Attic\n**Visits:** 2 | **Episodes:** 1\n\n### Memories\n\n---\n")
    edited = out.read_text(encoding="utf-8")

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))

    assert code == 1
    one_error_line(err, str(out), "1 edit", "1 new location", "memstore import", "--force")
    assert out.read_text(encoding="utf-8") == edited
    assert run(capsys, "--db", str(db), "import", str(out), "--apply")[0] == 0
    assert run(capsys, "--db", str(db), "export", "--out", str(out))[0] == 0
    assert "## Location 90: Attic" in out.read_text(encoding="utf-8")


@pytest.fixture
def restored(db: Path, tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]):
    """A file exported after the backup, then the backup restored and an agent learning
    'Window ajar' in it: the file's base is past the database's counter (2-way)."""
    backup = tmp_path / "backup.db"
    shutil.copy(db, backup)
    with MemoryStore.open(db) as store:
        store.add_memory(79, "Kitchen", mem("Knife here", text="A knife."))
    out = tmp_path / "M.md"
    assert run(capsys, "--db", str(db), "export", "--out", str(out))[0] == 0
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, db)
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", mem("Window ajar", text="Learned since."))
    return out


def test_a_two_way_export_refusal_counts_no_deletion_and_never_advises_prune(
    capsys: pytest.CaptureFixture[str], db: Path, restored: Path
) -> None:
    before = restored.read_bytes()

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(restored))

    assert code == 1
    line = one_error_line(err, str(restored), "2 edit", "1 added", "1 missing", "--force")
    assert "deleted" not in line and "--prune" not in line
    assert restored.read_bytes() == before


def test_a_two_way_prune_is_refused_without_force_and_deletes_nothing(
    capsys: pytest.CaptureFixture[str], db: Path, restored: Path
) -> None:
    code, _out, err = run(capsys, "--db", str(db), "import", str(restored), "--apply", "--prune")

    assert code == 1
    one_error_line(err, "2-way", "--prune would delete 1", "Window ajar", "--force")
    assert "Window ajar" in titles(db, 64)
    assert "Knife here" not in titles(db, 79)  # nothing applied

    code, _out, err = run(capsys, "--db", str(db), "import", str(restored), "--apply")
    assert code == 0, err
    assert "Window ajar" in titles(db, 64) and "Knife here" in titles(db, 79)

    code, _out, err = run(
        capsys, "--db", str(db), "import", str(restored), "--apply", "--prune", "--force"
    )
    assert code == 0, err
    assert "Window ajar" not in titles(db, 64)  # asked for by name with --force


def test_a_two_way_file_whose_only_edit_is_a_removal_is_not_overwritten(
    capsys: pytest.CaptureFixture[str], db: Path, restored: Path
) -> None:
    """Review D, D2: a removal in a file compared 2-way is not told from a memory the
    database learned since, but overwriting the file would lose it: refused."""
    run(capsys, "--db", str(db), "import", str(restored), "--apply")  # takes 'Knife here'
    edited = restored.read_text(encoding="utf-8")
    block = edited[edited.index("**[", edited.index("Fact 3") - 40) :]
    edited = edited.replace(block.split("\n\n")[0] + "\n\n", "", 1)
    assert "Fact 3" not in edited
    restored.write_text(edited, encoding="utf-8")

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(restored))

    assert code == 1
    line = one_error_line(err, str(restored), "missing from the file", "--force")
    assert "--prune" not in line
    assert restored.read_text(encoding="utf-8") == edited
