"""The LLM agent against hostile tool-calling replies (review A, defects 4, 7 and 11), with
an injected completion object: the tool calls honoured per reply and per turn are capped and
the excess refused and counted, every refused tool call shows in the agent's stats, a turn's
tools share one deadline, and a failure is logged on one bounded line."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any
from unittest import mock

import pytest

from memstore.config import MemstoreConfig
from memstore.llm import with_deadline
from memstore.llm_agent import (
    MAX_LOGGED_FAILURE_CHARS,
    MAX_TOOL_CALLS_PER_ROUND,
    MAX_TOOL_CALLS_PER_TURN,
    LLMAgent,
)
from memstore.manager import SimpleMemoryManager
from memstore.observation import Observation
from memstore.store import MemoryStore
from tests.cli_helpers import never_blocks as never_blocks  # a fixture
from tests.cli_helpers import run
from tests.fake_openai_server import FakeOpenAIServer, FakeReply, completion_body

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]

OBSERVATION = Observation(64, "West of House", "You are standing in an open field.", 0)
QUERY = '{"question": "where is the lamp?"}'


def reply(content: object = None, tool_calls: object = None) -> Any:
    return NS(choices=[NS(message=NS(content=content, tool_calls=tool_calls))])


def call(name: object, arguments: object, number: int = 0) -> Any:
    return NS(id=f"c{number}", function=NS(name=name, arguments=arguments))


class Scripted:
    """Stands in for LiteLLMCompletion: answers from a script, records the messages sent."""

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.sent: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], **extra: Any) -> Any:
        self.sent.append(messages)
        answer = self.replies.pop(0) if self.replies else reply("look")
        if isinstance(answer, BaseException):
            raise answer
        return answer


class QueryModel:
    """The cheap query model: counts its calls, answers at once."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls += 1
        return "Relevant memories: #1\nAnswer: in the living room"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[MemoryStore]:
    opened = MemoryStore.open(tmp_path / "memories.db")
    yield opened
    opened.close()


def tool_agent(
    store: MemoryStore, completion: Scripted, query: Any = None, **config: Any
) -> LLMAgent:
    # the toolkit's own query model is replaced below: it is not built (a LiteLLMCompletion
    # imports litellm when built, seconds of this quick test's time)
    with mock.patch("memstore.memory_tools.default_query_llm", return_value=None):
        agent = LLMAgent(
            MemstoreConfig(model="openai/fake", **config),
            completion=completion,  # type: ignore[arg-type]
            tools=True,
        )
        agent.start_episode(SimpleMemoryManager(store, episode=1))
    assert agent.toolkit is not None
    agent.toolkit.llm = query if query is not None else QueryModel()
    agent.toolkit.add_memory("The lamp is in the living room", 500, 1, 64, "West of House")
    return agent


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


# --- defect 4: the tool calls of one reply and one turn are capped ------------------------


def test_one_reply_with_a_thousand_tool_calls_runs_only_the_per_round_cap(
    sqlite_store: MemoryStore,
) -> None:
    calls = [call("query_memories", QUERY, n) for n in range(1000)]
    completion = Scripted(reply(None, calls), reply("north"))
    query = QueryModel()
    agent = tool_agent(sqlite_store, completion, query)
    assert agent.choose(OBSERVATION).action == "north"
    assert query.calls == MAX_TOOL_CALLS_PER_ROUND
    stats = agent.stats()
    assert stats["tool_calls"] == MAX_TOOL_CALLS_PER_ROUND
    assert stats["failures"] == {"too_many_tool_calls": 1000 - MAX_TOOL_CALLS_PER_ROUND}
    # what goes back to the model is bounded too: every call it is shown has its result
    second = completion.sent[1]
    [assistant] = [m for m in second if m["role"] == "assistant"]
    shown = {c["id"] for c in assistant["tool_calls"]}
    results = [m for m in second if m["role"] == "tool"]
    assert {m["tool_call_id"] for m in results} == shown
    assert len(results) <= 2 * MAX_TOOL_CALLS_PER_ROUND
    refused = [m["content"] for m in results[MAX_TOOL_CALLS_PER_ROUND:]]
    assert refused and all(text.startswith("Error: too many tool calls") for text in refused)


def test_tool_calls_over_the_per_turn_cap_are_refused_in_later_rounds(
    sqlite_store: MemoryStore,
) -> None:
    per_round = [call("get_top_memories", "{}", n) for n in range(MAX_TOOL_CALLS_PER_ROUND)]
    rounds = -(-MAX_TOOL_CALLS_PER_TURN // MAX_TOOL_CALLS_PER_ROUND) + 1
    completion = Scripted(*[reply(None, per_round) for _ in range(rounds)], reply("north"))
    agent = tool_agent(sqlite_store, completion)
    agent.max_tool_rounds = rounds
    assert agent.choose(OBSERVATION).action == "north"
    stats = agent.stats()
    assert stats["tool_calls"] == MAX_TOOL_CALLS_PER_TURN
    refused = rounds * MAX_TOOL_CALLS_PER_ROUND - MAX_TOOL_CALLS_PER_TURN
    assert stats["failures"] == {"too_many_tool_calls": refused}
    last = tool_results(completion.sent[-1])
    assert last[-1].startswith("Error: too many tool calls")


def test_the_next_turn_gets_its_own_tool_call_allowance(sqlite_store: MemoryStore) -> None:
    calls = [call("get_top_memories", "{}", n) for n in range(MAX_TOOL_CALLS_PER_ROUND)]
    completion = Scripted(reply(None, calls), reply("north"), reply(None, calls), reply("east"))
    agent = tool_agent(sqlite_store, completion)
    assert [agent.choose(OBSERVATION).action for _ in range(2)] == ["north", "east"]
    assert agent.stats()["tool_calls"] == 2 * MAX_TOOL_CALLS_PER_ROUND
    assert agent.stats()["failures"] == {}


def test_a_turns_tool_calls_share_one_deadline(
    sqlite_store: MemoryStore, never_blocks: None
) -> None:
    """A query model that never answers (bounded by its caller, memstore.llm.with_deadline):
    the first call times out after config.timeout, the turn's deadline, and the turn's time
    is then spent, so the other calls are refused without waiting."""
    release = threading.Event()
    asked = []

    def hung(messages: list[dict[str, str]]) -> str:
        asked.append(messages)
        release.wait(60)
        return "Relevant memories: #1\nAnswer: late"

    calls = [call("query_memories", QUERY, n) for n in range(MAX_TOOL_CALLS_PER_ROUND)]
    completion = Scripted(reply(None, calls), reply("north"))
    # the caller bounds its callable (5 s); the turn's deadline (0.2 s) is shorter and wins
    agent = tool_agent(sqlite_store, completion, with_deadline(hung, 5.0), timeout=0.2)
    try:
        assert agent.choose(OBSERVATION).action == "north"
    finally:
        release.set()
    assert len(asked) == 1
    results = tool_results(completion.sent[1])
    assert "timeout" in results[0] and "no answer within" in results[0]
    assert all(text.startswith("Error: no time left") for text in results[1:])
    failures = agent.stats()["failures"]
    assert failures == {"tool_timeout": 1, "tool_deadline": MAX_TOOL_CALLS_PER_ROUND - 1}


# --- defect 11: refused tool calls are counted ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_top_memories", "[1, 2]"),
        ("get_location_memories", {"location": 1.5}),
        ("no_such_tool", "{}"),
        ("get_top_memories", '{"limit": 3, "x": 1}'),
        ("get_top_memories", "{not json"),
        ("get_top_memories", '{"limit": 1e400}'),
        ("query_memories", {"question": {"a": 1}}),
        (None, "{}"),
    ],
)
def test_a_refused_tool_call_is_counted_in_the_agents_stats(
    sqlite_store: MemoryStore, name: object, arguments: object
) -> None:
    completion = Scripted(reply(None, [call(name, arguments)]), reply("north"))
    agent = tool_agent(sqlite_store, completion)
    assert agent.choose(OBSERVATION).action == "north"
    [result] = tool_results(completion.sent[1])
    assert result.startswith("Error:")
    assert agent.stats()["failures"] == {"tool_refused": 1}


def test_a_good_tool_call_is_not_counted_as_a_failure(sqlite_store: MemoryStore) -> None:
    completion = Scripted(reply(None, [call("query_memories", QUERY)]), reply("north"))
    agent = tool_agent(sqlite_store, completion)
    assert agent.choose(OBSERVATION).action == "north"
    [result] = tool_results(completion.sent[1])
    assert result.startswith("Question: where is the lamp?")
    assert agent.stats()["failures"] == {} and agent.stats()["tool_calls"] == 1


def test_refused_tool_calls_are_counted_across_episodes(sqlite_store: MemoryStore) -> None:
    completion = Scripted(
        reply(None, [call("nope", "{}")]), reply("north"), reply(None, [call("nope", "{}")])
    )
    agent = tool_agent(sqlite_store, completion)
    agent.choose(OBSERVATION)
    with mock.patch("memstore.memory_tools.default_query_llm", return_value=None):
        agent.start_episode(SimpleMemoryManager(sqlite_store, episode=2))  # a new toolkit
    agent.choose(OBSERVATION)
    assert agent.stats()["failures"] == {"tool_refused": 2}


@pytest.mark.parametrize("tool_calls", [5, "abc", {"a": 1}, 2.5])
def test_tool_calls_that_are_not_a_list_are_a_malformed_reply_never_an_exception(
    sqlite_store: MemoryStore, tool_calls: object
) -> None:
    completion = Scripted(reply(None, tool_calls))
    agent = tool_agent(sqlite_store, completion)
    choice = agent.choose(OBSERVATION)
    assert choice.action  # the explorer's
    stats = agent.stats()
    assert stats["failures"] == {"malformed": 1} and stats["fallbacks"] == 1
    assert stats["tool_calls"] == 0


# --- defect 7: one log line per failure, cut to a fixed length ---------------------------------


def test_a_failure_is_logged_on_one_line_cut_to_the_limit(
    sqlite_store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps({"response_object": {"choices": ["x" * 50_000]}})
    error = RuntimeError(
        "Invalid response object Traceback (most recent call last):\n"
        '  File "convert_dict_to_response.py", line 645, in convert\n'
        "    for _tc in tool_calls:\nTypeError: 'int' object is not iterable\n\n"
        f"received_args={body}"
    )
    agent = tool_agent(sqlite_store, Scripted(error))
    with caplog.at_level(logging.WARNING, logger="memstore.llm_agent"):
        agent.choose(OBSERVATION)
    [record] = [r for r in caplog.records if r.name == "memstore.llm_agent"]
    line = record.getMessage()
    assert "\n" not in line and len(line) <= MAX_LOGGED_FAILURE_CHARS
    assert "provider_error" in line and "RuntimeError" in line
    assert "Traceback" not in line and "'int' object is not iterable" in line
    assert agent.stats()["failures"] == {"provider_error": 1}
    assert agent.last_failure is not None and "\n" not in agent.last_failure


@pytest.mark.slow
def test_memstore_eval_with_bad_tool_calls_logs_one_short_line_per_failure(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reviewer's run: every reply's ``tool_calls`` is 5; litellm's error quotes its
    traceback and the whole response body; the log gets one short line per failure."""
    rom = rom_or_skip()
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    with FakeOpenAIServer() as server:
        for number in range(1, 41):  # retries included
            body = completion_body("", usage, "fake-model", number)
            body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": 5}
            server.enqueue(FakeReply(body=body))
        monkeypatch.setenv("MEMSTORE_API_BASE", server.api_base)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        with caplog.at_level(logging.WARNING, logger="memstore.llm_agent"):
            code, out, err = run(
                capsys,
                "eval", "--agent", "llm", "--model", "openai/fake-model", "--episodes", "1",
                "--moves", "3", "--seeds", "1", "--no-progress", "--rom", str(rom),
            )  # fmt: skip
    # every call failed, so the explorer played: eval judges nothing and says so (exit 1,
    # tests/test_eval_verdicts.py), after writing its report
    assert code == 1 and "no target was judged on that play" in err, err
    lines = [r.getMessage() for r in caplog.records if r.name == "memstore.llm_agent"]
    assert len(lines) == 6  # 2 arms x 3 moves
    for line in lines:
        assert "\n" not in line and len(line) <= MAX_LOGGED_FAILURE_CHARS
        assert "Traceback" not in line and "received_args" not in line
        assert "'int' object is not iterable; traceback left out" in line
    assert "agent 3 (3 failed: provider_error 3)" in out
