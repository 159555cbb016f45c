"""Review B: what a reviewer's file could make the import store that it never said.

F1. A Memories.md cut short while it was written (an editor's crash, a full disk, a copy
    stopped) imported with no problem: the last memory's text was stored as far as the cut,
    and ``--prune`` deleted the memories after it. memstore closes every section with a
    "---" line: a file with an export base whose last section is not closed is a problem.
F2. ``--skip-invalid`` stored a memory's text cut at a line the reader could not place (an
    empty line between two paragraphs, a bold ``**[IMPORTANT]**`` lead, a ``## Tip``
    heading, a ``---`` under a line of text): the rest of what the agent learned was
    erased, while the problem said the stray line was ignored. The memory is now skipped,
    and kept as the database has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import parse_memories_md
from memstore.cli import main
from memstore.md_store import export_memories_md
from memstore.merge import Resolution
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory

TEXT = "Attack the troll with the sword.\nIt takes several blows."


def stored(store: MemoryStore) -> list[tuple[object, ...]]:
    with store.transaction(write=False) as conn:
        found = conn.exec_driver_sql(
            "SELECT id, location_id, title, text, status FROM memories ORDER BY id"
        )
        return [tuple(row) for row in found]


def test_a_file_cut_short_anywhere_changes_nothing(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(10, "Room A", mem("First", text="line one of a text\nline two of it"))
    store.add_memory(10, "Room A", mem("Second", text="The troll guards the passage east."))
    store.add_memory(20, "Room B", mem("Third", text="The lamp is in the living room."))
    text = export_memories_md(store)
    before = stored(store)
    start = text.index("## Location 10")
    for cut in range(start, len(text) - len("---\n") + 1):
        for prune in (False, True):
            outcome = import_memories(store, text[:cut], apply=True, prune=prune)
            assert stored(store) == before, (cut, outcome.plan.summary())
    cut = text.index("living room.") + len("living")
    [problem] = import_memories(store, text[:cut], apply=False).plan.problems
    assert "the file ends inside location 20's section" in problem.message


def test_the_command_refuses_a_file_cut_short_and_prunes_nothing(
    tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.db"
    with MemoryStore.open(db) as store:
        for n in range(20):
            store.add_memory(10 + n // 5, f"Room {n // 5}", mem(f"Fact {n}", text=f"Fact {n}."))
    out = tmp_path / "Memories.md"
    assert main(["--db", str(db), "export", "--out", str(out)]) == 0
    text = out.read_text()
    out.write_text(text[: text.index("Fact 18.") + len("Fact")])
    assert main(["--db", str(db), "import", str(out), "--apply", "--prune"]) != 0
    assert "cut short?" in capsys.readouterr().out
    with MemoryStore.open(db) as store:
        assert [m.text for m in store.memories(13)][-2:] == ["Fact 18.", "Fact 19."]


def test_a_hand_written_file_with_no_section_closed_is_read_as_before() -> None:
    text = "## Location 5: Cave\n\n**[NOTE] Dark** *(Ep1, T1)*\nIt is dark.\n"
    result = parse_memories_md(text)
    assert not result.problems and result.locations[0].memories[0].text == "It is dark."


@pytest.mark.parametrize(
    ("edit", "old", "new"),
    [
        ("a paragraph break", "It takes several", "\nIt takes several"),
        ("a bold lead", "Attack the troll", "**[IMPORTANT]** Attack the troll"),
        ("a heading", "It takes several", "## Tip\nIt takes several"),
        ("a smaller heading", "It takes several", "### Tip\nIt takes several"),
        ("a heading's underline", "It takes several", "---\nIt takes several"),
        ("a visits line", "It takes several", "**Visits:** 3 | **Episodes:** 1\nIt takes several"),
    ],
)
def test_skip_invalid_never_stores_a_text_cut_at_a_line_it_could_not_place(
    store: MemoryStore, mem: MakeMemory, edit: str, old: str, new: str
) -> None:
    store.add_memory(10, "Troll Room", mem("Troll fight", text=TEXT))
    store.add_memory(10, "Troll Room", mem("Sword", text="The sword glows."))
    text = export_memories_md(store).replace(old, new).replace("glows.", "glows blue.")
    outcome = import_memories(store, text, apply=False)
    [problem] = outcome.plan.problems
    assert "memory 'Troll fight' skipped" in problem.message, edit
    outcome = import_memories(store, text, apply=True, skip_invalid=True)
    assert outcome.applied
    assert [(m.title, m.text) for m in store.memories(10)] == [
        ("Troll fight", TEXT),
        ("Sword", "The sword glows blue."),  # the rest of the file is applied
    ]


@pytest.mark.parametrize("prune", [False, True])
def test_a_memory_an_agent_learned_after_the_export_is_never_overwritten_by_the_file(
    store: MemoryStore, mem: MakeMemory, prune: bool
) -> None:
    # F3: the reviewer retitles "Lamp" to "Brass lamp"; an agent learns a new "Brass lamp"
    # with the same episode and turns after the export. The file's memory was merged field
    # by field with the agent's row, and --theirs wrote the file's text over it (with
    # --prune, "Lamp" was deleted too). It is a conflict the database's side of which is
    # kept whatever is chosen, and "Lamp" (maybe what the file's was edited from) is kept.
    for n in range(12):  # (so that one deletion stays under --prune's 10%)
        store.add_memory(99, "Filler", mem(f"F{n}", text="f", turns=str(n + 1)))
    store.add_memory(10, "Room", mem("Lamp", text="A brass lamp lies here.", turns="4"))
    text = export_memories_md(store).replace("] Lamp**", "] Brass lamp**")
    assert store.add_memory(10, "Room", mem("Brass lamp", text="It lasts 300 turns.", turns="4"))
    before = stored(store)
    outcome = import_memories(store, text, apply=True, prune=prune)
    assert not outcome.applied and stored(store) == before
    [conflict] = outcome.plan.conflicts
    assert "the database's is kept whatever you choose" in str(conflict)
    for resolution in (Resolution.THEIRS, Resolution.OURS, Resolution.SKIP):
        import_memories(store, text, apply=True, prune=prune, resolution=resolution)
        assert stored(store) == before, resolution


def test_a_skipped_link_of_a_memory_the_file_added_adds_no_copy_when_run_again(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review D F1: the file adds a superseded memory whose successor names nothing;
    # --skip-invalid stores it with no successor, and every run again added another copy
    store.add_memory(10, "Room", mem("Lamp", text="A lamp.", turns="4"))
    text = export_memories_md(store).replace(
        "\n---",
        "\n**[NOTE - PERMANENT - SUPERSEDED] Old lamp** *(Ep1, T2, +0)*\n"
        '[Superseded at T3 by "Nothing"]\n~~An old lamp.~~\n\n---',
    )
    for _ in range(3):
        import_memories(store, text, apply=True, skip_invalid=True)
    assert [m.title for m in store.memories(10, include_superseded=True)].count("Old lamp") == 1


def test_a_resolution_may_be_named_by_its_value(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    text = export_memories_md(store).replace("A lamp.", "A brass lamp.")
    store.supersede_memory(10, "Room", "Lamp", mem("Lamp", text="A lamp, lit."))
    outcome = import_memories(store, text, apply=True, resolution="ours")  # type: ignore[arg-type]
    assert outcome.applied  # (a plain "ours" was taken for no resolution: nothing applied)
    with pytest.raises(ValueError, match="'mine' is not a valid Resolution"):
        import_memories(store, text, apply=True, resolution="mine")  # type: ignore[arg-type]


def test_prune_of_the_sections_after_the_file_s_last_needs_force(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review C C2: a file cut right after a section's "---" cannot be told from a shorter
    # file; --prune deleted the memories of the sections after it (under the 10% guard)
    for n in range(30):
        store.add_memory(10 + n // 10, f"Room {n // 10}", mem(f"Fact {n}", text=f"Fact {n}."))
    store.add_memory(20, "Last", mem("End", text="The end."))
    text = export_memories_md(store)
    cut = text[: text.index("## Location 20")]
    outcome = import_memories(store, cut, apply=True, prune=True)
    assert not outcome.applied and "a file cut short after a section?" in (outcome.refused or "")
    assert [m.title for m in store.memories(20)] == ["End"]
    removed = text.replace(text[text.index("## Location 11") : text.index("## Location 12")], "")
    assert import_memories(store, removed, apply=True, prune=True, force=True).applied
    assert not store.memories(11) and [m.title for m in store.memories(20)] == ["End"]
