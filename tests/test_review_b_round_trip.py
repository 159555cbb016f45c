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
from exporters.base_line import END_LINE
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
    for cut in range(start, len(text)):
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
        ("a heading's underline", "It takes several", "---\nIt takes several"),  # (then text)
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
def test_a_memory_an_agent_learned_since_the_export_is_a_conflict_the_file_never_wins_alone(
    store: MemoryStore, mem: MakeMemory, prune: bool
) -> None:
    # F3: the reviewer retitles "Lamp" to "Brass lamp"; an agent learns a new "Brass lamp"
    # with the same episode and turns after the export. The conflict did not say that the
    # database's side was written since the export; --ours kept it, and with --prune
    # deleted "Lamp" (what the file's "Brass lamp" was an edit of). Review E F1: --theirs
    # must still take the file's side (a reviewer's fix of a memory an earlier import of
    # the same file added is such a conflict).
    for n in range(12):  # (so that one deletion stays under --prune's 10%)
        store.add_memory(99, "Filler", mem(f"F{n}", text="f", turns=str(n + 1)))
    store.add_memory(10, "Room", mem("Lamp", text="A brass lamp lies here.", turns="4"))
    text = export_memories_md(store).replace("] Lamp**", "] Brass lamp**")
    assert store.add_memory(10, "Room", mem("Brass lamp", text="It lasts 300 turns.", turns="4"))
    before = stored(store)
    outcome = import_memories(store, text, apply=True, prune=prune)
    assert not outcome.applied and stored(store) == before
    [conflict] = outcome.plan.conflicts
    assert "written in the database since the export" in str(conflict)
    for resolution in (Resolution.OURS, Resolution.SKIP):
        assert import_memories(store, text, apply=True, prune=prune, resolution=resolution)
        assert stored(store) == before, resolution
    import_memories(store, text, apply=True, prune=prune, resolution=Resolution.THEIRS)
    assert ("Brass lamp", "A brass lamp lies here.") in [
        (m.title, m.text) for m in store.memories(10)
    ]


def test_a_reviewer_fixes_a_memory_an_earlier_import_of_the_file_added(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review E F1: the fix was a conflict whose database side was always kept, and the
    # export then refused the file, advising the same --theirs
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    text = export_memories_md(store).replace(
        "\n---", "\n**[NOTE - PERMANENT] Grating** *(Ep1, T6, +0)*\nA gratin.\n\n---"
    )
    assert import_memories(store, text, apply=True).applied
    fixed = text.replace("A gratin.", "A grating.")
    assert not import_memories(store, fixed, apply=True).applied  # a conflict: choose
    assert import_memories(store, fixed, apply=True, resolution=Resolution.THEIRS).applied
    assert [m.text for m in store.memories(10)] == ["A lamp.", "A grating."]
    assert not import_memories(store, fixed, apply=False).plan.has_changes


def test_a_new_location_added_at_the_end_needs_its_closing_line(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review E F2 took a section the reviewer adds at the end, with no "---" after it, for
    # whole; but a file cut inside such a section stored its memories' texts as far as the
    # cut (reviews I F2, J J2): with no end line after it, it is a cut, new or not
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    section = (
        "\n## Location 11: Attic\n**Visits:** 1 | **Episodes:** 1\n\n### Memories\n\n"
        "**[NOTE - PERMANENT] Dust** *(Ep1, T7, +0)*\nDust everywhere.\n"
    )
    text = export_memories_md(store) + section
    store.add_memory(11, "Attic", mem("Bat", text="A bat."))  # an agent, there, meanwhile
    [problem] = import_memories(store, text, apply=False).plan.problems
    assert "the file ends inside location 11's section" in problem.message
    assert "close it with a '---' line" in problem.message
    closed = text + "\n---\n"
    outcome = import_memories(store, closed, apply=True)
    assert outcome.applied and not outcome.plan.problems
    assert [m.title for m in store.memories(11)] == ["Bat", "Dust"]
    assert not import_memories(store, closed, apply=False).plan.problems  # review F F1: again
    unclosed = export_memories_md(store).removesuffix(f"---\n\n{END_LINE}\n")
    [problem] = import_memories(store, unclosed, apply=False).plan.problems
    assert "the file ends inside location 11's section" in problem.message


@pytest.mark.parametrize("after", ["---", "## Location 11: Attic"])
def test_a_memory_right_above_a_separator_or_a_location_header_is_read_whole(
    store: MemoryStore, mem: MakeMemory, after: str
) -> None:
    # review E F3: a memory whose text ended right above "---" or a location header (no
    # empty line between) was skipped
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    text = export_memories_md(store).replace("A lamp.\n\n---", f"A brass lamp.\n{after}")
    if after != "---":
        text += "**Visits:** 1 | **Episodes:** 1\n\n---\n"
    outcome = import_memories(store, text, apply=True)
    assert outcome.applied and not outcome.plan.problems, outcome.plan.summary()
    assert [m.text for m in store.memories(10)] == ["A brass lamp."]


def test_a_skipped_link_of_a_memory_the_file_added_adds_no_copy_when_run_again(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review D F1: the file adds a superseded memory whose successor names nothing;
    # --skip-invalid stored it with no successor, and every run again added another copy
    # (it is now skipped, review J J1)
    store.add_memory(10, "Room", mem("Lamp", text="A lamp.", turns="4"))
    text = export_memories_md(store).replace(
        "\n---",
        "\n**[NOTE - PERMANENT - SUPERSEDED] Old lamp** *(Ep1, T2, +0)*\n"
        '[Superseded at T3 by "Nothing"]\n~~An old lamp.~~\n\n---',
    )
    for _ in range(3):
        import_memories(store, text, apply=True, skip_invalid=True)
    assert [m.title for m in store.memories(10, include_superseded=True)] == ["Lamp"]


def test_a_resolution_may_be_named_by_its_value(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    text = export_memories_md(store).replace("A lamp.", "A brass lamp.")
    store.supersede_memory(10, "Room", "Lamp", mem("Lamp", text="A lamp, lit."))
    outcome = import_memories(store, text, apply=True, resolution="ours")  # type: ignore[arg-type]
    assert outcome.applied  # (a plain "ours" was taken for no resolution: nothing applied)
    with pytest.raises(ValueError, match="'mine' is not a valid Resolution"):
        import_memories(store, text, apply=True, resolution="mine")  # type: ignore[arg-type]


def test_a_location_header_inside_a_memory_s_text_never_cuts_it(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review C C1: "## Location 99: X" right under a line of the text, the rest after it:
    # the memory was stored up to the header (review E F3: with nothing but a new section
    # after it, the memory above is whole: the test above)
    store.add_memory(10, "Troll Room", mem("Troll fight", text=TEXT))
    text = export_memories_md(store).replace("\nIt takes several", "\n## Location 99: X\nIt takes")
    [problem] = import_memories(store, text, apply=False).plan.problems
    assert "memory 'Troll fight' skipped" in problem.message
    import_memories(store, text, apply=True, skip_invalid=True)
    assert [m.text for m in store.memories(10)] == [TEXT]


def test_a_note_after_a_section_is_no_memory_s_text(store: MemoryStore, mem: MakeMemory) -> None:
    # review F F4: an HTML comment after a section's "---" skipped the memory above it
    store.add_memory(10, "Room", mem("Lamp", text="A lamp."))
    store.add_memory(20, "Hall", mem("Door", text="A door."))
    text = export_memories_md(store).replace("A lamp.", "A brass lamp.")
    text = text.replace("---\n\n## Location 20", "---\n\n<!-- reviewed -->\n\n## Location 20")
    [problem] = import_memories(store, text, apply=False).plan.problems
    assert problem.message == "text outside any memory ignored"
    assert import_memories(store, text, apply=True, skip_invalid=True).applied
    assert [m.text for m in store.memories(10)] == ["A brass lamp."]


def test_a_section_added_to_the_export_of_an_empty_database_is_no_cut_when_run_again(
    store: MemoryStore,
) -> None:
    # (the export's locations with memories: none; the check read the database's instead)
    text = export_memories_md(store) + (
        "\n## Location 11: Attic\n**Visits:** 1 | **Episodes:** 1\n\n### Memories\n\n"
        "**[NOTE - PERMANENT] Dust** *(Ep1, T7, +0)*\nDust everywhere.\n\n---\n"
    )
    assert "memstore-base" in text
    assert import_memories(store, text, apply=True).applied
    again = import_memories(store, text, apply=False)
    assert not again.plan.problems and not again.plan.has_changes
