"""Unresolved git conflict markers in a reviewed Memories.md are problems at their lines:
`memstore import` refuses the file instead of storing the markers in a memory's text (where
the agent would read them). A marker is a whole line: seven ``<``, ``=``, ``>`` or ``|``
(diff3), then a space or the line's end. Both readers (block by block, line by line) agree,
and a memory whose text holds such a line is written escaped, so it reads back."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memstore.cli as cli
from exporters import parse_memories_md, render_memories_md
from exporters.parse import parse_memories_md_rows, parse_rows_line_by_line
from memstore.models import Category, LocationInfo, LocationMemories, Memory, Persistence
from memstore.store import MemoryStore
from tests.conftest import MakeMemory
from tests.test_memories_md_canonical import edited_files
from tests.test_memories_md_roundtrip import any_memories, locations_of

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MARKERS = ["<<<<<<< HEAD", "=======", ">>>>>>> reviewer-branch", "||||||| merged common ancestor"]
#: Lines that only look like markers: text, read as text.
NOT_MARKERS = [
    "a ======= b",
    "=======x",
    "========",
    "<<<<<<<< HEAD",
    ">>>>>>",
    " =======",
    "=======\t",
    "<<<<<<<HEAD",
    "\\=======",
]
_MARKER = re.compile(r"(?:<{7}|={7}|>{7}|\|{7})(?: |$)")


def _file(text_lines: list[str]) -> str:
    body = "\n".join(text_lines)
    return (
        "# Location Memories\n\n## Location 27: Living Room\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n**[NOTE - PERMANENT] Lamp** *(Ep1, T2)*\nOn the table.\n\n"
        f"**[DISCOVERY - PERMANENT] Trap door** *(Ep1, T5)*\n{body}\n\n---\n"
    )


def _marker_lines(text: str) -> list[int]:
    return [n for n, line in enumerate(text.split("\n"), 1) if _MARKER.match(line)]


def test_conflict_markers_in_a_memory_text_are_problems_at_their_lines() -> None:
    text = _file(
        ["<<<<<<< HEAD", "Under the rug. A", "=======", "Under the rug. B", ">>>>>>> branch"]
    )

    result = parse_memories_md(text)

    assert [p.line for p in result.problems] == [12, 14, 16]
    assert all("conflict marker" in p.message for p in result.problems)
    kept = [m.title for location in result.locations for m in location.memories]
    assert kept == ["Lamp"]  # the memory holding the markers is skipped
    assert parse_memories_md_rows(text) == parse_rows_line_by_line(text)


@pytest.mark.parametrize("marker", MARKERS)
def test_every_kind_of_marker_is_a_problem_where_the_block_reader_would_read_it(
    marker: str,
) -> None:
    """A marker as a memory's only text line: a block the one-match reader would take."""
    text = _file([marker])

    rows = parse_memories_md_rows(text)

    assert [p.line for p in rows.problems] == [12]
    assert rows == parse_rows_line_by_line(text)


@pytest.mark.parametrize("marker", MARKERS)
def test_a_marker_between_memories_or_locations_is_a_problem(marker: str) -> None:
    text = _file(["Under the rug."])
    lines = text.split("\n")
    lines[10:10] = [marker, ""]  # a block of its own, before the trap door's
    lines[2:2] = [marker, ""]  # between the title and the location
    text = "\n".join(lines)

    rows = parse_memories_md_rows(text)

    assert [p.line for p in rows.problems] == [3, 13]
    assert rows == parse_rows_line_by_line(text)


@pytest.mark.parametrize("line", NOT_MARKERS)
def test_a_line_that_only_looks_like_a_marker_is_text(line: str) -> None:
    text = _file(["Under the rug.", line])

    result = parse_memories_md(text)

    assert result.problems == ()
    trap_door = result.locations[0].memories[1]
    assert trap_door.text.split("\n")[1] == line.replace("\\=", "=")


@pytest.mark.parametrize("marker", MARKERS)
def test_a_memory_text_holding_a_marker_line_is_written_escaped_and_reads_back(
    marker: str,
) -> None:
    memory = Memory(
        category=Category.NOTE,
        title="Diff",
        text=f"{marker}\nkeep {marker}\n{marker}",
        episode=1,
        turns="3",
        persistence=Persistence.PERMANENT,
    )
    entries = [LocationMemories(location=LocationInfo(id=5, name="Room"), memories=(memory,))]

    text = render_memories_md(entries)

    assert _marker_lines(text) == []
    result = parse_memories_md(text)
    assert result.problems == () and result.locations[0].memories == (memory,)


def test_import_refuses_a_file_with_conflict_markers(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The tester's reproduction: a merge left both sides of a text edit in the file."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(27, "Living Room", mem("Trap door", text="Under the rug."))
    file = tmp_path / "Memories.md"
    assert cli.main(["--db", str(db_path), "export", "--out", str(file)]) == 0
    exported = file.read_text()
    file.write_text(
        exported.replace(
            "Under the rug.\n",
            "<<<<<<< HEAD\nUnder the rug. A\n=======\nUnder the rug. B\n>>>>>>> reviewer\n",
        )
    )
    capsys.readouterr()

    code = cli.main(["--db", str(db_path), "import", str(file), "--apply"])

    out, err = capsys.readouterr()
    assert code == 1, out
    assert "nothing was applied" in err
    for number in _marker_lines(file.read_text()):
        assert f"line {number}: " in out and "conflict marker" in out, out
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT text FROM memories").fetchall() == [("Under the rug.",)]


MARKER_PIECE = st.sampled_from(MARKERS + NOT_MARKERS + ["=======  ", "<<<<<<< "])


@PROPERTY
@given(st.one_of(edited_files(MARKER_PIECE), edited_files(MARKER_PIECE, any_memories())))
def test_both_readers_report_every_marker_line_of_an_edited_file(text: str) -> None:
    rows = parse_memories_md_rows(text)

    assert rows == parse_rows_line_by_line(text)
    marker_problems = [p.line for p in rows.problems if "conflict marker" in p.message]
    assert marker_problems == _marker_lines(text)


_TEXT_PIECES = st.sampled_from([*MARKERS, *NOT_MARKERS, "x", "", "#", "---", " y"])


@PROPERTY
@given(
    locations_of(any_memories()),
    st.lists(st.lists(_TEXT_PIECES, max_size=4).map("\n".join), min_size=1, max_size=4),
)
def test_memory_texts_with_marker_lines_round_trip(
    entries: list[LocationMemories], texts: list[str]
) -> None:
    changed = []
    for n, entry in enumerate(entries):
        memories = tuple(
            m.model_copy(update={"text": texts[(n + k) % len(texts)]})
            for k, m in enumerate(entry.memories)
        )
        changed.append(entry.model_copy(update={"memories": memories}))
    text = render_memories_md(changed)

    assert _marker_lines(text) == []
    rows = parse_memories_md_rows(text)
    assert rows.problems == () and rows == parse_rows_line_by_line(text)
    assert parse_memories_md(render_memories_md(rows.as_models().locations)) == parse_memories_md(
        text
    )
