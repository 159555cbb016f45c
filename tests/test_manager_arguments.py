"""What the agent hands ``record_action_outcome`` never blocks a later write.

The manager buffers each turn's record, visit and map event for the next write. An action
holding a NUL character (which PostgreSQL cannot store, and which makes SQLite's checks
read a blank action) once made a map event that every later write failed on, so nothing
more was ever stored; an action of another type raised an AttributeError. A wrong type is
the caller's mistake (TypeError, before the turn is counted); an odd action is data: its
turn is recorded with the NUL written out, and it records no exit.
"""

from __future__ import annotations

from typing import Any

import pytest

from memstore.manager import SimpleMemoryManager
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.conftest import note

WEST, NORTH_OF_HOUSE, BEHIND = 64, 137, 85


def moved(before: int, after: int) -> ZMachineContext:
    return ZMachineContext(location_before=before, location_after=after)


@pytest.mark.parametrize("action", ["\x00north", "north\x00", "open\x00 door", "\x00"])
def test_an_action_holding_a_nul_blocks_no_later_write(store: MemoryStore, action: str) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    manager.record_action_outcome(WEST, "West of House", "open mailbox", "Opened.", moved(64, 64))
    manager.record_action_outcome(WEST, "West of House", action, "North of House", moved(64, 137))
    manager.record_action_outcome(
        NORTH_OF_HOUSE, "North of House", "east", "Behind House", moved(137, 85)
    )
    assert store.add_memory(BEHIND, "Behind House", note("Window ajar"))
    manager.reset_episode()
    records = store.turn_records(manager.run_id)
    assert [r["action"] for r in records] == [
        "open mailbox",
        action.replace("\x00", "\\x00"),
        "east",
    ]
    assert [m.title for m in store.memories(BEHIND)] == ["Window ajar"]
    the_map = MapStore(store)
    assert [(e.command, e.to_id) for e in the_map.exits(NORTH_OF_HOUSE).exits] == [("east", BEHIND)]
    assert the_map.exits(WEST).exits == ()  # the odd action learned no exit
    manager.close()


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ((WEST, "West of House", 5, "Done."), "action"),
        ((WEST, "West of House", None, "Done."), "action"),
        ((WEST, None, "north", "Done."), "location_name"),
        ((WEST, "West of House", "north", b"Done."), "response"),
    ],
    ids=["int action", "no action", "no location name", "bytes response"],
)
def test_a_wrong_type_is_a_type_error_before_the_turn_counts(
    store: MemoryStore, arguments: tuple[Any, ...], name: str
) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    with pytest.raises(TypeError, match=f"^{name} must be a str, got "):
        manager.record_action_outcome(*arguments, moved(64, 137))
    assert manager.turn == 0 and manager.get_status()["turn"] == 0
    manager.record_action_outcome(WEST, "West of House", "north", "Done.", moved(64, 137))
    manager.close()
    assert [r["action"] for r in store.turn_records(manager.run_id)] == ["north"]


@pytest.mark.parametrize("name", ["West\x00of House", "West \ud800"], ids=["NUL", "surrogate"])
def test_a_location_name_the_database_cannot_store_is_refused_at_once(
    store: MemoryStore, name: str
) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    with pytest.raises(ValueError, match="^location_name ") as raised:
        manager.record_action_outcome(WEST, name, "north", "Done.", moved(64, 137))
    assert "\n" not in str(raised.value) and manager.turn == 0
    manager.record_action_outcome(WEST, "West of House", "north", "Done.", moved(64, 137))
    manager.close()
    assert len(store.turn_records(manager.run_id)) == 1


@pytest.mark.parametrize("name", ["lamp\x00", "lamp \ud800"], ids=["NUL", "surrogate"])
def test_an_item_name_the_database_cannot_store_is_written_out(
    store: MemoryStore, name: str
) -> None:
    """Item names come with the context (the game adapter's object names): the offline
    recorder makes a memory's title of them, which a NUL once made a pydantic error
    raised out of the turn, after it was counted."""
    manager = SimpleMemoryManager(store, episode=1)
    context = ZMachineContext(
        location_before=7, location_after=7, inventory_after=frozenset({5}), item_names={5: name}
    )
    manager.record_action_outcome(7, "Attic", "take lamp", "Taken.", context)
    manager.close()
    titles = [m.title for m in store.memories(7)]
    assert (
        len(titles) == 1
        and name.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00") in titles[0]
    ), titles
    assert manager.turn == 1 and manager.get_status()["failures"] == {}


def test_a_memory_the_offline_recorder_cannot_make_is_a_counted_failure(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the offline recorder ever build an answer its own checks refuse, the turn
    counts a schema failure and nothing raises into the agent loop."""
    import memstore.synthesis_runner as runner

    def refused(**_fields: Any) -> Any:
        raise ValueError("1 validation error for MemorySynthesisResponse\nmemory_title\n  bad")

    monkeypatch.setattr(runner, "record_offline", refused)
    manager = SimpleMemoryManager(store, episode=1)
    context = ZMachineContext(location_before=7, location_after=7, inventory_after=frozenset({5}))
    assert manager.record_action_outcome(7, "Attic", "take lamp", "Taken.", context) is None
    assert manager.get_status()["failures"] == {"schema": 1}
    manager.close()
    (row,) = store.decision_log()
    assert row["error_kind"] == "schema" and "\n" not in row["error"]


def test_a_context_from_another_room_than_the_action_s_is_refused(store: MemoryStore) -> None:
    # review S5 B F12: location_id 137 with a context whose location_before is 64 stored
    # "'south' leads to location 137" at room 137 (a room leading to itself) while the map
    # filed the exit under room 64: the memory and the map disagreed, without a word
    manager = SimpleMemoryManager(store, episode=1)
    with pytest.raises(ValueError, match="location_before 64 is not the location_id 137"):
        manager.record_action_outcome(
            NORTH_OF_HOUSE, "North of House", "south", "North of House", moved(64, 137)
        )
    assert manager.turn == 0 and manager.counters["turns"] == 0
    manager.flush()
    assert store.memories(NORTH_OF_HOUSE) == [] and not MapStore(store).rooms()
