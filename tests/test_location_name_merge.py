"""A location's name is merged 3-way by an import, as a memory's fields are.

Was: the name was compared 2-way and the file's always won, so an agent's rename after an
export (a visit under another name) was undone by importing that export back, though the
reviewer never touched the name. Now the import reads the name each location had at the
export (``location_names``, revision 0009): a name only the database changed stays, a name
only the file changed is taken, and both changed differently is a conflict.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.merge import NameConflict, Resolution
from memstore.models import Memory
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.cli_helpers import run
from tests.conftest import MakeMemory


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


def name_of(store: MemoryStore, location_id: int) -> str:
    return {info.id: info.name for info in store.locations()}[location_id]


def renamed_in_file(text: str, location_id: int, old: str, new: str) -> str:
    header = f"## Location {location_id}: {old}\n"
    assert header in text
    return text.replace(header, f"## Location {location_id}: {new}\n")


@pytest.fixture
def kitchen(store: MemoryStore, mem: MakeMemory) -> MemoryStore:
    store.record_visit(7, "Kitchen", 1)
    store.add_memory(7, "Kitchen", mem("Sack", text="a brown sack"))
    store.record_visit(8, "Attic", 1)
    store.add_memory(8, "Attic", mem("Rope", text="a coil of rope"))
    return store


def test_an_agent_s_rename_after_the_export_survives_importing_that_export(
    kitchen: MemoryStore,
) -> None:
    text = exported(kitchen)
    kitchen.record_visit(7, "Kitchen (dark)", 2)  # the agent now calls it so

    outcome = import_memories(kitchen, text, apply=True)

    assert not outcome.plan.conflicts, outcome.plan.summary()
    assert name_of(kitchen, 7) == "Kitchen (dark)"
    assert name_of(kitchen, 8) == "Attic"


def test_an_agent_s_two_renames_after_the_export_survive_it(kitchen: MemoryStore) -> None:
    text = exported(kitchen)
    kitchen.record_visit(7, "Kitchen (dark)", 2)
    kitchen.record_visit(7, "Kitchen (lit)", 3)

    import_memories(kitchen, text, apply=True)

    assert name_of(kitchen, 7) == "Kitchen (lit)"


def test_a_reviewer_s_rename_is_imported(kitchen: MemoryStore) -> None:
    text = renamed_in_file(exported(kitchen), 7, "Kitchen", "Kitchen of the White House")

    outcome = import_memories(kitchen, text, apply=True)

    assert outcome.applied and not outcome.plan.conflicts
    assert name_of(kitchen, 7) == "Kitchen of the White House"
    assert name_of(kitchen, 8) == "Attic"


@pytest.mark.parametrize("blank", ["", "   ", " \u200b", " \u00a0\u200d"])
def test_a_header_whose_name_was_deleted_is_a_problem_never_a_rename_to_nothing(
    kitchen: MemoryStore, mem: MakeMemory, blank: str
) -> None:
    text = exported(kitchen)
    text = text.replace("## Location 7: Kitchen\n", f"## Location 7:{blank}\n")
    assert f"## Location 7:{blank}\n" in text
    outcome = import_memories(kitchen, text, apply=True)
    assert not outcome.applied
    assert [str(p) for p in outcome.plan.problems] == [
        "line 4: location 7: its header gives no name (the database's is 'Kitchen'): give it "
        "back, or another one; the location and its memories skipped"
    ]
    assert name_of(kitchen, 7) == "Kitchen"
    # a location whose stored name is blank exports and imports as it is
    kitchen.record_visit(9, "", 1)
    kitchen.add_memory(9, "", mem("Nameless", text="a room with no name yet"))
    assert import_memories(kitchen, exported(kitchen), apply=True).plan.problems == ()


def test_an_older_export_does_not_undo_a_reviewer_s_imported_rename(kitchen: MemoryStore) -> None:
    older = exported(kitchen)
    import_memories(kitchen, renamed_in_file(older, 7, "Kitchen", "Galley"), apply=True)
    assert name_of(kitchen, 7) == "Galley"

    import_memories(kitchen, older, apply=True)  # exported before that import

    assert name_of(kitchen, 7) == "Galley"


def test_both_renamed_differently_is_a_conflict_resolved_per_run(kitchen: MemoryStore) -> None:
    text = renamed_in_file(exported(kitchen), 7, "Kitchen", "Galley")
    kitchen.record_visit(7, "Kitchen (dark)", 2)

    plain = import_memories(kitchen, text, apply=True)
    assert not plain.applied and plain.refused is not None
    (conflict,) = plain.plan.conflicts
    assert isinstance(conflict, NameConflict)
    assert (conflict.file, conflict.database, conflict.base) == (
        "Galley",
        "Kitchen (dark)",
        "Kitchen",
    )
    assert conflict.line == text.splitlines().index("## Location 7: Galley") + 1
    assert "renamed from 'Kitchen' both in the file ('Galley')" in str(conflict)
    assert "conflicts 1" in plain.plan.summary()
    assert name_of(kitchen, 7) == "Kitchen (dark)"

    ours = import_memories(kitchen, text, apply=True, resolution=Resolution.OURS)
    assert name_of(kitchen, 7) == "Kitchen (dark)" and len(ours.plan.conflicts) == 1
    theirs = import_memories(kitchen, text, apply=True, resolution=Resolution.THEIRS)
    assert theirs.applied and name_of(kitchen, 7) == "Galley"


def test_a_file_with_no_base_still_takes_the_file_s_name(kitchen: MemoryStore) -> None:
    text = "\n".join(
        line for line in exported(kitchen).splitlines() if not line.startswith("<!-- memstore")
    )
    assert "<!--" not in text  # no base line: compared 2-way
    kitchen.record_visit(7, "Kitchen (dark)", 2)

    outcome = import_memories(kitchen, text, apply=True)

    assert outcome.applied and outcome.base is None
    assert name_of(kitchen, 7) == "Kitchen"


def test_a_visit_under_the_same_name_changes_no_version_and_a_rename_keeps_the_old_name(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path) as store:
        store.record_visit(7, "Kitchen", 1)
        store.record_visit(7, "Kitchen", 1)
        counter = sqlite3.connect(db_path).execute("SELECT change_counter FROM store_meta")
        (before,) = counter.fetchone()
        store.record_visit(7, "Galley", 2)
        store.record_visit(7, "Galley", 2)
    conn = sqlite3.connect(db_path)
    (after,) = conn.execute("SELECT change_counter FROM store_meta").fetchone()
    assert after == before + 1
    assert conn.execute(
        "SELECT location_id, name, replaced_version FROM location_names"
    ).fetchall() == [(7, "Kitchen", after)]
    assert conn.execute("SELECT name, visit_count FROM locations").fetchall() == [("Galley", 4)]


def test_the_command_names_a_rename_conflict_and_applies_it_with_theirs(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path) as store:
        store.record_visit(7, "Kitchen", 1)
        store.add_memory(7, "Kitchen", mem("Sack", text="a brown sack"))
    file = tmp_path / "Memories.md"
    assert run(capsys, "--db", str(db_path), "export", "--out", str(file))[0] == 0
    file.write_text(renamed_in_file(file.read_text("utf-8"), 7, "Kitchen", "Galley"), "utf-8")
    with MemoryStore.open(db_path) as store:
        store.record_visit(7, "Kitchen (dark)", 2)

    code, out, _err = run(capsys, "--db", str(db_path), "import", str(file), "--apply")
    assert code != 0
    assert (
        "location 7 renamed from 'Kitchen' both in the file ('Galley') and in the database "
        "('Kitchen (dark)') since the export"
    ) in out
    code, _out, _err = run(capsys, "--db", str(db_path), "import", str(file), "--apply", "--theirs")
    assert code == 0
    with MemoryStore.open(db_path) as store:
        assert name_of(store, 7) == "Galley"


# --- review round 2 -----------------------------------------------------------------------


def test_re_importing_a_file_whose_rename_was_imported_keeps_an_agent_s_later_rename(
    kitchen: MemoryStore,
) -> None:
    """Was: export, the reviewer renames Kitchen -> Galley and imports; the game then calls
    the room Kitchen again on the next visit; importing the same file again renamed it back
    to Galley with no conflict (the name at the export was Kitchen, like the database's)."""
    reviewed = renamed_in_file(exported(kitchen), 7, "Kitchen", "Galley")
    assert import_memories(kitchen, reviewed, apply=True).applied
    kitchen.record_visit(7, "Kitchen", 2)  # the game's own name

    again = import_memories(kitchen, reviewed, apply=True)

    assert not again.plan.conflicts and not again.plan.has_changes, again.plan.summary()
    assert name_of(kitchen, 7) == "Kitchen"


def test_names_that_read_the_same_are_the_same_name(kitchen: MemoryStore) -> None:
    """Was: an editor saving the file in NFC made an unchanged NFD name a rename (and,
    after an agent's rename, a conflict between two names that look identical)."""
    nfd, nfc = "Cafe\u0301", "Caf\u00e9"
    kitchen.record_visit(9, nfd, 1)
    kitchen.add_memory(9, nfd, note_titled("Menu"))
    text = exported(kitchen).replace(f"## Location 9: {nfd}\n", f"## Location 9: {nfc}\n")
    assert f"## Location 9: {nfc}\n" in text

    outcome = import_memories(kitchen, text, apply=True)

    assert not outcome.plan.has_changes and name_of(kitchen, 9) == nfd
    kitchen.record_visit(9, f"{nfd} (dark)", 2)
    later = import_memories(kitchen, text, apply=True)
    assert not later.plan.conflicts and name_of(kitchen, 9) == f"{nfd} (dark)"


def note_titled(title: str) -> Memory:
    return Memory(
        category="NOTE", title=title, text="t", episode=1, turns="1", persistence="permanent"
    )


# --- review round 3 -----------------------------------------------------------------------


def test_a_reviewer_s_rename_to_a_name_an_agent_used_for_a_while_is_imported(
    kitchen: MemoryStore,
) -> None:
    """Was: the agent visited as Galley, then as Kitchen again; the reviewer renamed Kitchen
    to Galley: the import said "the database already matches the file" (Galley was one of
    the names since the export) and the next export overwrote the edit."""
    text = renamed_in_file(exported(kitchen), 7, "Kitchen", "Galley")
    kitchen.record_visit(7, "Galley", 2)
    kitchen.record_visit(7, "Kitchen", 3)

    outcome = import_memories(kitchen, text, apply=True)

    assert outcome.applied and not outcome.plan.conflicts, outcome.plan.summary()
    assert name_of(kitchen, 7) == "Galley"


def test_a_name_an_agent_used_then_left_is_a_conflict_when_the_file_takes_it(
    kitchen: MemoryStore,
) -> None:
    text = renamed_in_file(exported(kitchen), 7, "Kitchen", "Galley")
    kitchen.record_visit(7, "Galley", 2)
    kitchen.record_visit(7, "Scullery", 3)

    outcome = import_memories(kitchen, text, apply=True)

    assert not outcome.applied
    assert [(c.file, c.database) for c in outcome.plan.conflicts] == [("Galley", "Scullery")]


def test_a_whitespace_only_rename_in_the_file_is_a_rename(kitchen: MemoryStore) -> None:
    kitchen.record_visit(9, "West  of House", 1)
    kitchen.add_memory(9, "West  of House", note_titled("Mailbox"))
    text = renamed_in_file(exported(kitchen), 9, "West  of House", "West of House")

    assert import_memories(kitchen, text, apply=True).applied
    assert name_of(kitchen, 9) == "West of House"
