"""Spec 002's plain ``z_machine_context`` dict is read, not silently dropped.

Was: the manager kept only the dict's keys that are ZMachineContext fields, so the spec's
``score_delta``, ``location_changed`` and ``inventory_changed`` vanished: a turn that scored
and moved fired no trigger and recorded nothing. Now they are read (memstore.spec_context),
and any other key is reported back, counted and logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memstore import MemoryStore, SimpleMemoryManager
from memstore.spec_context import context_from_mapping
from memstore.triggers import Trigger, significance

SPEC = {
    "first_visit": False,
    "score_delta": 10,
    "location_changed": True,
    "inventory_changed": True,
    "died": False,
    "response_length": 20,
}


def test_the_spec_s_dict_fires_the_triggers_its_flags_say() -> None:
    ctx, ignored = context_from_mapping(SPEC)
    assert ignored == ()
    assert (ctx.score_before, ctx.score_after, ctx.score_delta) == (0, 10, 10)
    assert ctx.location_changed and ctx.inventory_changed
    assert (ctx.location_after, ctx.items_gained, ctx.items_lost) == (
        None,
        frozenset(),
        frozenset(),
    )
    assert significance(ctx) == [
        Trigger.SCORE_CHANGED,
        Trigger.LOCATION_CHANGED,
        Trigger.INVENTORY_CHANGED,
    ]


def test_flags_that_say_nothing_changed_fire_nothing() -> None:
    ctx, _ = context_from_mapping(
        {**SPEC, "score_delta": 0, "location_changed": False, "inventory_changed": False}
    )
    assert significance(ctx) == []


def test_a_delta_beside_one_score_gives_the_other() -> None:
    """Was: {score_delta: 5, score_before: 40} became a score change of -40 (40 -> 0)."""
    ctx, _ = context_from_mapping({"score_delta": 5, "score_before": 40})
    assert (ctx.score_before, ctx.score_after, ctx.reported) == (40, 45, frozenset())
    ctx, _ = context_from_mapping({"score_delta": 5, "score_after": 45})
    assert (ctx.score_before, ctx.score_after) == (40, 45)
    ctx, _ = context_from_mapping({"score_delta": 5})
    assert ctx.score_delta == 5 and Trigger.SCORE_CHANGED in ctx.reported


def test_a_delta_that_disagrees_with_both_scores_is_the_caller_s_mistake() -> None:
    with pytest.raises(ValueError, match="disagrees"):
        context_from_mapping({"score_delta": 5, "score_before": 40, "score_after": 40})


def test_values_given_beside_a_flag_win() -> None:
    ctx, _ = context_from_mapping(
        {
            "score_delta": 0,
            "score_before": 5,
            "score_after": 5,
            "location_changed": True,
            "location_before": 3,
            "location_after": 3,
        }
    )
    assert not ctx.score_delta and not ctx.location_changed and significance(ctx) == []


def test_keys_it_does_not_read_are_named() -> None:
    _, ignored = context_from_mapping({**SPEC, "scoreafter": 3, 7: "x", "reported": ["a"]})
    assert ignored == ("7", "reported", "scoreafter")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("score_delta", "10"),
        ("score_delta", True),
        ("location_changed", 1),
        ("inventory_changed", "yes"),
    ],
)
def test_a_value_of_the_wrong_type_is_the_caller_s_mistake(key: str, value: Any) -> None:
    with pytest.raises(TypeError, match=key):
        context_from_mapping({**SPEC, key: value})


def test_the_prompt_states_no_score_or_items_the_dict_did_not_give(tmp_path: Path) -> None:
    """Was: the ground truth said "Score delta: +5 (0 → 5)" (a made-up score) and, after
    "Inventory changed", "Items gained: none" and "Items lost: none"."""
    seen: list[str] = []

    def model(messages: list[dict[str, str]]) -> str:
        seen.append("\n".join(m["content"] for m in messages))
        return '{"should_remember": false, "reasoning": "nothing new"}'

    with MemoryStore.open(tmp_path / "p.db") as store:
        manager = SimpleMemoryManager(store, llm=model)
        context = {"score_delta": 5, "inventory_changed": True, "first_visit": False}
        manager.record_action_outcome(64, "West of House", "take egg", "Taken.", context)
    (prompt,) = seen
    assert "- Score delta: +5 (the score itself was not given)" in prompt
    assert "- Inventory changed (the caller reported it; the items were not given)" in prompt
    assert "Items gained" not in prompt and "Items lost" not in prompt and "0 → 5" not in prompt
