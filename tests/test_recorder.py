"""The offline recorder: only Z-machine facts, one per turn, deterministic titles."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore.models import Category, Memory, Persistence, Status
from memstore.recorder import first_sentence, record_offline, refused_action
from memstore.synthesis import MemorySynthesisResponse, number_memories, resolve_decision
from memstore.triggers import ZMachineContext

LAMP = 15


def record(action: str, ctx: ZMachineContext, response: str = "Done.", existing=()):
    return record_offline(
        location_id=8,
        location_name="Kitchen",
        action=action,
        response=response,
        ctx=ctx,
        existing=existing,
    )


def stored(title: str, persistence: str = "permanent") -> Memory:
    return Memory(
        category="NOTE", title=title, text="", episode=1, turns="3", persistence=persistence
    )


def as_stored(answer: MemorySynthesisResponse) -> Memory:
    """The memory an answer of the recorder becomes."""
    assert answer.should_remember and answer.category and answer.persistence
    return Memory(
        category=answer.category,
        title=answer.memory_title or "",
        text=answer.memory_text or "",
        episode=1,
        turns="3",
        persistence=answer.persistence,
    )


def test_score_change_is_a_permanent_success() -> None:
    answer = record("open trophy case", ZMachineContext(score_before=0, score_after=10))
    assert answer.should_remember
    assert answer.memory_title == "'open trophy case' scores +10"
    assert answer.category is Category.SUCCESS
    assert answer.persistence is Persistence.PERMANENT
    assert answer.status is Status.ACTIVE
    assert "(0 → 10)" in (answer.memory_text or "")


def test_score_loss_is_a_danger() -> None:
    answer = record("jump", ZMachineContext(score_before=10, score_after=5))
    assert answer.memory_title == "'jump' scores -5"
    assert answer.category is Category.DANGER


def test_death_wins_and_quotes_what_the_game_said_before_dying() -> None:
    ctx = ZMachineContext(score_before=10, score_after=0, died=True, location_after=1)
    answer = record(
        "north",
        ctx,
        response="The troll swings his axe.  It cleaves you in twain.\n****  You have died  ****",
    )
    assert answer.memory_title == "'north' is deadly"
    assert answer.category is Category.DANGER
    assert answer.persistence is Persistence.PERMANENT
    assert '"The troll swings his axe. It cleaves you in twain."' in (answer.memory_text or "")
    assert "Also: 'north' changed the score by -10" in (answer.memory_text or "")


def test_exit_records_where_it_leads() -> None:
    ctx = ZMachineContext(location_before=8, location_after=5, location_after_name="Living Room")
    answer = record("west", ctx)
    assert answer.memory_title == "'west' leads to Living Room (5)"
    assert answer.category is Category.NOTE
    assert answer.persistence is Persistence.PERMANENT
    assert answer.memory_text == "From Kitchen (8), 'west' leads to Living Room (5)."


def test_exit_without_a_name_uses_the_number() -> None:
    ctx = ZMachineContext(location_before=8, location_after=5)
    assert record("west", ctx).memory_title == "'west' leads to location 5"


def test_item_gained_is_a_permanent_mechanic_with_its_name() -> None:
    ctx = ZMachineContext(inventory_after=frozenset({LAMP}), item_names={LAMP: "brass lantern"})
    answer = record("take lamp", ctx)
    assert answer.memory_title == "'take lamp' gets the brass lantern"
    assert answer.category is Category.SUCCESS
    assert answer.persistence is Persistence.PERMANENT


def test_item_dropped_is_ephemeral() -> None:
    ctx = ZMachineContext(inventory_before=frozenset({LAMP}), item_names={LAMP: "brass lantern"})
    answer = record("drop lamp", ctx)
    assert answer.memory_title == "Dropped brass lantern here"
    assert answer.persistence is Persistence.EPHEMERAL


def test_item_put_somewhere_is_ephemeral() -> None:
    ctx = ZMachineContext(inventory_before=frozenset({3, 4}))
    answer = record("put all in case", ctx)
    assert answer.memory_title == "Placed object 3 and object 4 here"
    assert answer.persistence is Persistence.EPHEMERAL


def test_score_beats_exit_beats_inventory_and_the_rest_is_mentioned() -> None:
    ctx = ZMachineContext(
        score_before=0,
        score_after=5,
        location_before=8,
        location_after=9,
        location_after_name="Attic",
        inventory_after=frozenset({LAMP}),
        item_names={LAMP: "brass lantern"},
    )
    answer = record("up", ctx)
    assert answer.memory_title == "'up' scores +5"
    text = answer.memory_text or ""
    assert "leads to Attic (9)" in text and "the brass lantern" in text


def test_nothing_provable_is_not_remembered() -> None:
    answer = record("look", ZMachineContext(first_visit=True, response_length=300))
    assert answer.should_remember is False
    assert answer.reasoning.startswith("offline recorder")


def test_existing_title_is_not_stored_again() -> None:
    ctx = ZMachineContext(location_before=8, location_after=5, location_after_name="Living Room")
    answer = record("west", ctx, existing=[stored("'west' leads to Living Room (5)")])
    assert answer.should_remember is False
    assert "already stored" in answer.reasoning


def test_a_turn_whose_leading_fact_is_stored_is_already_remembered() -> None:
    ctx = ZMachineContext(
        score_before=0, score_after=5, location_before=8, location_after=9, location_after_name="A"
    )
    first = record("up", ctx)
    assert first.memory_title == "'up' scores +5"
    assert "leads to A (9)" in (first.memory_text or "")  # the other fact is in the text
    again = record("up", ctx, existing=number_memories([as_stored(first)]))
    assert again.should_remember is False
    assert "already stored" in again.reasoning


def test_reasoning_never_claims_to_be_an_llm() -> None:
    answer = record("take lamp", ZMachineContext(inventory_after=frozenset({LAMP})))
    assert answer.reasoning.startswith("offline recorder")
    assert "no LLM was called" in answer.reasoning


def test_recorder_answer_goes_through_the_guards() -> None:
    answer = record("take lamp", ZMachineContext(inventory_after=frozenset({LAMP})))
    decision = resolve_decision(answer, [], first_visit=False)
    assert decision.new_memory is not None
    assert decision.new_memory.title == "'take lamp' gets object 15"


def test_long_actions_are_shortened_in_titles() -> None:
    answer = record("x" * 300, ZMachineContext(score_before=0, score_after=1))
    assert len(answer.memory_title or "") < 100


def test_first_sentence_skips_star_banners_and_whitespace() -> None:
    assert first_sentence("****  You have died  ****\n\nYou are dead. Sorry.") == "You have died"
    assert first_sentence("The axe hits.\nYou die.\n\n**** You have died ****") == "The axe hits."
    assert first_sentence("   ") == ""


# --- one tier per memory, each fact once, refusals (issue 17) ----------------------------------

NOTHING = ZMachineContext(location_before=8, location_after=8)


def test_a_permanent_memory_never_carries_an_episode_only_fact() -> None:
    coffin = 7
    ctx = ZMachineContext(
        score_before=0, score_after=10, inventory_before=frozenset({coffin}),
        item_names={coffin: "gold coffin"},
    )  # fmt: skip
    answer = record("put coffin in case", ctx)
    assert answer.memory_title == "'put coffin in case' scores +10"
    assert answer.persistence is Persistence.PERMANENT
    assert "this episode only" not in (answer.memory_text or "")
    assert "Placed" not in (answer.memory_text or "")


def test_an_exit_in_a_score_memorys_text_is_not_stored_again() -> None:
    scored = ZMachineContext(
        score_before=0, score_after=10, location_before=8, location_after=5,
        location_after_name="Kitchen",
    )  # fmt: skip
    first = as_stored(record("enter window", scored))
    assert "leads to Kitchen (5)" in first.text
    moved = ZMachineContext(location_before=8, location_after=5, location_after_name="Kitchen")
    again = record("enter window", moved, existing=[first])
    assert again.should_remember is False and "already stored" in again.reasoning


def test_a_score_memory_leaves_out_an_exit_already_stored() -> None:
    moved = ZMachineContext(location_before=8, location_after=5, location_after_name="Kitchen")
    exit_memory = as_stored(record("enter window", moved))
    scored = moved.model_copy(update={"score_before": 0, "score_after": 10})
    answer = record("enter window", scored, existing=[exit_memory])
    assert answer.memory_title == "'enter window' scores +10"
    assert "leads to" not in (answer.memory_text or "")
    # the score memory of a later episode (other score figures) is the same fact
    later = scored.model_copy(update={"score_before": 5, "score_after": 15})
    assert (
        record("enter window", later, existing=[exit_memory, as_stored(answer)]).should_remember
        is False
    )


@pytest.mark.parametrize(
    ("response", "title"),
    [
        ("You can't go that way.", "'north' is no exit"),
        ('I don\'t know the word "north".', "'north' is not understood"),
        ("What a concept!", "'north' is impossible"),
    ],
)
def test_a_refusal_that_proves_a_rule_is_a_permanent_failure(response: str, title: str) -> None:
    answer = record("north", NOTHING, response=response + "\nThe axe sweeps past.")
    assert answer.should_remember and answer.memory_title == title
    assert answer.category is Category.FAILURE
    assert answer.persistence is Persistence.PERMANENT
    assert f'"{response}"' in (answer.memory_text or "")
    assert "this episode only" not in (answer.memory_text or "")
    assert refused_action(title) == "north"


def test_a_refusal_by_the_state_of_the_game_is_an_ephemeral_failure() -> None:
    answer = record("west", NOTHING, response="The kitchen window is closed.")
    assert answer.memory_title == "'west' is refused for now"
    assert answer.category is Category.FAILURE
    assert answer.persistence is Persistence.EPHEMERAL
    assert "(this episode only" in (answer.memory_text or "")


def test_a_refusal_is_stored_once_and_other_answers_are_not_failures() -> None:
    first = record("north", NOTHING, response="You can't go that way.")
    again = record("north", NOTHING, response="You can't go that way.", existing=[as_stored(first)])
    assert again.should_remember is False
    assert record("wait", NOTHING, response="Time passes...").should_remember is False
    moved = ZMachineContext(location_before=8, location_after=5)  # a refusal text, but it moved
    assert record("north", moved, response="You can't go that way.").category is Category.NOTE


def test_a_rule_supersedes_the_same_actions_failure_for_now() -> None:
    for_now = as_stored(record("west", NOTHING, response="You can't see any west here!"))
    rule = record("west", NOTHING, response="You can't go that way.", existing=[for_now])
    assert rule.memory_title == "'west' is no exit"
    assert rule.supersedes == ("'west' is refused for now",) and rule.invalidates == ()
    decision = resolve_decision(rule, number_memories([for_now]), first_visit=False)
    assert decision.supersede_titles == ("'west' is refused for now",)


def test_an_action_that_works_invalidates_its_failures_with_the_reason() -> None:
    closed = as_stored(record("west", NOTHING, response="The kitchen window is closed."))
    moved = ZMachineContext(location_before=8, location_after=5, location_after_name="Kitchen")
    answer = record("west", moved, existing=[closed])
    assert answer.memory_title == "'west' leads to Kitchen (5)"
    assert answer.invalidates == ("'west' is refused for now",)
    assert "worked here later" in (answer.invalidation_reason or "")
    # the exit already stored: the answer only invalidates
    exit_memory = as_stored(answer)
    only = record("west", moved, existing=[closed, exit_memory])
    assert only.should_remember is False and only.invalidates == ("'west' is refused for now",)
    decision = resolve_decision(only, number_memories([closed, exit_memory]), first_visit=False)
    assert decision.invalidate_titles == ("'west' is refused for now",) and decision.has_effect


def test_refused_action_reads_the_action_back_from_failure_and_danger_titles() -> None:
    assert refused_action("'take bird's nest' is not understood") == "take bird's nest"
    assert refused_action("'north' is deadly") == "north"
    assert refused_action("'west' is refused for now") == "west"
    assert refused_action("'west' leads to Kitchen (5)") is None
    assert refused_action("Take or break window") is None


contexts = st.builds(
    ZMachineContext,
    score_before=st.integers(0, 350),
    score_after=st.integers(0, 350),
    location_before=st.integers(1, 250),
    location_after=st.integers(1, 250),
    inventory_before=st.frozensets(st.integers(1, 250), max_size=4),
    inventory_after=st.frozensets(st.integers(1, 250), max_size=4),
    died=st.booleans(),
    item_names=st.dictionaries(st.integers(1, 250), st.sampled_from(["lamp", "sword", "egg"])),
    location_after_name=st.one_of(st.none(), st.just("Attic")),
)


ANSWERS = st.sampled_from(
    [
        "Something happens. More.",
        "You can't go that way.",
        "The kitchen window is closed.",
        'I don\'t know the word "egg".',
    ]
)


@given(
    ctx=contexts,
    action=st.sampled_from(["north", "take all", "drop egg", "give egg to troll"]),
    response=ANSWERS,
)
def test_recorder_is_deterministic_and_always_valid(
    ctx: ZMachineContext, action: str, response: str
) -> None:
    first = record(action, ctx, response=response)
    again = record(action, ZMachineContext(**ctx.model_dump()), response=response)
    assert first == again
    if first.should_remember:
        assert first.persistence is not Persistence.CORE
        # one tier per memory: an on-disk memory never says it is for this episode only
        if first.persistence is Persistence.PERMANENT:
            assert "this episode only" not in (first.memory_text or "")
        # the answer is storable as a Memory
        decision = resolve_decision(first, [], first_visit=True)
        assert decision.new_memory is not None
        decision.new_memory.to_memory(episode=1, turns=1)
        # replaying the turn stores its other facts, one at a time, then nothing
        memories = [as_stored(first)]
        for _ in range(4):
            answer = record(action, ctx, response=response, existing=memories)
            if not answer.should_remember:
                break
            assert answer.memory_title not in {m.title for m in memories}
            memories.append(as_stored(answer))
        else:
            raise AssertionError(f"the same turn keeps adding memories: {memories}")


def test_a_rule_refusal_of_an_action_that_worked_here_before_is_for_now() -> None:
    """Zork says "You can't go that way." for the living room's shut trap door."""
    moved = ZMachineContext(location_before=8, location_after=5, location_after_name="Cellar")
    went_down = as_stored(record("down", moved))
    answer = record("down", NOTHING, response="You can't go that way.", existing=[went_down])
    assert answer.memory_title == "'down' is refused for now"
    assert answer.persistence is Persistence.EPHEMERAL
    # a refusal of another action here is still a rule
    other = record("up", NOTHING, response="You can't go that way.", existing=[went_down])
    assert other.memory_title == "'up' is no exit"
