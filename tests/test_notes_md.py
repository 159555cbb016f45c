"""Notes.md: deterministic rendering of flagged memories, and escaping of their content."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import pytest

from exporters.notes_md import escape_markdown, render_notes_md
from memstore.flagged import FlaggedMemories, FlaggedMemory
from memstore.store import MemoryStore


def memory(
    id: int,
    content: str,
    importance: int,
    turn: int = 1,
    location_id: int | None = 180,
    location_name: str = "West of House",
    score: int | None = 0,
    moves: int | None = 1,
    episode: int = 1,
) -> FlaggedMemory:
    return FlaggedMemory(
        id=id,
        content=content,
        importance=importance,
        turn=turn,
        location_id=location_id,
        location_name=location_name,
        score=score,
        moves=moves,
        episode=episode,
        session_id=f"session-{id}",
        created_at=f"2026-01-0{id % 9 + 1}T00:00:00",
    )


def test_empty() -> None:
    assert render_notes_md([]) == "# Agent Notes\n\nNo memories flagged by the agent yet.\n"


def test_layout() -> None:
    text = render_notes_md(
        [
            memory(1, "Mailbox contains a leaflet", 300, turn=5, score=0, moves=5),
            memory(
                2,
                "Lantern on the trophy case",
                800,
                turn=9,
                location_id=193,
                location_name="Living Room",
                score=10,
                moves=12,
                episode=2,
            ),
            memory(
                3,
                "It is dark",
                100,
                turn=11,
                location_id=None,
                location_name="Darkness",
                score=None,
                moves=None,
            ),
        ]
    )
    assert text == (
        "# Agent Notes\n"
        "\n"
        "3 memories flagged by the agent, most important first.\n"
        "\n"
        "## 1. Importance 800/1000 at Living Room (#193)\n"
        "\n"
        "- Episode 2, turn 9\n"
        "- Score 10, moves 12\n"
        "\n"
        "> Lantern on the trophy case\n"
        "\n"
        "## 2. Importance 300/1000 at West of House (#180)\n"
        "\n"
        "- Episode 1, turn 5\n"
        "- Score 0, moves 5\n"
        "\n"
        "> Mailbox contains a leaflet\n"
        "\n"
        "## 3. Importance 100/1000 at Darkness\n"
        "\n"
        "- Episode 1, turn 11\n"
        "- Score ?, moves ?\n"
        "\n"
        "> It is dark\n"
    )


def test_one_memory_is_singular() -> None:
    assert "1 memory flagged by the agent" in render_notes_md([memory(1, "x", 5)])


def test_order_is_importance_then_turn_then_id_whatever_the_input_order() -> None:
    memories = [
        memory(4, "d", 500, turn=9),
        memory(2, "b", 500, turn=3),
        memory(1, "a", 500, turn=3),
        memory(3, "c", 900, turn=20),
        memory(5, "e", 10, turn=1),
    ]
    expected = render_notes_md(memories)
    assert re.findall(r"^> (\w)$", expected, re.MULTILINE) == ["c", "a", "b", "d", "e"]
    rng = random.Random(7)
    for _ in range(10):
        shuffled = memories[:]
        rng.shuffle(shuffled)
        assert render_notes_md(iter(shuffled)) == expected


def test_timestamps_and_sessions_do_not_change_the_output() -> None:
    one = memory(1, "Mailbox contains a leaflet", 300)
    other = one.model_copy(update={"created_at": "1999-12-31", "session_id": "another"})
    assert render_notes_md([one]) == render_notes_md([other])


@dataclass
class Plain:
    """Anything with the attributes will do; without an id, ties fall back to content."""

    content: str
    importance: int
    turn: int
    location_id: int | None
    location_name: str
    score: int | None
    moves: int | None
    episode: int


def test_memory_like_objects_without_ids() -> None:
    items = [Plain("zeta", 5, 1, 1, "Here", 0, 0, 1), Plain("alpha", 5, 1, 1, "Here", 0, 0, 1)]
    text = render_notes_md(items)
    assert text.index("> alpha") < text.index("> zeta")
    assert text == render_notes_md(reversed(items))


def test_renders_what_the_store_holds(store: MemoryStore) -> None:
    flagged = FlaggedMemories(store)
    flagged.add_flagged_memory("Mailbox contains a leaflet", 300, 5, 180, "West of House")
    flagged.add_flagged_memory("Lantern on the trophy case", 800, 9, 193, "Living Room")
    text = render_notes_md(flagged.all())
    assert text.index("Living Room (#193)") < text.index("West of House (#180)")


# --- escaping ---------------------------------------------------------------------------------

FORGERY = (
    "# Fake heading\n"
    "## 9. Importance 1000/1000 at Nowhere\n"
    "---\n"
    "- a list item\n"
    "+ another\n"
    "1. ordered\n"
    "2) ordered too\n"
    "    indented code\n"
    "```\n"
    "<script>alert(1)</script>\n"
    "| a | b |\n"
    "> quoted\n"
    "===\n"
    "*bold* _em_ [link](http://x) ~~strike~~ &amp; \\ back"
)


def entry_lines(text: str) -> list[str]:
    return text.splitlines()


def test_content_cannot_forge_structure() -> None:
    text = render_notes_md([memory(1, FORGERY, 500), memory(2, "Plain", 400)])
    lines = entry_lines(text)
    headings = [line for line in lines if line.startswith("#")]
    assert headings == [
        "# Agent Notes",
        "## 1. Importance 500/1000 at West of House (#180)",
        "## 2. Importance 400/1000 at West of House (#180)",
    ]
    start = lines.index("## 1. Importance 500/1000 at West of House (#180)") + 5
    end = lines.index("## 2. Importance 400/1000 at West of House (#180)") - 1
    quoted = lines[start:end]
    assert len(quoted) == len(FORGERY.splitlines())
    assert all(line.startswith("> ") for line in quoted)
    assert quoted == [
        "> \\# Fake heading",
        "> \\#\\# 9. Importance 1000/1000 at Nowhere",
        "> \\---",
        "> \\- a list item",
        "> \\+ another",
        "> 1\\. ordered",
        "> 2\\) ordered too",
        "> indented code",
        "> \\`\\`\\`",
        "> \\<script\\>alert(1)\\</script\\>",
        "> \\| a \\| b \\|",
        "> \\> quoted",
        "> \\===",
        "> \\*bold\\* \\_em\\_ \\[link\\](http://x) \\~\\~strike\\~\\~ \\&amp; \\\\ back",
    ]


def test_blank_lines_in_content_stay_inside_the_quote() -> None:
    text = render_notes_md([memory(1, "first\n\nsecond\r\nthird", 500)])
    assert text.endswith("> first\n>\n> second\n> third\n")


def test_location_names_are_escaped_on_one_line() -> None:
    text = render_notes_md([memory(1, "x", 5, location_name="Evil\n# Room *[x]*")])
    assert "## 1. Importance 5/1000 at Evil \\# Room \\*\\[x\\]\\* (#180)\n" in text


def test_unescaping_the_escaped_text_gives_the_original_back() -> None:
    # CommonMark: a backslash before ASCII punctuation stands for that character
    for line in FORGERY.splitlines():
        unescaped = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", escape_markdown(line))
        assert unescaped == line.lstrip()


def test_a_commonmark_renderer_sees_only_our_structure() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    text = render_notes_md([memory(1, FORGERY, 500, location_name="# [Evil](x) *Room*")])
    tokens = (
        markdown_it.MarkdownIt("commonmark").enable("table").enable("strikethrough").parse(text)
    )
    blocks = [t.type for t in tokens if t.type.endswith("_open") and t.level == 0]
    assert blocks == [
        "heading_open",
        "paragraph_open",
        "heading_open",
        "bullet_list_open",
        "blockquote_open",
    ]
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1", "h2"]
    inside = [t.type for t in tokens if t.level > 0 and t.type.endswith("_open")]
    assert set(inside) <= {"list_item_open", "paragraph_open"}
    inline = [t for t in tokens if t.type == "inline"]
    heading_text = "".join(child.content for child in inline[2].children or [])
    assert heading_text == "1. Importance 500/1000 at # [Evil](x) *Room* (#180)"
    quote = [child for child in inline[-1].children or [] if child.type == "text"]
    rendered = "\n".join(child.content for child in quote)
    assert rendered.split("\n") == [line.lstrip() for line in FORGERY.splitlines()]
