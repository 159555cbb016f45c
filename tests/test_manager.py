"""SimpleMemoryManager: the spec's scenarios, with a scripted LLM and through litellm."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore.config import MemstoreConfig
from memstore.manager import SimpleMemoryManager, rebuild_from_log
from memstore.models import Persistence, Status
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.fake_openai_server import FakeOpenAIServer, FakeReply

WEST_OF_HOUSE, BEHIND_HOUSE, KITCHEN, TROLL_ROOM = 64, 79, 8, 152
LONG = "x" * 150  # a response long enough to fire the long-response trigger


class ScriptedLLM:
    """An injected LLM: returns queued answers (str, dict or an exception) in order."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.calls.append(messages)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer if isinstance(answer, str) else json.dumps(answer)

    def prompt(self, index: int = -1) -> str:
        return "\n".join(message["content"] for message in self.calls[index])


def remember(
    title: str, category: str = "NOTE", persistence: str = "permanent", **extra: Any
) -> dict[str, Any]:
    return {
        "should_remember": True,
        "category": category,
        "memory_title": title,
        "memory_text": f"Learned: {title}.",
        "persistence": persistence,
        "reasoning": "test",
        **extra,
    }


def ctx(here: int, there: int | None = None, **fields: Any) -> ZMachineContext:
    return ZMachineContext(location_before=here, location_after=there if there else here, **fields)


@pytest.fixture
def manager_for(store: MemoryStore) -> Iterator[Any]:
    made: list[SimpleMemoryManager] = []

    def make(llm: Any = None, **kwargs: Any) -> SimpleMemoryManager:
        manager = SimpleMemoryManager(store, llm=llm, **kwargs)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


def test_failed_take_window_is_remembered_once_and_the_repeat_deduplicated(
    manager_for: Any,
) -> None:
    llm = ScriptedLLM(
        remember("Take or break window", "FAILURE"), remember("Take or break window", "FAILURE")
    )
    manager = manager_for(llm)
    for _ in range(2):
        manager.record_action_outcome(
            WEST_OF_HOUSE,
            "West of House",
            "take window",
            "The window is part of the house. " * 5,
            ctx(WEST_OF_HOUSE),
        )
    assert [m.title for m in manager.store.memories(WEST_OF_HOUSE)] == ["Take or break window"]
    assert "[1]" in llm.prompt(1) and "Take or break window" in llm.prompt(1)
    assert manager.get_status()["duplicates_dropped"] == 1


def test_troll_gift_stored_tentative_then_superseded_after_death(manager_for: Any) -> None:
    llm = ScriptedLLM(
        remember("Troll accepts lunch gift", status="TENTATIVE"),
        remember("Troll attacks after accepting gift", "DANGER", supersedes=[1]),
    )
    manager = manager_for(llm)
    manager.record_action_outcome(
        TROLL_ROOM,
        "Troll Room",
        "give lunch to troll",
        "The troll graciously accepts the lunch. " * 3,
        ctx(TROLL_ROOM, inventory_before=frozenset({5})),
    )
    assert "TENTATIVE MEMORIES" in manager.get_location_memory(TROLL_ROOM)
    manager.record_action_outcome(
        TROLL_ROOM,
        "Troll Room",
        "go north",
        "The troll swings his axe. ****  You have died  ****",
        ctx(TROLL_ROOM, died=True),
    )
    assert "give lunch to troll" in llm.prompt(1)  # the history window shows the gift
    chain = manager.store.history(TROLL_ROOM, "Troll attacks after accepting gift")
    assert [(m.title, m.status) for m in chain] == [
        ("Troll accepts lunch gift", Status.SUPERSEDED),
        ("Troll attacks after accepting gift", Status.ACTIVE),
    ]
    assert chain[0].superseded_by == "Troll attacks after accepting gift"
    assert "TENTATIVE" not in manager.get_location_memory(TROLL_ROOM)


def test_window_procedure_is_stored_at_the_source_location(manager_for: Any) -> None:
    llm = ScriptedLLM(remember("Open window then enter it to reach the kitchen", "SUCCESS"))
    manager = manager_for(llm)
    manager.record_action_outcome(
        BEHIND_HOUSE,
        "Behind House",
        "enter window",
        "Kitchen. " * 20,
        ctx(BEHIND_HOUSE, KITCHEN, location_after_name="Kitchen"),
    )
    assert [m.title for m in manager.store.memories(BEHIND_HOUSE)] == [
        "Open window then enter it to reach the kitchen"
    ]
    assert manager.store.memories(KITCHEN) == []


def test_dropped_sword_is_ephemeral_and_gone_after_reset_episode(manager_for: Any) -> None:
    llm = ScriptedLLM(remember("Dropped sword here", persistence="ephemeral"))
    manager = manager_for(llm)
    manager.record_action_outcome(
        KITCHEN, "Kitchen", "drop sword", "Dropped.", ctx(KITCHEN, inventory_before=frozenset({3}))
    )
    assert manager.store.get_ephemeral_count(KITCHEN) == 1
    assert manager.store.get_persistent_count() == 0
    episode = manager.episode
    manager.reset_episode()
    assert manager.episode == episode + 1
    assert manager.store.get_ephemeral_count() == 0
    assert "Dropped sword" not in manager.get_location_memory(KITCHEN)


def test_core_on_a_return_visit_is_downgraded_to_permanent(manager_for: Any) -> None:
    llm = ScriptedLLM(
        remember("Mailbox here", "DISCOVERY", "core"),
        remember("Leaflet in mailbox", "DISCOVERY", "core"),
    )
    manager = manager_for(llm)
    manager.record_action_outcome(WEST_OF_HOUSE, "West of House", "look", LONG, ctx(WEST_OF_HOUSE))
    manager.record_action_outcome(
        WEST_OF_HOUSE, "West of House", "open mailbox", LONG, ctx(WEST_OF_HOUSE)
    )
    assert "FIRST VISIT" in llm.prompt(0) and "RETURN VISIT" in llm.prompt(1)
    persistence = {m.title: m.persistence for m in manager.store.memories(WEST_OF_HOUSE)}
    assert persistence == {
        "Mailbox here": Persistence.CORE,
        "Leaflet in mailbox": Persistence.PERMANENT,
    }
    assert manager.get_status()["core_downgrades"] == 1


def test_hallucinated_references_are_ignored_and_counted(manager_for: Any) -> None:
    llm = ScriptedLLM(
        remember("Real fact"), remember("Second fact", supersedes=[7, "Nonexistent memory"])
    )
    manager = manager_for(llm)
    manager.record_action_outcome(3, "Clearing", "look", LONG, ctx(3))
    manager.record_action_outcome(3, "Clearing", "look", LONG, ctx(3))
    titles = {m.title: m.status for m in manager.store.memories(3, include_superseded=True)}
    assert titles == {"Real fact": Status.ACTIVE, "Second fact": Status.ACTIVE}
    assert manager.get_status()["hallucinated_references"] == 2


def test_an_invalidation_only_answer_is_applied(manager_for: Any) -> None:
    llm = ScriptedLLM(
        remember("Troll is friendly", status="TENTATIVE"),
        {
            "should_remember": False,
            "invalidates": [1],
            "invalidation_reason": "Proven false by death",
            "reasoning": "death proves it wrong",
        },
    )
    manager = manager_for(llm)
    manager.record_action_outcome(TROLL_ROOM, "Troll Room", "wave", LONG, ctx(TROLL_ROOM))
    applied = manager.record_action_outcome(
        TROLL_ROOM, "Troll Room", "north", "You died.", ctx(TROLL_ROOM, died=True)
    )
    assert applied is not None and applied.invalidated == ("Troll is friendly",)
    (memory,) = manager.store.memories(TROLL_ROOM, include_superseded=True)
    assert memory.status is Status.SUPERSEDED
    assert memory.invalidation_reason == "Proven false by death"


def test_more_than_three_supersessions_are_rejected_and_nothing_is_written(
    manager_for: Any,
) -> None:
    llm = ScriptedLLM(
        remember("A"),
        remember("B"),
        remember("C"),
        remember("D"),
        remember("E", supersedes=[1, 2, 3, 4]),
    )
    manager = manager_for(llm)
    for _ in range(5):
        manager.record_action_outcome(3, "Clearing", "look", LONG, ctx(3))
    assert [m.title for m in manager.store.memories(3)] == ["A", "B", "C", "D"]
    assert manager.get_status()["failures"] == {"schema": 1}


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (TimeoutError("slow"), "timeout"),
        (RuntimeError("provider down"), "provider_error"),
        ("this is not json", "invalid_json"),
        ({"should_remember": True, "category": "NOTE"}, "schema"),
    ],
)
def test_llm_failures_never_reach_the_agent_loop(manager_for: Any, answer: Any, kind: str) -> None:
    manager = manager_for(ScriptedLLM(answer))
    result = manager.record_action_outcome(3, "Clearing", "look", LONG, ctx(3))
    assert result is None
    assert manager.get_status()["failures"] == {kind: 1}
    assert manager.store.get_persistent_count() == 0
    manager.flush()  # failures wait, with other bookkeeping, for the next write
    (row,) = manager.store.decision_log()
    assert row["error_kind"] == kind and row["applied"] is None


def test_a_turn_without_triggers_calls_no_llm(manager_for: Any) -> None:
    llm = ScriptedLLM()
    manager = manager_for(llm, episode=1)
    manager._visited.add(3)  # a return visit: no first-visit trigger
    manager.record_action_outcome(3, "Clearing", "wait", "Time passes.", ctx(3, first_visit=False))
    assert llm.calls == []
    status = manager.get_status()
    assert (status["turns_seen"], status["triggers_fired"], status["llm_calls"]) == (1, 0, 0)


def test_without_a_model_the_offline_recorder_stores_proven_facts(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig())
    assert manager.get_status()["mode"] == "offline"
    manager.record_action_outcome(
        BEHIND_HOUSE,
        "Behind House",
        "enter window",
        "Kitchen",
        ctx(BEHIND_HOUSE, KITCHEN, score_before=0, score_after=10, location_after_name="Kitchen"),
    )
    (memory,) = store.memories(BEHIND_HOUSE)
    assert memory.score_change == 10 and memory.category.value == "SUCCESS"
    (row,) = store.decision_log()
    assert row["mode"] == "offline" and row["model"] == "offline-recorder"
    assert "offline recorder" in json.loads(row["decision"])["reasoning"]


def test_the_decision_log_rebuilds_the_same_persistent_memories(
    manager_for: Any, tmp_path: Path
) -> None:
    llm = ScriptedLLM(
        remember("Troll accepts lunch gift", status="TENTATIVE"),
        remember("Troll attacks after gift", "DANGER", supersedes=[1]),
        remember("Dropped sword here", persistence="ephemeral"),
        remember("Sword needed against troll", supersedes=["Dropped sword here"]),
        {
            "should_remember": False,
            "invalidates": ["Sword needed against troll"],
            "invalidation_reason": "the axe wins anyway",
            "reasoning": "",
        },
        remember("Mailbox here", "DISCOVERY", "core"),
    )
    manager = manager_for(llm)
    for location in (TROLL_ROOM, TROLL_ROOM, TROLL_ROOM, TROLL_ROOM, TROLL_ROOM):
        manager.record_action_outcome(location, "Troll Room", "act", LONG, ctx(location))
    manager.reset_episode()
    manager.record_action_outcome(WEST_OF_HOUSE, "West of House", "look", LONG, ctx(WEST_OF_HOUSE))
    with MemoryStore.open(tmp_path / "rebuilt.db") as rebuilt:
        assert rebuild_from_log(manager.store, rebuilt) == 6
        original = [(loc.location.id, loc.memories) for loc in manager.store.export_locations()]
        again = [(loc.location.id, loc.memories) for loc in rebuilt.export_locations()]
    assert again == original
    assert len(original[1][1]) == 3  # the troll room: superseded, active, invalidated


def test_history_window_and_reasoning_reach_the_prompt(manager_for: Any) -> None:
    llm = ScriptedLLM(remember("Door needs brass key"))
    manager = manager_for(llm, config=MemstoreConfig(history_window=2))
    manager._visited.add(134)
    for action in ("examine door", "unlock door with rusty key"):
        manager.add_reasoning(manager.turn + 1, f"trying {action}", action)
        manager.record_action_outcome(134, "Hallway", action, "No.", ctx(134, first_visit=False))
    manager.add_reasoning(3, "the brass key should fit", "unlock door with brass key")
    manager.record_action_outcome(134, "Hallway", "unlock door with brass key", LONG, ctx(134))
    prompt = llm.prompt()
    assert "examine door" in prompt and "unlock door with rusty key" in prompt
    assert "the brass key should fit" in prompt


def test_episodes_continue_across_managers_on_the_same_database(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        first = SimpleMemoryManager(store)
        assert first.episode == 1
        first.record_action_outcome(3, "Clearing", "look", LONG, ctx(3))
        first.close()
    with MemoryStore.open(db_path) as store:
        assert SimpleMemoryManager(store).episode == 2


def test_spec_style_dict_context_is_accepted(manager_for: Any) -> None:
    llm = ScriptedLLM(remember("Score here"))
    manager = manager_for(llm)
    manager.record_action_outcome(
        3,
        "Clearing",
        "dig",
        "Done.",
        {
            "score_before": 0,
            "score_after": 5,
            "location_before": 3,
            "location_after": 3,
            "died": False,
        },
    )
    assert len(llm.calls) == 1
    with pytest.raises(TypeError, match="z_machine_context"):
        manager.record_action_outcome(3, "Clearing", "dig", "Done.", "not a context")
    with pytest.raises(TypeError, match="location_id must be an int"):
        manager.record_action_outcome("3", "Clearing", "dig", "Done.", ctx(3))


def test_manager_through_litellm_and_a_local_fake_server(store: MemoryStore) -> None:
    with FakeOpenAIServer() as server:
        server.enqueue(FakeReply(content=json.dumps(remember("Grating opens from below"))))
        server.enqueue(FakeReply(status=500, body={"error": {"message": "boom"}}))
        config = MemstoreConfig(
            model="openai/fake-model",
            api_base=server.api_base,
            api_key="test",
            num_retries=0,
            timeout=5,
        )
        manager = SimpleMemoryManager(store, config)
        assert manager.get_status()["mode"] == "llm"
        manager.record_action_outcome(9, "Clearing", "open grating", LONG, ctx(9))
        manager.record_action_outcome(9, "Clearing", "open grating", LONG, ctx(9))
        sent = server.requests[0].body
    assert [m.title for m in store.memories(9)] == ["Grating opens from below"]
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 1000
    assert manager.get_status()["failures"] == {"provider_error": 1}


def test_the_configured_database_and_model_reach_the_readme_agent_loop(tmp_path, monkeypatch):
    # The README's loop: MemoryStore.open() then SimpleMemoryManager(store), no config.
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: the environment decides
    configured = tmp_path / "configured.db"
    monkeypatch.setenv("MEMSTORE_DB", str(configured))
    monkeypatch.setenv("MEMSTORE_MODEL", "openai/some-model")
    # the manager's LiteLLMCompletion imports litellm when built (seconds); no call is made
    monkeypatch.setattr("memstore.llm.import_litellm", lambda: None)
    with MemoryStore.open() as store:
        manager = SimpleMemoryManager(store)
        assert manager.mode == "llm"
        assert manager.model == "openai/some-model"
    assert configured.is_file()
    assert not (tmp_path / "game_files").exists()


def test_without_a_configured_model_the_readme_agent_loop_is_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with MemoryStore.open(tmp_path / "m.db") as store:
        assert SimpleMemoryManager(store).mode == "offline"


def test_turn_records_count_the_memory_tokens_the_agent_was_given(
    store: MemoryStore, mem: Any
) -> None:
    # The agent loop passes no memory_tokens: the manager knows what it handed out.
    from memstore.tokens import count_tokens

    store.add_memory(KITCHEN, "Kitchen", mem("Sack on the table", text="A brown sack. " * 5))
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="tokens")
    given = manager.get_location_memory(KITCHEN)
    manager.record_action_outcome(KITCHEN, "Kitchen", "wait", "Time passes.", ctx(KITCHEN))
    # a turn whose agent read no memory first
    manager.record_action_outcome(KITCHEN, "Kitchen", "wait", "Time passes.", ctx(KITCHEN))
    manager.get_location_memory(KITCHEN)
    manager.record_action_outcome(
        KITCHEN, "Kitchen", "wait", "Time passes.", ctx(KITCHEN), memory_tokens=7
    )
    manager.flush()
    tokens = [record["memory_tokens"] for record in store.turn_records("tokens")]
    assert count_tokens(given) > 20
    assert tokens == [count_tokens(given), 0, 7]


def test_a_manager_leaves_the_store_clock_alone_and_passes_turn_and_episode(
    store: MemoryStore, manager_for: Any
) -> None:
    # The manager used to set store.current_turn/current_episode, which silently changed
    # what store.invalidate_memory does by default for every other caller of the store.
    store.current_episode, store.current_turn = 1, 0
    llm = ScriptedLLM(
        remember("Troll is friendly", status="TENTATIVE"),
        {
            "should_remember": False,
            "invalidates": [1],
            "invalidation_reason": "Proven false by death",
            "reasoning": "death proves it wrong",
        },
    )
    manager = manager_for(llm, episode=4, run_id="clock")
    quiet = ctx(TROLL_ROOM, first_visit=False)  # no trigger: no LLM call, a turn record
    manager.record_action_outcome(TROLL_ROOM, "Troll Room", "wait", "Time passes.", quiet)
    manager.record_action_outcome(TROLL_ROOM, "Troll Room", "wave", LONG, ctx(TROLL_ROOM))
    applied = manager.record_action_outcome(
        TROLL_ROOM, "Troll Room", "north", "You died.", ctx(TROLL_ROOM, died=True)
    )
    manager.flush()
    assert (store.current_episode, store.current_turn) == (1, 0)  # untouched
    assert applied is not None and (applied.episode, applied.turn) == (4, 3)
    (memory,) = store.memories(TROLL_ROOM, include_superseded=True)
    assert (memory.episode, memory.turns) == (4, "2")
    assert memory.invalidation_reason == "Proven false by death"
    assert (memory.superseded_at_episode, memory.superseded_at_turn) == (4, 3)
    logged = [(row["episode"], row["turn"]) for row in store.decision_log()]
    assert logged == [(4, 2), (4, 3)]
    records = [(r["episode"], r["turn"]) for r in store.turn_records("clock")]
    assert records == [(4, 1), (4, 2), (4, 3)]


def test_turn_records_and_decision_rows_fill_every_column_of_their_tables() -> None:
    from memstore.schema import synthesis_decisions, turn_records
    from memstore.turn_log import DecisionLog, DecisionRow, PendingWrites, TurnRecord

    record = TurnRecord(
        run_id="r", episode=2, turn=5, location_id=KITCHEN, action="open sack",
        score_before=0, score_after=5, location_after=KITCHEN, state_changed=True,
        outcome="ok", died=False, triggers="score_changed", memory_tokens=12,
        overhead_us=3.5, created_at="2026-11-23T00:00:00+00:00",
    )  # fmt: skip
    entry = DecisionLog(triggers="death", mode="llm", model="m", error_kind="timeout")
    decision = DecisionRow(KITCHEN, "Kitchen", 2, 5, entry, "2026-11-23T00:00:00+00:00")
    assert set(record.row()) == {c.name for c in turn_records.columns} - {"id"}
    assert set(decision.row()) == {c.name for c in synthesis_decisions.columns} - {"id"}
    assert (record.row()["state_changed"], record.row()["died"]) == (1, 0)
    assert decision.row()["applied"] is None and decision.row()["error_kind"] == "timeout"
    pending = PendingWrites(decisions=[decision], turns=[record])
    handed = pending.bookkeeping()
    pending.clear()
    assert handed.turns == [record.row()] and handed.decisions == [decision.row()]
