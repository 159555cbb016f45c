"""resolve_decision: the guards between a validated answer and the store."""

from __future__ import annotations

import dataclasses

import pytest

from memstore.models import Category, Memory, Persistence, Status
from memstore.synthesis import (
    MemoryDraft,
    MemorySynthesisResponse,
    SynthesisDecision,
    number_memories,
    resolve_decision,
)


def memory(title: str, persistence: str = "permanent", status: str = "ACTIVE") -> Memory:
    extra = {"superseded_by": "Something newer"} if status == "SUPERSEDED" else {}
    return Memory(
        category="NOTE",
        title=title,
        text=f"text of {title}",
        episode=1,
        turns="10",
        persistence=persistence,
        status=status,
        **extra,
    )


@pytest.fixture
def existing() -> list[tuple[int, Memory]]:
    return number_memories(
        [
            memory("Troll attacks on sight", "permanent"),  # [1]
            memory("Troll accepts lunch gift", "ephemeral", "TENTATIVE"),  # [2]
            memory("Sword here", "core"),  # [3]
            memory("Old rumour", "permanent", "SUPERSEDED"),  # [4]
        ]
    )


def new(**fields: object) -> MemorySynthesisResponse:
    data: dict[str, object] = {
        "should_remember": True,
        "category": "DANGER",
        "memory_title": "Troll attacks after accepting gift",
        "memory_text": "Gift strategy fails.",
        "persistence": "permanent",
        "reasoning": "r",
    }
    data.update(fields)
    return MemorySynthesisResponse.model_validate(data)


def test_number_memories_gives_handles_from_one() -> None:
    numbered = number_memories([memory("a"), memory("b")])
    assert [handle for handle, _ in numbered] == [1, 2]


def test_plain_new_memory_passes_through(existing) -> None:
    decision = resolve_decision(new(status="TENTATIVE"), existing, first_visit=False)
    assert decision.new_memory == MemoryDraft(
        category=Category.DANGER,
        title="Troll attacks after accepting gift",
        text="Gift strategy fails.",
        persistence=Persistence.PERMANENT,
        status=Status.TENTATIVE,
    )
    assert decision.has_effect and not decision.core_downgraded
    assert decision.supersede_titles == () and decision.invalidate_titles == ()


def test_decision_is_frozen(existing) -> None:
    decision = resolve_decision(new(), existing, first_visit=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.core_downgraded = True  # type: ignore[misc]


def test_draft_becomes_a_memory_with_episode_and_turns(existing) -> None:
    draft = resolve_decision(new(), existing, first_visit=True).new_memory
    assert draft is not None
    stored = draft.to_memory(episode=2, turns=13, score_change=0)
    assert (stored.episode, stored.turns, stored.title) == (2, "13", draft.title)


def test_core_on_return_visit_is_downgraded_to_permanent(existing) -> None:
    decision = resolve_decision(new(persistence="core"), existing, first_visit=False)
    assert decision.new_memory is not None
    assert decision.new_memory.persistence is Persistence.PERMANENT
    assert decision.core_downgraded is True


def test_core_on_first_visit_is_kept(existing) -> None:
    decision = resolve_decision(new(persistence="core"), existing, first_visit=True)
    assert decision.new_memory is not None
    assert decision.new_memory.persistence is Persistence.CORE
    assert decision.core_downgraded is False


def test_supersession_by_handle_yields_exact_titles(existing) -> None:
    decision = resolve_decision(new(supersedes=[2]), existing, first_visit=False)
    assert decision.supersede_titles == ("Troll accepts lunch gift",)


def test_supersession_by_exact_title_is_accepted(existing) -> None:
    decision = resolve_decision(
        new(supersedes_memory_titles=["Troll accepts lunch gift"]), existing, first_visit=False
    )
    assert decision.supersede_titles == ("Troll accepts lunch gift",)


def test_handle_and_title_of_the_same_memory_count_once(existing) -> None:
    decision = resolve_decision(
        new(supersedes=[2, "Troll accepts lunch gift"]), existing, first_visit=False
    )
    assert decision.supersede_titles == ("Troll accepts lunch gift",)


def test_hallucinated_handle_is_ignored_and_counted(existing) -> None:
    decision = resolve_decision(new(supersedes=[2, 9]), existing, first_visit=False)
    assert decision.supersede_titles == ("Troll accepts lunch gift",)
    assert decision.hallucinated_references == (9,)
    assert decision.hallucinated_count == 1
    assert decision.new_memory is not None


def test_near_miss_title_is_never_fuzzy_matched(existing) -> None:
    decision = resolve_decision(
        new(supersedes=["troll accepts lunch gift", "Troll accepts lunch"]),
        existing,
        first_visit=False,
    )
    assert decision.supersede_titles == ()
    assert decision.hallucinated_count == 2


def test_permanent_superseded_by_ephemeral_is_skipped_but_new_memory_kept(existing) -> None:
    decision = resolve_decision(
        new(memory_title="Dropped sword near troll", persistence="ephemeral", supersedes=[1, 2]),
        existing,
        first_visit=False,
    )
    assert decision.forbidden_supersessions == ("Troll attacks on sight",)
    assert decision.forbidden_count == 1
    assert decision.supersede_titles == ("Troll accepts lunch gift",)  # ephemeral → ephemeral ok
    assert decision.new_memory is not None
    assert decision.new_memory.persistence is Persistence.EPHEMERAL


def test_core_superseded_by_ephemeral_is_skipped(existing) -> None:
    decision = resolve_decision(
        new(memory_title="Took sword", persistence="ephemeral", supersedes=[3]),
        existing,
        first_visit=False,
    )
    assert decision.forbidden_supersessions == ("Sword here",)
    assert decision.supersede_titles == ()


def test_ephemeral_upgraded_by_permanent_and_core_refined_by_permanent(existing) -> None:
    decision = resolve_decision(new(supersedes=[2, 3]), existing, first_visit=False)
    assert decision.supersede_titles == ("Troll accepts lunch gift", "Sword here")
    assert decision.forbidden_supersessions == ()


def test_core_downgrade_happens_before_the_transition_check(existing) -> None:
    decision = resolve_decision(
        new(persistence="core", supersedes=[3]), existing, first_visit=False
    )
    assert decision.core_downgraded
    assert decision.supersede_titles == ("Sword here",)


def test_already_superseded_memory_is_not_touched_again(existing) -> None:
    decision = resolve_decision(
        new(supersedes=[4], invalidates=["Old rumour"], invalidation_reason="x"),
        existing,
        first_visit=False,
    )
    assert decision.supersede_titles == () and decision.invalidate_titles == ()
    assert decision.already_superseded == (4, "Old rumour")


def test_invalidation_only_answer_yields_an_invalidating_decision(existing) -> None:
    response = MemorySynthesisResponse(
        should_remember=False,
        invalidates=(2,),
        invalidation_reason="Proven false by death",
        reasoning="no new memory needed",
    )
    decision = resolve_decision(response, existing, first_visit=False)
    assert decision.new_memory is None
    assert decision.invalidate_titles == ("Troll accepts lunch gift",)
    assert decision.invalidation_reason == "Proven false by death"
    assert decision.has_effect


def test_invalidation_of_only_hallucinated_memories_has_no_effect(existing) -> None:
    response = MemorySynthesisResponse(
        should_remember=False, invalidates=("Nope",), invalidation_reason="x"
    )
    decision = resolve_decision(response, existing, first_visit=False)
    assert not decision.has_effect
    assert decision.invalidation_reason is None
    assert decision.hallucinated_references == ("Nope",)


def test_new_memory_with_supersession_and_invalidation_together(existing) -> None:
    decision = resolve_decision(
        new(supersedes=[2], invalidates=[1], invalidation_reason="Proven false separately"),
        existing,
        first_visit=False,
    )
    assert decision.supersede_titles == ("Troll accepts lunch gift",)
    assert decision.invalidate_titles == ("Troll attacks on sight",)


def test_same_memory_by_handle_and_title_in_both_lists_stays_superseded(existing) -> None:
    decision = resolve_decision(
        new(supersedes=[2], invalidates=["Troll accepts lunch gift"], invalidation_reason="x"),
        existing,
        first_visit=False,
    )
    assert decision.supersede_titles == ("Troll accepts lunch gift",)
    assert decision.invalidate_titles == ()
    assert decision.conflicting_references == ("Troll accepts lunch gift",)


def test_new_memory_repeating_an_existing_title_is_dropped(existing) -> None:
    decision = resolve_decision(
        new(memory_title="Troll attacks on sight"), existing, first_visit=False
    )
    assert decision.new_memory is None and decision.duplicate_title


def test_new_memory_may_reuse_the_title_it_supersedes(existing) -> None:
    decision = resolve_decision(
        new(memory_title="Troll accepts lunch gift", supersedes=[2]), existing, first_visit=False
    )
    assert decision.new_memory is not None and not decision.duplicate_title
    assert decision.supersede_titles == ("Troll accepts lunch gift",)


def test_no_memories_at_location_everything_is_hallucinated() -> None:
    decision = resolve_decision(new(supersedes=[1]), [], first_visit=True)
    assert decision.hallucinated_references == (1,)
    assert decision.new_memory is not None


def test_not_remembering_is_a_no_op(existing) -> None:
    response = MemorySynthesisResponse(should_remember=False, reasoning="duplicate")
    decision = resolve_decision(response, existing, first_visit=False)
    assert decision == SynthesisDecision(reasoning="duplicate")
    assert not decision.has_effect
