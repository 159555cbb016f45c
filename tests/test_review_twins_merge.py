"""Review round 4 (the review round trip): twins, renames paired by text, re-runs, spellings.

Twins are memories with the same key (location, title, episode, turns): an agent makes them
by superseding a memory with one of the same title in the same turn. The import used to pair
a key's memories by their place in the file, so a reviewer who deleted or moved one twin
paired the other with the wrong row: what an agent invalidated after the export came back.
Every test ends with ``memstore check``'s rules (the ``store`` fixture).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest

from exporters import render_memories_md
from memstore.merge import Resolution
from memstore.models import Status
from memstore.store import MemoryStore
from memstore.store_import import ImportOutcome, import_memories
from tests.conftest import MakeMemory


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


def blocks(text: str) -> list[str]:
    return text.split("\n\n")


def rows(store: MemoryStore, location_id: int = 64) -> list[tuple[str, str, str, str | None]]:
    """(title, text, status, invalidation reason) of every memory there, in stored order."""
    return [
        (m.title, m.text, m.status.value, m.invalidation_reason)
        for m in store.memories(location_id, include_superseded=True)
    ]


def twins(store: MemoryStore, mem: MakeMemory, *, others: int = 0) -> None:
    """A "old text" superseded by A "new text", both Ep1 T5 (same key), and ``others``."""
    store.add_memory(64, "West of House", mem("A", text="old text"))
    assert store.supersede_memory(64, "West of House", "A", mem("A", text="new text"))
    for n in range(others):
        store.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))


def run(store: MemoryStore, text: str, **options: object) -> ImportOutcome:
    dry = import_memories(store, text, apply=False, **options)  # type: ignore[arg-type]
    applied = import_memories(store, text, apply=True, **options)  # type: ignore[arg-type]
    assert dry.plan.summary() == applied.plan.summary(), "the dry run plans what --apply does"
    return applied


def test_deleting_the_superseded_twin_keeps_the_agent_s_invalidation(
    store: MemoryStore, mem: MakeMemory
) -> None:
    twins(store, mem)
    text = "\n\n".join(b for b in blocks(exported(store)) if "old text" not in b)
    store.invalidate_memory(64, "A", "proven false", turn=9)  # the agent, after the export

    outcome = run(store, text)

    assert not outcome.plan.conflicts and not outcome.plan.problems
    assert store.get_location_memory(64).count("new text") == 0  # not live again
    assert sorted(rows(store)) == [
        ("A", "new text", "SUPERSEDED", "proven false"),
        ("A", "old text", "SUPERSEDED", None),  # missing from the file: --prune's
    ]


def test_swapping_twins_keeps_the_agent_s_invalidation_whatever_the_resolution(
    store: MemoryStore, mem: MakeMemory
) -> None:
    twins(store, mem)
    parts = blocks(exported(store))
    at = [n for n, b in enumerate(parts) if b.startswith("**[NOTE")]
    parts[at[0]], parts[at[1]] = parts[at[1]], parts[at[0]]
    store.invalidate_memory(64, "A", "proven false", turn=9)
    before = sorted(rows(store))

    for resolution in (None, Resolution.OURS):
        outcome = run(store, "\n\n".join(parts), resolution=resolution)
        assert not outcome.plan.conflicts and not outcome.plan.has_changes
        assert sorted(rows(store)) == before


def test_renaming_the_superseded_twin_with_prune_plans_and_applies_the_rename(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The dry run was clean and wrong (the superseded row made live, the live one pruned),
    and --apply an internal IntegrityError."""
    twins(store, mem, others=12)
    text = exported(store).replace(
        "**[NOTE - PERMANENT - SUPERSEDED] A**", "**[NOTE - PERMANENT - SUPERSEDED] A (old)**"
    )
    assert "A (old)" in text

    outcome = run(store, text, prune=True)

    assert outcome.applied and not outcome.plan.problems, outcome.plan.summary()
    assert ("A", "new text", "ACTIVE", None) in rows(store)
    assert ("A (old)", "old text", "SUPERSEDED", None) in rows(store)
    assert [m.title for m in store.history(64, "A (old)")] == ["A (old)", "A"]


def test_twins_both_edited_are_paired_by_place_and_each_keeps_its_row(
    store: MemoryStore, mem: MakeMemory
) -> None:
    twins(store, mem)
    text = exported(store).replace("old text", "old text, reviewed")
    text = text.replace("new text", "new text, reviewed")

    outcome = run(store, text)

    assert len(outcome.plan.changed) == 2 and not outcome.plan.added
    assert sorted(rows(store)) == [
        ("A", "new text, reviewed", "ACTIVE", None),
        ("A", "old text, reviewed", "SUPERSEDED", None),
    ]


@pytest.mark.parametrize("resolution", [Resolution.OURS, Resolution.THEIRS])
def test_a_renamed_memory_is_paired_with_the_likeliest_title_among_equal_texts(
    store: MemoryStore, mem: MakeMemory, resolution: Resolution
) -> None:
    """Two memories with one text: the agent invalidated one after the export, the reviewer
    deleted it and fixed a typo in the other's title. The rename was paired with the
    invalidated one (the database changed it), so --prune --ours deleted the other."""
    same = "A troll blocks the way."
    store.add_memory(64, "West of House", mem("Troll iz here", text=same, turns="1"))
    store.add_memory(64, "West of House", mem("Troll present", text=same, turns="2"))
    for n in range(12):
        store.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))
    text = exported(store)
    store.invalidate_memory(64, "Troll present", "the troll left", turn=5)
    dropped = f"**[NOTE - PERMANENT] Troll present** *(Ep1, T2, +0)*\n{same}\n\n"
    assert dropped in text
    text = text.replace(dropped, "").replace("Troll iz here", "Troll is here")

    outcome = run(store, text, prune=True, resolution=resolution, force=True)

    assert outcome.applied, outcome.refused
    trolls = sorted(r for r in rows(store) if r[0].startswith("Troll"))
    present = ("Troll present", same, "SUPERSEDED", "the troll left")
    if resolution is Resolution.OURS:  # the agent's invalidation is kept
        assert trolls == [("Troll is here", same, "ACTIVE", None), present]
    else:  # the reviewer deleted it: --theirs takes the file
        assert trolls == [("Troll is here", same, "ACTIVE", None)]


def test_running_the_same_theirs_prune_import_again_changes_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The first run keeps the memory the agent invalidated (the reviewer renamed it: the
    database's memory is kept whatever the resolution); the second deleted it."""
    store.add_memory(64, "West of House", mem("Troll iz here", text="A troll."))
    for n in range(12):
        store.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))
    text = exported(store).replace("Troll iz here", "Troll is here")
    store.invalidate_memory(64, "Troll iz here", "the troll left", turn=5)

    first = run(store, text, prune=True, resolution=Resolution.THEIRS)
    after_first = sorted(rows(store))
    second = run(store, text, prune=True, resolution=Resolution.THEIRS)

    assert first.applied and ("Troll iz here", "A troll.", "SUPERSEDED", "the troll left") in (
        after_first
    )
    assert not second.plan.missing and not second.plan.has_changes, second.plan.summary()
    assert sorted(rows(store)) == after_first


@pytest.mark.parametrize(
    ("title", "respell"),
    [
        (unicodedata.normalize("NFD", "Café door"), lambda t: unicodedata.normalize("NFC", t)),
        ("Café\tdoor", lambda t: t.replace("Café\tdoor", "Café door")),  # tabs to spaces
    ],
    ids=["nfc", "tabs"],
)
def test_a_title_respelled_by_an_editor_is_not_a_second_live_memory(
    store: MemoryStore, mem: MakeMemory, title: str, respell: Callable[[str], str]
) -> None:
    store.add_memory(64, "West of House", mem(title, text="The door is locked."))
    store.add_memory(64, "West of House", mem("Mailbox", text="A mailbox.", turns="2"))
    text = respell(exported(store)).replace("A mailbox.", "A small mailbox.")
    assert title not in text

    outcome = import_memories(store, text, apply=True)

    live = [m.title for m in store.memories(64) if m.status is not Status.SUPERSEDED]
    assert len([t for t in live if "door" in t]) == 1, live
    assert [p.message for p in outcome.plan.problems if "spelled" in p.message]


# --- review round 5 ------------------------------------------------------------------------------


def test_pruning_at_one_location_leaves_the_links_of_another_alone(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The re-linking of memories whose successor a prune deletes asked every linked memory
    of the file for its row, and a location the import does not touch has none: --apply
    failed on every retry ("no longer in the database") after a clean dry run."""
    store.add_memory(64, "West of House", mem("Z", turns="1"))
    assert store.supersede_memory(64, "West of House", "Z", mem("A", turns="3"))
    store.add_memory(79, "Kitchen", mem("Y", turns="1"))
    assert store.supersede_memory(79, "Kitchen", "Y", mem("B", turns="3"))
    for n in range(12):
        store.add_memory(80, "Attic", mem(f"F{n}", turns=str(20 + n)))
    header = "**[NOTE - PERMANENT] B** *(Ep1, T3, +0)*"
    text = exported(store).replace(header, header.replace("T3", "T4"))

    outcome = run(store, text, prune=True)

    assert outcome.applied, outcome.refused
    assert [(m.title, m.turns) for m in store.history(79, "Y")] == [("Y", "1"), ("B", "4")]
    assert [(m.title, m.turns) for m in store.history(64, "Z")] == [("Z", "1"), ("A", "3")]


def test_a_successor_whose_turns_were_fixed_is_linked_again_not_an_older_namesake(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(64, "West of House", mem("A", text="old alpha, proven false", turns="2"))
    store.invalidate_memory(64, "A", "wrong", turn=2)
    store.add_memory(64, "West of House", mem("Z", text="zeta", turns="1"))
    assert store.supersede_memory(64, "West of House", "Z", mem("A", text="alpha", turns="3"))
    for n in range(30):
        store.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))
    header = "**[NOTE - PERMANENT] A** *(Ep1, T3, +0)*"
    text = exported(store).replace(header, header.replace("T3", "T4"))

    assert run(store, text, prune=True).applied

    assert [(m.title, m.text) for m in store.history(64, "Z")] == [("Z", "zeta"), ("A", "alpha")]


@pytest.mark.parametrize("prune", [False, True])
def test_the_twin_the_file_keeps_and_edits_is_paired_with_its_own_row(
    store: MemoryStore, mem: MakeMemory, prune: bool
) -> None:
    """Deleting one twin and editing the other paired the edit with the deleted twin's row
    (the first in stored order): the agent's invalidation of the kept twin was undone, and
    with --prune --apply was an IntegrityError."""
    twins(store, mem, others=12)
    text = "\n\n".join(b for b in blocks(exported(store)) if "old text" not in b)
    text = text.replace("new text", "new text, reviewed")
    store.invalidate_memory(64, "A", "proven false", turn=9)  # the agent, after the export

    outcome = run(store, text, prune=prune)

    assert outcome.applied, outcome.plan.summary()
    assert "reviewed" not in store.get_location_memory(64)  # nothing live again
    found = sorted(r for r in rows(store) if r[0] == "A")
    kept = [("A", "new text, reviewed", "SUPERSEDED", "proven false")]
    assert found == (kept if prune else [*kept, ("A", "old text", "SUPERSEDED", None)])


def test_twins_edited_without_an_agent_change_are_applied_not_refused(
    store: MemoryStore, mem: MakeMemory
) -> None:
    twins(store, mem, others=12)
    text = "\n\n".join(b for b in blocks(exported(store)) if "old text" not in b)
    text = text.replace("new text", "new text, reviewed")
    for prune in (False, True):
        outcome = run(store, text, prune=prune)
        assert outcome.applied or not outcome.plan.has_changes, outcome.plan.summary()
        assert not outcome.plan.problems
    assert [r[1:3] for r in rows(store) if r[0] == "A"] == [("new text, reviewed", "ACTIVE")]


def test_a_rename_that_reads_as_well_of_two_memories_loses_neither_with_ours(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Two memories with one text, both titles as like the new one: the agent invalidated
    one after the export, the reviewer deleted it and renamed the other. Paired with the
    changed one, --ours --prune dropped the rename and pruned the other: nothing left."""
    same = "A troll blocks the way."
    store.add_memory(64, "West of House", mem("Troll A", text=same, turns="1"))
    store.add_memory(64, "West of House", mem("Troll B", text=same, turns="2"))
    for n in range(30):
        store.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))
    text = exported(store)
    store.invalidate_memory(64, "Troll B", "the troll left", turn=5)
    dropped = f"**[NOTE - PERMANENT] Troll B** *(Ep1, T2, +0)*\n{same}\n\n"
    text = text.replace(dropped, "").replace("Troll A", "Troll C")

    outcome = run(store, text, prune=True, resolution=Resolution.OURS)

    assert outcome.refused is None and outcome.plan.conflicts
    trolls = sorted(r for r in rows(store) if r[0].startswith("Troll"))
    assert ("Troll B", same, "SUPERSEDED", "the troll left") in trolls
    assert [r for r in trolls if r[2] == "ACTIVE"], trolls  # A, or its rename C, is live


def test_a_plain_import_first_does_not_keep_what_theirs_prune_deletes(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The re-run rule (a memory the file has renamed, which an earlier import took, is
    kept) took any memory with the same text: after a plain import, --theirs --prune kept
    a memory the reviewer deleted, which the same command run directly deletes."""

    def scenario(target: MemoryStore) -> str:
        target.add_memory(64, "West of House", mem("Dark here", text="It is dark.", turns="1"))
        target.add_memory(64, "West of House", mem("Grue warning", text="It is dark.", turns="2"))
        for n in range(30):
            target.add_memory(64, "West of House", mem(f"F{n}", turns=str(20 + n)))
        text = exported(target)
        target.invalidate_memory(64, "Grue warning", "no grue here", turn=9)
        for title in ("Dark here", "Grue warning"):
            block = next(b for b in blocks(text) if f"] {title}**" in b)
            text = text.replace(block + "\n\n", "")
        first = "**[NOTE - PERMANENT] F0**"
        return text.replace(first, f"**[NOTE - PERMANENT] Dark here!** *(Ep1, T3, +0)*\n"
                                   f"It is dark.\n\n{first}")  # fmt: skip

    text = scenario(store)
    plain = run(store, text)  # a retitle of the unchanged 'Dark here' needs --prune (F3)
    assert not plain.applied
    assert "an edit of the database's live memory 'Dark here'" in plain.plan.summary()
    # the database gains 'Dark here!' as a plain import took it before that rule (or an
    # agent learning it): the re-run rule's case
    store.add_memory(64, "West of House", mem("Dark here!", text="It is dark.", turns="3"))
    assert run(store, text, prune=True, resolution=Resolution.THEIRS).applied
    assert sorted(r[0] for r in rows(store) if not r[0].startswith("F")) == ["Dark here!"]


def test_respelled_titles_the_database_already_had_side_by_side_are_no_problem(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(64, "West of House", mem("Troll  here", text="double space", turns="1"))
    store.add_memory(64, "West of House", mem("Troll here", text="single space", turns="2"))
    text = exported(store)
    block = next(b for b in blocks(text) if "double space" in b)
    text = text.replace(block + "\n\n", "").replace(
        "**[NOTE - PERMANENT] Troll here** *(Ep1, T2, +0)*\nsingle space",
        "**[NOTE - PERMANENT - SUPERSEDED] Troll here** *(Ep1, T2, +0)*\n[Superseded at T3 by "
        '"Troll here"]\n~~single space~~\n\n**[NOTE - PERMANENT] Troll here** *(Ep1, T3, +0)*\n'
        "the troll moved",
    )

    outcome = run(store, text)

    assert outcome.applied and not outcome.plan.problems, outcome.plan.summary()
