"""Hostile model answers never raise out of record_action_outcome (issue 14).

Each one becomes a counted ``schema`` failure with its decision-log row, and nothing is
written: deep nesting, huge integers, texts SQLite reads as blank (a leading NUL), lone
surrogates that cannot be stored or serialised, and answers too large to read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memstore.manager import SimpleMemoryManager
from memstore.models import Memory
from memstore.store import MemoryStore
from memstore.synthesis import (
    MAX_ANSWER_CHARS,
    AnswerError,
    LLMCallError,
    MemoryDraft,
    SynthesisErrorKind,
    parse_synthesis_answer,
    synthesize,
)
from memstore.triggers import ZMachineContext
from tests.conftest import remember

CLEARING = 3
LONG = "x" * 150  # fires the long-response trigger


def invalidate_first(reason: str) -> dict[str, Any]:
    return {
        "should_remember": False,
        "invalidates": [1],
        "invalidation_reason": reason,
        "reasoning": "proven false",
    }


class Answers:
    """An injected LLM answering raw texts in order (dicts are sent as JSON)."""

    def __init__(self, *answers: str | dict[str, Any]) -> None:
        self.answers = [a if isinstance(a, str) else json.dumps(a) for a in answers]

    def __call__(self, messages: list[dict[str, str]]) -> str:
        return self.answers.pop(0)


@pytest.fixture
def play(store: MemoryStore) -> Iterator[Any]:
    """Play one turn per answer at the Clearing; return the manager."""
    made: list[SimpleMemoryManager] = []

    def run(*answers: str | dict[str, Any]) -> SimpleMemoryManager:
        manager = SimpleMemoryManager(store, llm=Answers(*answers), episode=1)
        made.append(manager)
        for _ in answers:
            context = ZMachineContext(location_before=CLEARING, location_after=CLEARING)
            manager.record_action_outcome(CLEARING, "Clearing", "look", LONG, context)
        return manager

    yield run
    for manager in made:
        manager.close()


def assert_one_schema_failure_nothing_written(
    manager: SimpleMemoryManager, titles_before: list[str]
) -> None:
    assert manager.get_status()["failures"] == {"schema": 1}
    memories = manager.store.memories(CLEARING, include_superseded=True)
    assert [(m.title, m.status.value) for m in memories] == titles_before
    manager.flush()
    failed = [row for row in manager.store.decision_log() if row["error_kind"]]
    assert len(failed) == 1
    (row,) = failed
    assert row["error_kind"] == "schema" and row["applied"] is None
    assert row["location_id"] == CLEARING and row["error"]


DEEP = 100_000
HUGE_INT = "1" * 5000

HOSTILE_NEW_MEMORY = {
    "deeply nested JSON": '{"should_remember": false, "reasoning": '
    + "[" * DEEP
    + "]" * DEEP
    + "}",
    "unclosed deep nesting": "[" * DEEP,
    "deep nesting in a fence": "```json\n" + '{"a": ' * DEEP + "1" + "}" * DEEP + "\n```",
    "a 5,000-digit integer": json.dumps(remember("Big"))[:-1] + f', "supersedes": [{HUGE_INT}]}}',
    "a 5,000-digit handle string": json.dumps(remember("Big", supersedes=[f"[{HUGE_INT}]"])),
    "a title starting with NUL": json.dumps(remember("\x00Troll")),
    "a title of spaces and NUL": json.dumps(remember("  \x00 x")),
    "a title of a tab and NUL": json.dumps(remember("\t\x00Troll")),
    "a NUL inside the title": json.dumps(remember("Troll\x00here")),
    "a NUL inside the text": json.dumps(remember("Troll", memory_text="axe\x00swings")),
    "a lone surrogate in the title": json.dumps(remember("Troll \ud800")),
    "a lone surrogate in the text": json.dumps(remember("Troll", memory_text="axe \udfff")),
    "a lone surrogate in the reasoning": json.dumps(remember("Troll", reasoning="\ud83d")),
    "a raw lone surrogate outside the JSON": "Here:\ud800\n```json\n"
    + json.dumps(remember("Troll"))
    + "\n```",
    "an answer too large to read": json.dumps(remember("Big", reasoning="y" * MAX_ANSWER_CHARS)),
}


@pytest.mark.parametrize("raw", HOSTILE_NEW_MEMORY.values(), ids=HOSTILE_NEW_MEMORY.keys())
def test_hostile_answer_is_a_counted_schema_failure(play: Any, raw: str) -> None:
    manager = play(raw)
    assert_one_schema_failure_nothing_written(manager, [])


HOSTILE_INVALIDATION = {
    "a reason starting with NUL": invalidate_first("\x00proven false"),
    "a reason of a space and NUL": invalidate_first(" \x00"),
    "a lone surrogate in the reason": invalidate_first("proven \ud800 false"),
}


@pytest.mark.parametrize("answer", HOSTILE_INVALIDATION.values(), ids=HOSTILE_INVALIDATION.keys())
def test_hostile_invalidation_changes_nothing(play: Any, answer: dict[str, Any]) -> None:
    manager = play(remember("Troll is friendly"), answer)
    assert_one_schema_failure_nothing_written(manager, [("Troll is friendly", "ACTIVE")])


def test_the_turn_after_a_hostile_answer_is_stored_normally(play: Any) -> None:
    manager = play("[" * DEEP, remember("Troll is friendly"))
    assert [m.title for m in manager.store.memories(CLEARING)] == ["Troll is friendly"]
    assert manager.get_status()["failures"] == {"schema": 1}
    assert manager.get_status()["memories_written"] == 1


def test_an_answer_holding_a_nul_is_logged_storably_and_blocks_no_later_write(
    play: Any,
) -> None:
    """PostgreSQL cannot store a NUL: the decision-log row of the failed answer waits in
    the buffer for the next write, which must not fail on it (nor any write after)."""
    manager = play("sorry\x00 I cannot answer", remember("Troll is friendly"))
    assert manager.get_status()["failures"] == {"invalid_json": 1}
    assert [m.title for m in manager.store.memories(CLEARING)] == ["Troll is friendly"]
    manager.flush()
    rows = manager.store.decision_log()
    (failed,) = [row for row in rows if row["error_kind"]]
    (applied,) = [row for row in rows if not row["error_kind"]]
    assert failed["error_kind"] == "invalid_json"
    assert failed["raw_answer"] == "sorry\\x00 I cannot answer"  # the NUL, written out
    assert applied["error_kind"] is None and applied["applied"]


def test_a_new_memory_that_breaks_a_rule_of_memory_is_a_counted_schema_failure(
    play: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the answer's checks and Memory's ever disagree (as they did on a title of a
    tab and a NUL), the memory Memory refuses is a counted failure, never an exception."""

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        return Memory(category="NOTE", title=" ", text="t", episode=1, turns="1")

    monkeypatch.setattr(MemoryDraft, "to_memory", refused)
    manager = play(remember("Troll"))
    assert_one_schema_failure_nothing_written(manager, [])
    (row,) = manager.store.decision_log()
    assert row["error"].startswith("the new memory: ")
    assert "title must not be blank" in row["error"] and "\n" not in row["error"]
    assert "\n" not in (manager.last_failure or "\n")


def test_the_failed_answer_is_kept_in_the_log_bounded_and_storable(play: Any) -> None:
    manager = play(json.dumps(remember("Troll \ud800", reasoning="z" * 50_000)))
    manager.flush()
    (row,) = manager.store.decision_log()
    assert row["error_kind"] == "schema"
    assert "Troll" in row["raw_answer"] and len(row["raw_answer"]) <= 10_000
    row["raw_answer"].encode("utf-8")  # storable text: the surrogate was escaped


@pytest.mark.parametrize(
    "raw",
    [
        "[" * DEEP,
        '{"should_remember": ' + HUGE_INT + "}",
        json.dumps(remember("\x00x")),
        json.dumps(invalidate_first("\ud800")),
        "x" * (MAX_ANSWER_CHARS + 1),
    ],
    ids=["deep", "huge int", "NUL title", "surrogate reason", "too large"],
)
def test_parse_synthesis_answer_raises_only_answer_error(raw: str) -> None:
    with pytest.raises(AnswerError) as caught:
        parse_synthesis_answer(raw)
    assert caught.value.kind is SynthesisErrorKind.SCHEMA


def test_a_long_reference_list_is_refused_in_linear_time() -> None:
    refs = [f"t{number}" for number in range(9000)]
    raw = json.dumps(invalidate_first("gone") | {"invalidates": refs})
    assert len(raw) < MAX_ANSWER_CHARS
    started = time.perf_counter()
    with pytest.raises(AnswerError, match="9000 references are too many") as caught:
        parse_synthesis_answer(raw)
    assert time.perf_counter() - started < 0.25
    assert caught.value.kind is SynthesisErrorKind.SCHEMA


def test_a_schema_failure_message_is_bounded_however_many_errors() -> None:
    raw = json.dumps(remember("Troll", supersedes=[[1]] * 40, invalidates=[{}] * 40))
    with pytest.raises(AnswerError) as caught:
        parse_synthesis_answer(raw)
    assert caught.value.kind is SynthesisErrorKind.SCHEMA
    assert caught.value.message.endswith("more") and len(caught.value.message) < 1000


def test_a_provider_error_with_a_huge_message_is_logged_bounded(store: MemoryStore) -> None:
    def failing(messages: list[dict[str, str]]) -> str:
        raise RuntimeError("<html>" + "z" * 1_000_000 + "\ud800</html>")

    manager = SimpleMemoryManager(store, llm=failing, episode=1)
    context = ZMachineContext(location_before=CLEARING, location_after=CLEARING)
    assert manager.record_action_outcome(CLEARING, "Clearing", "look", LONG, context) is None
    assert manager.get_status()["failures"] == {"provider_error": 1}
    manager.close()
    (row,) = store.decision_log()
    assert row["error"].startswith("RuntimeError: <html>zzz") and len(row["error"]) <= 2000
    with pytest.raises(LLMCallError) as caught:  # what the warning in the log shows
        synthesize(failing, [])
    assert len(caught.value.message) <= 1000


@pytest.mark.parametrize(
    "raw", ["[" * DEEP, '{"a": ' * 40 + "1" + "}" * 40], ids=["unclosed", "closed"]
)
def test_deep_nesting_is_refused_before_the_json_reader_recurses(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At Python's recursion limit every finaliser that runs fails too (an unraisable
    error once failed an unrelated test): the depth is counted first."""

    def never(_text: str) -> object:
        raise AssertionError("the JSON reader was called")

    monkeypatch.setattr(json, "loads", never)
    with pytest.raises(AnswerError, match="nested too deeply"):
        parse_synthesis_answer(raw)


def test_brackets_inside_strings_are_not_nesting() -> None:
    answer = remember("Maze", memory_text="[" * 100 + "{" * 100 + '\\"]' * 10)
    parsed = parse_synthesis_answer(json.dumps(answer))
    assert parsed.memory_text == answer["memory_text"]
