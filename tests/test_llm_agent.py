"""The LLM agent end to end: litellm against the local fake OpenAI server, on the real game
(slow). Valid commands are played; malformed answers, server errors, rate limits, timeouts
and endless tool calls are counted and the explorer plays the turn; tool calls run the
memory tools and their results go back to the model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memstore.config import MemstoreConfig
from memstore.explorer import observe
from memstore.game import ZorkGame, z_machine_context
from memstore.llm_agent import LLMAgent
from memstore.manager import SimpleMemoryManager
from memstore.memory_tools import TOOL_NAMES
from memstore.store import MemoryStore
from tests.fake_openai_server import FakeOpenAIServer, FakeReply, completion_body

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def config_for(server: FakeOpenAIServer, **settings: Any) -> MemstoreConfig:
    values: dict[str, Any] = {"num_retries": 0, "timeout": 5.0}
    values.update(settings)
    return MemstoreConfig(
        model="openai/fake-model", api_base=server.api_base, api_key="test", **values
    )


def tool_call(name: str, arguments: dict[str, Any], number: int = 1) -> FakeReply:
    """A reply whose assistant message calls one tool."""
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    body = completion_body("", usage, "fake-model", number)
    body["choices"][0]["finish_reason"] = "tool_calls"
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return FakeReply(body=body)


class Loop:
    """The agent loop of the README, with the LLM agent choosing."""

    def __init__(self, agent: LLMAgent, store: MemoryStore, game: ZorkGame) -> None:
        self.agent, self.game = agent, game
        self.manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="llm-agent")
        agent.start_episode(self.manager)
        text, snapshot = game.reset()
        self.observation = observe(game, snapshot, text)
        self.played: list[str] = []

    def turns(self, count: int) -> list[str]:
        for _ in range(count):
            choice = self.agent.choose(self.observation)
            self.manager.add_reasoning(self.manager.turn + 1, choice.reasoning, choice.action)
            step = self.game.step(choice.action)
            self.manager.record_action_outcome(
                step.before.location_id,
                step.before.location_name,
                choice.action,
                step.response,
                z_machine_context(step.before, step.after, step.response),
            )
            self.observation = observe(self.game, step.after, step.response)
            self.played.append(choice.action)
        return self.played


@pytest.fixture
def game() -> Iterator[ZorkGame]:
    with ZorkGame(rom_or_skip(), seed=12) as running:
        yield running


def test_the_models_commands_are_played_with_memory_exits_and_history_in_its_prompt(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(
        FakeReply(content="open mailbox"), FakeReply(content="North."), FakeReply(content="up")
    )
    agent = LLMAgent(config_for(server), seed=1)
    loop = Loop(agent, store, game)
    assert loop.turns(3) == ["open mailbox", "north", "up"]
    loop.manager.flush()
    assert agent.stats() == {"calls": 3, "tool_calls": 0, "failures": {}, "fallbacks": 0}
    third = server.requests[2].body
    assert third["model"] == "fake-model" and "tools" not in third
    prompt = third["messages"][1]["content"]
    assert "Location: North of House (137)" in prompt
    assert "- open mailbox -> Opening the small mailbox reveals a leaflet." in prompt
    assert "- north -> North of House" in prompt
    # the memory of North of House ends with its exits line ('south' was seen from West
    # of House, so here nothing is known but the untried directions)
    assert "Exits: " in prompt or "Exits: none known yet" in prompt
    records = store.turn_records("llm-agent")
    assert [r["action"] for r in records] == ["open mailbox", "north", "up"]
    assert records[2]["outcome"] == "refused"  # "You can't go that way."


def test_malformed_answers_fall_back_to_the_explorer_and_are_counted(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(
        FakeReply(content=""),
        FakeReply(content='{"action": "nor'),
        FakeReply(content="I would like to walk around the house and look at it all"),
        FakeReply(content="west"),
    )
    agent = LLMAgent(config_for(server), seed=1)
    played = Loop(agent, store, game).turns(4)
    assert played[3] == "west" and all(played[:3])
    stats = agent.stats()
    assert stats["failures"] == {"malformed": 3} and stats["fallbacks"] == 3
    assert "malformed" in (agent.last_failure or "")


def test_server_errors_and_rate_limits_are_counted_never_raised(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(FakeReply(status=500), FakeReply(status=429), FakeReply(content="north"))
    agent = LLMAgent(config_for(server), seed=1)
    played = Loop(agent, store, game).turns(3)
    assert played[2] == "north"
    assert agent.stats()["failures"] == {"provider_error": 1, "rate_limit": 1}


def test_a_timeout_is_bounded_by_the_configured_deadline(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(FakeReply(delay=30, content="north"), FakeReply(trickle=0.5, content="east"))
    agent = LLMAgent(config_for(server, timeout=1.0), seed=1)
    loop = Loop(agent, store, game)
    started = time.monotonic()
    loop.turns(2)
    assert time.monotonic() - started < 6  # two calls of at most ~1 s each, not 30 s
    assert agent.stats()["failures"] == {"timeout": 2}


def test_tool_calls_run_the_memory_tools_and_the_model_then_answers(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(
        FakeReply(content="north"),  # one move, so the map has a route to ask for
        tool_call("get_route", {"from": "West of House", "to": "North of House"}, 2),
        tool_call("get_top_memories", {"limit": 3}, 3),
        FakeReply(content="south"),
    )
    agent = LLMAgent(config_for(server), seed=1, tools=True)
    played = Loop(agent, store, game).turns(2)
    assert played == ["north", "south"]
    assert agent.stats()["tool_calls"] == 2 and agent.stats()["failures"] == {}
    offered = [tool["function"]["name"] for tool in server.requests[0].body["tools"]]
    assert offered == list(TOOL_NAMES)
    final = server.requests[3].body["messages"]
    roles = ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [m["role"] for m in final] == roles
    # the route, from the map the manager keeps (its last turn not written yet)
    assert final[3]["content"].startswith("Route from West of House (#64) to North of House")
    assert "1. north → North of House (#137)" in final[3]["content"]
    assert final[2]["tool_calls"][0]["function"]["name"] == "get_route"
    assert final[5]["content"].startswith("No memories recorded yet")  # no flagged memory


def test_a_model_that_only_calls_tools_falls_back_after_the_rounds(
    server: FakeOpenAIServer, store: MemoryStore, game: ZorkGame
) -> None:
    server.enqueue(*[tool_call("get_top_memories", {}, n) for n in range(1, 4)])
    agent = LLMAgent(config_for(server), seed=1, tools=True, max_tool_rounds=2)
    played = Loop(agent, store, game).turns(1)
    assert played and agent.stats()["failures"] == {"tool_loop": 1}
    assert len(server.requests) == 3 and agent.stats()["tool_calls"] == 2
