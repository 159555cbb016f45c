"""Review C, C2: a Memories.md cut short right after a section's "---" line read as a file
whose reviewer deleted the sections after it, and ``import --prune`` deleted their
memories (within its 10% guard, so nothing stopped it).

The export now ends with an end line (``exporters.base_line.END_LINE``). A file with an
export base and no end line is one that may have been cut short: ``--prune`` refuses,
without ``--force``, to delete the memories of a location the file has no section for.
A reviewer who deletes sections keeps the end line, and their deletions go through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import parse_memories_md, render_memories_md
from exporters.base_line import END_LINE, ExportBase
from memstore.cli import main
from memstore.md_store import export_memories_md
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory


def stored(store: MemoryStore) -> list[tuple[object, ...]]:
    with store.transaction(write=False) as conn:
        found = conn.exec_driver_sql("SELECT id, location_id, title, text, status FROM memories")
        return sorted(tuple(row) for row in found)


def fill(store: MemoryStore, mem: MakeMemory, locations: int = 12, each: int = 3) -> None:
    for n in range(locations * each):
        place = 10 + n // each
        store.add_memory(place, f"Room {place}", mem(f"Fact {n}", text=f"Fact {n} is true."))


def section(text: str, location_id: int) -> tuple[int, int]:
    """Where location ``location_id``'s section starts and ends (after its "---" line)."""
    start = text.index(f"## Location {location_id}:")
    return start, text.index("---\n", start) + len("---\n")


def test_a_file_cut_after_any_line_prunes_nothing(store: MemoryStore, mem: MakeMemory) -> None:
    fill(store, mem)
    text = export_memories_md(store)
    before = stored(store)
    cuts = [at + 1 for at, char in enumerate(text) if char == "\n"][:-1]
    assert len(cuts) > 100
    for cut in cuts:
        outcome = import_memories(store, text[:cut], apply=True, prune=True)
        assert stored(store) == before, (cut, outcome.plan.summary())


def test_the_cut_is_named_and_force_still_prunes(store: MemoryStore, mem: MakeMemory) -> None:
    fill(store, mem)
    text = export_memories_md(store)
    cut = section(text, 20)[1]  # the last section, 21, is lost
    outcome = import_memories(store, text[:cut], apply=True, prune=True)
    assert not outcome.applied and outcome.prune_guard is not None
    assert outcome.prune_guard.startswith(
        "the file does not end with its end line (<!-- memstore-end"
    )
    assert "--prune would delete 3 memories at 1 location the file has no section for" in (
        outcome.prune_guard
    )
    assert "location 21 'Fact 33'" in outcome.prune_guard
    forced = import_memories(store, text[:cut], apply=True, prune=True, force=True)
    assert forced.applied and [m.title for m in store.memories(21)] == []


def test_a_reviewer_who_deletes_the_last_sections_keeps_the_end_line(
    store: MemoryStore, mem: MakeMemory
) -> None:
    fill(store, mem)
    text = export_memories_md(store)
    reviewed = text[: section(text, 21)[0]] + text[section(text, 21)[1] :]
    outcome = import_memories(store, reviewed, apply=True, prune=True)
    assert outcome.applied and outcome.prune_guard is None
    assert store.memories(21) == [] and len(store.memories(20)) == 3


def test_deletions_inside_a_section_need_no_end_line(store: MemoryStore, mem: MakeMemory) -> None:
    fill(store, mem)
    text = export_memories_md(store).replace(END_LINE + "\n", "")
    start, end = section(text, 15)
    reviewed = text[:start] + text[start:end].replace("Fact 15 is true.", "X") + text[end:]
    at = reviewed.index("**[NOTE - PERMANENT] Fact 16**")
    reviewed = reviewed[:at] + reviewed[reviewed.index("\n\n", at) + 2 :]
    outcome = import_memories(store, reviewed, apply=True, prune=True)
    assert outcome.applied, outcome.prune_guard
    assert [m.title for m in store.memories(15)] == ["Fact 15", "Fact 17"]


def test_a_section_added_after_the_end_line_is_read(store: MemoryStore, mem: MakeMemory) -> None:
    fill(store, mem, locations=2)
    text = export_memories_md(store)
    added = (
        "\n## Location 99: Attic\n**Visits:** 0 | **Episodes:** none\n\n### Memories\n\n"
        "**[NOTE - PERMANENT] Dusty** *(Ep1, T1)*\nIt is dusty.\n\n---\n"
    )
    outcome = import_memories(store, text + added, apply=True, prune=True)
    assert outcome.applied and not outcome.plan.problems
    assert [m.title for m in store.memories(99)] == ["Dusty"]
    assert len(stored(store)) == 7


def test_the_end_line_is_written_last_by_an_export_only() -> None:
    base = ExportBase("5f0c9a3e", 4)
    assert render_memories_md([], base).endswith(f"-->\n\n{END_LINE}\n")
    assert END_LINE not in render_memories_md([])
    for line in (END_LINE, "<!-- memstore-end -->", "  <!-- memstore-end: anything -->\t"):
        parsed = parse_memories_md(f"# Location Memories\n\n{line}\n")
        assert parsed.ended and not parsed.problems, line
    for line in ("<!-- memstore-ending -->", "x <!-- memstore-end -->", "<!-- memstore-end"):
        parsed = parse_memories_md(f"# Location Memories\n\n{line}\n")
        assert not parsed.ended and parsed.problems, line


@pytest.mark.parametrize(
    "text", ["<!-- memstore-end -->", "a\n<!-- memstore-end: x -->", "<!-- memstore-base: x"]
)
def test_a_text_line_shaped_like_a_mark_reads_back_as_written(
    store: MemoryStore, mem: MakeMemory, text: str
) -> None:
    store.add_memory(5, "Cave", mem("Marked", text=text))
    exported = export_memories_md(store)
    parsed = parse_memories_md(exported)
    assert parsed.ended and not parsed.problems
    assert parsed.locations[0].memories[0].text == text
    cut = exported[: exported.index("\n---\n") + 5]  # the memory is whole; the end line is not
    assert not parse_memories_md(cut).ended


def cut_export(folder: Path, mem: MakeMemory) -> tuple[Path, Path, str]:
    """(database, Memories.md, its whole text): the file exported, then cut right after
    location 20's section (location 21's, the last, is lost)."""
    db = folder / "m.db"
    with MemoryStore.open(db) as store:
        fill(store, mem)
    out = folder / "Memories.md"
    assert main(["--db", str(db), "export", "--out", str(out)]) == 0
    text = out.read_text()
    out.write_text(text[: section(text, 20)[1]])
    return db, out, text


def test_the_command_refuses_a_file_cut_after_a_separator(
    tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out, _text = cut_export(tmp_path, mem)
    assert main(["--db", str(db), "import", str(out), "--apply", "--prune"]) != 0
    said = capsys.readouterr()
    assert "cut short after a '---' line?" in said.out + said.err
    with MemoryStore.open(db) as store:
        assert len(store.memories(21)) == 3


def test_export_over_a_cut_file_says_it_may_be_cut(
    tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out, text = cut_export(tmp_path, mem)
    capsys.readouterr()
    assert main(["--db", str(db), "export", "--out", str(out)]) != 0
    said = capsys.readouterr().err
    assert "it does not end with its end line, which memstore writes last: if it was cut " in said
    advice = f"put the end line back at its end, then import it (memstore import --db {db} {out} "
    assert advice in said
    assert said.endswith(" --apply --prune)\n")  # (3 of 36 memories: within the 10% guard)
    assert main(["--db", str(db), "export", "--out", str(out), "--force"]) == 0
    assert out.read_text() == text


# --- review G, of the end line itself -----------------------------------------------------


def old_export(store: MemoryStore) -> str:
    """The export as memstore wrote it before the end line: a text line that is an end
    line was written as it is, and the file ended after its last "---"."""
    text = export_memories_md(store).removesuffix(f"\n{END_LINE}\n")
    return text.replace("\\<!-- memstore-", "<!-- memstore-")


def test_a_text_line_of_an_older_export_shaped_like_the_end_line_is_text(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # G F1: the first such line anywhere was blanked: the text lost it on import, and a
    # cut of the file passed for whole
    fill(store, mem, locations=4)
    store.add_memory(5, "Cave", mem("Marked", text="a\n<!-- memstore-end -->"))
    store.add_memory(6, "Pit", mem("Marked", text="<!-- memstore-end: x -->\nb"))
    text = old_export(store)
    assert "\na\n<!-- memstore-end -->\n" in text
    parsed = parse_memories_md(text)
    assert not parsed.ended and not parsed.problems
    texts = {e.location.id: e.memories[0].text for e in parsed.locations if e.location.id < 10}
    assert texts == {5: "a\n<!-- memstore-end -->", 6: "<!-- memstore-end: x -->\nb"}
    assert not import_memories(store, text, apply=False).plan.has_changes
    before = stored(store)
    cut = text[: section(text, 12)[1]]
    outcome = import_memories(store, cut, apply=True, prune=True)
    assert not outcome.applied and stored(store) == before


def test_an_end_line_that_is_not_last_does_not_say_the_file_is_whole(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # G F2: an end line moved up (or a section moved below it) still counted, so a cut
    # after it deleted what followed. (A cut right after an end line that is not last
    # cannot be told from a whole file: memstore writes it last.)
    fill(store, mem, locations=4)
    text = export_memories_md(store)
    start, end = section(text, 13)
    assert parse_memories_md(text[:start] + text[end:] + "\n" + text[start:end]).ended is False
    title, base, rest = text.removesuffix(f"\n{END_LINE}\n").split("\n", 2)
    moved_up = f"{title}\n{base}\n{END_LINE}\n{rest}"
    assert parse_memories_md(moved_up).ended is False and not parse_memories_md(moved_up).problems
    before = stored(store)
    outcome = import_memories(store, moved_up[: section(moved_up, 12)[1]], apply=True, prune=True)
    assert not outcome.applied and stored(store) == before
    assert outcome.prune_guard is not None
    assert outcome.prune_guard.startswith("the file does not end with its end line")


def test_an_end_line_above_the_base_line_leaves_the_base_line_read(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # G F5: the base line was reported malformed, and the file compared 2-way
    fill(store, mem, locations=2)
    text = export_memories_md(store)
    title, rest = text.split("\n", 1)
    parsed = parse_memories_md(f"{title}\n{END_LINE}\n{rest}")
    assert parsed.base is not None and not parsed.problems and parsed.ended


def test_a_misspelled_or_cut_end_line_is_named(store: MemoryStore, mem: MakeMemory) -> None:
    # G F6: only "text outside any memory ignored"
    fill(store, mem, locations=2)
    text = export_memories_md(store)
    for wrong in (text[:-10], text.replace(END_LINE, "<!-- memstore-end-->")):
        [problem] = parse_memories_md(wrong).problems
        assert problem.line == text.count("\n")
        assert problem.message.startswith("an end line memstore does not write"), problem


def test_a_last_section_with_no_separator_above_the_end_line_is_not_cut(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # G F7: "cut short?" for a file that ends with its end line
    fill(store, mem, locations=2)
    text = export_memories_md(store)
    unclosed = text.replace(f"---\n\n{END_LINE}", f"\n{END_LINE}")
    parsed = parse_memories_md(unclosed)
    assert parsed.ended and not parsed.problems
    assert not import_memories(store, unclosed, apply=False).plan.problems


def test_export_s_advice_for_a_file_without_its_end_line_keeps_the_ten_percent_guard(
    tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    # G F4: export advised --prune --force, which also lifts the 10% guard
    db, out, text = cut_export(tmp_path, mem)
    out.write_text(text[: section(text, 19)[1]])  # two sections of 12 lost: 6 of 36
    capsys.readouterr()
    assert main(["--db", str(db), "export", "--out", str(out)]) != 0
    said = capsys.readouterr().err
    assert "put the end line back at its end, then import it" in said
    assert f"(memstore import --db {db} {out} --apply --prune --force)" in said
    out.write_text(text[: section(text, 20)[0]] + f"\n{END_LINE}\n")
    with MemoryStore.open(db) as store:
        guard = import_memories(store, out.read_text(), apply=False, prune=True).prune_guard
    assert guard is not None and "more than 10%" in guard


# --- review I -------------------------------------------------------------------------------


def test_a_file_cut_inside_a_section_the_reviewer_added_changes_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # I F2: the section was new, so "nothing stored can be lost by it": the cut text of its
    # memory was stored, without --prune and with no problem
    fill(store, mem, locations=2)
    text = export_memories_md(store)
    added = (
        "## Location 400: Maze\n**Visits:** 1 | **Episodes:** 2\n\n### Memories\n\n"
        "**[DANGER - CORE] Thief** *(Ep2, T140)*\nThe thief steals.\nKeep moving.\n\n"
        "**[NOTE - PERMANENT] Skeleton** *(Ep2, T141)*\nA skeleton.\n\n---\n\n"
    )
    reviewed = text.replace(END_LINE, added + END_LINE)
    before = stored(store)
    start = reviewed.index("## Location 400")
    for cut in range(start, reviewed.index("---\n", start)):
        outcome = import_memories(store, reviewed[:cut], apply=True)
        assert stored(store) == before, (cut, outcome.plan.summary())
        assert store.location(400) is None, cut
    [problem] = import_memories(
        store, reviewed[: reviewed.index("Keep m") + 6], apply=False
    ).plan.problems
    assert "the file ends inside location 400's section" in problem.message
    assert import_memories(store, reviewed, apply=True).applied
    assert [m.title for m in store.memories(400)] == ["Thief", "Skeleton"]


def test_a_file_cut_inside_a_section_added_after_the_end_line_changes_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review J J2: a section after the end line was taken for a reviewer's addition, so a
    # cut inside it stored its text as far as the cut (and a location named 'Grat')
    fill(store, mem, locations=2)
    reviewed = export_memories_md(store) + (
        "\n## Location 400: Grating Room\n**Visits:** 1 | **Episodes:** 2\n\n### Memories\n\n"
        "**[NOTE - PERMANENT] Grating** *(Ep2, T140)*\nA grating.\nKeep trying.\n\n---\n"
    )
    before = stored(store)
    start = reviewed.index("## Location 400")
    for cut in range(start, reviewed.rindex("---\n")):
        outcome = import_memories(store, reviewed[:cut], apply=True)
        assert stored(store) == before, (cut, outcome.plan.summary())
        assert store.location(400) is None, cut
    assert import_memories(store, reviewed, apply=True).applied
    assert [m.text for m in store.memories(400)] == ["A grating.\nKeep trying."]
