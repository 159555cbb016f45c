"""Review D: a fuzzer of twins and agent writes against the import.

F2. With ``--prune --force``, a file that makes an old "Stove" live again and retitles
    the live "Stove" raised SQLite's IntegrityError (one live memory per title) out of
    ``import``: the old one became live before the prune deleted the live one. Deletions
    now come before any memory takes the title they free. (F1, a copy added on every run
    of ``--skip-invalid``, is in test_review_b_round_trip.py.)
"""

from __future__ import annotations

import pytest

from memstore.md_store import export_memories_md
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory


@pytest.mark.parametrize("twins", [True, False])
def test_prune_frees_a_title_before_an_old_memory_takes_it_again(
    store: MemoryStore, mem: MakeMemory, twins: bool
) -> None:
    store.add_memory(79, "Kitchen", mem("Stove", text="The stove is cold.", turns="2"))
    if twins:  # a later "Stove" with the same key
        store.supersede_memory(79, "Kitchen", "Stove", mem("Stove", text="A lamp.", turns="2"))
        struck = '[Superseded at T2 by "Stove"]\n~~The stove is cold.~~'
    else:
        store.invalidate_memory(79, "Stove", "gone", turn=3, episode=1)
        store.add_memory(79, "Kitchen", mem("Stove", text="A lamp.", turns="4"))
        struck = '[Invalidated at T3: "gone"]\n~~The stove is cold.~~'
    text = export_memories_md(store)
    turns = "T2" if twins else "T4"
    text = (
        text.replace("PERMANENT - SUPERSEDED] Stove", "PERMANENT] Stove")
        .replace(struck, "The stove is cold.")
        .replace(
            f"PERMANENT] Stove** *(Ep1, {turns}, +0)*\nA lamp.",
            f"PERMANENT] Trapdoor** *(Ep1, {turns}, +0)*\nA lamp.",
        )
    )
    outcome = import_memories(store, text, apply=True, prune=True, force=True)
    assert outcome.applied and not outcome.plan.problems
    assert sorted((m.title, m.text, m.status.value) for m in store.memories(79, True)) == [
        ("Stove", "The stove is cold.", "ACTIVE"),
        ("Trapdoor", "A lamp.", "ACTIVE"),
    ]


def test_a_store_made_from_a_path_says_to_open_it(tmp_path: object) -> None:
    # review E (outside its range): MemoryStore("/path.db") raised AttributeError
    with pytest.raises(TypeError, match=r"MemoryStore\.open\("):
        MemoryStore(str(tmp_path))  # type: ignore[arg-type]
