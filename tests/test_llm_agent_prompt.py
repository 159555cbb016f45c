"""The LLM agent's prompt and how its answer is read (no model, no game)."""

from __future__ import annotations

import pytest

from memstore.explorer import Observation, Thing
from memstore.llm_agent import MAX_ACTION_CHARS, build_agent_messages, parse_action

OBSERVATION = Observation(
    64,
    "West of House",
    "West of House\nYou are standing in an open field west of a white house.",
    5,
    (Thing(146, "brass lantern"),),
    (Thing(230, "small mailbox"),),
)


@pytest.mark.parametrize(
    ("answer", "action"),
    [
        ("north", "north"),
        ("North.", "north"),
        ("> Open the mailbox", "open the mailbox"),
        ("`take lamp`", "take lamp"),
        ('"go north"', "go north"),
        ("Command: put egg in case", "put egg in case"),
        ("\n\n  west\nbecause the forest is east", "west"),
    ],
)
def test_a_short_command_is_read_from_the_first_line(answer: str, action: str) -> None:
    assert parse_action(answer) == action


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n ",
        None,
        42,
        '{"action": "north"',
        "I think the best thing to do here is to go north now",  # a sentence, not a command
        "x" * (MAX_ACTION_CHARS + 1),
        "<tool_call>north</tool_call>",
        "north; drop all",
    ],
)
def test_anything_else_is_malformed(answer: object) -> None:
    assert parse_action(answer) is None


def test_the_prompt_holds_the_room_the_answer_the_memory_the_exits_and_the_history() -> None:
    memory = "**[FAILURE] 'up' is no exit**\nExits: north → North of House (137); untried: west"
    messages = build_agent_messages(
        OBSERVATION, memory, [("open mailbox", "Opening the small mailbox reveals a leaflet.")]
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "exactly one game command" in messages[0]["content"]
    user = messages[1]["content"]
    assert "Location: West of House (64); score 5" in user
    assert "The game said: West of House You are standing in an open field" in user
    assert "You carry: brass lantern. Here: small mailbox." in user
    assert "'up' is no exit" in user and "Exits: north → North of House (137)" in user
    assert "- open mailbox -> Opening the small mailbox reveals a leaflet." in user
    assert user.endswith("Your command:")


def test_without_memory_or_map_the_prompt_says_so_and_the_answer_is_cut() -> None:
    long = Observation(1, "Maze", "twisty " * 400, 0)
    user = build_agent_messages(long, "", [], tools_rounds=2)
    assert "(nothing remembered here yet)" in user[1]["content"]
    assert "Exits: none known yet" in user[1]["content"]
    assert "…" in user[1]["content"] and len(user[1]["content"]) < 1000
    assert "memory tools (at most 2 rounds)" in user[0]["content"]
