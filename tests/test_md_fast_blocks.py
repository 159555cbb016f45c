"""The common cases of the fast path (exporters.fast_blocks: a plain memory block, a struck
SUPERSEDED one, read with almost no check in Python) give exactly what the general block
reader gives, and only rows that the model accepts; a run of blocks is read as block by
block, with its line breaks counted."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporters import render_memories_md
from exporters.fast_blocks import (
    read_general_memory_block,
    read_memory_block,
    read_memory_run,
)
from exporters.parse import parse_memories_md_rows, parse_rows_line_by_line
from memstore.md_rows import memory_row_problem
from memstore.models import LocationInfo, LocationMemories, Memory
from tests.test_memories_md_roundtrip import any_memories, canonical_memories

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PLAIN = "**[NOTE - CORE] The lamp** *(Ep3, T12, +5)*\nIt is brass."
STRUCK = (
    "**[DANGER - PERMANENT - SUPERSEDED] The troll** *(Ep2, T40)*\n"
    '[Superseded at Ep3, T45 by "The troll is dead"]\n~~He blocks the way.~~'
)
INVALIDATED = (
    "**[NOTE - CORE - SUPERSEDED] Grue** *(Ep1, T9, -10)*\n"
    '[Invalidated at T12: "Proven false"]\n~~Dark rooms are safe.~~'
)
#: Blocks at the edges of the common cases (each read by the general reader too).
EDGES = [
    PLAIN,
    STRUCK,
    INVALIDATED,
    "**[NOTE - CORE] The lamp** *(Ep3, T12)*",  # no text
    "**[NOTE - CORE] The lamp** *(Ep3, T12)*\n",  # a last line left empty
    "**[NOTE - CORE] The lamp** *(Ep0, T12)*\nx",  # episode 0
    "**[NOTE - CORE] The lamp** *(Ep03, T12)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep1000, T12)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T12-14)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T14-12)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T12-)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T" + "9" * 19 + ")*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T" + "9" * 18 + ")*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T1, +0)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T1, -0)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T1, +007)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T1, +1000)*\nx",
    "**[NOTE - CORE]  The lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] \tlamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] \x1flamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] lamp\x00** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] \x00lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] * ** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] a** *(Ep1, T1)*** *(Ep1, T1)*\nx",
    "**[NOTE - CORE] " + "t" * 500 + "** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] " + "t" * 501 + "** *(Ep3, T1)*\nx",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n" + "x" * 20_000,
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n" + "x" * 20_001,
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n#x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n*x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n[x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n\tx",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n---x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n--x",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na\\*b",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\ncafé",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na\nb",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na\n#b",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na\x00b",
    '**[NOTE - CORE] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\nx',
    "**[NOTE - CORE] lamp** *(Ep3, T1)* \nx",
    "**[NOTE - EPHEMERAL] lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE - ACTIVE] lamp** *(Ep3, T1)*\nx",
    "**[NOTE] lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE - TENTATIVE] lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\nx",
    "**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n~~x~~",
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by ""]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "a"b"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2: "why"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at T2 by "x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at T2: " "]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at T2: "\\tx"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at T2: "\x00x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at Ep3, T2: "x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Invalidated at Ep0, T2: "x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\n~~~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\n~~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\n~~a~~b~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\n~~a\nb~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\nx',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"] \n~~x~~',
    "**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T"
    + "9" * 19
    + ' by "x"]\n~~x~~',
    '**[NOTE - CORE] lamp** *(Ep3, T1)*\n[Invalidated at T2: "x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1-2)*\n[Superseded at T2 by "x"]\n~~x~~',
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T2-1)*\n[Superseded at T2 by "x"]\n~~x~~',
    "**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1-"
    + "9" * 19
    + ')*\n[Superseded at T2 by "x"]\n~~x~~',
    "**[NOTE - CORE] The lamp** *(Ep3, T12-" + "9" * 18 + ")*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T12-" + "9" * 19 + ")*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T12-12)*\nx",
    "**[NOTE - CORE] The lamp** *(Ep3, T12--13)*\nx",
]


def _blocks_of(memory: Memory) -> list[str]:
    entry = LocationMemories(location=LocationInfo(id=1, name="Room"), memories=(memory,))
    return [b for b in render_memories_md([entry]).split("\n\n") if b.startswith("**[")]


def _same(block: str) -> None:
    fast = read_memory_block(block)
    general = read_general_memory_block(block)
    assert fast == general
    if fast is not None:
        assert general is not None
        assert [type(value) for value in fast] == [type(value) for value in general]
        assert memory_row_problem(fast) is None


def test_edge_blocks_read_as_the_general_reader_reads_them() -> None:
    for block in EDGES:
        _same(block)
    assert read_memory_block(PLAIN) is not None
    assert read_memory_block(STRUCK) is not None
    assert read_memory_block(INVALIDATED) is not None
    assert read_memory_block("**[NOTE - CORE] The lamp** *(Ep3, T12-14)*\nx") is not None


#: Small edits of a rendered block: characters that the common cases refuse or accept.
EDIT = st.sampled_from(
    ["", "x", " ", "\t", "\n", "\\", "*", "**", "[", "]", "~~", '"', "-", "---", "#", "é", "\x00"]
    + ["0", "9", ", +5", "Ep", "T", "\x1f", "\x85", "\ud800"]
)


@st.composite
def edited_blocks(draw: st.DrawFn) -> str:
    memory = draw(st.one_of(canonical_memories(), any_memories()))
    block = (_blocks_of(memory) or [PLAIN])[0]  # an EPHEMERAL memory is not written
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(block)))
        cut = draw(st.integers(0, 2))
        block = block[:at] + draw(EDIT) + block[at + cut :]
    return block


@PROPERTY
@given(edited_blocks())
@example(PLAIN)
@example(STRUCK)
def test_any_block_reads_as_the_general_reader_reads_it(block: str) -> None:
    _same(block)


@PROPERTY
@given(st.lists(st.one_of(edited_blocks(), st.sampled_from(EDGES)), max_size=6))
def test_a_run_is_read_as_block_by_block(blocks: list[str]) -> None:
    rows, breaks = read_memory_run(blocks, 0)

    expected = []
    for block in blocks:
        row = read_memory_block(block)
        if row is None:
            break
        expected.append(row)
    assert rows == expected
    assert breaks == sum(block.count("\n") for block in blocks[: len(rows)])
    if blocks:
        last = read_memory_block(blocks[-1])
        assert read_memory_run(blocks, len(blocks) - 1)[0] == ([] if last is None else [last])


def _file_of(blocks: list[str]) -> str:
    return (
        "# Location Memories\n\n## Location 5: Room\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n" + "\n\n".join(blocks) + "\n\n---\n\n## Location 6: Next\n"
        "**Visits:** 0 | **Episodes:** none\n\n### Memories\n\n**[BOGUS] x** *(Ep1, T1)*\n"
    )


def test_a_file_of_edge_blocks_reads_as_line_by_line_with_the_same_line_numbers() -> None:
    text = _file_of(EDGES)

    fast = parse_memories_md_rows(text)

    assert fast == parse_rows_line_by_line(text)
    assert fast.problems  # the edges hold problems, each at its line
    assert fast.problems[-1].line == text.count("\n")


@PROPERTY
@given(st.lists(st.one_of(edited_blocks(), st.sampled_from(EDGES)), max_size=8))
def test_runs_of_blocks_read_as_line_by_line(blocks: list[str]) -> None:
    text = _file_of(blocks)

    assert parse_memories_md_rows(text) == parse_rows_line_by_line(text)
