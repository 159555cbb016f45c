"""Rendering Memories.md: layout, markers, metadata, supersession, determinism."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from exporters import parse_memories_md, render_memories_md
from exporters.render import render_memory_lines
from memstore.models import LocationInfo, LocationMemories, Memory

FIXTURES = Path(__file__).parent / "fixtures" / "spec_memories"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def memory(title: str = "Open window", **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "category": "SUCCESS",
        "title": title,
        "text": "Window opens.",
        "episode": 1,
        "turns": "23-24",
        "score_change": 0,
        "persistence": "permanent",
    }
    values.update(fields)
    return Memory(**values)


def location(
    location_id: int, *memories: Memory, name: str = "Room", **fields: Any
) -> LocationMemories:
    info = LocationInfo(id=location_id, name=name, **fields)
    return LocationMemories(location=info, memories=memories)


def add_permanent_marker(text: str) -> str:
    """The spec's older examples without a marker, as this exporter writes them."""
    return re.sub(
        r"^\*\*\[(SUCCESS|FAILURE|DISCOVERY|DANGER|NOTE)(\]| - (?:TENTATIVE|SUPERSEDED)\])",
        r"**[\1 - PERMANENT\2",
        text,
        flags=re.MULTILINE,
    )


def render_fragment(text: str) -> str:
    """Parse a spec fragment of memories (wrapped in a location) and render just them."""
    result = parse_memories_md("## Location 1: Somewhere\n\n" + text)
    assert result.problems == ()
    blocks = ["\n".join(render_memory_lines(m)) for m in result.locations[0].memories]
    return "\n\n".join(blocks) + "\n"


# --- the spec's examples render back -------------------------------------------------


def test_spec_000_example_renders_back_identical_with_the_permanent_marker() -> None:
    original = fixture("000_file_structure.md")

    rendered = render_memories_md(parse_memories_md(original).locations)

    assert rendered == add_permanent_marker(original)
    assert rendered != original  # the older example lacked the marker


def test_spec_002_core_and_permanent_example_renders_back_byte_identical() -> None:
    original = fixture("002_core_and_permanent_only.md")

    assert render_memories_md(parse_memories_md(original).locations) == original


@pytest.mark.parametrize(
    "name",
    [
        "002_core_examples.md",
        "002_permanent_examples.md",
        "004_core_marker.md",
        "004_permanent_marker.md",
        "004_invalidated.md",
        "004_superseded.md",
    ],
)
def test_spec_memory_examples_render_back_identical(name: str) -> None:
    original = fixture(name)

    expected = add_permanent_marker(original).replace("*(Ep01,", "*(Ep1,")
    assert render_fragment(original) == expected


def test_spec_supersession_result_renders_with_marker_episode_and_struck_text() -> None:
    original = fixture("004_supersession_result.md")

    expected = (
        add_permanent_marker(original)
        .replace("*(Ep01,", "*(Ep1,")
        .replace(
            "Troll accepts lunch offering graciously. Reaction to gift unclear.",
            "~~Troll accepts lunch offering graciously. Reaction to gift unclear.~~",
        )
    )
    assert render_fragment(original) == expected
    assert render_fragment(fixture("003_supersession_result_epep.md")) == expected


def test_spec_004_status_examples_render_back_identical() -> None:
    lines = fixture("004_format_with_status.md").splitlines()
    result = parse_memories_md("## Location 1: A\n" + "\n".join(lines))

    rendered = [render_memory_lines(m)[0] for m in result.locations[0].memories]
    assert rendered == lines[1:]  # lines[0] is the spec's template, not a memory


# --- layout --------------------------------------------------------------------------


def test_layout_of_a_location_with_memories() -> None:
    text = render_memories_md(
        [location(15, memory(), name="West of House", visit_count=3, episodes=(3, 1, 2))]
    )

    assert text == (
        "# Location Memories\n"
        "\n"
        "## Location 15: West of House\n"
        "**Visits:** 3 | **Episodes:** 1, 2, 3\n"
        "\n"
        "### Memories\n"
        "\n"
        "**[SUCCESS - PERMANENT] Open window** *(Ep1, T23-24, +0)*\n"
        "Window opens.\n"
        "\n"
        "---\n"
    )


def test_empty_episode_list_renders_as_none_and_no_locations_as_just_the_title() -> None:
    text = render_memories_md([location(4, name="Unvisited")])

    assert "**Visits:** 0 | **Episodes:** none\n" in text
    assert text.endswith("### Memories\n\n---\n")
    assert render_memories_md([]) == "# Location Memories\n"


def test_locations_are_sorted_by_id_with_a_separator_after_each() -> None:
    text = render_memories_md([location(30, name="C"), location(2, name="A"), location(11)])

    headers = [line for line in text.splitlines() if line.startswith("## ")]
    assert headers == ["## Location 2: A", "## Location 11: Room", "## Location 30: C"]
    assert text.count("\n---\n") == 3
    assert "---\n\n## Location 11" in text


def test_duplicate_location_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="location 7"):
        render_memories_md([location(7), location(7)])


def test_memories_keep_the_order_given() -> None:
    titles = ["Zebra", "Apple", "Mango"]
    text = render_memories_md([location(1, *(memory(t) for t in titles))])

    found = re.findall(r"\] (\w+)\*\*", text)
    assert found == titles


# --- markers and metadata --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "header"),
    [
        ({}, "**[SUCCESS - PERMANENT] Open window** *(Ep1, T23-24, +0)*"),
        ({"persistence": "core"}, "**[SUCCESS - CORE] Open window** *(Ep1, T23-24, +0)*"),
        (
            {"status": "TENTATIVE", "category": "NOTE"},
            "**[NOTE - PERMANENT - TENTATIVE] Open window** *(Ep1, T23-24, +0)*",
        ),
        (
            {"status": "SUPERSEDED", "category": "DANGER", "persistence": "core"},
            "**[DANGER - CORE - SUPERSEDED] Open window** *(Ep1, T23-24, +0)*",
        ),
        (
            {"score_change": 5, "episode": 3},
            "**[SUCCESS - PERMANENT] Open window** *(Ep3, T23-24, +5)*",
        ),
        (
            {"score_change": -10, "turns": "7"},
            "**[SUCCESS - PERMANENT] Open window** *(Ep1, T7, -10)*",
        ),
        ({"score_change": None}, "**[SUCCESS - PERMANENT] Open window** *(Ep1, T23-24)*"),
    ],
)
def test_header_shows_category_persistence_status_and_metadata(
    fields: dict[str, Any], header: str
) -> None:
    assert render_memory_lines(memory(**fields))[0] == header


def test_zero_score_is_plus_zero_and_none_is_omitted() -> None:
    assert render_memory_lines(memory(score_change=0))[0].endswith("*(Ep1, T23-24, +0)*")
    assert render_memory_lines(memory(score_change=None))[0].endswith("*(Ep1, T23-24)*")


def test_ephemeral_memories_never_appear_in_the_render() -> None:
    kept = memory("Kept memory")
    dropped = memory("Dropped sword here", persistence="ephemeral", category="NOTE")

    text = render_memories_md([location(8, dropped, kept, dropped)])

    assert "Dropped sword here" not in text
    assert "EPHEMERAL" not in text
    assert text.count("Kept memory") == 1
    assert render_memory_lines(dropped) == []
    assert "\n\n\n" not in text


# --- supersession ------------------------------------------------------------------


def superseded(**fields: Any) -> Memory:
    values: dict[str, Any] = {
        "status": "SUPERSEDED",
        "text": "Troll accepts lunch gift graciously.",
        "superseded_at_turn": 50,
        "superseded_at_episode": 1,
    }
    values.update(fields)
    return memory("Old approach", **values)


def test_superseded_memory_names_its_successor_and_strikes_its_text() -> None:
    lines = render_memory_lines(superseded(superseded_by="Better approach"))

    assert lines[1:] == [
        '[Superseded at T50 by "Better approach"]',
        "~~Troll accepts lunch gift graciously.~~",
    ]


def test_invalidated_memory_gives_its_reason() -> None:
    lines = render_memory_lines(superseded(invalidation_reason="Proven false by death"))

    assert lines[1] == '[Invalidated at T50: "Proven false by death"]'


def test_supersession_episode_is_written_only_when_it_differs() -> None:
    later = superseded(superseded_by="New", superseded_at_episode=2)

    assert render_memory_lines(later)[1] == '[Superseded at Ep2, T50 by "New"]'


def test_superseded_memory_without_successor_or_reason() -> None:
    old_file = superseded(superseded_at_turn=None, superseded_at_episode=None)
    no_link = superseded()

    assert render_memory_lines(old_file)[1:] == ["~~Troll accepts lunch gift graciously.~~"]
    assert render_memory_lines(no_link)[1] == "[Superseded at T50]"


# --- escaping and determinism ----------------------------------------------------------


def test_content_that_looks_like_structure_is_escaped() -> None:
    tricky = memory(
        'A **bold** *(Ep9, T9)* [x] "q" ~~s~~ \\',
        text="## Location 9: Fake\n---\n**[NOTE] Fake** *(Ep1, T1)*\n\n   \n[Superseded at T1]",
    )

    lines = render_memory_lines(tricky)

    assert lines == [
        '**[SUCCESS - PERMANENT] A \\*\\*bold\\*\\* \\*(Ep9, T9)\\* \\[x\\] \\"q\\" '
        "\\~\\~s\\~\\~ \\\\** *(Ep1, T23-24, +0)*",
        "\\## Location 9: Fake",
        "\\---",
        "\\*\\*\\[NOTE\\] Fake\\*\\* \\*(Ep1, T1)\\*\\n",
        "\\  \\s",  # its first and its last space protected (no line ends in one)
        "\\[Superseded at T1\\]",
    ]


def test_output_is_deterministic_whatever_the_input_order() -> None:
    entries = [
        location(9, memory("One"), memory("Two", persistence="core"), name="Nine"),
        location(3, superseded(superseded_by="One"), name="Three", episodes=(2, 1)),
    ]

    first = render_memories_md(entries)

    assert render_memories_md(list(reversed(entries))) == first
    assert render_memories_md(iter(entries)) == first
    assert first.encode("utf-8") == render_memories_md(entries).encode("utf-8")
