"""The common cases of the fast path (exporters.fast_blocks: a plain memory block, a struck
SUPERSEDED one, read with almost no check in Python) give exactly what the general block
reader gives, and only rows that the model accepts, in any script; a run of blocks is read
as block by block, with its line breaks counted."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporters import fast_blocks, render_memories_md
from exporters.fast_blocks import (
    read_general_memory_block,
    read_memory_block,
    read_memory_run,
)
from exporters.memory_block import HEADER_STARTS
from exporters.parse import parse_memories_md_rows, parse_rows_line_by_line
from memstore.md_rows import MemoryRow, memory_row_problem
from memstore.models import LocationInfo, LocationMemories, Memory, Status
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
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na \\s",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\n\\s\nb\\t",
    "**[NOTE - CORE] lamp** *(Ep3, T1)*\na\\\\s",
    '**[NOTE - CORE - SUPERSEDED] lamp** *(Ep3, T1)*\n[Superseded at T2 by "x"]\n~~a\\s~~',
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
        "**Visits:** 0 | **Episodes:** none\n\n### Memories\n\n**[BOGUS] x** *(Ep1, T1)*\n\n---\n"
    )


def test_a_file_of_edge_blocks_reads_as_line_by_line_with_the_same_line_numbers() -> None:
    text = _file_of(EDGES)

    fast = parse_memories_md_rows(text)

    assert fast == parse_rows_line_by_line(text)
    assert fast.problems  # the edges hold problems, each at its line
    assert fast.problems[-1].line == text.split("\n").index("**[BOGUS] x** *(Ep1, T1)*") + 1


@PROPERTY
@given(st.lists(st.one_of(edited_blocks(), st.sampled_from(EDGES)), max_size=8))
def test_runs_of_blocks_read_as_line_by_line(blocks: list[str]) -> None:
    text = _file_of(blocks)

    assert parse_memories_md_rows(text) == parse_rows_line_by_line(text)


# --- text beyond ASCII ---------------------------------------------------------------------
#
# The one-match path reads blocks in any script; it must read each exactly as the general
# reader and the line reader do, or decline it. Python treats the characters below as
# whitespace (str.strip(), str.split(), re's \s) or line boundaries (str.splitlines()):
# the line reader must not, and the model's title and reason rules do (blank titles).

#: Every character that is whitespace to Python or a line boundary to str.splitlines(),
#: but " ", "\t" and "\n" (checked against the unicode tables below), and U+FEFF.
UNICODE_SPACES = [
    "\x0b",
    "\x0c",
    "\r",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    "\x85",
    "\xa0",
    "\u1680",
    *[chr(code) for code in range(0x2000, 0x200B)],
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
    "\ufeff",  # the byte-order mark: not whitespace, dropped only at the file's start
]
#: Combining marks (alone, they combine with what the format puts before them).
COMBINING = ["\u0301", "e\u0301", "\u0338", "\u20dd", "\u200d", "\u0345"]
#: Multi-byte scripts and punctuation (two, three and four bytes in UTF-8).
SCRIPTS = [
    "é",
    "—",
    "“quotes”",
    "火",
    "한국어",
    "Ωμέγα",
    "עברית",
    "😀",
    "👩\u200d👧",
    "ſ",
    "ı",
    "K",
]
#: Lone surrogates: the model refuses them in a title or a text, takes them elsewhere.
SURROGATES = ["\ud800", "\udfff", "\ud83d\ude00"]
UNICODE_PIECES = UNICODE_SPACES + COMBINING + SCRIPTS + SURROGATES


def test_the_unicode_spaces_are_all_of_pythons_whitespace_and_line_boundaries() -> None:
    special = {
        char
        for char in map(chr, range(0x110000))
        if char.isspace() or len(f"a{char}b".splitlines()) > 1
    }
    assert special - {" ", "\t", "\n"} == set(UNICODE_SPACES) - {"\ufeff"}


unicode_piece = st.one_of(
    st.sampled_from(UNICODE_PIECES),
    st.characters(),  # any code point, surrogates too
    st.sampled_from(["x", "a b", " ", "-", "*", '"', "\\", "\n"]),
)
unicode_text = st.lists(unicode_piece, max_size=8).map("".join)


def unicode_lines(min_size: int = 0) -> st.SearchStrategy[str]:
    """Texts that keep a block in the common layout more often (one line, no markup)."""
    pieces = st.one_of(st.sampled_from(UNICODE_PIECES), st.sampled_from(["x", "a b"]))
    return st.lists(pieces, min_size=min_size, max_size=6).map("".join)


@st.composite
def unicode_blocks(draw: st.DrawFn) -> str:
    """A memory block in the renderer's layout with text beyond ASCII in its title, text,
    successor or reason, as written by hand (so lone surrogates and blank titles too), maybe
    edited further. Most keep the layout the one-match path takes, so that its acceptances
    are tested as much as its refusals."""
    (_category, _persistence, status), start = draw(st.sampled_from(list(HEADER_STARTS.items())))
    text = st.one_of(unicode_lines(), unicode_lines(), unicode_lines(), unicode_text)
    title = st.one_of(unicode_lines(1), unicode_lines(1), unicode_lines(1), unicode_text)
    header = (
        f"{start}{draw(title)}** *(Ep{draw(st.integers(1, 1000))}, T{draw(st.integers(0, 99))}"
        f"{draw(st.sampled_from(['', ', +5', ', -0']))})*"
    )
    body = draw(text)
    if status is Status.SUPERSEDED:
        turn, link = draw(st.integers(0, 99)), draw(text)
        reference = draw(
            st.sampled_from(
                [f'[Superseded at T{turn} by "{link}"]', f'[Invalidated at T{turn}: "{link}"]']
            )
        )
        lines = [header, reference, f"~~{body}~~"]
    else:
        lines = [header, body] if body else [header]
    block = "\n".join(lines)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(block)))
        block = block[:at] + draw(st.sampled_from(UNICODE_PIECES)) + block[at:]
    return block


@PROPERTY
@given(unicode_blocks())
def test_any_unicode_block_reads_as_the_general_reader_reads_it(block: str) -> None:
    _same(block)


@PROPERTY
@given(st.lists(st.one_of(unicode_blocks(), edited_blocks()), max_size=8))
def test_runs_of_unicode_blocks_read_as_line_by_line(blocks: list[str]) -> None:
    text = _file_of(blocks)

    fast, by_lines = parse_memories_md_rows(text), parse_rows_line_by_line(text)

    assert fast.locations == by_lines.locations
    assert fast.problems == by_lines.problems  # the same problems, at the same lines


def _without_the_general_reader(block: str, monkeypatch: pytest.MonkeyPatch) -> MemoryRow | None:
    """What the one-match patterns alone (``_PLAIN_BLOCK``, ``_STRUCK_BLOCK``) read of a block."""

    def refuse(block: str) -> None:
        return None

    with monkeypatch.context() as patch:
        patch.setattr(fast_blocks, "read_general_memory_block", refuse)
        return read_memory_block(block)


def _plain(title: str, text: str) -> str:
    return f"**[NOTE - CORE] {title}** *(Ep3, T12)*" + (f"\n{text}" if text else "")


def _struck(title: str, text: str, link: str) -> str:
    return f"**[NOTE - CORE - SUPERSEDED] {title}** *(Ep3, T12)*\n[{link}]\n~~{text}~~"


@pytest.mark.parametrize("char", UNICODE_SPACES + COMBINING + SCRIPTS)
def test_a_text_beyond_ascii_takes_the_one_match_path_whole(
    char: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # U+0085, U+2028, U+001C..U+001F split a str.splitlines() line: not a Memories.md line
    for text in (char, f"a{char}b", f"a{char}", f"{char}b", f"a {char} b"):
        for block in (
            _plain("The lamp", text),
            _struck("The lamp", text, 'Superseded at T13 by "Lamp"'),
            _struck("The lamp", text, f'Invalidated at T13: "Why{char}"'),
        ):
            _same(block)
            row = _without_the_general_reader(block, monkeypatch)
            assert row is not None, block
            assert row.text == text
            assert read_memory_block(block) == row


@pytest.mark.parametrize("char", UNICODE_SPACES + COMBINING + SCRIPTS)
def test_a_title_beyond_ascii_is_read_unless_it_is_blank(
    char: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for title in (char, f"{char}x", f"x{char}", f"x{char}y", char * 3):
        blank = not title.strip()
        for block in (
            _plain(title, "It is brass."),
            _struck(title, "It is brass.", 'Superseded at T13 by "Lamp"'),
        ):
            _same(block)
            row = read_memory_block(block)
            assert (row is None) == blank, block  # U+3000 alone is a blank title
            if row is not None:
                assert row.title == title
            if blank or title[0] <= " ":  # the patterns decline an ASCII space or control first
                assert _without_the_general_reader(block, monkeypatch) is None
            else:
                assert _without_the_general_reader(block, monkeypatch) == row


@pytest.mark.parametrize("char", UNICODE_SPACES)
def test_a_blank_reason_beyond_ascii_is_declined(char: str) -> None:
    for reason in (char, f"{char}x", f"x{char}", char * 2):
        block = _struck("The lamp", "It is brass.", f'Invalidated at T13: "{reason}"')
        _same(block)
        row = read_memory_block(block)
        assert (row is None) == (not reason.strip()), block
        assert row is None or row.invalidation_reason == reason


@pytest.mark.parametrize("surrogate", SURROGATES)
def test_lone_surrogates_are_declined_in_a_title_or_text_but_kept_in_a_link(
    surrogate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for block in (
        _plain(f"The lamp{surrogate}", "It is brass."),
        _plain("The lamp", f"It is brass{surrogate}."),
        _struck("The lamp", f"café{surrogate}", 'Superseded at T13 by "Lamp"'),
    ):
        _same(block)
        assert read_memory_block(block) is None  # the model refuses it: a problem
    for link in (
        f'Superseded at T13 by "Lamp{surrogate}"',
        f'Invalidated at T13: "Why{surrogate}"',
    ):
        block = _struck("The lamp", "café", link)
        _same(block)
        row = read_memory_block(block)
        assert row is not None and surrogate in (row.superseded_by or row.invalidation_reason or "")
        # a block with a surrogate is left to the general reader, which takes it
        assert _without_the_general_reader(block, monkeypatch) is None


def test_a_file_of_unicode_blocks_reads_as_line_by_line_with_the_same_line_numbers() -> None:
    blocks = [
        _plain("Lamp", "Line\u2028separator, next\x85line, file\x1cseparator."),
        _plain("\u3000", "A blank title: a problem at this line."),
        _plain("Lamp\ud800", "A lone surrogate in the title: a problem."),
        _plain("火", "\u3000Ideographic space first, then 火 and 😀 and e\u0301."),
        _struck("Troll", "Über die Brücke — “café”", 'Invalidated at T13: "\xa0"'),
        _struck("Troll", "Über die Brücke", 'Invalidated at T13: "\u2003Proven\u2003"'),
        _plain("\ufeffBOM", "\ufeff"),
        # Markers that unicode case folding turns into known ones ("ſ".upper() == "S",
        # "ı".upper() == "I"): the line reader's lenient header reads them, the one-match
        # patterns decline them.
        "**[NOTE - CORE - ſUPERSEDED] Long s** *(Ep3, T12)*\nx",
        "**[NOTE - PERMANENT - TENTATıVE] Dotless i** *(Ep3, T12)*\nx",
    ]
    text = _file_of(blocks)

    fast, by_lines = parse_memories_md_rows(text), parse_rows_line_by_line(text)

    assert fast == by_lines
    memories = fast.locations[0].memories
    assert memories[0].text == "Line\u2028separator, next\x85line, file\x1cseparator."
    assert memories[-3].text == "\ufeff"
    assert [m.status for m in memories[-2:]] == [Status.SUPERSEDED, Status.TENTATIVE]
    lines = text.split("\n")
    assert [lines[p.line - 1][:20] for p in fast.problems[:3]] == [
        _plain("\u3000", "")[:20],
        _plain("Lamp\ud800", "")[:20],
        _struck("Troll", "", "")[:20],
    ]


@pytest.mark.parametrize(
    "turns",
    ["0" * 100 + "1", "0" * 150 + "7", "1" * 101, "05-" + "0" * 100 + "7", "05", "007-010"],
)
def test_a_turn_of_leading_zeros_or_past_100_digits_reads_as_line_by_line(turns: str) -> None:
    # review L1 #4: the fast reader took up to 200 digits with no dash (turn 1), the line
    # reader at most 100 a number (malformed metadata)
    text = _file_of([f"**[NOTE - PERMANENT] Lamp** *(Ep1, T{turns})*\nA lamp."])

    assert parse_memories_md_rows(text) == parse_rows_line_by_line(text)
