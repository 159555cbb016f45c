"""Parsing Memories.md: the spec's examples, the older implementation's forms, broken files."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import ParseResult, Problem, parse_memories_md
from memstore.models import Category, LocationInfo, Memory, Persistence, Status

FIXTURES = Path(__file__).parent / "fixtures" / "spec_memories"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def in_location(fragment: str) -> str:
    """Wrap a memory fragment from the spec into a location, as the spec's files do."""
    return "## Location 1: Somewhere\n\n" + fragment


def only_memories(result: ParseResult) -> tuple[Memory, ...]:
    assert len(result.locations) == 1
    return result.locations[0].memories


# --- the spec's examples -------------------------------------------------------------


def test_spec_000_file_structure_example_parses_both_locations_without_problems() -> None:
    result = parse_memories_md(fixture("000_file_structure.md"))

    assert result.problems == ()
    assert [entry.location for entry in result.locations] == [
        LocationInfo(id=15, name="West of House", visit_count=3, episodes=(1, 2, 3)),
        LocationInfo(id=23, name="Living Room", visit_count=5, episodes=(1, 2, 3, 4)),
    ]
    west, living = result.locations
    assert [m.title for m in west.memories] == [
        "Open and enter window",
        "Take or break window",
        "Mailbox location",
    ]
    assert len(living.memories) == 4
    first = west.memories[0]
    assert first == Memory(
        category=Category.SUCCESS,
        title="Open and enter window",
        text="Window can be opened with effort and used as alternative entrance to house. "
        "Must squeeze through opening.",
        episode=1,
        turns="23-24",
        score_change=0,
        persistence=Persistence.PERMANENT,
        status=Status.ACTIVE,
    )
    assert west.memories[1].score_change is None
    assert living.memories[0].score_change == 5


def test_unmarked_memories_of_the_older_format_are_permanent_and_active() -> None:
    result = parse_memories_md(fixture("000_file_structure.md"))

    memories = [m for entry in result.locations for m in entry.memories]
    assert {m.persistence for m in memories} == {Persistence.PERMANENT}
    assert {m.status for m in memories} == {Status.ACTIVE}


def test_spec_002_core_and_permanent_example_reads_persistence_markers() -> None:
    result = parse_memories_md(fixture("002_core_and_permanent_only.md"))

    assert result.problems == ()
    assert [entry.location.id for entry in result.locations] == [5, 8]
    persistences = [[m.persistence for m in entry.memories] for entry in result.locations]
    assert persistences == [
        [Persistence.CORE, Persistence.PERMANENT],
        [Persistence.CORE, Persistence.CORE, Persistence.PERMANENT],
    ]
    assert result.locations[0].memories[1].score_change == 5


@pytest.mark.parametrize(
    ("name", "persistence", "count"),
    [
        ("002_core_examples.md", Persistence.CORE, 3),
        ("002_permanent_examples.md", Persistence.PERMANENT, 4),
        ("004_core_marker.md", Persistence.CORE, 1),
        ("004_permanent_marker.md", Persistence.PERMANENT, 1),
    ],
)
def test_spec_persistence_marker_examples_parse_without_problems(
    name: str, persistence: Persistence, count: int
) -> None:
    result = parse_memories_md(in_location(fixture(name)))

    assert result.problems == ()
    memories = only_memories(result)
    assert len(memories) == count
    assert {m.persistence for m in memories} == {persistence}
    assert all(m.text and m.title for m in memories)


def test_spec_004_superseded_example_fills_the_supersession_fields() -> None:
    result = parse_memories_md(in_location(fixture("004_superseded.md")))

    assert result.problems == ()
    (memory,) = only_memories(result)
    assert memory.status is Status.SUPERSEDED
    assert memory.category is Category.DANGER
    assert memory.episode == 1  # "Ep01"
    assert memory.superseded_by == "Better approach"
    assert memory.superseded_at_turn == 50
    assert memory.superseded_at_episode == 1  # absent from the line: the memory's own
    assert memory.invalidation_reason is None
    assert memory.text == "Troll accepts lunch gift graciously."  # ~~ removed


def test_spec_004_invalidated_example_fills_the_reason_and_no_successor() -> None:
    result = parse_memories_md(in_location(fixture("004_invalidated.md")))

    assert result.problems == ()
    (memory,) = only_memories(result)
    assert memory.status is Status.SUPERSEDED
    assert memory.invalidation_reason == "Proven false by death"
    assert memory.superseded_by is None
    assert memory.superseded_at_turn == 25
    assert memory.text == "Troll seems friendly when approached slowly."


@pytest.mark.parametrize("name", ["004_supersession_result.md", "003_supersession_result_epep.md"])
def test_spec_supersession_result_reads_ep01_and_epep_01_and_unstruck_text(name: str) -> None:
    result = parse_memories_md(in_location(fixture(name)))

    assert result.problems == ()
    active, superseded = only_memories(result)
    assert (active.episode, active.turns, active.status) == (1, "13", Status.ACTIVE)
    assert superseded.status is Status.SUPERSEDED
    assert superseded.persistence is Persistence.PERMANENT
    assert superseded.superseded_by == "Troll attacks after accepting gift"
    assert superseded.superseded_at_turn == 13
    assert superseded.text == "Troll accepts lunch offering graciously. Reaction to gift unclear."


def test_spec_004_status_template_line_is_reported_and_real_examples_kept() -> None:
    result = parse_memories_md(in_location(fixture("004_format_with_status.md")))

    assert [p.line for p in result.problems] == [3]
    assert "unknown category 'CATEGORY'" in result.problems[0].message
    tentative, superseded = only_memories(result)
    assert (tentative.status, tentative.persistence) == (Status.TENTATIVE, Persistence.PERMANENT)
    assert (superseded.status, superseded.persistence) == (Status.SUPERSEDED, Persistence.CORE)
    assert tentative.text == "" and superseded.text == ""
    assert superseded.superseded_at_turn is None and superseded.superseded_by is None


def test_ephemeral_memories_found_in_a_file_are_reported_and_skipped() -> None:
    result = parse_memories_md(in_location(fixture("002_ephemeral_examples.md")))

    assert only_memories(result) == ()
    assert [p.line for p in result.problems] == [3, 6, 9, 12]
    assert all("EPHEMERAL" in p.message for p in result.problems)


def test_spec_002_memory_type_example_keeps_core_and_permanent_and_reports_ephemeral() -> None:
    result = parse_memories_md(fixture("002_memory_type_relationships.md"))

    (kitchen,) = result.locations
    assert kitchen.location == LocationInfo(id=8, name="Kitchen")  # no visits line: defaults
    assert [m.persistence for m in kitchen.memories] == [Persistence.CORE, Persistence.PERMANENT]
    assert [(p.line, "EPHEMERAL" in p.message) for p in result.problems] == [(9, True)]


# --- the older implementation's forms ------------------------------------------------

LEGACY = (
    "# Location Memories\r\n"
    "\r\n"
    "\r\n"
    "## Location 152: Troll Room\r\n"
    "**Visits:** 2 | **Episodes:** 1, 2\r\n"
    "\r\n"
    "**[DANGER] Troll attacks** *(T13, -10)*\r\n"
    "Troll becomes hostile.\r\n"
    "\r\n"
    "\r\n"
    "\r\n"
    "**[NOTE - SUPERSEDED] Troll accepts gift** *(Ep01, T12)*\r\n"
    '[Invalidated at T25: "Proven false by death"]\r\n'
    "~~Troll accepts lunch.~~\r\n"
    "\r\n"
    "---\r\n"
)


def test_legacy_file_with_crlf_blank_lines_no_ep_and_no_memories_heading() -> None:
    result = parse_memories_md(LEGACY)

    assert result.problems == ()
    (troll,) = result.locations
    assert troll.location == LocationInfo(id=152, name="Troll Room", visit_count=2, episodes=(1, 2))
    attacks, gift = troll.memories
    assert (attacks.episode, attacks.turns, attacks.score_change) == (1, "13", -10)
    assert attacks.text == "Troll becomes hostile."  # no stray "\r"
    assert (gift.category, gift.status, gift.persistence) == (
        Category.NOTE,
        Status.SUPERSEDED,
        Persistence.PERMANENT,
    )
    assert gift.invalidation_reason == "Proven false by death"
    assert gift.text == "Troll accepts lunch."


def test_status_without_persistence_and_explicit_active_are_read() -> None:
    text = in_location(
        "**[NOTE - TENTATIVE] Maybe** *(Ep2, T3, +0)*\nperhaps\n\n"
        "**[success - core - active] Sure** *(Ep2, T4, +1)*\ncertain\n"
    )
    result = parse_memories_md(text)

    assert result.problems == ()
    maybe, sure = only_memories(result)
    assert (maybe.status, maybe.persistence) == (Status.TENTATIVE, Persistence.PERMANENT)
    assert (sure.category, sure.status, sure.persistence) == (
        Category.SUCCESS,
        Status.ACTIVE,
        Persistence.CORE,
    )


def test_multi_line_text_keeps_its_line_breaks() -> None:
    result = parse_memories_md(in_location("**[NOTE] Two lines** *(Ep1, T1)*\nfirst\nsecond\n"))

    assert only_memories(result)[0].text == "first\nsecond"


def test_reference_line_episode_is_read_when_present() -> None:
    text = in_location(
        '**[NOTE - PERMANENT - SUPERSEDED] Old** *(Ep1, T1)*\n[Superseded at Ep3, T9 by "New"]\n'
        "~~old~~\n"
    )
    (memory,) = only_memories(parse_memories_md(text))

    assert (memory.superseded_at_episode, memory.superseded_at_turn) == (3, 9)
    assert memory.superseded_by == "New"


def test_empty_episode_list_and_empty_file_are_read() -> None:
    text = "## Location 0: Nowhere\n**Visits:** 0 | **Episodes:** none\n"
    result = parse_memories_md(text)

    assert result.problems == ()
    assert result.locations[0].location == LocationInfo(id=0, name="Nowhere")
    assert parse_memories_md("") == ParseResult(locations=(), problems=())


# --- broken files ----------------------------------------------------------------------

CORRUPT = """\
# Location Memories

## Location 1: Good Start
**Visits:** 1 | **Episodes:** 1

### Memories

**[SUCCESS - PERMANENT] Fine one** *(Ep1, T1, +0)*
Valid text.

**[WIZARDRY - PERMANENT] Bad category** *(Ep1, T2)*
This memory has an unknown category.

**[NOTE - PERMANENT] Broken metadata** *(Episode one, Tturn)*
This memory has broken metadata.

**[NOTE - PERMANENT] Fine two** *(Ep1, T3)*
Also valid.

---

## Locatoin two: Garbage
**Visits:** 1 | **Episodes:** 1

**[NOTE - PERMANENT] Lost with its location** *(Ep1, T4)*
Skipped with the garbage section.

---

## Location 3: Good End
**Visits:** x | **Episodes:** 1

**[NOTE - PERMANENT] Backwards turns** *(Ep1, T9-5)*
Rejected by the model.

**[DANGER - CORE] Fine three** *(Ep2, T7, -5)*
Still read.

---

## Location 1: Duplicate
**[NOTE] Hidden** *(Ep1, T1)*
x
"""


def test_corrupt_file_keeps_every_valid_section_and_memory() -> None:
    result = parse_memories_md(CORRUPT)

    assert [(e.location.id, e.location.name) for e in result.locations] == [
        (1, "Good Start"),
        (3, "Good End"),
    ]
    assert [[m.title for m in e.memories] for e in result.locations] == [
        ["Fine one", "Fine two"],
        ["Fine three"],
    ]
    assert result.locations[1].memories[0].score_change == -5


def test_corrupt_file_reports_each_broken_piece_at_its_line() -> None:
    result = parse_memories_md(CORRUPT)

    lines = CORRUPT.split("\n")
    reported = [(p.line, lines[p.line - 1]) for p in result.problems]
    assert reported == [
        (11, "**[WIZARDRY - PERMANENT] Bad category** *(Ep1, T2)*"),
        (14, "**[NOTE - PERMANENT] Broken metadata** *(Episode one, Tturn)*"),
        (22, "## Locatoin two: Garbage"),
        (31, "**Visits:** x | **Episodes:** 1"),
        (33, "**[NOTE - PERMANENT] Backwards turns** *(Ep1, T9-5)*"),
        (41, "## Location 1: Duplicate"),
    ]
    messages = [p.message for p in result.problems]
    assert "unknown category 'WIZARDRY'" in messages[0]
    assert "malformed metadata" in messages[1]
    assert "malformed location header" in messages[2]
    assert "malformed visits line" in messages[3]
    assert "invalid" in messages[4] and "Backwards turns" in messages[4]
    assert "duplicate location id 1" in messages[5]
    assert all(isinstance(p, Problem) for p in result.problems)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("**[NOTE] Orphan** *(Ep1, T1)*\ntext\n", 1, "outside any location"),
        ("## Location 1: A\n**[NOTE] No metadata**\ntext\n", 2, "malformed memory header"),
        ("## Location 1: A\nstray words\nmore\n", 2, "text outside any memory"),
        ("## Location 1: A\n**[NOTE] T** *(Ep0, T1)*\n", 2, "episode"),
        ("## Location 1: A\n**[NOTE - CORE - CORE] T** *(Ep1, T1)*\n", 2, "repeated marker"),
        (
            '## Location 1: A\n**[NOTE] T** *(Ep1, T1)*\n[Superseded at T2 by "X"]\nx\n',
            3,
            "not SUPERSEDED",
        ),
        (
            "## Location 1: A\n**[NOTE - SUPERSEDED] T** *(Ep1, T1)*\n[Superseded at soon]\n",
            3,
            "malformed reference line",
        ),
        ("## Location 1: A\n#### Deep heading\n", 2, "unexpected heading"),
        (
            '## Location 1: A\n**[NOTE - SUPERSEDED] T** *(Ep1, T1)*\n[Invalidated at T2: "  "]\n',
            2,
            "invalidation reason must not be blank",
        ),
    ],
)
def test_each_kind_of_broken_piece_is_reported_at_its_line(
    text: str, line: int, fragment: str
) -> None:
    result = parse_memories_md(text)

    assert [p.line for p in result.problems] == [line]
    assert fragment in result.problems[0].message
    assert all(not entry.memories for entry in result.locations)


def test_problem_reads_as_line_and_message() -> None:
    assert str(Problem(line=7, message="bad")) == "line 7: bad"
