"""A handle retires exactly the memory the prompt showed under it (review D2, D3), an
exception that cannot be described is still a counted failure (D4), and the model's
titles are compared as a reader reads them (D6).

D2/D3 run two agents (two stores) on one database, on SQLite and on PostgreSQL: one
agent's ephemeral tier is its own, so another agent may store a persistent memory of the
same title at the same room, or supersede the memory the first agent's model is looking at
while the model answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore.manager import SimpleMemoryManager
from memstore.memory_tools import MemoryToolkit
from memstore.models import Memory
from memstore.store import MemoryStore
from memstore.synthesis import (
    AnswerError,
    MemorySynthesisResponse,
    SynthesisErrorKind,
    describe_exception,
    number_memories,
    parse_synthesis_answer,
    resolve_decision,
)
from memstore.triggers import ZMachineContext
from tests.conftest import note, remember

ROOM = 5
LONG = "x" * 150  # fires the long-response trigger


def invalidate(*handles: int) -> dict[str, Any]:
    return {
        "should_remember": False,
        "invalidates": list(handles),
        "invalidation_reason": "proven false",
        "reasoning": "test",
    }


def one_turn(store: MemoryStore, llm: Callable[[list[dict[str, str]]], str]) -> Any:
    """One turn at ROOM with ``llm`` answering; returns (manager, what it applied)."""
    manager = SimpleMemoryManager(store, llm=llm, episode=1)
    context = ZMachineContext(location_before=ROOM, location_after=ROOM)
    applied = manager.record_action_outcome(ROOM, "Room", "look", LONG, context)
    manager.flush()
    return manager, applied


def answering(answer: dict[str, Any]) -> Callable[[list[dict[str, str]]], str]:
    return lambda _messages: json.dumps(answer)


def states(store: MemoryStore) -> list[tuple[str, str, str, str]]:
    """(persistence, status, title, text) of every memory at ROOM this store sees."""
    return [
        (m.persistence.value, m.status.value, m.title, m.text)
        for m in store.memories(ROOM, include_superseded=True)
    ]


def handle_of(store: MemoryStore, persistence: str) -> int:
    """The handle the prompt gives this store's live memory of ``persistence`` at ROOM."""
    shown = [m.persistence.value for m in store.memories(ROOM)]
    return 1 + shown.index(persistence)


# --- D2: a handle to the agent's own ephemeral memory -----------------------------------


def lamps(agent: MemoryStore, other: MemoryStore) -> None:
    """The agent's ephemeral "Lamp here", then another agent's permanent one (it cannot see
    the first one's session tier): both live for the agent, [1] permanent, [2] ephemeral."""
    assert agent.add_memory(ROOM, "Room", note("Lamp here", "ephemeral", text="A: mine"))
    assert other.add_memory(ROOM, "Room", note("Lamp here", text="B: found at start"))
    assert [m.persistence.value for m in agent.memories(ROOM)] == ["permanent", "ephemeral"]


def test_a_handle_to_the_agents_ephemeral_memory_supersedes_that_memory_only(
    database: str | Path,
) -> None:
    # was: B's permanent "Lamp here" was superseded, A's own ephemeral one stayed ACTIVE
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        lamps(agent, other)
        answer = remember("Lamp taken back", supersedes=[handle_of(agent, "ephemeral")])
        manager, applied = one_turn(agent, answering(answer))
        assert applied.superseded == ("Lamp here",)
        assert states(agent) == [
            ("permanent", "ACTIVE", "Lamp here", "B: found at start"),
            ("permanent", "ACTIVE", "Lamp taken back", "Learned: Lamp taken back."),
            ("ephemeral", "SUPERSEDED", "Lamp here", "A: mine"),
        ]
        assert [m.text for m in other.memories(ROOM) if m.title == "Lamp here"] == [
            "B: found at start"
        ]
        assert manager.get_status()["supersessions"] == 1


def test_a_handle_to_the_agents_ephemeral_memory_invalidates_that_memory_only(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        lamps(agent, other)
        manager, applied = one_turn(agent, answering(invalidate(handle_of(agent, "ephemeral"))))
        assert applied.invalidated == ("Lamp here",)
        assert states(agent) == [
            ("permanent", "ACTIVE", "Lamp here", "B: found at start"),
            ("ephemeral", "SUPERSEDED", "Lamp here", "A: mine"),
        ]
        assert manager.get_status()["invalidations"] == 1


def test_a_handle_to_the_other_agents_permanent_memory_retires_that_one(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        lamps(agent, other)
        answer = remember("Lamp is lit", supersedes=[handle_of(agent, "permanent")])
        _manager, applied = one_turn(agent, answering(answer))
        assert applied.superseded == ("Lamp here",)
        assert [(m.persistence.value, m.title) for m in other.memories(ROOM)] == [
            ("permanent", "Lamp is lit")
        ]
        assert ("ephemeral", "ACTIVE", "Lamp here", "A: mine") in states(agent)


def test_both_lamps_by_handle_are_both_superseded(database: str | Path) -> None:
    """Two shown memories of one title are two memories: each handle counts."""
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        lamps(agent, other)
        _manager, applied = one_turn(agent, answering(remember("No lamp", supersedes=[1, 2])))
        assert applied.superseded == ("Lamp here", "Lamp here")
        assert [m.title for m in agent.memories(ROOM)] == ["No lamp"]


def test_the_live_list_after_a_synthesis_by_handle_equals_a_fresh_read(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        lamps(agent, other)
        existing = number_memories(agent.memories(ROOM))  # as the manager reads it: cached
        answer = MemorySynthesisResponse.model_validate(remember("Lamp gone", supersedes=[2]))
        decision = resolve_decision(answer, existing, first_visit=False)
        agent.apply_synthesis(
            ROOM,
            "Room",
            new_memory=note("Lamp gone", turns="6"),
            supersede_titles=decision.supersede_titles,
            episode=1,
            turn=6,
        )
        warm = agent.memories(ROOM)
        agent._forget()
        assert agent.memories(ROOM) == warm
        assert [(m.persistence.value, m.title) for m in warm] == [
            ("permanent", "Lamp here"),
            ("permanent", "Lamp gone"),
        ]


# --- D3: the shown memory was retired while the model answered --------------------------


def replaced_while_answering(
    other: MemoryStore, answer: dict[str, Any]
) -> Callable[[list[dict[str, str]]], str]:
    """A model that answers ``answer`` about [1] "Seed", while another agent supersedes
    "Seed" with a new memory of the same title (the README allows reusing it)."""

    def model(_messages: list[dict[str, str]]) -> str:
        newer = note("Seed", text="B: the troll was killed", turns="8")
        assert other.supersede_memory(ROOM, "Room", "Seed", newer)
        return json.dumps(answer)

    return model


def test_a_memory_superseded_while_the_model_answered_is_not_superseded_again(
    database: str | Path,
) -> None:
    # was: A's answer retired B's new "Seed", which A's model never saw
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        assert agent.add_memory(ROOM, "Room", note("Seed", text="old: the troll is here"))
        model = replaced_while_answering(other, remember("A replacement", supersedes=[1]))
        _manager, applied = one_turn(agent, model)
        assert applied.superseded == () and applied.stale == ("Seed",)
        assert applied.new_memory is not None  # the rest of the answer is kept
        assert [(m.title, m.text) for m in other.memories(ROOM)] == [
            ("Seed", "B: the troll was killed"),
            ("A replacement", "Learned: A replacement."),
        ]
        (logged,) = [row for row in agent.decision_log() if row["applied"]]
        assert json.loads(logged["applied"])["stale"] == ["Seed"]


def test_a_memory_superseded_while_the_model_answered_is_not_invalidated(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        assert agent.add_memory(ROOM, "Room", note("Seed", text="old: the troll is here"))
        assert agent.add_memory(ROOM, "Room", note("Rug", text="a rug"))
        model = replaced_while_answering(other, invalidate(1, 2))
        _manager, applied = one_turn(agent, model)
        assert applied.invalidated == ("Rug",) and applied.stale == ("Seed",)
        assert [(m.title, m.text) for m in other.memories(ROOM)] == [
            ("Seed", "B: the troll was killed")
        ]


def test_a_stale_handle_is_counted_in_the_managers_status(database: str | Path) -> None:
    with MemoryStore.open(database) as agent, MemoryStore.open(database) as other:
        assert agent.add_memory(ROOM, "Room", note("Seed", text="old: the troll is here"))
        model = replaced_while_answering(other, remember("A replacement", supersedes=[1]))
        manager, _applied = one_turn(agent, model)
        assert manager.get_status()["stale_references"] == 1


def test_plain_titles_still_find_the_live_memory(database: str | Path) -> None:
    """A caller that names titles (rebuild_from_log, the API) keeps the exact-title match."""
    with MemoryStore.open(database) as store:
        assert store.add_memory(ROOM, "Room", note("Seed"))
        applied = store.apply_synthesis(
            ROOM,
            "Room",
            new_memory=note("Seed grown", turns="6"),
            supersede_titles=["Seed"],
            episode=1,
            turn=6,
        )
        assert applied.superseded == ("Seed",) and applied.stale == ()


# --- D4: an exception that cannot be described ------------------------------------------


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str of exception fails")


class StrNotAString(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


class StrRecurses(Exception):
    def __str__(self) -> str:
        return str(self)


class ClassRaises(Exception):
    """``isinstance`` reads ``__class__`` when the type itself does not match."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise RuntimeError("no class to give")


UNDESCRIBABLE = [StrRaises, StrNotAString, StrRecurses, ClassRaises]


def raising(exc: BaseException) -> Callable[[list[dict[str, str]]], str]:
    def model(_messages: list[dict[str, str]]) -> str:
        raise exc

    return model


@pytest.mark.parametrize("kind", UNDESCRIBABLE)
def test_an_exception_that_cannot_be_described_is_a_counted_provider_error(
    store: MemoryStore, kind: type[Exception]
) -> None:
    # was: RuntimeError, TypeError or RecursionError out of record_action_outcome
    manager, applied = one_turn(store, raising(kind()))
    assert applied is None
    status = manager.get_status()
    assert status["failures"] == {"provider_error": 1} and status["llm_calls"] == 1
    assert manager.last_failure is not None and kind.__name__ in manager.last_failure
    (row,) = store.decision_log()
    assert row["error_kind"] == "provider_error" and kind.__name__ in row["error"]


@pytest.mark.parametrize("kind", UNDESCRIBABLE)
def test_describe_exception_never_raises(kind: type[Exception]) -> None:
    described = describe_exception(kind(), 1000)
    assert described.startswith(kind.__name__) and type(described) is str


def test_describe_exception_gives_the_message_cut_and_storable() -> None:
    assert describe_exception(ValueError("bad\x00value"), 1000) == "ValueError: bad\\x00value"
    assert len(describe_exception(ValueError("y" * 5000), 100)) == 100


class HostileStr(str):
    def __getitem__(self, key: Any) -> str:
        raise RuntimeError("sliced")


class StrIsAHostileStr(Exception):
    def __str__(self) -> str:
        return HostileStr("a message")


def test_describe_exception_takes_a_str_subclass_as_plain_text() -> None:
    assert describe_exception(StrIsAHostileStr(), 1000) == "StrIsAHostileStr: a message"


@pytest.mark.parametrize("kind", UNDESCRIBABLE)
def test_a_query_tool_reports_an_undescribable_model_error_as_text(
    store: MemoryStore, kind: type[Exception]
) -> None:
    kit = MemoryToolkit(store, llm=raising(kind()))
    kit.add_memory("Brass lantern on the trophy case", 800, 9, 193, "Living Room", 10, 12)
    result = kit.query_memories("Where is the lantern?")
    assert result.startswith("Error: query_memories could not get an answer"), result
    assert "provider_error" in result and kind.__name__ in result
    assert dict(kit.failures) == {"provider_error": 1}


# --- D6: titles as a reader reads them ---------------------------------------------------


def test_a_new_title_spelled_like_a_live_one_is_a_dropped_duplicate() -> None:
    existing = number_memories([note("Caf\u00e9")])
    for spelling in ("Cafe\u0301", "Caf\u00e9  ", "Caf\u00e9"):
        answer = MemorySynthesisResponse.model_validate(remember(spelling))
        decision = resolve_decision(answer, existing, first_visit=False)
        assert decision.duplicate_title and decision.new_memory is None, spelling


def test_a_new_title_spelled_like_the_memory_it_supersedes_is_kept() -> None:
    existing = number_memories([note("Caf\u00e9")])
    answer = MemorySynthesisResponse.model_validate(remember("Cafe\u0301", supersedes=[1]))
    decision = resolve_decision(answer, existing, first_visit=False)
    assert not decision.duplicate_title and decision.supersede_titles == ("Caf\u00e9",)


def test_two_spellings_of_one_title_are_one_memory_through_the_manager(
    store: MemoryStore,
) -> None:
    # was: both "Cafe\u0301" and "Caf\u00e9" stored and live at one room
    answers = [json.dumps(remember("Cafe\u0301")), json.dumps(remember("Caf\u00e9"))]
    manager = SimpleMemoryManager(store, llm=lambda _m: answers.pop(0), episode=1)
    for _ in range(2):
        context = ZMachineContext(location_before=ROOM, location_after=ROOM)
        manager.record_action_outcome(ROOM, "Room", "look", LONG, context)
    assert [m.title for m in store.memories(ROOM)] == ["Cafe\u0301"]
    assert manager.get_status()["duplicates_dropped"] == 1


INVISIBLE_TITLES = ["\u200b", "\u200b \u2060\ufeff", "\u200d\u200c", " \u00ad "]


@pytest.mark.parametrize("title", INVISIBLE_TITLES)
def test_a_title_of_only_format_characters_is_a_schema_failure(title: str) -> None:
    with pytest.raises(AnswerError) as refused:
        parse_synthesis_answer(json.dumps(remember(title)))
    assert refused.value.kind is SynthesisErrorKind.SCHEMA
    assert "memory_title" in refused.value.message


def test_an_invisible_title_is_counted_and_nothing_is_stored(store: MemoryStore) -> None:
    manager, applied = one_turn(store, answering(remember("\u200b")))
    assert applied is None and store.memories(ROOM) == []
    assert manager.get_status()["failures"] == {"schema": 1}


def test_a_title_with_a_format_character_beside_visible_ones_is_accepted() -> None:
    answer = parse_synthesis_answer(json.dumps(remember("Tro\u00adll here\u200b")))
    assert answer.memory_title == "Tro\u00adll here\u200b"


def test_a_stored_invisible_title_stays_readable(store: MemoryStore) -> None:
    """The rule is the model's answer's, not the stored row's: a database holding such a
    title (written before, or imported) still reads."""
    assert store.add_memory(ROOM, "Room", note("\u200b"))
    assert [m.title for m in store.memories(ROOM)] == ["\u200b"]
    assert Memory.model_validate(note("\u200b").model_dump()).title == "\u200b"
