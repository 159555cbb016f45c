"""Review F of the round trip (export, edit, import): a retitle of a memory the database
did not change is a problem without --prune, never a second live copy; memories skipped
for a problem are counted as problems, not deletions, and "unchanged" counts only the
file's; a duplicate title names the database's memory as the database's; a second base
line is called one; `import --force` needs --prune; `export --out DIR/` names a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West of House", mem("Mailbox here", text="A small mailbox."))
        store.add_memory(79, "Kitchen", mem("Sack on table", text="Brown sack.", turns="5"))
        store.add_memory(79, "Kitchen", mem("Bottle here", text="Glass bottle.", turns="6"))
        for n in range(12):  # so that one deletion stays under --prune's 10% guard
            store.add_memory(27, "Living Room", mem(f"Fact {n}", text="Known."))
    return db_path


def titles(db: Path, location_id: int) -> list[str]:
    with MemoryStore.open(db, read_only=True) as store:
        return [m.title for m in store.memories(location_id)]


def exported(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> Path:
    out = tmp_path / "M.md"
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err
    return out


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


# --- F3: a retitle of a memory nobody else changed ------------------------------------------


def test_a_retitle_of_an_unchanged_memory_is_a_problem_without_prune_never_a_second_copy(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, "] Sack on table**", "] Sack on the table**")

    code, printed, err = run(capsys, "--db", str(db), "import", str(out), "--apply")

    assert code == 1
    one_error_line(err, "1 problem(s)", "nothing was applied")
    problem = next(line for line in printed.splitlines() if "is an edit of" in line)
    assert "'Sack on the table'" in problem and "live memory 'Sack on table'" in problem
    assert "--prune" in problem and "memory skipped" in problem
    assert "added 0" in printed
    assert titles(db, 79) == ["Sack on table", "Bottle here"]  # no second live copy
    code, printed, err = run(
        capsys, "--db", str(db), "import", str(out), "--apply", "--skip-invalid"
    )
    assert code == 0, err
    assert "nothing to apply: the problems listed were skipped" in printed
    assert titles(db, 79) == ["Sack on table", "Bottle here"]

    code, _printed, err = run(capsys, "--db", str(db), "import", str(out), "--apply", "--prune")
    assert code == 0, err
    assert titles(db, 79) == ["Bottle here", "Sack on the table"]  # replaced
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err  # the loop goes on: nothing left to import


def test_prune_with_problems_skipped_leaves_no_second_copy_and_no_internal_error(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    """--prune deletes nothing while the file has problems (--skip-invalid applies the
    rest): a retitle or a turns fix that was to replace the old memory would stand beside
    it. Was: the retitle added a second live copy; the turns fix an internal error (the
    database's unique live title)."""
    out = exported(capsys, db, tmp_path)
    edit(out, "] Sack on table**", "] Sack on the table**")
    edit(out, "] Bottle here** *(Ep1, T6, +0)*", "] Bottle here** *(Ep1, T7, +0)*")
    edit(out, "## Location 79", "#### stray heading\n\n## Location 79")

    code, printed, err = run(
        capsys,
        *("--db", str(db), "import", str(out)),
        *("--apply", "--prune", "--force", "--skip-invalid"),
    )

    assert code == 0, err
    skipped = [line for line in printed.splitlines() if "--prune deletes nothing" in line]
    assert len(skipped) == 2, printed
    assert titles(db, 79) == ["Sack on table", "Bottle here"]
    with MemoryStore.open(db, read_only=True) as store:
        assert [m.turns for m in store.memories(79)] == ["5", "6"]


# --- F6: skipped memories are problems, not deletions; "unchanged" counts the file's ---------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("] Bottle here** *(Ep1, T6, +0)*", "] Bottle here** *(Ep0, T6, +0)*"),  # invalid
        ("] Bottle here** *(Ep1, T6, +0)*", "] Bottle here** *(T6, garbage)*"),  # malformed
        ("[NOTE - PERMANENT] Bottle here**", "[NOTE - PERMANENT] **"),  # no title: by text
        ("Glass bottle.\n", "<<<<<<< HEAD\nGlass bottle.\n=======\nGlass jar.\n>>>>>>> x\n"),
        (  # the whole section skipped
            "## Location 79: Kitchen\n**Visits:** 0 | **Episodes:** none",
            "## Location 79: Kitchen\n**Visits:** 0 | **Episodes:** 99999999999999999999",
        ),
    ],
    ids=["episode-0", "bad-metadata", "empty-title", "conflict-marker", "location"],
)
def test_a_memory_skipped_for_a_problem_is_counted_as_one_not_as_a_deletion(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, old: str, new: str
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, old, new)

    code, printed, _err = run(capsys, "--db", str(db), "import", str(out), "-v")

    assert code == 1
    assert "would delete 0 (only with --prune)" in printed, printed
    assert "missing from the file" not in printed
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 1
    line = one_error_line(err, "with problems", "--force")
    assert "deleted" not in line and "--prune" not in line
    assert titles(db, 79) == ["Sack on table", "Bottle here"]


def test_unchanged_counts_only_the_files_memories(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    """A retitle taken with --theirs over an agent's invalidation keeps the database's
    memory too: the same file imported again holds 15 memories, not 16 unchanged."""
    out = exported(capsys, db, tmp_path)
    with MemoryStore.open(db) as store:
        store.invalidate_memory(79, "Sack on table", "gone", turn=10)
        store.add_memory(64, "West of House", mem("Window ajar", text="Learned since."))
    edit(out, "] Sack on table**", "] Sack on the table**")
    code, printed, err = run(capsys, "--db", str(db), "import", str(out), "--apply", "--theirs")
    assert code == 0, err
    assert "added 1\n" in printed and "unchanged 14\n" in printed

    code, printed, err = run(capsys, "--db", str(db), "import", str(out))

    assert code == 0, err
    assert "added 0\n" in printed and "unchanged 15\n" in printed  # the file's 15 memories


# --- F7: a duplicate title beside the database's memory ---------------------------------------


def test_a_title_the_database_gained_since_is_not_blamed_on_the_file(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    """The reviewer moves 'Bottle here' to location 64, where an agent learned a memory
    with that title after the export: the file has one, the database the other."""
    out = exported(capsys, db, tmp_path)
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", mem("Bottle here", text="Another.", episode=2))
    block = "**[NOTE - PERMANENT] Bottle here** *(Ep1, T6, +0)*\nGlass bottle.\n\n"
    edit(out, block, "")
    edit(out, "**[NOTE - PERMANENT] Mailbox here**", block + "**[NOTE - PERMANENT] Mailbox here**")

    code, printed, _err = run(capsys, "--db", str(db), "import", str(out))

    assert code == 1
    (problem,) = [line for line in printed.splitlines() if "'Bottle here'" in line]
    assert "the file's memory titled 'Bottle here' at location 64" in problem
    assert "the database's memory with that title (Ep2, T5)" in problem
    assert "the database's stays" in problem and "all of them skipped" not in problem
    assert "Bottle here" in titles(db, 64)


# --- F8: a second base line -----------------------------------------------------------------


def test_a_second_valid_base_line_is_called_a_second_one(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = exported(capsys, db, tmp_path)
    other = "<!-- memstore-base: database=00000000-0000-0000-0000-000000000000 version=1 -->"
    edit(out, "# Location Memories\n", f"# Location Memories\n{other}\n")

    code, printed, _err = run(capsys, "--db", str(db), "import", str(out))

    assert code == 1
    (problem,) = [line for line in printed.splitlines() if line.startswith("  line 3:")]
    assert "a second export base line: only the first one (line 2) counts" in problem
    assert "not one memstore writes" not in printed


# --- F9: import --force without --prune -----------------------------------------------------


def test_import_force_without_prune_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = exported(capsys, db, tmp_path)
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "--db", str(db), "import", str(out), "--force")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    (error,) = [line for line in err.splitlines() if "error:" in line]
    assert "--force" in error and "--prune" in error


# --- F10: export --out DIR/ -----------------------------------------------------------------


@pytest.mark.parametrize("ending", ["/", "/."])
def test_export_to_a_path_naming_a_missing_folder_is_refused(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, ending: str
) -> None:
    target = tmp_path / "newdir"

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", f"{target}{ending}")

    assert code == 1
    one_error_line(err, f"{target}{ending}: names a folder", "not a file")
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["memories.db"]


# --- F5: a 2-way --prune whose deletion would cut the database's link -----------------------


def test_a_two_way_prune_of_a_successor_says_what_it_would_delete_not_a_problem(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    """The file's base line is gone (2-way); an agent superseded 'Sack on table' by 'Sack
    moved' after the export. Was: a problem blaming the file for a link it does not have."""
    out = exported(capsys, db, tmp_path)
    lines = out.read_text(encoding="utf-8").split("\n")
    out.write_text("\n".join(line for line in lines if "memstore-base" not in line))
    with MemoryStore.open(db) as store:
        store.supersede_memory(79, "Kitchen", "Sack on table", mem("Sack moved", turns="12"))

    code, printed, err = run(capsys, "--db", str(db), "import", str(out), "--prune", "--ours")

    assert code == 1
    assert "problems 0" in printed
    one_error_line(err, "2-way", "--prune would delete 1", "'Sack moved'", "--force")
    assert titles(db, 79) == ["Bottle here", "Sack moved"]
