"""The spec's success metrics: repeated failed actions, coverage by episode, milestones."""

from __future__ import annotations

from typing import Any

from memstore.config import MemstoreConfig
from memstore.manager import SimpleMemoryManager
from memstore.metrics import (
    compute_metrics,
    coverage_from_records,
    repeated_failed_action_rate,
)
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.conftest import MakeMemory

KITCHEN, ATTIC, CELLAR = 8, 9, 10


def turn(episode: int, location: int, action: str, changed: bool, **extra: Any) -> dict:
    record = {
        "episode": episode,
        "turn": 1,
        "location_id": location,
        "location_after": location,
        "action": action,
        "state_changed": int(changed),
        "score_after": 0,
        "memory_tokens": 0,
        "overhead_us": 0.0,
        "triggers": "",
    }
    record.update(extra)
    return record


def test_a_failure_repeated_in_a_later_episode_counts_once_the_run_is_considered() -> None:
    records = [
        turn(1, KITCHEN, "take window", changed=False),
        turn(1, KITCHEN, "Take Window ", changed=False),  # same action, same episode
        turn(2, KITCHEN, "take window", changed=False),  # same action, next episode
        turn(2, ATTIC, "take window", changed=False),  # another location: not a repeat
    ]
    assert repeated_failed_action_rate(records) == 2 / 4
    assert repeated_failed_action_rate(records, within_episode=True) == 1 / 4


def test_an_action_that_changed_the_state_is_no_failure_to_repeat() -> None:
    records = [turn(1, KITCHEN, "west", changed=True), turn(2, KITCHEN, "west", changed=True)]
    assert repeated_failed_action_rate(records) == 0.0


def test_turns_to_first_score_and_its_change_across_episodes() -> None:
    records = [
        turn(1, KITCHEN, "a", True, turn=1),
        turn(1, KITCHEN, "b", True, turn=9, score_after=10),
        turn(2, KITCHEN, "a", True, turn=4, score_after=10),
        turn(3, KITCHEN, "a", True, turn=2),
    ]
    metrics = compute_metrics(records)
    assert metrics["turns_to_first_score"] == {1: 9, 2: 4, 3: None}
    assert metrics["turns_to_first_score_change"] == {2: -5, 3: None}


def test_locations_with_memory_are_judged_at_the_end_of_each_episode(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(KITCHEN, "Kitchen", mem("Sack on the table", episode=1))
    store.add_memory(ATTIC, "Attic", mem("Rope here", episode=2))
    store.invalidate_memory(KITCHEN, "Sack on the table", "someone took it", turn=4, episode=3)
    assert store.locations_with_memory(1) == {KITCHEN}
    assert store.locations_with_memory(2) == {KITCHEN, ATTIC}
    assert store.locations_with_memory(3) == {ATTIC}  # the kitchen's memory ended in 3


def test_an_ephemeral_memory_covers_its_episode_after_it_is_gone(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(), episode=1)  # offline recorder
    dropped = ZMachineContext(
        location_before=CELLAR,
        location_after=CELLAR,
        inventory_before=frozenset({55}),
        inventory_after=frozenset(),
        item_names={55: "brass lantern"},
    )
    manager.record_action_outcome(CELLAR, "Cellar", "drop lamp", "Dropped.", dropped)
    assert store.get_ephemeral_count(CELLAR) == 1
    manager.reset_episode()
    assert store.get_ephemeral_count(CELLAR) == 0
    assert store.locations_with_memory(1) == {CELLAR}
    assert store.locations_with_memory(2) == set()


def test_coverage_counts_where_records_start_and_end() -> None:
    records = [
        turn(1, KITCHEN, "up", True, location_after=ATTIC),
        turn(1, ATTIC, "down", True, location_after=KITCHEN),
        turn(2, KITCHEN, "down", True, location_after=CELLAR),
    ]
    covered = {1: {ATTIC, CELLAR}, 2: {KITCHEN, CELLAR}}
    assert coverage_from_records(records, covered) == {1: (1, 2), 2: (2, 2)}
