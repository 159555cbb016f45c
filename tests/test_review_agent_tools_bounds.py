"""Bounds on what the memory tools take in and hand out (review A, defects 5, 6 and 10):
flagged content is refused at the door past its limit or when it is not Unicode, every tool
result is cut to a fixed length (and says so), an injected model callable gets
``config.timeout`` like litellm does, and a citation too long for an int is dropped."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore.config import MemstoreConfig
from memstore.flagged import MAX_CONTENT_CHARS, MAX_LOCATION_NAME_CHARS
from memstore.llm import LLMDeadlineExceeded, with_deadline
from memstore.manager import SimpleMemoryManager
from memstore.memory_tools import MemoryToolkit
from memstore.models import TEXT_MAX
from memstore.store import MemoryStore
from memstore.tool_text import MAX_TOOL_RESULT_CHARS, parse_query_answer
from memstore.triggers import ZMachineContext
from tests.cli_helpers import never_blocks as never_blocks  # a fixture

CUT_NOTE = "[cut:"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[MemoryStore]:
    opened = MemoryStore.open(tmp_path / "memories.db")
    yield opened
    opened.close()


def answering(raw: str) -> Any:
    return lambda messages: raw


def big_toolkit(store: MemoryStore, llm: Any = None) -> MemoryToolkit:
    """Twenty memories at one place, each as long as the limit allows."""
    kit = MemoryToolkit(store, llm=llm)
    for number in range(20):
        content = f"{number:02d} " + "lamp " * ((MAX_CONTENT_CHARS - 3) // 5)
        assert kit.add_memory(content[:MAX_CONTENT_CHARS], 500, number, 64, "West of House")
    return kit


# --- defect 5: flagged content is bounded at the door -----------------------------------------


def test_the_flagged_content_limit_is_the_memory_text_limit() -> None:
    assert MAX_CONTENT_CHARS == TEXT_MAX == 20_000


def test_flagged_content_longer_than_the_limit_is_refused_in_one_line(store: MemoryStore) -> None:
    # the model's content: refused and counted by the toolkit (review S6 A F2: it raised
    # into the game loop), one ValueError line from FlaggedMemories
    kit = MemoryToolkit(store)
    assert kit.add_memory("x" * 5_000_000, 5, 1, 64, "West of House") is False
    assert kit.failures["content_refused"] == 1
    with pytest.raises(ValueError, match="20,000") as raised:
        kit.memories.add_flagged_memory("x" * 5_000_000, 5, 1, 64, "West of House")
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300
    assert kit.get_memory_count() == 0


def test_flagged_content_at_the_limit_is_stored(store: MemoryStore) -> None:
    kit = MemoryToolkit(store)
    assert kit.add_memory("y" * MAX_CONTENT_CHARS, 5, 1, 64, "West of House")


def test_a_long_location_name_is_refused_in_one_line(store: MemoryStore) -> None:
    kit = MemoryToolkit(store)
    with pytest.raises(ValueError, match=f"{MAX_LOCATION_NAME_CHARS:,}") as raised:
        kit.add_memory("lamp", 5, 1, 64, "W" * 1_000_000)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300


@pytest.mark.parametrize(
    ("content", "name", "problem"),
    [
        ("lamp\ud800", "West", "surrogate"),
        ("lamp", "West\udfff", "surrogate"),
        ("lamp\x00here", "West", "NUL"),
        ("lamp", "\x00", "NUL"),
    ],
)
def test_unstorable_text_is_a_one_line_value_error(
    store: MemoryStore, content: str, name: str, problem: str
) -> None:
    kit = MemoryToolkit(store)
    with pytest.raises(ValueError, match=problem) as raised:
        kit.memories.add_flagged_memory(content, 5, 1, 64, name)
    assert not isinstance(raised.value, UnicodeError)
    assert "\n" not in str(raised.value)
    assert kit.get_memory_count() == 0


@pytest.mark.parametrize(
    ("content", "written"), [("lamp\ud800", "lamp\\ud800"), ("lamp\x00here", "lamp\\x00here")]
)
def test_the_toolkit_writes_out_what_the_model_s_note_cannot_store(
    store: MemoryStore, content: str, written: str
) -> None:
    # review S6 A F2: the model's note is data: written out as the manager keeps an action
    kit = MemoryToolkit(store)
    assert kit.add_memory(content, 5, 1, 64, "West")
    assert [memory.content for memory in kit.memories.top(5)] == [written]


def test_the_toolkit_refuses_an_unstorable_location_name_in_one_line(store: MemoryStore) -> None:
    kit = MemoryToolkit(store)  # the caller's argument, not the model's: raised
    with pytest.raises(ValueError, match="NUL"):
        kit.add_memory("lamp", 5, 1, 64, "\x00")
    assert kit.get_memory_count() == 0


# --- defect 5: every tool result is cut to a fixed length ------------------------------------


def test_get_top_memories_is_cut_to_the_maximum_and_says_so(sqlite_store: MemoryStore) -> None:
    result = big_toolkit(sqlite_store).call_tool("get_top_memories", {"limit": 20})
    assert len(result) <= MAX_TOOL_RESULT_CHARS and CUT_NOTE in result
    assert result.startswith("Top 20 Most Important Memories:")


def test_get_location_memories_is_cut_to_the_maximum(sqlite_store: MemoryStore) -> None:
    result = big_toolkit(sqlite_store).call_tool("get_location_memories", {"location": "64"})
    assert len(result) <= MAX_TOOL_RESULT_CHARS and CUT_NOTE in result


def test_the_query_prompt_and_answer_are_bounded(sqlite_store: MemoryStore) -> None:
    sent: list[list[dict[str, str]]] = []

    def llm(messages: list[dict[str, str]]) -> str:
        sent.append(messages)
        cited = ", ".join(f"#{n}" for n in range(1, 21))
        return f"Relevant memories: {cited}\nAnswer: " + "y" * 10_000_000

    kit = big_toolkit(sqlite_store, llm)
    result = kit.call_tool("query_memories", {"question": "lamp?"})
    assert len(result) <= MAX_TOOL_RESULT_CHARS and CUT_NOTE in result
    assert "y" * 100 + "…" in result  # the answer cut, the memories still shown
    assert "#2 [Turn" in result
    assert len(sent[0][1]["content"]) < 20 * 2_000  # each memory shown cut


def test_a_short_tool_result_is_not_cut(sqlite_store: MemoryStore) -> None:
    kit = MemoryToolkit(sqlite_store)
    kit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    assert CUT_NOTE not in kit.call_tool("get_top_memories", {})


def test_two_hundred_thousand_invented_citations_give_a_short_answer(
    sqlite_store: MemoryStore, never_blocks: None
) -> None:
    kit = MemoryToolkit(sqlite_store)
    kit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    kit.llm = answering(
        "Relevant memories: " + ", ".join(f"#{i}" for i in range(1, 200_001)) + "\nAnswer: x"
    )
    result = kit.call_tool("query_memories", {"question": "lamp?"})
    assert len(result) <= MAX_TOOL_RESULT_CHARS
    assert "#1 [Turn 1 @ West of House (#64)] The lamp is in the living room" in result
    assert "Dropped citations of memories that do not exist: #2, #3" in result
    assert "199,999" in result  # how many were dropped, not each of them


# --- defect 10: a citation too long for an int ------------------------------------------------


def test_a_five_thousand_digit_citation_is_dropped_and_the_answer_kept(
    sqlite_store: MemoryStore,
) -> None:
    kit = MemoryToolkit(sqlite_store)
    kit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    kit.llm = answering("Relevant memories: #1, #" + "9" * 5000 + "\nAnswer: in the living room")
    result = kit.call_tool("query_memories", {"question": "lamp?"})
    assert result.startswith("Question: lamp?\nAnswer: in the living room")
    assert "#1 [Turn 1 @ West of House (#64)]" in result
    assert "Dropped citations of memories that do not exist: #999" in result
    assert len(result) < 1_000 and "Exceeds the limit" not in result


def test_parse_query_answer_leaves_out_a_number_too_long_to_be_a_memory() -> None:
    raw = "Relevant memories: #" + "7" * 5000 + ", #2\nAnswer: a"
    assert parse_query_answer(raw) == ([2], "a")


# --- defect 6: an injected model callable is bounded by config.timeout --------------------------


class Hung:
    """A model callable that answers only when released (the test releases it at the end)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls += 1
        self.release.wait(60)
        return '{"should_remember": false, "reasoning": "late"}'


@pytest.fixture
def hung() -> Iterator[Hung]:
    llm = Hung()
    yield llm
    llm.release.set()


def test_a_hung_query_model_is_a_timeout_error_string(
    sqlite_store: MemoryStore, hung: Hung, never_blocks: None
) -> None:
    bounded = with_deadline(hung, 0.2)  # the caller bounds its own callable
    kit = MemoryToolkit(sqlite_store, llm=bounded, config=MemstoreConfig(timeout=5.0))
    kit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    result = kit.call_tool("query_memories", '{"question": "lamp?"}')
    assert result.startswith("Error: query_memories could not get an answer")
    assert "timeout" in result and "no answer within 0.2 s" in result
    assert kit.failures == {"timeout": 1}


def test_a_hung_summary_model_still_lists_the_memories(
    sqlite_store: MemoryStore, hung: Hung, never_blocks: None
) -> None:
    kit = MemoryToolkit(
        sqlite_store, llm=with_deadline(hung, 0.2), config=MemstoreConfig(timeout=5.0)
    )
    kit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    result = kit.call_tool("get_location_memories", {"location": "64"})
    assert "The lamp is in the living room" in result and "no answer within" in result
    assert kit.failures == {"timeout": 1}


def test_a_hung_synthesis_model_is_a_counted_timeout(
    sqlite_store: MemoryStore, hung: Hung, never_blocks: None
) -> None:
    manager = SimpleMemoryManager(
        sqlite_store, config=MemstoreConfig(timeout=5.0), llm=with_deadline(hung, 0.2), episode=1
    )
    ctx = ZMachineContext(location_before=3, location_after=3)
    manager.record_action_outcome(3, "Clearing", "look", "x" * 150, ctx)
    assert hung.calls == 1
    assert dict(manager.failures) == {"timeout": 1}
    assert "no answer within 0.2 s" in (manager.last_failure or "")


def test_the_deadline_thread_is_a_daemon(hung: Hung, never_blocks: None) -> None:
    seen: list[threading.Thread] = []

    def spy(messages: list[dict[str, str]]) -> str:
        seen.append(threading.current_thread())
        return hung(messages)

    with pytest.raises(LLMDeadlineExceeded):
        with_deadline(spy, 0.1)([])
    assert seen and seen[0].daemon  # never holds up the interpreter's exit


def test_a_bounded_callable_keeps_its_name_answers_and_errors() -> None:
    class Model:
        last_usage = "usage"

        def __call__(self, messages: list[dict[str, str]]) -> str:
            if not messages:
                raise KeyError("no messages")
            return "answer"

    def named(messages: list[dict[str, str]]) -> str:
        return "named"

    bounded = with_deadline(Model(), 5.0)
    assert bounded([{"role": "user", "content": "x"}]) == "answer"
    assert bounded.last_usage == "usage"  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        bounded([])
    assert with_deadline(named, 5.0).__name__ == "named"  # type: ignore[attr-defined]
    assert with_deadline(bounded, 5.0) is bounded  # never wrapped twice


def test_an_injected_callable_runs_in_the_callers_thread(sqlite_store: MemoryStore) -> None:
    """memstore never moves a caller's callable to a thread of its own: one holding a
    sqlite3 connection (usable only in the thread that made it) keeps working, as it did
    before deadlines existed (a round-2 review found such a callable failing every call,
    and so no memory ever written, once the manager wrapped it)."""
    cache = sqlite3.connect(":memory:")
    cache.execute("CREATE TABLE answers (n INTEGER)")
    threads: list[threading.Thread] = []

    def replayed(messages: list[dict[str, str]]) -> str:
        threads.append(threading.current_thread())
        cache.execute("INSERT INTO answers VALUES (1)")
        return json.dumps(
            {
                "should_remember": True,
                "category": "NOTE",
                "memory_title": "Mailbox here",
                "memory_text": "A small mailbox.",
                "persistence": "permanent",
                "reasoning": "replayed",
            }
        )

    manager = SimpleMemoryManager(sqlite_store, llm=replayed, episode=1)
    ctx = ZMachineContext(location_before=3, location_after=3)
    manager.record_action_outcome(3, "Clearing", "look", "x" * 150, ctx)
    assert threads == [threading.current_thread()]
    assert dict(manager.failures) == {}
    assert [m.title for m in sqlite_store.memories(3)] == ["Mailbox here"]

    def query(messages: list[dict[str, str]]) -> str:
        threads.append(threading.current_thread())
        cache.execute("INSERT INTO answers VALUES (2)")
        return "Relevant memories: #1\nAnswer: it holds a leaflet"

    kit = MemoryToolkit(sqlite_store, llm=query)
    kit.add_memory("The mailbox holds a leaflet", 500, 1, 64, "West of House")
    assert "it holds a leaflet" in kit.call_tool("query_memories", '{"question": "mailbox?"}')
    assert threads == [threading.current_thread()] * 2 and kit.failures == {}
    assert cache.execute("SELECT count(*) FROM answers").fetchone() == (2,)


def test_a_bounded_callable_never_runs_two_calls_at_once(hung: Hung, never_blocks: None) -> None:
    """A call abandoned at its deadline may still be running: until it returns, a new call
    is refused at once (a local model that cannot serve two calls is never given two)."""
    bounded = with_deadline(hung, 0.1)
    with pytest.raises(LLMDeadlineExceeded, match="no answer within"):
        bounded([])
    with pytest.raises(LLMDeadlineExceeded, match="another call is still running"):
        bounded([])
    assert hung.calls == 1
    hung.release.set()
    for _ in range(100):  # the abandoned call returns in its thread
        if bounded._running is not None and bounded._running.is_set():  # type: ignore[attr-defined]  # noqa: SLF001
            break
        time.sleep(0.01)
    assert "late" in bounded([])
    assert hung.calls == 2


def test_setting_an_attribute_on_a_bounded_callable_sets_the_callables() -> None:
    class Model:
        last_usage: object = "first"

        def __call__(self, messages: list[dict[str, str]]) -> str:
            return "answer"

    model = Model()
    bounded = with_deadline(model, 5.0)
    bounded.last_usage = None  # type: ignore[attr-defined]
    assert model.last_usage is None and bounded.last_usage is None  # type: ignore[attr-defined]


def test_a_bounded_callable_called_from_many_threads_never_runs_two_calls_at_once() -> None:
    """The check of the last call and the start of the next are one step (round 3 saw two
    calls run at once from six threads, and live calls refused as abandoned)."""
    running, peak, lock = [0], [0], threading.Lock()

    def model(messages: list[dict[str, str]]) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        return "answer"

    bounded = with_deadline(model, 5.0)
    answers: list[str] = []

    def caller() -> None:
        for _ in range(20):
            try:
                answers.append(bounded([]))
            except LLMDeadlineExceeded as exc:
                assert "another call is still running" in str(exc)

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert peak[0] == 1 and answers


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 0, -1, 1e300, "5"])
def test_a_deadline_that_is_not_a_positive_finite_number_is_refused(seconds: Any) -> None:
    with pytest.raises(ValueError, match="positive finite number"):
        with_deadline(lambda messages: "answer", seconds)
