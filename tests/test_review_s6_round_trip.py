"""Review S6 B: the review round trip.

Was: a file imported again after a later reviewer reverted its edit undid that revert,
silently: the memory's text (or status) went back to the first file's, though a location's
name an import set was already kept against exactly this (F2).
"""

from __future__ import annotations

from pathlib import Path

from memstore import MemoryStore
from memstore.md_store import export_memories_md
from memstore.store_import import import_memories
from tests.conftest import note

LOCKED = "The grating is locked."
OPEN = "The grating opens from above."


def test_a_file_imported_again_keeps_a_later_revert_of_its_text(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED))
        alice = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, alice, apply=True).applied
        bob = export_memories_md(store).replace(OPEN, LOCKED)  # Bob reverts Alice's edit
        assert import_memories(store, bob, apply=True).applied

        again = import_memories(store, alice, apply=True)  # Alice's file, once more

        assert [m.text for m in store.memories(80)] == [LOCKED]
        assert again.plan.conflicts == ()
        (warning,) = again.plan.warnings
        assert "'Grating': the file's text is one the database had since the export" in warning
        # an edit of a fresh export still sets it again
        carol = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, carol, apply=True).applied
        assert [m.text for m in store.memories(80)] == [OPEN]


LIVE = f"**[NOTE - PERMANENT] Grating** *(Ep1, T5, +0)*\n{LOCKED}\n"
INVALIDATED = (
    f"**[NOTE - PERMANENT - SUPERSEDED] Grating** *(Ep1, T5, +0)*\n"
    f'[Invalidated at T5: "wrong"]\n~~{LOCKED}~~\n'
)


def test_a_file_imported_again_keeps_a_later_revival(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="5"))
        export = export_memories_md(store)
        assert LIVE in export
        alice = export.replace(LIVE, INVALIDATED)  # Alice invalidates it
        assert import_memories(store, alice, apply=True).applied
        assert store.memories(80) == []
        revived = export_memories_md(store)
        assert INVALIDATED in revived
        bob = revived.replace(INVALIDATED, LIVE)  # Bob brings it back
        assert import_memories(store, bob, apply=True, resolution="theirs").applied
        assert [m.title for m in store.memories(80)] == ["Grating"]

        again = import_memories(store, alice, apply=True)

        assert [m.title for m in store.memories(80)] == ["Grating"]  # still live
        assert "'Grating': the file's status" in again.plan.warnings[0]
