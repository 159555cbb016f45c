"""The busy-database buffering with the lock held by another process, the bound at its real
size, and more corrections of waiting memories (memstore.busy_buffer; all slow: the everyday
loop's are in tests/test_busy_gaps.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_sound
from test_busy_gaps import FIELD, NORTH, file_locked, go, go_north, kitchen_west, look

from memstore.busy_buffer import MAX_WAITING_BYTES, MAX_WAITING_SYNTHESES
from memstore.manager import SimpleMemoryManager
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.test_review_busy_turns import locked_by_another_process

pytestmark = pytest.mark.slow


def test_per_turn_wait_with_the_lock_held_by_another_process(db_path: Path) -> None:
    busy_s = 0.5
    with MemoryStore.open(db_path, busy_timeout_s=busy_s) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        waits = []
        with locked_by_another_process(db_path):
            for start in range(10, 40):
                started = time.perf_counter()
                go(manager, start, start + 1)
                waits.append(time.perf_counter() - started)
            manager.reset_episode()
            assert manager.flush() is False  # an explicit flush waits, bounded
        assert waits[0] >= busy_s * 0.9
        assert sum(waits[1:]) < busy_s, waits  # 29 turns: less than one busy timeout
        status = manager.get_status()
        assert (status["store_busy"], status["writes_deferred"]) == (2, 30)
        assert manager.flush()
        assert len([row for row in store.decision_log() if row["applied"]]) == 30
        assert len(store.turn_records(manager.run_id)) == 31
        manager.close()
        assert_sound(store)


def test_the_bound_at_its_real_size(db_path: Path) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        buffer = manager._synthesis.buffer
        with file_locked(db_path):
            started = time.perf_counter()
            for start in range(100, 1100):
                go(manager, start, start + 1)
            per_turn = (time.perf_counter() - started) / 1000
            status = manager.get_status()
            assert status["syntheses_waiting"] <= MAX_WAITING_SYNTHESES
            assert buffer.waiting_bytes(manager._pending) <= MAX_WAITING_BYTES
        assert per_turn < 0.02, per_turn  # the bound's own cost, per busy turn
        assert status["syntheses_waiting"] + status["syntheses_dropped"] == 1000
        assert manager.flush()
        assert store.get_status()["memories_by_tier"]["permanent"] == status["syntheses_waiting"]
        manager.close()
        assert_sound(store)


def test_a_later_turn_supersedes_a_waiting_memory_and_does_not_repeat_one(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            kitchen_west(manager, "You can't see any west here!", moved=False)
            kitchen_west(manager, "You can't go that way.", moved=False)
            go_north(manager)
            go_north(manager)  # the same exit again: already (waiting to be) stored
            assert manager.get_status()["syntheses_waiting"] == 3
        assert manager.flush()
        assert [m.title for m in store.memories(8)] == ["'west' is no exit"]
        assert [m.title for m in store.history(8, "'west' is refused for now")] == [
            "'west' is refused for now",
            "'west' is no exit",
        ]
        assert [m.title for m in store.memories(FIELD)] == [NORTH]
        manager.close()
        assert_sound(store)


class ScriptedLLM:
    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.prompts.append("\n".join(m["content"] for m in messages))
        return json.dumps(self.answers.pop(0))


def memory_answer(title: str, **more: Any) -> dict[str, Any]:
    return {
        "should_remember": True,
        "category": "DANGER",
        "memory_title": title,
        "memory_text": f"{title}.",
        "persistence": "permanent",
        "status": "ACTIVE",
        "reasoning": "scripted",
        **more,
    }


def test_a_models_answer_retires_a_waiting_memory_by_its_handle(db_path: Path) -> None:
    llm = ScriptedLLM(
        {"should_remember": False, "reasoning": "nothing"},
        memory_answer("A troll guards the bridge"),
        memory_answer("The troll is dead", supersedes=[1]),
    )
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store, llm=llm)
        look(manager, 30, "Troll Room")
        with file_locked(db_path):
            for _ in range(2):
                manager.record_action_outcome(
                    30,
                    "Troll Room",
                    "attack troll",
                    "The troll " + "swings his axe. " * 8,
                    ZMachineContext(location_before=30, location_after=30),
                )
        assert "[1] [DANGER] A troll guards the bridge" in llm.prompts[2]
        assert manager.flush()
        assert [m.title for m in store.memories(30)] == ["The troll is dead"]
        assert [m.title for m in store.history(30, "A troll guards the bridge")] == [
            "A troll guards the bridge",
            "The troll is dead",
        ]
        assert manager.get_status()["supersessions"] == 1
        manager.close()
        assert_sound(store)
