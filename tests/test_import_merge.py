"""The 3-way import: what agents learned after an export is never undone by importing it.

Each test exports a file (with its base line), lets "an agent" write through the public API
after the export, edits the file as a reviewer would, and imports it in one transaction
(``memstore.store_import.import_memories``). Every test ends with ``memstore check``'s
rules (the ``store`` fixture).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import memstore.cli as cli
from exporters import render_memories_md
from exporters.base_line import END_LINE, split_base_line
from memstore.merge import Resolution
from memstore.models import Status
from memstore.store import MemoryStore
from memstore.store_import import ImportOutcome, import_memories
from tests.conftest import MakeMemory


@pytest.fixture
def filled(store: MemoryStore, mem: MakeMemory) -> MemoryStore:
    """Ten memories at two locations."""
    for n in range(6):
        store.add_memory(15, "West of House", mem(f"Fact {n}", turns=str(n + 1)))
    for n in range(4):
        store.add_memory(79, "Kitchen", mem(f"Kitchen fact {n}", turns=str(n + 1)))
    return store


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def one(store: MemoryStore, location_id: int, title: str):  # type: ignore[no-untyped-def]
    found = [m for m in store.memories(location_id, include_superseded=True) if m.title == title]
    assert len(found) == 1, found
    return found[0]


def counter(store: MemoryStore) -> int:
    with store.transaction(write=False) as conn:
        return store.database_identity(conn).version


def run_import(store: MemoryStore, text: str, **options) -> ImportOutcome:  # type: ignore[no-untyped-def]
    options.setdefault("apply", True)
    return import_memories(store, text, **options)


# --- the change counter ---------------------------------------------------------------------


def test_every_persistent_write_advances_the_counter_and_reads_do_not(
    store: MemoryStore, mem: MakeMemory
) -> None:
    assert counter(store) == 0
    store.add_memory(15, "West of House", mem("Mailbox"))
    assert counter(store) == 1
    store.supersede_memory(15, "West of House", "Mailbox", mem("Mailbox open", turns="6"))
    assert counter(store) == 2  # one version for the whole transaction
    store.invalidate_memory(15, "Mailbox open", "no mailbox", turn=7)
    assert counter(store) == 3
    store.add_memory(15, "West of House", mem("Dropped sack", persistence="ephemeral"))
    store.get_location_memory(15)
    exported(store)
    assert counter(store) == 3  # ephemeral writes and reads leave it alone
    assert store.add_memory(15, "West of House", mem("Mailbox")) is True
    assert store.add_memory(15, "West of House", mem("Mailbox")) is False  # refused: no version
    assert counter(store) == 4


def test_the_export_records_the_database_and_its_counter(filled: MemoryStore) -> None:
    base, _body = split_base_line(exported(filled))
    with filled.transaction(write=False) as conn:
        here = filled.database_identity(conn)
    assert base is not None
    assert (
        (base.database_id, base.version)
        == (here.database_id, here.version)
        == (
            here.database_id,
            10,
        )
    )
    assert base.rows is not None and len(base.rows) == 8  # the memories' fingerprint


def test_a_database_restored_from_a_backup_and_written_since_is_compared_two_way(
    db_path: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    """Restored, then written until its counter passes the file's: its memories at the
    file's change are not the ones exported. Read 3-way, the agent's invalidation made in
    the first timeline and exported would look like a reviewer's edit... and the other way
    round: what the agents learned after the restore would be undone."""
    backup = tmp_path / "backup.db"
    with MemoryStore.open(db_path) as store:
        for n in range(3):
            store.add_memory(79, "Kitchen", mem(f"Kitchen fact {n}", turns=str(n + 1)))
    source, copy = sqlite3.connect(db_path), sqlite3.connect(backup)
    source.backup(copy)
    source.close()
    copy.close()
    with MemoryStore.open(db_path) as store:
        store.invalidate_memory(79, "Kitchen fact 1", "first timeline", turn=9)
        text = exported(store)
    backup.replace(db_path)  # restored
    with MemoryStore.open(db_path) as store:
        store.add_memory(79, "Kitchen", mem("Learned after the restore", turns="9"))
        store.invalidate_memory(79, "Kitchen fact 2", "second timeline", turn=9)
        outcome = run_import(store, text)
        assert any("restored from a backup" in w for w in outcome.plan.warnings)
        assert one(store, 79, "Kitchen fact 2").invalidation_reason == "second timeline"
        assert one(store, 79, "Learned after the restore").status is Status.ACTIVE


# --- what the database changed since the export wins ----------------------------------------


def test_a_supersession_made_after_the_export_is_not_reverted(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    text = exported(filled)
    filled.supersede_memory(15, "West of House", "Fact 2", mem("Fact 2 revised", turns="9"))
    filled.invalidate_memory(79, "Kitchen fact 1", "the table was moved", turn=9)
    outcome = run_import(filled, text, prune=True, force=True)
    assert outcome.refused is None and not outcome.plan.conflicts and not outcome.plan.missing
    assert one(filled, 15, "Fact 2").status is Status.SUPERSEDED
    assert [m.title for m in filled.history(15, "Fact 2")] == ["Fact 2", "Fact 2 revised"]
    assert one(filled, 79, "Kitchen fact 1").invalidation_reason == "the table was moved"
    assert filled.get_persistent_count() == 9


def test_the_reviewers_edits_are_applied_beside_the_agents_changes(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    text = exported(filled)
    filled.supersede_memory(15, "West of House", "Fact 2", mem("Fact 2 revised", turns="9"))
    reviewed = edit(text, "What we learned: Fact 4.", "Checked by hand: Fact 4.")
    # the reviewer also rewrote the text of the memory the agent superseded meanwhile
    reviewed = edit(reviewed, "What we learned: Fact 2.", "Reworded: Fact 2.")
    outcome = run_import(filled, reviewed)
    assert outcome.applied and not outcome.plan.conflicts
    assert one(filled, 15, "Fact 4").text == "Checked by hand: Fact 4."
    fact2 = one(filled, 15, "Fact 2")  # both changes kept, field by field
    assert fact2.text == "Reworded: Fact 2." and fact2.superseded_by == "Fact 2 revised"
    # and the agent can go on: the successor can be superseded again (no stray link)
    assert filled.supersede_memory(
        15, "West of House", "Fact 2 revised", mem("Fact 2 third", turns="12")
    )


def test_a_memory_learned_after_the_export_is_never_pruned(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    text = exported(filled)
    filled.add_memory(15, "West of House", mem("Learned later", turns="20"))
    filled.add_memory(200, "Attic", mem("Rope here", turns="21"))  # a new location too
    outcome = run_import(filled, text, prune=True, force=True)
    assert outcome.plan.missing == () and outcome.refused is None
    assert one(filled, 15, "Learned later").status is Status.ACTIVE
    assert one(filled, 200, "Rope here").status is Status.ACTIVE


def test_a_memory_the_database_deleted_after_the_export_is_not_added_back(
    filled: MemoryStore,
) -> None:
    text = exported(filled)
    pruned = edit(
        text, "**[NOTE - PERMANENT] Fact 5** *(Ep1, T6, +0)*\nWhat we learned: Fact 5.\n\n", ""
    )
    assert run_import(filled, pruned, prune=True, force=True).applied
    assert filled.get_persistent_count(15) == 5
    outcome = run_import(filled, text)  # the older export still has Fact 5
    assert outcome.plan.added == () and filled.get_persistent_count(15) == 5


def test_the_reviewer_removing_a_memory_is_pruned_only_with_prune(filled: MemoryStore) -> None:
    text = exported(filled)
    removed = edit(
        text, "**[NOTE - PERMANENT] Fact 0** *(Ep1, T1, +0)*\nWhat we learned: Fact 0.\n\n", ""
    )
    outcome = run_import(filled, removed)
    assert len(outcome.plan.missing) == 1 and filled.get_persistent_count() == 10
    outcome = run_import(filled, removed, prune=True)  # 1 of 10: within the 10% guard
    assert outcome.applied and filled.get_persistent_count() == 9


def _keys_fixed_after_the_agent_changed_them(filled: MemoryStore, mem: MakeMemory) -> str:
    """The reviewer corrects a title and a turn; meanwhile an agent superseded the one and
    invalidated the other. Matched by title, episode and turns, each edit reads as the old
    memory dropped and a new one added."""
    text = exported(filled)
    filled.supersede_memory(15, "West of House", "Fact 2", mem("Fact 2 revised", turns="9"))
    filled.invalidate_memory(79, "Kitchen fact 1", "the table was moved", turn=9)
    reviewed = edit(text, "**[NOTE - PERMANENT] Fact 2**", "**[NOTE - PERMANENT] Fact 2 (west)**")
    return edit(
        reviewed,
        "**[NOTE - PERMANENT] Kitchen fact 1** *(Ep1, T2, +0)*",
        "**[NOTE - PERMANENT] Kitchen fact 1** *(Ep1, T3, +0)*",
    )


def test_fixing_the_title_or_turn_of_a_memory_an_agent_changed_is_a_conflict(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    """Never a live copy of what an agent superseded or invalidated since the export."""
    reviewed = _keys_fixed_after_the_agent_changed_them(filled, mem)
    before = counter(filled)
    outcome = run_import(filled, reviewed, prune=True, force=True)
    assert not outcome.applied and "2 conflict(s)" in (outcome.refused or "")
    kitchen, west = sorted(outcome.plan.conflicts, key=lambda c: c.location_id, reverse=True)
    lines = reviewed.split("\n")
    assert west.line == lines.index("**[NOTE - PERMANENT] Fact 2 (west)** *(Ep1, T3, +0)*") + 1
    assert "edited in the file from 'Fact 2' (Ep1, T3)" in str(west)
    assert "superseded by 'Fact 2 revised' in the database since the export" in str(west)
    assert "invalidated ('the table was moved') in the database" in str(kitchen)
    assert counter(filled) == before
    for resolution in (Resolution.OURS, Resolution.SKIP):
        outcome = run_import(filled, reviewed, resolution=resolution, prune=True, force=True)
        assert outcome.refused is None  # nothing to apply: the database's side is kept
        assert outcome.plan.added == () and outcome.plan.missing == ()
    assert [m.title for m in filled.memories(15) if m.title.startswith("Fact 2")] == [
        "Fact 2 revised"
    ]
    assert [m.turns for m in filled.memories(79, include_superseded=True)][1:2] == ["2"]
    assert one(filled, 79, "Kitchen fact 1").status is Status.SUPERSEDED


def test_theirs_takes_the_fixed_memory_from_the_file(filled: MemoryStore, mem: MakeMemory) -> None:
    reviewed = _keys_fixed_after_the_agent_changed_them(filled, mem)
    outcome = run_import(filled, reviewed, resolution=Resolution.THEIRS)
    assert outcome.applied and len(outcome.plan.added) == 2
    assert one(filled, 15, "Fact 2 (west)").status is Status.ACTIVE
    assert one(filled, 15, "Fact 2").status is Status.SUPERSEDED  # the agent's change stays


def test_fixing_the_title_of_a_memory_nobody_else_changed_is_no_conflict(
    filled: MemoryStore,
) -> None:
    text = exported(filled)
    reviewed = edit(text, "**[NOTE - PERMANENT] Fact 2**", "**[NOTE - PERMANENT] Fact 2 (west)**")
    outcome = run_import(filled, reviewed, prune=True)
    assert outcome.applied and not outcome.plan.conflicts
    assert [m.title for m in filled.memories(15) if m.title.startswith("Fact 2")] == [
        "Fact 2 (west)"
    ]


def test_an_edit_is_paired_with_the_twin_the_agent_changed(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Two memories share their text; the agent invalidates the second; the reviewer drops
    the first and fixes the second's turn. Paired by text with the untouched first, the
    edit would bring the invalidated one back live."""
    same = "It is pitch dark. You are likely to be eaten by a grue."
    store.add_memory(15, "Dark Place", mem("Pitch dark", text=same, turns="5"))
    store.add_memory(15, "Dark Place", mem("Grue danger", text=same, turns="9"))
    text = exported(store)
    store.invalidate_memory(15, "Grue danger", "the lamp is lit", turn=12)
    reviewed = edit(text, f"**[NOTE - PERMANENT] Pitch dark** *(Ep1, T5, +0)*\n{same}\n\n", "")
    reviewed = edit(reviewed, "Grue danger** *(Ep1, T9, +0)*", "Grue danger** *(Ep1, T10, +0)*")
    outcome = run_import(store, reviewed)
    (conflict,) = outcome.plan.conflicts
    assert "edited in the file from 'Grue danger' (Ep1, T9)" in str(conflict)
    assert not outcome.applied
    assert one(store, 15, "Grue danger").status is Status.SUPERSEDED


def _fact_2_retired_and_rewritten(filled: MemoryStore, mem: MakeMemory, rewritten: str) -> str:
    """Exported; an agent supersedes Fact 2; the reviewer replaces its block by ``rewritten``."""
    text = exported(filled)
    filled.supersede_memory(15, "West of House", "Fact 2", mem("Fact 2 revised", turns="9"))
    return edit(
        text, "**[NOTE - PERMANENT] Fact 2** *(Ep1, T3, +0)*\nWhat we learned: Fact 2.", rewritten
    )


def test_rewriting_the_title_and_text_of_a_memory_an_agent_superseded_is_a_conflict(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    """Nothing to pair it by but its place: taken as an edit, to the safe side."""
    reviewed = _fact_2_retired_and_rewritten(
        filled, mem, "**[NOTE - PERMANENT] Fact two** *(Ep1, T3, +0)*\nReworded by hand."
    )
    outcome = run_import(filled, reviewed)
    (conflict,) = outcome.plan.conflicts
    assert "new in the file where it dropped 'Fact 2' (Ep1, T3), maybe an edit of it" in str(
        conflict
    )
    assert "superseded by 'Fact 2 revised' in the database since the export" in str(conflict)
    assert run_import(filled, reviewed, resolution=Resolution.OURS).plan.added == ()
    assert run_import(filled, reviewed, resolution=Resolution.THEIRS).applied
    assert one(filled, 15, "Fact two").text == "Reworded by hand."
    assert one(filled, 15, "Fact 2").status is Status.SUPERSEDED


def test_every_new_memory_where_a_retired_one_was_dropped_is_a_conflict(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    """Which of them is the rewrite cannot be told: none may slip in as a live copy."""
    reviewed = _fact_2_retired_and_rewritten(
        filled,
        mem,
        "**[NOTE - PERMANENT] Window ajar** *(Ep1, T30, +0)*\nThe window is open.\n\n"
        "**[NOTE - PERMANENT] Fact two** *(Ep1, T3, +0)*\nReworded by hand.",
    )
    outcome = run_import(filled, reviewed, prune=True, force=True)
    assert sorted(c.title for c in outcome.plan.conflicts) == ["Fact two", "Window ajar"]
    outcome = run_import(filled, reviewed, resolution=Resolution.OURS, prune=True, force=True)
    assert outcome.plan.added == () and outcome.plan.missing == ()
    titles = [m.title for m in filled.memories(15)]
    assert "Fact two" not in titles and "Window ajar" not in titles
    assert one(filled, 15, "Fact 2").status is Status.SUPERSEDED


def _moved_to_west_of_house(text: str) -> str:
    """The reviewer moves Kitchen fact 1's block, unchanged, to location 15."""
    block = (
        "**[NOTE - PERMANENT] Kitchen fact 1** *(Ep1, T2, +0)*\nWhat we learned: Kitchen fact 1."
    )
    moved = edit(text, block + "\n\n", "")
    return edit(moved, "**[NOTE - PERMANENT] Fact 0**", block + "\n\n**[NOTE - PERMANENT] Fact 0**")


def test_moving_a_memory_an_agent_retired_to_another_location_is_a_conflict(
    filled: MemoryStore,
) -> None:
    text = exported(filled)
    filled.invalidate_memory(79, "Kitchen fact 1", "the table was moved", turn=9)
    reviewed = _moved_to_west_of_house(text)
    outcome = run_import(filled, reviewed, prune=True, force=True)
    (conflict,) = outcome.plan.conflicts
    assert conflict.location_id == 15 and "moved in the file from location 79" in str(conflict)
    assert "invalidated ('the table was moved') in the database" in str(conflict)
    outcome = run_import(filled, reviewed, resolution=Resolution.OURS, prune=True, force=True)
    assert outcome.plan.added == () and outcome.plan.missing == ()
    assert [m.title for m in filled.memories(15) if m.title == "Kitchen fact 1"] == []
    assert one(filled, 79, "Kitchen fact 1").status is Status.SUPERSEDED


def test_moving_a_memory_nobody_changed_is_no_conflict(filled: MemoryStore) -> None:
    outcome = run_import(filled, _moved_to_west_of_house(exported(filled)), prune=True)
    assert outcome.applied and not outcome.plan.conflicts
    assert one(filled, 15, "Kitchen fact 1").status is Status.ACTIVE
    assert [m.title for m in filled.memories(79) if m.title == "Kitchen fact 1"] == []


def test_a_new_memory_beside_one_both_sides_dropped_is_no_conflict(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    """Pruned by an earlier import and dropped from the file: nothing to pair with."""
    text = exported(filled)
    block = "**[NOTE - PERMANENT] Fact 5** *(Ep1, T6, +0)*\nWhat we learned: Fact 5.\n\n"
    assert run_import(filled, edit(text, block, ""), prune=True).applied
    added = "**[NOTE - PERMANENT] Rope here** *(Ep1, T20, +0)*\nA rope hangs down.\n\n"
    outcome = run_import(filled, edit(text, block, added))
    assert outcome.applied and not outcome.plan.conflicts
    assert one(filled, 15, "Rope here").status is Status.ACTIVE


def test_pruning_a_successor_keeps_the_state_its_predecessor_had(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Deleting a memory clears the link of the memory it superseded (ON DELETE SET NULL):
    that change is kept in the history like any other, so the state at the file's change
    is still the exported one and the same file imports 3-way again."""
    store.add_memory(15, "West of House", mem("Lamp", turns="1"))
    store.supersede_memory(15, "West of House", "Lamp", mem("Lamp", turns="2"))
    store.supersede_memory(15, "West of House", "Lamp", mem("Lamp", turns="3"))
    text = exported(store)
    middle = "**[NOTE - PERMANENT - SUPERSEDED] Lamp** *(Ep1, T2, +0)*\n"
    start = text.index(middle)
    pruned = text[:start] + text[text.index("\n\n", start) + 2 :]
    outcome = run_import(store, pruned, prune=True, force=True)
    assert outcome.applied and len(outcome.plan.missing) == 1
    again = run_import(store, pruned, apply=False)
    assert again.base is not None and not again.plan.warnings, again.plan.warnings
    assert not again.plan.conflicts and not again.plan.has_changes


# --- conflicts ------------------------------------------------------------------------------


def _both_changed(filled: MemoryStore, mem: MakeMemory) -> str:
    """The reviewer invalidates Fact 3 and edits Fact 4; an agent supersedes Fact 3."""
    text = exported(filled)
    reviewed = edit(
        text,
        "**[NOTE - PERMANENT] Fact 3** *(Ep1, T4, +0)*\nWhat we learned: Fact 3.",
        '**[NOTE - PERMANENT - SUPERSEDED] Fact 3** *(Ep1, T4, +0)*\n[Invalidated at T8: "wrong"]'
        "\n~~What we learned: Fact 3.~~",
    )
    reviewed = edit(reviewed, "What we learned: Fact 4.", "Edited: Fact 4.")
    filled.supersede_memory(15, "West of House", "Fact 3", mem("Fact 3 better", turns="9"))
    return reviewed


def test_a_conflict_is_reported_with_its_line_and_both_sides_and_nothing_is_applied(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    reviewed = _both_changed(filled, mem)
    before = counter(filled)
    outcome = run_import(filled, reviewed)
    assert not outcome.applied and "1 conflict(s)" in (outcome.refused or "")
    (conflict,) = outcome.plan.conflicts
    line = (
        reviewed.split("\n").index("**[NOTE - PERMANENT - SUPERSEDED] Fact 3** *(Ep1, T4, +0)*") + 1
    )
    assert conflict.line == line
    assert "status: file invalidated ('wrong'), database superseded by 'Fact 3 better'" in str(
        conflict
    )
    assert (
        counter(filled) == before and one(filled, 15, "Fact 4").text == "What we learned: Fact 4."
    )
    dry = import_memories(filled, reviewed, apply=False)
    assert dry.plan.conflicts == outcome.plan.conflicts and dry.refused == outcome.refused


@pytest.mark.parametrize(
    ("resolution", "reason", "successor"),
    [
        (Resolution.OURS, None, "Fact 3 better"),
        (Resolution.THEIRS, "wrong", None),
        (Resolution.SKIP, None, "Fact 3 better"),
    ],
)
def test_a_resolution_chooses_a_side_and_applies_the_rest(
    filled: MemoryStore,
    mem: MakeMemory,
    resolution: Resolution,
    reason: str | None,
    successor: str | None,
) -> None:
    reviewed = _both_changed(filled, mem)
    outcome = run_import(filled, reviewed, resolution=resolution)
    assert outcome.applied and len(outcome.plan.conflicts) == 1
    fact3 = one(filled, 15, "Fact 3")
    assert fact3.status is Status.SUPERSEDED
    assert (fact3.invalidation_reason, fact3.superseded_by) == (reason, successor)
    assert one(filled, 15, "Fact 4").text == "Edited: Fact 4."
    assert one(filled, 15, "Fact 3 better").status is Status.ACTIVE


def test_the_cli_refuses_conflicts_and_says_how_to_resolve_them(
    filled: MemoryStore,
    mem: MakeMemory,
    tmp_path: Path,
    db_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "Memories.md"
    path.write_text(_both_changed(filled, mem), encoding="utf-8")
    db = str(db_path)  # the command opens the SQLite file (db_path: SQLite only)
    assert cli.main(["--db", db, "import", str(path)]) == 1  # the dry run says so too
    out, err = capsys.readouterr()
    assert "conflicts 1" in out and "--ours" in err and "--theirs" in err
    assert cli.main(["--db", db, "import", str(path), "--apply", "--ours"]) == 0
    assert "conflicts resolved by taking the database's side" in capsys.readouterr().out
    assert one(filled, 15, "Fact 3").superseded_by == "Fact 3 better"


# --- files with no usable base ----------------------------------------------------------------


def test_a_file_with_no_base_never_moves_a_status_backwards_without_theirs(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    _base, legacy = split_base_line(exported(filled))
    filled.supersede_memory(15, "West of House", "Fact 1", mem("Fact 1 again", turns="9"))
    outcome = run_import(filled, legacy)
    assert not outcome.applied and len(outcome.plan.conflicts) == 1
    assert any("no export base" in warning for warning in outcome.plan.warnings)
    assert one(filled, 15, "Fact 1").status is Status.SUPERSEDED
    assert run_import(filled, legacy, resolution=Resolution.OURS).refused is None
    assert one(filled, 15, "Fact 1").status is Status.SUPERSEDED
    assert run_import(filled, legacy, resolution=Resolution.THEIRS).applied
    assert one(filled, 15, "Fact 1").status is Status.ACTIVE


def test_a_file_from_another_database_is_compared_two_way_with_a_warning(
    filled: MemoryStore, tmp_path: Path
) -> None:
    text = exported(filled)
    with MemoryStore.open(tmp_path / "other.db") as other:
        outcome = run_import(other, text)
        assert outcome.applied and other.get_persistent_count() == 10
        assert any("exported from another database" in w for w in outcome.plan.warnings)


# --- guards and rules -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# Location Memories\n"])
def test_prune_with_an_empty_file_is_refused_without_force(filled: MemoryStore, text: str) -> None:
    outcome = run_import(filled, text, prune=True)
    assert not outcome.applied and "no location sections" in (outcome.refused or "")
    assert "(10 of 10)" in (outcome.refused or "") and filled.get_persistent_count() == 10
    assert run_import(filled, text, prune=True, force=True).applied
    assert filled.get_persistent_count() == 0


def test_prune_of_more_than_a_tenth_is_refused_without_force(filled: MemoryStore) -> None:
    text = exported(filled)
    kitchen = text[text.index("## Location 79") : text.index(END_LINE)]  # (the end line stays)
    outcome = run_import(filled, text.replace(kitchen, ""), prune=True)
    assert "--prune would delete 4 of 10 persistent memories" in (outcome.refused or "")
    assert filled.get_persistent_count() == 10


def test_a_circle_of_supersessions_in_the_file_is_a_problem_at_its_line(
    store: MemoryStore,
) -> None:
    text = (
        "# Location Memories\n\n## Location 5: Cave\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n"
        "**[NOTE - PERMANENT - SUPERSEDED] A** *(Ep1, T1, +0)*\n"
        '[Superseded at T2 by "B"]\n~~a~~\n\n'
        "**[NOTE - PERMANENT - SUPERSEDED] B** *(Ep1, T2, +0)*\n"
        '[Superseded at T3 by "A"]\n~~b~~\n\n'
        "---\n"
    )
    outcome = run_import(store, text)
    assert not outcome.applied
    assert [(p.line, "go round in a circle" in p.message) for p in outcome.plan.problems] == [
        (9, True)
    ]
    assert store.get_persistent_count() == 0


def test_an_import_that_would_break_a_rule_is_rolled_back(
    filled: MemoryStore, mem: MakeMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstore.store_import as store_import

    monkeypatch.setattr(store_import, "check_invariants", lambda conn: ["a broken rule"])
    text = edit(exported(filled), "What we learned: Fact 4.", "Edited: Fact 4.")
    before = counter(filled)
    with pytest.raises(store_import.ImportRefused, match="a broken rule"):
        run_import(filled, text)
    assert (
        counter(filled) == before and one(filled, 15, "Fact 4").text == "What we learned: Fact 4."
    )


def test_memstore_check_finds_a_live_memory_with_a_link(
    filled: MemoryStore, mem: MakeMemory, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(db_path)  # the command opens the SQLite file (db_path: SQLite only)
    assert cli.main(["--db", db, "check"]) == 0
    assert "ok:" in capsys.readouterr().out
    filled.supersede_memory(15, "West of House", "Fact 0", mem("Fact 0 new", turns="9"))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memories SET status = 'ACTIVE' WHERE title = 'Fact 0'")
        conn.execute("UPDATE memories SET status = 'SUPERSEDED' WHERE title = 'Fact 0 new'")
    assert cli.main(["--db", db, "check"]) == 1
    out, err = capsys.readouterr()
    assert "location 15 'Fact 0' is ACTIVE but has a supersession link" in out
    assert "1 problem(s)" in err
    with sqlite3.connect(db) as conn:  # mend it, so the fixture's final check passes
        conn.execute("UPDATE memories SET status = 'SUPERSEDED' WHERE title = 'Fact 0'")
        conn.execute("UPDATE memories SET status = 'ACTIVE' WHERE title = 'Fact 0 new'")
