"""build_synthesis_messages: sections, handles, visit status, history, deltas."""

from __future__ import annotations

import pytest

from memstore.models import Memory
from memstore.prompt import build_synthesis_messages, context_hints
from memstore.synthesis import number_memories
from memstore.triggers import ZMachineContext

PERMANENT = Memory(
    category="DANGER",
    title="Troll attacks on sight",
    text="The troll swings his axe.",
    episode=1,
    turns="12",
    persistence="permanent",
)
EPHEMERAL = Memory(
    category="NOTE",
    title="Dropped sword here",
    text="Left the sword by the door.",
    episode=2,
    turns="14-15",
    persistence="ephemeral",
    status="TENTATIVE",
)


def build(**changes: object) -> list[dict[str, str]]:
    arguments: dict[str, object] = {
        "location_id": 152,
        "location_name": "Troll Room",
        "action": "give lunch to troll",
        "response": "The troll graciously accepts the lunch and eats it hungrily.",
        "ctx": ZMachineContext(
            location_before=152,
            location_after=152,
            inventory_before=frozenset({40, 41}),
            inventory_after=frozenset({41}),
            item_names={40: "lunch"},
            first_visit=False,
        ),
        "existing": number_memories([PERMANENT, EPHEMERAL]),
    }
    arguments.update(changes)
    return build_synthesis_messages(**arguments)  # type: ignore[arg-type]


def user(**changes: object) -> str:
    return build(**changes)[1]["content"]


def test_messages_are_a_system_and_a_user_message() -> None:
    messages = build()
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "JSON" in messages[0]["content"]


def test_location_id_and_name_are_given() -> None:
    assert user().startswith("Location: Troll Room (ID: 152)")


def test_existing_memories_of_both_tiers_have_handles_status_and_persistence() -> None:
    text = user()
    assert "[1] [DANGER] Troll attacks on sight (ACTIVE, permanent, persistent tier" in text
    assert "[2] [NOTE] Dropped sword here (TENTATIVE, ephemeral, session tier" in text
    assert "The troll swings his axe." in text


def test_no_existing_memories_says_so() -> None:
    assert "EXISTING MEMORIES AT THIS LOCATION:\n(none yet)" in user(existing=[])


def test_superseded_memory_is_marked_as_untouchable() -> None:
    old = Memory(
        category="NOTE",
        title="Old",
        text="t",
        episode=1,
        turns="1",
        persistence="permanent",
        status="SUPERSEDED",
        superseded_by="New",
    )
    assert "already SUPERSEDED" in user(existing=number_memories([old]))


def test_guidance_sections_are_present() -> None:
    text = user()
    for heading in (
        "DE-DUPLICATION:",
        "CONTRADICTIONS, SUPERSESSION AND INVALIDATION:",
        "MEMORY PERSISTENCE CLASSIFICATION:",
        "CURRENT ACTION:",
        "OUTPUT FORMAT:",
    ):
        assert heading in text


def test_all_three_persistence_types_are_always_explained() -> None:
    for first_visit in (True, False):
        text = user(first_visit=first_visit)
        for marker in ("**CORE**", "**PERMANENT**", "**EPHEMERAL**"):
            assert marker in text


def test_visit_status_follows_the_context_or_the_argument() -> None:
    assert "Current visit status: RETURN VISIT" in user()
    assert "Current visit status: FIRST VISIT" in user(first_visit=True)
    ctx = ZMachineContext(first_visit=True)
    assert "Current visit status: FIRST VISIT" in user(ctx=ctx)
    assert "Current visit status: RETURN VISIT" in user(ctx=ZMachineContext())  # None → return


def test_context_hints_for_placement_and_inventory_change() -> None:
    text = user(action="drop lunch")
    assert "Inventory changed without movement suggests item manipulation" in text
    assert "Placement action detected (likely EPHEMERAL)" in text


def test_context_hints_for_room_description_score_and_failure() -> None:
    ctx = ZMachineContext(score_before=5, score_after=15, response_length=150)
    hints = context_hints("open case", "You can't see any such thing.", ctx, first_visit=True)
    assert hints == [
        "• Long response on first visit suggests room description (likely CORE)",
        "• Score increase suggests game mechanic discovered (likely PERMANENT)",
        "• Failed action suggests game constraint learned (likely PERMANENT)",
    ]


def test_no_signals_says_so() -> None:
    text = user(action="wait", response="Time passes.", ctx=ZMachineContext())
    assert "• No strong signals from context" in text


def test_history_window_entries_are_shown_with_matching_responses() -> None:
    text = user(
        recent_actions=[(47, "examine window", "The window is slightly ajar.")],
        recent_reasoning=[(47, "Need an entry to the kitchen.", "examine window")],
    )
    assert "RECENT ACTION SEQUENCE:" in text
    assert "Turn 47: examine window\nResponse: The window is slightly ajar." in text
    assert (
        "AGENT'S REASONING:\nTurn 47:\nReasoning: Need an entry to the kitchen.\n"
        "Action: examine window\nResponse: The window is slightly ajar." in text
    )
    assert "MULTI-STEP PROCEDURE DETECTION:" in text


def test_empty_history_leaves_the_sections_out() -> None:
    text = user()
    assert "RECENT ACTION SEQUENCE:" not in text
    assert "AGENT'S REASONING:" not in text


def test_action_response_and_inventory_deltas_with_names() -> None:
    text = user(turn=12)
    assert "Turn: 12\nAction: give lunch to troll\nResponse:\nThe troll graciously" in text
    assert "- Items lost: lunch (object 40)" in text
    assert "- Items gained: none" in text
    assert "- Location unchanged" in text
    assert "- Death: no" in text
    assert "- First visit to Troll Room (152): no" in text


def test_score_movement_death_and_unnamed_items() -> None:
    ctx = ZMachineContext(
        score_before=10,
        score_after=0,
        location_before=152,
        location_after=1,
        location_after_name="Afterlife",
        inventory_before=frozenset(),
        inventory_after=frozenset({77}),
        died=True,
    )
    text = user(ctx=ctx, action="north")
    assert "- Score delta: -10 (10 → 0)" in text
    assert "- Moved from Troll Room (152) to Afterlife (1)" in text
    assert "- Items gained: object 77" in text
    assert "- Death: YES, the player died" in text


def test_output_rules_ask_for_json_with_handles() -> None:
    text = user()
    assert "Answer with one JSON object only" in text
    assert '"supersedes": [handles' in text and '"invalidates"' in text


@pytest.mark.parametrize("first_visit", [True, False])
def test_prompt_is_deterministic(first_visit: bool) -> None:
    history = {"recent_actions": [(1, "a", "b")], "recent_reasoning": [(1, "r", "a")]}
    assert build(first_visit=first_visit, **history) == build(first_visit=first_visit, **history)
