"""The offline recorder: only Z-machine facts, one per turn, deterministic titles."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstore.models import Category, Memory, Persistence, Status
from memstore.recorder import first_sentence, record_offline
from memstore.synthesis import number_memories, resolve_decision
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
    again = record("up", ctx, existing=number_memories([stored("'up' scores +5")]))
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


@given(ctx=contexts, action=st.sampled_from(["north", "take all", "drop egg", "give egg to troll"]))
def test_recorder_is_deterministic_and_always_valid(ctx: ZMachineContext, action: str) -> None:
    first = record(action, ctx, response="Something happens. More.")
    again = record(action, ZMachineContext(**ctx.model_dump()), response="Something happens. More.")
    assert first == again
    if first.should_remember:
        assert first.persistence is not Persistence.CORE
        # the answer is storable as a Memory
        decision = resolve_decision(first, [], first_visit=True)
        assert decision.new_memory is not None
        decision.new_memory.to_memory(episode=1, turns=1)
