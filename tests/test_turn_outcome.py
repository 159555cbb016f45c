"""The turn record's outcome (revision 0007): worked out by the manager, counted by the
metrics beside the older definition, and migrated up and down on a populated database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from memstore.config import MemstoreConfig
from memstore.errors import SchemaOutOfDate
from memstore.manager import SimpleMemoryManager
from memstore.metrics import compute_metrics, repeated_failed_action_rate, turn_failed
from memstore.schema import HEAD_REVISION
from memstore.store import MemoryStore
from memstore.triggers import Trigger, ZMachineContext
from tests.test_migration_0003 import alembic_config, revision, snapshot
from tests.test_migration_0006 import populated_0005
from tests.test_store_schema import schema_of

BEHIND_HOUSE, KITCHEN = 85, 27
WALL = "You can't go that way."
OPENED = "With great effort, you open the window far enough to allow entry."


def here(location: int = BEHIND_HOUSE, there: int | None = None, **fields: object):
    return ZMachineContext(
        location_before=location, location_after=there or location, first_visit=False, **fields
    )


def outcomes(store: MemoryStore, run_id: str) -> list[tuple[str, str | None]]:
    return [(r["action"], r["outcome"]) for r in store.turn_records(run_id)]


def test_each_turn_record_says_whether_the_game_refused_repeated_or_killed(
    store: MemoryStore,
) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="r")
    play = manager.record_action_outcome
    play(BEHIND_HOUSE, "Behind House", "open window", OPENED, here())
    play(BEHIND_HOUSE, "Behind House", "open window", "Have your eyes checked.", here())
    play(BEHIND_HOUSE, "Behind House", "examine window", "The window is open.", here())
    play(BEHIND_HOUSE, "Behind House", "examine window", "The window is open.", here())
    play(BEHIND_HOUSE, "Behind House", "north", WALL, here())
    play(BEHIND_HOUSE, "Behind House", "west", "Kitchen\nA table.", here(there=KITCHEN))
    play(KITCHEN, "Kitchen", "east", "Behind House", here(KITCHEN, BEHIND_HOUSE))
    play(BEHIND_HOUSE, "Behind House", "west", "Kitchen\nA table.", here(there=KITCHEN))
    play(KITCHEN, "Kitchen", "up", "Oh, no! ... You have died", here(KITCHEN, 3, died=True))
    manager.flush()
    assert outcomes(store, "r") == [
        ("open window", "ok"),  # changed no score, location or inventory: still no failure
        ("open window", "refused"),
        ("examine window", "ok"),
        ("examine window", "repeated"),  # the same answer again, nothing changed
        ("north", "refused"),
        ("west", "ok"),
        ("east", "ok"),
        ("west", "ok"),  # the same answer, but the player moved
        ("up", "died"),
    ]
    assert manager.last_outcome is not None and manager.last_outcome.value == "died"


def test_repeats_are_judged_within_the_episode_and_per_place(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="r")
    look = "A dimly lit forest."
    manager.record_action_outcome(1, "Forest", "look", look, here(1))
    manager.record_action_outcome(2, "Forest", "look", look, here(2))  # another room
    manager.record_action_outcome(1, "Forest", "LOOK.", look, here(1))  # the same action key
    manager.reset_episode()
    manager.record_action_outcome(1, "Forest", "look", look, here(1))  # a new episode
    manager.flush()
    assert [outcome for _action, outcome in outcomes(store, "r")] == [
        "ok",
        "ok",
        "repeated",
        "ok",
    ]


def test_a_refusal_fires_the_refused_trigger(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="r")
    manager.record_action_outcome(BEHIND_HOUSE, "Behind House", "north", WALL, here())
    manager.record_action_outcome(BEHIND_HOUSE, "Behind House", "wait", "Time passes...", here())
    manager.flush()
    assert [r["triggers"] for r in store.turn_records("r")] == [Trigger.REFUSED.value, ""]
    assert manager.get_status()["triggers_fired"] == 1


def test_the_metrics_count_failures_by_the_game_and_by_the_older_definition() -> None:
    def record(episode: int, action: str, changed: bool, outcome: str | None) -> dict:
        return {
            "episode": episode,
            "turn": 1,
            "location_id": BEHIND_HOUSE,
            "location_after": BEHIND_HOUSE,
            "action": action,
            "state_changed": int(changed),
            "outcome": outcome,
            "score_after": 0,
            "memory_tokens": 0,
            "overhead_us": 0.0,
            "triggers": "",
        }

    records = [
        record(1, "open window", False, "ok"),  # the older definition calls it a failure
        record(2, "open window", False, "ok"),
        record(1, "north", False, "refused"),
        record(2, "north", False, "refused"),
        record(2, "take leaflet", False, None),  # before revision 0007: the older rule
        record(2, "take leaflet", False, None),
    ]
    assert [turn_failed(r) for r in records] == [False, False, True, True, True, True]
    assert [turn_failed(r, "state") for r in records] == [True] * 6
    assert repeated_failed_action_rate(records) == 2 / 6
    assert repeated_failed_action_rate(records, definition="state") == 3 / 6
    metrics = compute_metrics(records)
    assert metrics["repeated_failed_action_rate_old"] == 3 / 6
    assert (metrics["failed_turns"], metrics["failed_turns_old"]) == (4, 6)
    with pytest.raises(ValueError, match="unknown failure definition"):
        turn_failed(records[0], "vibes")


# --- revision 0007 ---------------------------------------------------------------------------


def populated_0006(tmp_path: Path) -> Path:
    db = populated_0005(tmp_path)
    command.upgrade(alembic_config(db), "0006")
    return db


def turn_rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, action, state_changed FROM turn_records").fetchall()


def test_upgrade_to_0007_adds_an_empty_outcome_and_keeps_every_row(tmp_path: Path) -> None:
    db = populated_0006(tmp_path)
    before, turns = snapshot(db), turn_rows(db)
    assert turns  # the populated database has turn records
    command.upgrade(alembic_config(db), "0007")
    assert revision(db) == "0007"
    assert snapshot(db) == before and turn_rows(db) == turns
    with sqlite3.connect(db) as conn:
        assert {row[0] for row in conn.execute("SELECT outcome FROM turn_records")} == {None}
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE turn_records SET outcome = 'meh'")
    command.upgrade(alembic_config(db), "head")
    assert revision(db) == HEAD_REVISION
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="new")
        manager.record_action_outcome(BEHIND_HOUSE, "Behind House", "north", WALL, here())
        manager.flush()
        assert outcomes(store, "new") == [("north", "refused")]
        assert [r["outcome"] for r in store.turn_records() if r["run_id"] != "new"] == [None]


def test_downgrade_to_0006_drops_only_the_outcome_and_upgrade_again_works(
    tmp_path: Path,
) -> None:
    db = populated_0006(tmp_path)
    config = alembic_config(db, allow_data_loss=True)  # it deletes stored data: confirmed
    schema_0006, turns = schema_of(db), turn_rows(db)
    command.upgrade(config, "head")
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="new")
        manager.record_action_outcome(BEHIND_HOUSE, "Behind House", "north", WALL, here())
        manager.flush()
    played = snapshot(db)  # every row but the outcomes
    command.downgrade(config, "0006")
    assert snapshot(db) == played
    assert revision(db) == "0006"
    assert [row for row in schema_of(db) if "alembic" not in row[1]] == [
        row for row in schema_0006 if "alembic" not in row[1]
    ]
    assert turn_rows(db)[: len(turns)] == turns and len(turn_rows(db)) == len(turns) + 1
    with pytest.raises(SchemaOutOfDate, match="alembic upgrade head"):
        MemoryStore.open(db)
    command.upgrade(config, "head")
    assert revision(db) == HEAD_REVISION
    with MemoryStore.open(db) as store:
        assert [r["outcome"] for r in store.turn_records()] == [None, None]  # not kept
    assert snapshot(db) == played


def test_the_migrated_turn_records_are_the_ones_a_new_database_gets(tmp_path: Path) -> None:
    db = populated_0006(tmp_path)
    command.upgrade(alembic_config(db), "head")
    MemoryStore.open(tmp_path / "new.db").close()

    def turns_schema(path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
        return [row for row in schema_of(path) if "turn_records" in row[1]]

    assert turns_schema(db) == turns_schema(tmp_path / "new.db") != []


# --- what the offline recorder makes of refusals, through the manager ----------------------


def test_refusals_become_failure_memories_and_a_success_invalidates_them(
    store: MemoryStore,
) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="r")
    play = manager.record_action_outcome
    play(BEHIND_HOUSE, "Behind House", "north", WALL, here())
    play(BEHIND_HOUSE, "Behind House", "west", "The kitchen window is closed.", here())
    tiers = {m.title: m.persistence.value for m in store.memories(BEHIND_HOUSE)}
    assert tiers == {"'north' is no exit": "permanent", "'west' is refused for now": "ephemeral"}
    play(BEHIND_HOUSE, "Behind House", "open window", OPENED, here())
    play(BEHIND_HOUSE, "Behind House", "west", "Kitchen", here(there=KITCHEN))
    live = {m.title for m in store.memories(BEHIND_HOUSE)}
    assert live == {"'north' is no exit", "'west' leads to location 27"}
    history = store.history(BEHIND_HOUSE, "'west' is refused for now")
    assert history[-1].invalidation_reason is not None
    assert "worked here later" in history[-1].invalidation_reason
    manager.reset_episode()
    assert {m.title for m in store.memories(BEHIND_HOUSE)} == live
