"""What `memstore export`, `memstore demo`, `memstore import` and `memstore map import-json`
refuse so that no stored data is lost: an output that is the database's own file or the
other output's file, a Memories.md holding a reviewer's edits that were never imported,
and an input that is not a regular file or is too large to be a memstore file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memstore.cli_args import MAX_INPUT_BYTES
from memstore.errors import FileChanged
from memstore.export_file import FileState, file_state, write_atomically
from memstore.store import MemoryStore
from tests.cli_helpers import never_blocks as never_blocks  # a fixture
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.fixtures.walkthrough import rom_or_skip


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(64, "West of House", 1)
        store.add_memory(64, "West of House", mem("Mailbox here", text="A small mailbox."))
        store.add_memory(64, "West of House", mem("Leaflet inside", text="In the mailbox."))
        store.add_memory(27, "Living Room", mem("Trap door", text="Under the rug."))
    return db_path


def memory_count(db: Path) -> int:
    with MemoryStore.open(db, read_only=True) as store:
        return sum(len(entry.memories) for entry in store.export_locations())


def export(capsys: pytest.CaptureFixture[str], db: Path, out: Path, *more: str) -> tuple[int, str]:
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out), *more)
    return code, err


# --- defect 1: an output that is the database, or the other output ---------------------------


def test_demo_refuses_an_out_that_is_the_database_file_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    before = db.read_bytes()

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "5",
        "--out", str(db), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, str(db), "the database's own file")
    assert db.read_bytes() == before
    assert not (db.parent / "Map.md").exists()
    assert memory_count(db) == 3


def test_demo_refuses_an_out_whose_map_md_is_the_database_file(
    capsys: pytest.CaptureFixture[str], mem: MakeMemory, tmp_path: Path
) -> None:
    db = tmp_path / "Map.md"
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", mem("Mailbox here"))
    before = db.read_bytes()

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "5",
        "--out", str(tmp_path / "Memories.md"), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, "Map.md", "the database's own file")
    assert db.read_bytes() == before
    assert not (tmp_path / "Memories.md").exists()


def test_demo_refuses_an_out_that_is_its_own_map_md(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "game" / "Map.md"

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "5",
        "--out", str(out), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, str(out), "Map.md")
    assert not out.parent.exists()


def test_export_refuses_the_same_file_for_out_and_notes(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    assert export(capsys, db, out)[0] == 0
    before = out.read_bytes()
    alias = tmp_path / "alias.md"
    alias.symlink_to(out)

    for notes in (out, alias, tmp_path / "." / "M.md"):
        code, err = export(capsys, db, out, "--notes", str(notes))
        assert code == 1
        one_error_line(err, "--out", "--notes", "same file")
        assert out.read_bytes() == before


# --- defect 2: a Memories.md with edits that were not imported --------------------------------


@pytest.fixture
def exported(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> Path:
    out = tmp_path / "M.md"
    code, err = export(capsys, db, out)
    assert code == 0, err
    return out


def edit(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert old in text
    edited = text.replace(old, new)
    path.write_text(edited, encoding="utf-8")
    return edited


def test_export_refuses_to_overwrite_reviewer_edits_that_were_not_imported(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    edited = edit(exported, "Under the rug.", "Under the rug. REVIEWER EDIT")

    code, err = export(capsys, db, exported)

    assert code == 1
    one_error_line(err, str(exported), "1 edit", "not imported", "memstore import", "--force")
    assert exported.read_text(encoding="utf-8") == edited


def test_a_save_made_while_the_export_runs_is_not_overwritten(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    exported: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reviewer saves right after the edit guard read the file: the export's rename
    would replace the save. It is refused just before the rename, and nothing is written."""
    import memstore.cli_transfer as transfer

    checked = transfer.refuse_to_lose_edits

    def then_saved(store: MemoryStore, path: str, **options: bool) -> FileState:
        state = checked(store, path, **options)
        Path(path).write_text("# Location Memories\n\nSAVED BY THE REVIEWER\n", encoding="utf-8")
        return state

    monkeypatch.setattr(transfer, "refuse_to_lose_edits", then_saved)
    code, err = export(capsys, db, exported)
    assert code == 1
    one_error_line(err, str(exported), "changed while it was being exported", "nothing")
    assert "SAVED BY THE REVIEWER" in exported.read_text(encoding="utf-8")
    assert [p.name for p in exported.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_write_atomically_refuses_a_file_changed_since_it_was_checked(tmp_path: Path) -> None:
    target = tmp_path / "M.md"
    missing = file_state(target)
    target.write_text("first", encoding="utf-8")
    with pytest.raises(FileChanged, match="changed while it was being exported"):
        write_atomically(target, "export", unchanged=missing)  # created since
    state = file_state(target)
    os.utime(target, ns=(state.modified_ns + 10**9, state.modified_ns + 10**9))
    with pytest.raises(FileChanged):
        write_atomically(target, "export", unchanged=state)  # saved again since
    assert target.read_text(encoding="utf-8") == "first"
    write_atomically(target, "export", unchanged=file_state(target))
    assert target.read_text(encoding="utf-8") == "export"


def test_export_refuses_to_overwrite_a_deletion_that_was_not_imported(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    text = exported.read_text(encoding="utf-8")
    block = text[text.index("**[") :]
    edited = text.replace(block.split("\n\n")[0] + "\n\n", "", 1)
    assert edited != text
    exported.write_text(edited, encoding="utf-8")

    code, err = export(capsys, db, exported)

    assert code == 1
    one_error_line(err, "1 edit", "deleted", "--prune", "--force")
    assert exported.read_text(encoding="utf-8") == edited


def test_export_with_force_overwrites_the_edits(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    original = exported.read_text(encoding="utf-8")
    edit(exported, "Under the rug.", "Under the rug. REVIEWER EDIT")

    code, err = export(capsys, db, exported, "--force")

    assert code == 0, err
    assert exported.read_text(encoding="utf-8") == original


def test_export_overwrites_an_unedited_export_even_after_the_database_changed(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db) as store:
        store.add_memory(79, "Kitchen", mem("Sack on table", text="Brown sack."))
        store.supersede_memory(
            27, "Living Room", "Trap door", mem("Trap door open", text="It is open.")
        )

    code, err = export(capsys, db, exported)

    assert code == 0, err
    text = exported.read_text(encoding="utf-8")
    assert "Sack on table" in text and "Trap door open" in text


def test_export_after_the_edits_were_imported_overwrites(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    edit(exported, "Under the rug.", "Under the rug. REVIEWED")
    code, _out, err = run(capsys, "--db", str(db), "import", str(exported), "--apply")
    assert code == 0, err

    code, err = export(capsys, db, exported)

    assert code == 0, err
    assert "Under the rug. REVIEWED" in exported.read_text(encoding="utf-8")


def test_export_check_is_unchanged_by_the_edit_guard(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    edited = edit(exported, "Under the rug.", "Under the rug. REVIEWER EDIT")

    code, err = export(capsys, db, exported, "--check")

    assert code == 1
    # the report of --check (its diff), not the guard's refusal; its advice names the edit
    assert err.startswith(f"memstore: {exported} differs from what the database would export")
    assert "would refuse it" in err.splitlines()[-1]
    assert exported.read_text(encoding="utf-8") == edited


def test_export_refuses_a_memories_md_without_base_line_that_holds_edits(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    without_base = "\n".join(
        line
        for line in exported.read_text(encoding="utf-8").split("\n")
        if "memstore-base" not in line
    )
    exported.write_text(without_base, encoding="utf-8")
    assert export(capsys, db, exported)[0] == 0  # what the database holds: nothing to lose
    without_base = "\n".join(
        line
        for line in exported.read_text(encoding="utf-8").split("\n")
        if "memstore-base" not in line
    )
    edited = without_base.replace("Under the rug.", "Under the rug. HAND EDIT")
    exported.write_text(edited, encoding="utf-8")

    code, err = export(capsys, db, exported)

    assert code == 1
    one_error_line(err, str(exported), "no export base line", "1 edit", "--force")
    assert exported.read_text(encoding="utf-8") == edited
    assert export(capsys, db, exported, "--force")[0] == 0
    assert "HAND EDIT" not in exported.read_text(encoding="utf-8")


def test_export_refuses_a_file_that_is_no_memories_md_unless_forced(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    """An export replaces only an empty file or a file of its kind (review D, F5)."""
    other = tmp_path / "other.md"
    other.write_text("the old file\n", encoding="utf-8")

    code, err = export(capsys, db, other)

    assert code == 1
    assert "is not a Memories.md" in err and "--force" in err
    assert other.read_text(encoding="utf-8") == "the old file\n"
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(other), "--force")
    assert code == 0, err
    assert "Trap door" in other.read_text(encoding="utf-8")


def test_export_overwrites_an_empty_file(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    out.write_text("", encoding="utf-8")

    code, err = export(capsys, db, out)

    assert code == 0, err
    assert "Trap door" in out.read_text(encoding="utf-8")


def test_export_refuses_a_file_exported_from_another_database_that_differs(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    MemoryStore.open(other).close()
    before = exported.read_bytes()

    code, err = export(capsys, other, exported)

    assert code == 1
    one_error_line(err, str(exported), "another database", "--force")
    assert exported.read_bytes() == before


def test_demo_refuses_to_overwrite_reviewer_edits_before_playing(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    rom_or_skip()  # the demo plays the game
    edited = edit(exported, "Under the rug.", "Under the rug. REVIEWER EDIT")

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "5",
        "--out", str(exported), "--no-progress",
    )  # fmt: skip

    assert code == 1
    assert err.strip().splitlines()[-1].startswith("memstore: error: "), err
    one_error_line(err, "1 edit", "--force")
    assert exported.read_text(encoding="utf-8") == edited
    assert not (exported.parent / "Map.md").exists()
    with MemoryStore.open(db, read_only=True) as store:
        assert store.turn_records() == []  # nothing was played


@pytest.mark.slow
def test_demo_with_force_overwrites_the_edits(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path
) -> None:
    rom_or_skip()  # the demo plays the game
    edit(exported, "Under the rug.", "Under the rug. REVIEWER EDIT")

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3",
        "--out", str(exported), "--no-progress", "--force",
    )  # fmt: skip

    assert code == 0, err
    assert "REVIEWER EDIT" not in exported.read_text(encoding="utf-8")


# --- defect 3: an input that is not a regular file, or too large ------------------------------


@pytest.mark.parametrize("command", [("import",), ("map", "import-json")])
def test_reading_a_character_device_is_refused_without_reading_it(
    capsys: pytest.CaptureFixture[str], db: Path, command: tuple[str, ...]
) -> None:
    code, _out, err = run(capsys, "--db", str(db), *command, "/dev/zero")

    assert code == 1
    one_error_line(err, "/dev/zero", "character device", "not a regular file")
    assert memory_count(db) == 3


@pytest.mark.parametrize("command", [("import",), ("map", "import-json")])
def test_reading_a_fifo_is_refused_without_blocking(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    tmp_path: Path,
    never_blocks: None,
    command: tuple[str, ...],
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    code, _out, err = run(capsys, "--db", str(db), *command, str(fifo))

    assert code == 1
    one_error_line(err, str(fifo), "FIFO", "not a regular file")


@pytest.mark.parametrize("command", [("import",), ("map", "import-json")])
def test_reading_a_file_larger_than_the_limit_is_refused_without_reading_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    huge = tmp_path / "huge.md"
    with huge.open("wb") as handle:  # sparse: no disk space used
        handle.truncate(MAX_INPUT_BYTES + 1)

    code, _out, err = run(capsys, "--db", str(db), *command, str(huge))

    assert code == 1
    one_error_line(err, str(huge), "larger than", "MiB")
    assert memory_count(db) == 3


def test_an_import_still_reads_a_regular_file_and_a_link_to_one(
    capsys: pytest.CaptureFixture[str], db: Path, exported: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link.md"
    link.symlink_to(exported)
    for path in (exported, link):
        code, out, err = run(capsys, "--db", str(db), "import", str(path))
        assert code == 0, err
        assert "dry run" in out
