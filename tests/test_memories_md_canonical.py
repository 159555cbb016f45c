"""The reader's fast path takes every rendered file, and the reader gives the same with it
as line by line (exporters.line_parser), whatever the text."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporters import parse_memories_md, render_memories_md
from exporters.parse import (
    parse_line_by_line,
    parse_memories_md_rows,
    parse_rows_line_by_line,
    read_canonical,
)
from memstore.models import (
    Category,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    blank_for_sqlite,
)
from tests.test_md_fast_blocks import SURROGATES, UNICODE_PIECES
from tests.test_memories_md_roundtrip import (
    LINE_PIECES,
    TRICKY_PIECES,
    any_memories,
    canonical_memories,
    episodes,
    locations_of,
    scores,
    turns,
)

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(locations_of(any_memories()))
def test_every_rendered_file_is_read_by_the_canonical_reader(
    entries: list[LocationMemories],
) -> None:
    text = render_memories_md(entries)

    canonical = read_canonical(text)

    assert canonical is not None
    by_lines = parse_line_by_line(text)
    assert by_lines.problems == ()
    assert tuple(canonical) == by_lines.locations


ANY_PIECE = st.one_of(st.sampled_from(LINE_PIECES), st.sampled_from(TRICKY_PIECES), st.text())
#: Edits that mostly keep the layout (more of them are taken by the canonical reader).
SMALL_PIECE = st.one_of(
    st.text(st.characters(blacklist_characters="\n"), max_size=8),
    st.sampled_from(["x", "-", "--", "~~", "\\", "[", "*", "#", " ", "é"]),
)


def unicode_pieces(surrogates: bool = True) -> st.SearchStrategy[str]:
    """Text beyond ASCII: unicode's whitespace and line boundaries, combining marks, scripts
    of two to four bytes, any code point, and lone surrogates unless told otherwise."""
    pieces = [p for p in UNICODE_PIECES if surrogates or p not in SURROGATES]
    characters = st.characters(exclude_categories=() if surrogates else ("Cs",))
    return st.one_of(
        st.sampled_from(pieces),
        st.lists(st.sampled_from([*pieces, "x", "a b"]), max_size=6).map("".join),
        st.text(characters, max_size=6),
    )


UNICODE_PIECE = unicode_pieces()
#: Texts beyond ASCII that the model takes anywhere (no lone surrogate: not in a title or
#: text), half of them with the format's tricky pieces too (escapes, several lines).
unicode_text = st.one_of(
    st.lists(unicode_pieces(surrogates=False), max_size=6).map("".join),
    st.lists(
        st.one_of(unicode_pieces(surrogates=False), st.sampled_from(TRICKY_PIECES)), max_size=6
    ).map("".join),
)


@st.composite
def unicode_memories(draw: st.DrawFn) -> Memory:
    """A memory as the store hands it to the exporter, with text beyond ASCII everywhere
    (and lone surrogates where the model takes them: a successor or a reason)."""
    status = draw(st.sampled_from(Status))
    fields: dict[str, Any] = {
        "category": draw(st.sampled_from(Category)),
        "title": draw(unicode_text.filter(lambda t: not blank_for_sqlite(t) and len(t) <= 500)),
        "text": draw(unicode_text),
        # mostly numbers the one-match patterns read (episodes and scores of 3 digits)
        "episode": draw(st.one_of(st.integers(1, 999), episodes)),
        "turns": draw(turns),
        "score_change": draw(st.one_of(st.none(), st.integers(-999, 999), scores)),
        "persistence": draw(st.sampled_from([Persistence.CORE, Persistence.PERMANENT])),
        "status": status,
    }
    if status is Status.SUPERSEDED:
        fields["superseded_at_turn"] = draw(st.integers(0, 10**6))
        fields["superseded_at_episode"] = draw(st.one_of(st.integers(1, 999), episodes))
        link = draw(st.lists(UNICODE_PIECE, min_size=1, max_size=4).map("".join))
        kind = draw(st.sampled_from(["superseded_by", "invalidation_reason", "neither"]))
        if kind == "superseded_by" or (
            kind == "invalidation_reason" and not blank_for_sqlite(link)
        ):
            fields[kind] = link
    return Memory(**fields)


@st.composite
def edited_files(
    draw: st.DrawFn,
    piece: st.SearchStrategy[str] = ANY_PIECE,
    memories: st.SearchStrategy[Memory] | None = None,
) -> str:
    """A rendered file with a few lines inserted, deleted, replaced or cut, as a hand edit would."""
    entries = draw(locations_of(canonical_memories() if memories is None else memories))
    lines = render_memories_md(entries).split("\n")
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "cut", "append"]))
        if action == "insert" or not lines or index == len(lines):
            lines.insert(index, draw(piece))
        elif action == "delete":
            del lines[index]
        elif action == "replace":
            lines[index] = draw(piece)
        elif action == "cut":
            line = lines[index]
            lines[index] = line[: draw(st.integers(0, len(line)))]
        else:
            lines[index] += draw(piece)
    return "\n".join(lines)


CRLF_IN_TEXT = (
    "# Location Memories\n\n## Location 1: \n**Visits:** 0 | **Episodes:** none\n\n"
    "### Memories\n\n**[SUCCESS - CORE] 0** *(Ep1, T0)*\n\r\n0\n\n---\n"
)


def _one_memory(block: str) -> str:
    return (
        "# Location Memories\n\n## Location 5: Room\n**Visits:** 1 | **Episodes:** 1\n\n"
        f"### Memories\n\n{block}\n\n---\n"
    )


@PROPERTY
@given(st.one_of(edited_files(), edited_files(SMALL_PIECE)))
@example(CRLF_IN_TEXT)  # a CRLF is a line break to the parser: the block splits in two
# Headers the canonical reader's block regex admits but the model or FAST_HEADER refuses,
# or reads through its lookup tables' fallbacks:
@example(_one_memory("**[NOTE - PERMANENT] T** *(Ep1, T12-)*\ntext"))
@example(_one_memory("**[NOTE - PERMANENT - SUPERSEDED] T** *(Ep1, T12-3)*\n[Superseded at T50]"))
@example(_one_memory("**[NOTE - PERMANENT] T** *(Ep0, T12)*\ntext"))
@example(_one_memory("**[NOTE - PERMANENT] T** *(Ep01, T12, +05)*\ntext"))
@example(_one_memory("**[NOTE - PERMANENT] T** *(Ep1234, T1-2, -1000)*"))
@example(_one_memory("**[NOTE - EPHEMERAL] T** *(Ep1, T1)*\ntext"))
@example(_one_memory("**[NOTE - PERMANENT]  ** *(Ep1, T1)*\ntext"))
def test_canonical_reader_takes_an_edited_file_only_when_the_line_parser_agrees(text: str) -> None:
    # read_canonical takes text as parse_memories_md hands it over: no BOM, no CRLF
    canonical = read_canonical(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    by_lines = parse_line_by_line(text)

    if canonical is not None:
        assert by_lines.problems == ()
        assert tuple(canonical) == by_lines.locations
    assert parse_memories_md(text) == by_lines


def test_a_file_with_problems_is_read_line_by_line_with_line_numbers() -> None:
    text = (
        "# Location Memories\n\n## Location 5: Room\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n**[NOTE - CORE] Fine** *(Ep1, T1)*\nText.\n\n"
        "**[BOGUS - CORE] Broken** *(Ep1, T2)*\nMore.\n\n---\n"
    )

    assert read_canonical(text) is None
    result = parse_memories_md(text)
    assert [m.title for m in result.locations[0].memories] == ["Fine"]
    assert [p.line for p in result.problems] == [11]


@PROPERTY
@given(locations_of(unicode_memories()))
def test_every_rendered_file_beyond_ascii_is_read_in_one_match_per_block(
    entries: list[LocationMemories],
) -> None:
    text = render_memories_md(entries)

    canonical = read_canonical(text)

    assert canonical is not None
    assert tuple(canonical) == parse_line_by_line(text).locations
    assert parse_memories_md_rows(text) == parse_rows_line_by_line(text)


@PROPERTY
@given(
    st.one_of(
        edited_files(UNICODE_PIECE),
        edited_files(UNICODE_PIECE, unicode_memories()),
        edited_files(SMALL_PIECE, unicode_memories()),
    )
)
def test_an_edited_file_beyond_ascii_reads_as_line_by_line(text: str) -> None:
    fast, by_lines = parse_memories_md_rows(text), parse_rows_line_by_line(text)

    assert fast.locations == by_lines.locations
    assert fast.problems == by_lines.problems  # the same problems, at the same lines
    canonical = read_canonical(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    if canonical is not None:
        assert by_lines.problems == ()
        assert tuple(canonical) == parse_line_by_line(text).locations
