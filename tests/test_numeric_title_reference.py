"""A reference that is a memory's exact title is that memory, even when it reads like a
handle.

Was: the answer's ``"1"`` (under the spec's ``supersedes_memory_titles``, a list of
titles) was turned into handle 1 while the answer was read, so the memory shown as [1]
was retired instead of the memory titled "1". Now a bare number is looked up as a title
first, and as a handle only when no memory has that title; "[2]", the way the prompt
shows a handle, is still handle 2.
"""

from __future__ import annotations

import json

from memstore import Memory, MemoryStore, SimpleMemoryManager, ZMachineContext
from memstore.synthesis import MemorySynthesisResponse


def note(title: str, text: str) -> Memory:
    return Memory(
        category="NOTE", title=title, text=text, episode=1, turns="1", persistence="permanent"
    )


def answer(**fields: object) -> str:
    return json.dumps(
        {
            "should_remember": True,
            "category": "NOTE",
            "memory_title": "Dial code is 2",
            "memory_text": "The dial opens at 2.",
            "persistence": "permanent",
            "reasoning": "r",
            **fields,
        }
    )


def play(store: MemoryStore, reply: str) -> tuple[str, ...]:
    manager = SimpleMemoryManager(store, llm=lambda _messages: reply)
    outcome = manager.record_action_outcome(
        10,
        "Vault",
        "turn dial to 2",
        "Click. " * 30,
        ZMachineContext(location_before=10, location_after=10),
    )
    assert outcome is not None
    manager.flush()
    return outcome.superseded


def statuses(store: MemoryStore) -> dict[str, str]:
    return {m.title: m.status.value for m in store.memories(10, include_superseded=True)}


def test_a_title_that_reads_like_a_handle_names_the_memory_with_that_title(
    db_path: object,
) -> None:
    with MemoryStore.open(db_path) as store:  # type: ignore[arg-type]
        store.add_memory(10, "Vault", note("Dial has 3 digits", "three digits"))
        store.add_memory(10, "Vault", note("1", "a memory titled 1"))

        superseded = play(store, answer(supersedes_memory_titles=["1"]))

        assert superseded == ("1",)
        assert statuses(store) == {
            "Dial has 3 digits": "ACTIVE",
            "1": "SUPERSEDED",
            "Dial code is 2": "ACTIVE",
        }


def test_a_handle_written_as_text_still_names_the_memory_shown_so(db_path: object) -> None:
    with MemoryStore.open(db_path) as store:  # type: ignore[arg-type]
        store.add_memory(10, "Vault", note("Dial has 3 digits", "three digits"))

        superseded = play(store, answer(supersedes=["[1]"]))

        assert superseded == ("Dial has 3 digits",)


def test_the_answer_keeps_a_bare_number_as_written_and_reads_a_bracketed_one_as_a_handle() -> None:
    response = MemorySynthesisResponse.model_validate_json(
        answer(
            supersedes=["1", "[2]", 3, "[3]"],
            invalidate_memory_titles=["7"],
            invalidation_reason="wrong",
        )
    )
    assert response.supersedes == ("1", 2, 3)
    assert response.invalidates == ("7",)


def test_a_bare_number_too_long_to_be_a_handle_is_a_reference_to_nothing(
    db_path: object,
) -> None:
    with MemoryStore.open(db_path) as store:  # type: ignore[arg-type]
        store.add_memory(10, "Vault", note("Dial has 3 digits", "three digits"))

        assert play(store, answer(supersedes=["9" * 5000])) == ()
        assert statuses(store)["Dial has 3 digits"] == "ACTIVE"
