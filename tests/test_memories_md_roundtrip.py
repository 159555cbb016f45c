"""Round trips between objects and Memories.md are lossless, for any content (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters import parse_memories_md, render_memories_md
from exporters.escaping import (
    escape_inline,
    escape_text_lines,
    unescape,
    unescape_text_lines,
)
from memstore.models import (
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    blank_for_sqlite,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Pieces of the file format, and characters that carry meaning in it.
TRICKY_PIECES = [
    "**",
    "*(",
    ")*",
    "*",
    "[",
    "]",
    '"',
    "~~",
    "~",
    "\\",
    "\\n",
    "\\\\",
    "#",
    "## ",
    "### Memories",
    "# Location Memories",
    "---",
    "[Superseded",
    "[Invalidated at T1: ",
    '[Superseded at T5 by "x"]',
    "**[NOTE] T** *(Ep1, T1)*",
    "**Visits:** 1 | ",
    "## Location 3: Room",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    " ",
    "  ",
    "\t",
    # the escapes of a line's last space or tab (exporters.escaping.protect_line_end)
    "\\s",
    "\\t",
    " \\s",
    "\\\\s",
    "Ep01",
    "-",
    "\ufeff",
    "\u2028",
    "\x85",
    "\x0b",
    "é",
    "火",
    "😀",
]

tricky_piece = st.one_of(st.sampled_from(TRICKY_PIECES), st.text(max_size=4))
tricky_text = st.one_of(
    st.text(),
    st.lists(tricky_piece, max_size=12).map("".join),
    # whole lines that start with the format's markers, blank lines, trailing spaces
    st.lists(st.lists(tricky_piece, max_size=3).map("".join), max_size=6).map("\n".join),
)
# the model's rules: titles and reasons are not blank (to Python, nor to SQLite's length(),
# which stops at a NUL)
titles = tricky_text.filter(lambda s: not blank_for_sqlite(s) and len(s) <= 500)
reasons = tricky_text.filter(lambda s: not blank_for_sqlite(s))
turns = st.one_of(
    st.integers(0, 10**6).map(str),
    st.tuples(st.integers(0, 1000), st.integers(0, 1000)).map(
        lambda pair: f"{pair[0]}-{pair[0] + pair[1]}"
    ),
)
episodes = st.integers(1, 10_000)
scores = st.none() | st.integers(-1000, 1000)


@st.composite
def canonical_memories(draw: st.DrawFn) -> Memory:
    """A memory as the store hands it to the exporter (see the module docstring rules)."""
    status = draw(st.sampled_from(Status))
    fields: dict[str, Any] = {
        "category": draw(st.sampled_from(Category)),
        "title": draw(titles),
        "text": draw(tricky_text),
        "episode": draw(episodes),
        "turns": draw(turns),
        "score_change": draw(scores),
        "persistence": draw(st.sampled_from([Persistence.CORE, Persistence.PERMANENT])),
        "status": status,
    }
    if status is Status.SUPERSEDED:
        fields["superseded_at_turn"] = draw(st.integers(0, 10**6))
        fields["superseded_at_episode"] = draw(episodes)
        link = draw(st.sampled_from(["successor", "reason", "neither"]))
        if link == "successor":
            fields["superseded_by"] = draw(titles)
        elif link == "reason":
            fields["invalidation_reason"] = draw(reasons)
    return Memory(**fields)


@st.composite
def any_memories(draw: st.DrawFn) -> Memory:
    """Any valid memory, canonical or not: ephemeral, missing supersession fields, ..."""
    status = draw(st.sampled_from(Status))
    fields: dict[str, Any] = {
        "category": draw(st.sampled_from(Category)),
        "title": draw(titles),
        "text": draw(tricky_text),
        "episode": draw(episodes),
        "turns": draw(turns),
        "score_change": draw(scores),
        "persistence": draw(st.sampled_from(Persistence)),
        "status": status,
        "superseded_at_turn": draw(st.none() | st.integers(0, 10**6)),
        "superseded_at_episode": draw(st.none() | episodes),
    }
    if status is Status.SUPERSEDED:
        link = draw(st.sampled_from(["successor", "reason", "neither"]))
        if link == "successor":
            fields["superseded_by"] = draw(tricky_text)
        elif link == "reason":
            fields["invalidation_reason"] = draw(reasons)
    return Memory(**fields)


def locations_of(memory_strategy: st.SearchStrategy[Memory]) -> st.SearchStrategy[Any]:
    location = st.builds(
        LocationInfo,
        id=st.integers(0, 10**6),
        name=tricky_text,
        visit_count=st.integers(0, 10**4),
        episodes=st.lists(st.integers(1, 10**4), max_size=5).map(tuple),
    )
    entry = st.builds(
        LocationMemories,
        location=location,
        memories=st.lists(memory_strategy, max_size=4).map(tuple),
    )
    return st.lists(entry, max_size=4, unique_by=lambda e: e.location.id)


def by_id(entries: Any) -> list[LocationMemories]:
    return sorted(entries, key=lambda e: e.location.id)


@PROPERTY
@given(locations_of(canonical_memories()))
def test_parse_of_render_gives_back_canonical_objects(entries: list[LocationMemories]) -> None:
    result = parse_memories_md(render_memories_md(entries))

    assert result.problems == ()
    assert list(result.locations) == by_id(entries)


@PROPERTY
@given(locations_of(any_memories()))
def test_export_parse_export_is_byte_identical_for_any_content(
    entries: list[LocationMemories],
) -> None:
    first = render_memories_md(entries)

    result = parse_memories_md(first)

    assert result.problems == ()
    assert render_memories_md(result.locations) == first


@PROPERTY
@given(locations_of(any_memories()))
def test_parse_export_parse_gives_equal_objects(entries: list[LocationMemories]) -> None:
    parsed = parse_memories_md(render_memories_md(entries)).locations

    again = parse_memories_md(render_memories_md(parsed))

    assert again.problems == ()
    assert again.locations == parsed


LINE_PIECES = [
    "# Location Memories",
    "## Location 1: A",
    "## Location 2: B",
    "## Location x: Broken",
    "### Memories",
    "**Visits:** 2 | **Episodes:** 1, 2",
    "**Visits:** nope",
    "**[NOTE] Plain** *(Ep1, T1, +0)*",
    "**[DANGER - CORE - SUPERSEDED] Old** *(Ep01, T3)*",
    "**[NOTE - SUPERSEDED] Older** *(Epep_01, T4, -2)*",
    "**[BOGUS] Bad** *(Ep1, T1)*",
    "**[NOTE - EPHEMERAL] Temp** *(Ep1, T1)*",
    "**[NOTE] Broken** *(Ep1)*",
    '[Superseded at T5 by "Plain"]',
    '[Invalidated at Ep2, T6: "wrong"]',
    "[Superseded at T7]",
    "~~struck~~",
    "~~open",
    "close~~",
    "---",
    "",
    "   ",
    "text with \\*escapes\\* and \\q unknown ones",
]


@PROPERTY
@given(
    st.lists(st.one_of(st.sampled_from(LINE_PIECES), tricky_text), max_size=30),
    st.sampled_from(["\n", "\r\n"]),
)
def test_parse_export_parse_is_stable_for_any_file(lines: list[str], newline: str) -> None:
    parsed = parse_memories_md(newline.join(lines))

    again = parse_memories_md(render_memories_md(parsed.locations))

    assert again.problems == ()
    assert again.locations == parsed.locations
    assert render_memories_md(again.locations) == render_memories_md(parsed.locations)


@PROPERTY
@given(tricky_text)
def test_escaping_round_trips_one_line_fields_and_texts(value: str) -> None:
    inline = escape_inline(value)
    lines = escape_text_lines(value)

    assert "\n" not in inline and "\r" not in inline
    assert unescape(inline) == value
    assert unescape_text_lines(lines) == value
    assert all(line.strip(" \t") for line in lines)  # never a blank line


@pytest.mark.parametrize("text", ["", " ", "\t", "  \n ", "\n", "\n\n\n", "\r\n"])
def test_empty_and_whitespace_only_texts_round_trip(text: str) -> None:
    entry = LocationMemories(
        location=LocationInfo(id=1, name=text),
        memories=(
            Memory(
                category="NOTE",
                title="Blank",
                text=text,
                episode=1,
                turns="1",
                persistence="core",
            ),
            Memory(
                category="NOTE",
                title="Blank struck",
                text=text,
                episode=1,
                turns="1",
                persistence="core",
                status="SUPERSEDED",
                superseded_at_turn=2,
                superseded_at_episode=1,
                invalidation_reason="proven false",
            ),
        ),
    )

    result = parse_memories_md(render_memories_md([entry]))

    assert result.problems == ()
    assert result.locations == (entry,)
