"""Spec 004's memory operations on the manager, dated by the manager's clock, and spec 002's
plain context dict read through the manager.

Was: the manager had none of spec 004's methods (they were only on the store), and the
store's default turn is its own clock, which the manager never sets: an invalidation
through the store in a manager-driven game was dated T0 ("Invalidated at T0" for a memory
learned at T30). And a spec-002 dict (``score_delta``, ``location_changed``,
``inventory_changed``) lost those keys: a turn that scored and moved fired no trigger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import Memory, MemoryStore, SimpleMemoryManager, ZMachineContext
from memstore.rows import SupersedeOutcome
from tests.conftest import write_lock_held

WAIT = ZMachineContext(location_before=152, location_after=152)


def note(title: str, **fields: object) -> Memory:
    values: dict[str, object] = {
        "category": "NOTE",
        "title": title,
        "text": "t",
        "episode": 1,
        "turns": "1",
        "persistence": "permanent",
        **fields,
    }
    return Memory(**values)  # type: ignore[arg-type]


def played(store: MemoryStore, turns: int) -> SimpleMemoryManager:
    manager = SimpleMemoryManager(store)
    for _ in range(turns):
        manager.record_action_outcome(152, "Troll Room", "wait", "Time passes.", WAIT)
    return manager


def test_the_manager_invalidates_at_its_own_turn_and_episode(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        manager = played(store, 30)
        manager.add_memory(152, "Troll Room", note("Troll is friendly", status="TENTATIVE"))

        assert manager.invalidate_memory(152, "Troll is friendly", "Proven false by death")

        manager.flush()
        (gone,) = [m for m in store.memories(152, include_superseded=True)]
        assert (gone.superseded_at_episode, gone.superseded_at_turn) == (manager.episode, 30)
        assert gone.invalidation_reason == "Proven false by death"
        assert manager.invalidate_memory(152, "Troll is friendly", "again", turn=31) is False


def test_the_manager_has_spec_004_s_methods(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        manager = played(store, 2)
        assert manager.add_memory(152, "Troll Room", note("Old"))
        assert manager.add_memory(152, "Troll Room", note("Eph", persistence="ephemeral"))
        outcome = manager.supersede_memory(152, "Troll Room", "Old", note("New", turns="2"))
        assert outcome is SupersedeOutcome.SUPERSEDED
        assert manager.invalidate_memories(152, ["New", "Nope"], "both wrong") == {
            "New": True,
            "Nope": False,
        }
        assert (manager.get_persistent_count(152), manager.get_ephemeral_count()) == (0, 1)
        assert manager.get_memory_breakdown(152) == {"core": 0, "permanent": 0, "ephemeral": 1}


def test_a_busy_database_is_not_done_and_counted_never_raised(db_path: Path) -> None:
    with (
        MemoryStore.open(db_path) as holder,
        MemoryStore.open(db_path, busy_timeout_s=0.2) as store,
    ):
        manager = played(store, 1)
        manager.add_memory(152, "Troll Room", note("Old"))
        with write_lock_held(holder):
            assert manager.add_memory(152, "Troll Room", note("Other")) is False
            busy = manager.supersede_memory(152, "Troll Room", "Old", note("New"))
            assert busy is SupersedeOutcome.STORE_BUSY and not busy
            assert manager.invalidate_memories(152, ["Old"], "wrong") == {"Old": False}
        status = manager.get_status()  # the first refused; then, the lock held, not tried
        assert (status["store_busy"], status["writes_deferred"]) == (1, 2)
        assert [m.title for m in store.memories(152)] == ["Old"]
        with pytest.raises(ValueError, match="reason"):
            manager.invalidate_memory(152, "Old", "  ")  # the caller's mistake still raises


def test_spec_002_s_dict_through_the_manager_fires_triggers_and_remembers(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)
        context = {
            "first_visit": False,
            "score_delta": 10,
            "location_changed": True,
            "inventory_changed": True,
            "died": False,
            "response_length": 20,
            "scoreafter": 3,
        }
        outcome = manager.record_action_outcome(64, "West of House", "take egg", "Taken.", context)
        status = manager.get_status()
        assert status["triggers_fired"] == 1 and status["context_keys_ignored"] == 1
        assert outcome is not None and outcome.new_memory is not None
        assert outcome.new_memory.score_change == 10
        manager.flush()
        assert store.get_location_memory(64)


def test_one_title_given_as_a_string_is_the_caller_s_mistake(db_path: Path) -> None:
    """Was (manager): "Troll" read as the titles "T", "r", "o", "l": the memories titled
    "o" and "l" were invalidated."""
    with MemoryStore.open(db_path) as store:
        manager = played(store, 1)
        for title in ("o", "l"):
            manager.add_memory(152, "Troll Room", note(title))
        for owner in (manager, store):
            with pytest.raises(TypeError, match="not one string"):
                owner.invalidate_memories(152, "Troll", "wrong")  # type: ignore[arg-type]
        assert sorted(m.title for m in store.memories(152)) == ["l", "o"]
