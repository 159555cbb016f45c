"""Map.md and Notes.md are written for people and never read back (review A, F4): memstore
ends each with a mark holding a digest of the text above it, and an export refuses,
without --force, to replace a marked file whose text changed since it was written, so a
reviewer's note in either is never lost silently. An unedited file is replaced freely,
whatever the database learned since; an older memstore's file (no mark) as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.written_mark import edited_since_written, marked
from memstore.flagged import FlaggedMemories
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.map_helpers import record_sample


def test_a_marked_text_is_unedited_through_line_endings_and_trailing_blank_space() -> None:
    text = marked("# Map\n\nA line.")
    assert text.startswith("# Map\n\nA line.\n<!-- memstore-written: sha256=")
    assert not edited_since_written(text)
    assert not edited_since_written(text.replace("\n", "\r\n"))  # git's autocrlf
    assert not edited_since_written(text + "\n  \n")
    assert not edited_since_written("# Map\n\nno mark at all\n")  # an older memstore's


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("A line.", "A line, reviewed."),
        lambda t: t + "- my own note\n",  # added after the mark
        lambda t: "note on top\n" + t,
        lambda t: t.replace("sha256=", "sha256=0"),  # the mark itself
    ],
)
def test_any_edit_of_a_marked_text_is_seen(edit) -> None:
    assert edited_since_written(edit(marked("# Map\n\nA line.\n")))


@pytest.fixture
def db(db_path: Path) -> Path:
    with MemoryStore.open(db_path) as store:
        record_sample(store)  # a map
        assert FlaggedMemories(store).add_flagged_memory("Lamp in the attic", 500, 3, 1, "Attic")
    return db_path


def test_map_export_refuses_a_map_md_edited_since_it_was_written(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0  # unedited
    with out.open("a", encoding="utf-8") as f:
        f.write("extra reviewer line\n")
    edited = out.read_text(encoding="utf-8")

    code, _out, err = run(capsys, "--db", str(db), "map", "export", "--out", str(out))

    assert code == 1
    one_error_line(err, str(out), "edited since memstore wrote it", "--force")
    assert out.read_text(encoding="utf-8") == edited
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out), "--force")[0] == 0
    assert "extra reviewer line" not in out.read_text(encoding="utf-8")
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out), "--check")[0] == 0


def test_export_refuses_a_notes_md_edited_since_it_was_written(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out, notes = tmp_path / "M.md", tmp_path / "Notes.md"
    args = ("--db", str(db), "export", "--out", str(out), "--notes", str(notes))
    assert run(capsys, *args)[0] == 0
    with MemoryStore.open(db) as store:  # learned since: an unedited file is replaced
        assert FlaggedMemories(store).add_flagged_memory("Troll ahead", 900, 4, 1, "Cellar")
    assert run(capsys, *args)[0] == 0
    assert "Troll ahead" in notes.read_text(encoding="utf-8")
    with notes.open("a", encoding="utf-8") as f:
        f.write("- my own note: do not forget\n")
    edited = notes.read_text(encoding="utf-8")

    code, _out, err = run(capsys, *args)

    assert code == 1
    one_error_line(err, str(notes), "edited since memstore wrote it", "--force")
    assert notes.read_text(encoding="utf-8") == edited
    assert run(capsys, *args, "--force")[0] == 0
    assert "do not forget" not in notes.read_text(encoding="utf-8")


def test_a_notes_md_of_an_older_memstore_without_the_mark_is_replaced(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out, notes = tmp_path / "M.md", tmp_path / "Notes.md"
    notes.write_text("# Agent Notes\n\nNo memories flagged by the agent yet.\n", encoding="utf-8")

    code, _out, err = run(
        capsys, "--db", str(db), "export", "--out", str(out), "--notes", str(notes)
    )

    assert code == 0, err
    assert "Lamp in the attic" in notes.read_text(encoding="utf-8")


def test_the_demo_refuses_an_edited_map_md_beside_its_out_before_playing(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    from tests.fixtures.walkthrough import rom_or_skip

    rom_or_skip()  # the demo plays the game
    map_md = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(map_md))[0] == 0
    edited = map_md.read_text(encoding="utf-8").replace("## Rooms", "## Rooms\n\nMy note.")
    map_md.write_text(edited, encoding="utf-8")
    with MemoryStore.open(db, read_only=True) as store:
        turns_before = len(store.turn_records())

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "5",
        "--out", str(tmp_path / "Memories.md"), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, str(map_md), "edited since memstore wrote it", "--force")
    assert map_md.read_text(encoding="utf-8") == edited
    with MemoryStore.open(db, read_only=True) as store:
        assert len(store.turn_records()) == turns_before  # nothing was played


def test_check_of_a_hand_edited_map_md_advises_force_not_a_refused_export(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    """Review G #5: --check said to run the export, which then refused the edited file."""
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    with out.open("a", encoding="utf-8") as f:
        f.write("my note\n")

    code, _out, err = run(capsys, "--db", str(db), "map", "export", "--out", str(out), "--check")

    assert code == 1
    assert "edited by hand" in err and "--force" in err.strip().splitlines()[-1]
