"""Review S5 C (the map and processes sharing a database), finding F5.

A map row holding a value of the wrong kind (SQLite keeps what a hand edit put there:
the text 'many' as a count) passed ``memstore check``, made ``map route`` an internal
error and ``get_location_memory`` raise TypeError into the agent loop. The map's reads now
pass such a row over, and ``check`` names it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstore.manager import SimpleMemoryManager
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.cli_helpers import run

#: (a number put in a TEXT column is stored as text: a blob is what such a column keeps)
DAMAGE = [
    "UPDATE map_connections SET verifications = 'many' WHERE action_key = 'north'",
    "UPDATE map_connections SET last_turn = 2.5 WHERE action_key = 'north'",
    "UPDATE map_connections SET action = x'6e6f727468' WHERE action_key = 'north'",
    "UPDATE map_rooms SET name = x'41' WHERE id = 137",
    "UPDATE map_exit_failures SET count = 'two'",
]


def mapped(db: Path) -> None:
    manager = SimpleMemoryManager(MemoryStore.open(db), episode=1)
    moves = [(64, "north", 137), (137, "south", 64), (64, "west", 64), (64, "north", 137)]
    names = {64: "West of House", 137: "North of House"}
    for before, action, after in moves:
        manager.record_action_outcome(
            before,
            names[before],
            action,
            "You can't go that way." if before == after else names[after],
            ZMachineContext(location_before=before, location_after=after),
        )
    assert manager.flush()
    manager.store.close()


def damaged(tmp_path: Path, damage: str) -> Path:
    """A mapped database with ``damage`` done to it by hand (through sqlite3)."""
    db = tmp_path / "m.db"
    mapped(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute(damage).rowcount >= 1
    conn.close()
    return db


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_map_row_of_the_wrong_kind_is_passed_over_and_named_by_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, damage: str
) -> None:
    db = damaged(tmp_path, damage)
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store)
        for room in (64, 137):
            assert isinstance(manager.get_location_memory(room), str)
            MapStore(store).exits(room)
        MapStore(store).route(64, 137)
        MapStore(store).graph()
    code, _out, err = run(capsys, "--db", str(db), "map", "route", "64", "137")
    assert "internal error" not in err
    code, out, err = run(capsys, "--db", str(db), "check")
    assert code == 1 and "memstore cannot read them" in out + err, out + err


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_next_turns_write_over_a_map_row_of_the_wrong_kind(tmp_path: Path, damage: str) -> None:
    """Review S5 D F6: the reads passed such a row over, but the next blocked exit's write
    compared the stored 'two' with a number (TypeError out of flush and every later turn),
    and a 'many' verifications took the next real move without counting it. The writes now
    count from what such a value casts to, and name the room again; an action held as a
    blob stays passed over (``memstore check`` names it) and raises nothing."""
    db = damaged(tmp_path, damage)
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store, episode=2)
        for before, action, after in [(64, "west", 64), (64, "north", 137), (137, "south", 64)]:
            manager.record_action_outcome(
                before,
                "Room",
                action,
                "You can't go that way." if before == after else "Moved.",
                ZMachineContext(location_before=before, location_after=after),
            )
        assert manager.flush()
        # a count, a turn or a room's name is written over; an action held as a blob is not
        mended = "action = x'" not in damage
        assert (manager.map.route(64, 137).actions == ("north",)) is mended


def test_a_count_past_the_largest_is_written_back_as_the_largest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # review S5 E F7: 1e300 was cast to 2**63-1 by the next write: `check` then said ok,
    # and the map's own export could not be imported back
    from memstore.map_events import COUNT_MAX

    db = damaged(tmp_path, "UPDATE map_exit_failures SET count = 1e300")
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store, episode=2)
        manager.record_action_outcome(
            64, "Room", "west", "You can't go that way.",
            ZMachineContext(location_before=64, location_after=64),
        )  # fmt: skip
        assert manager.flush()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count FROM map_exit_failures").fetchall() == [(COUNT_MAX,)]
    conn.close()
    out = tmp_path / "map.json"
    assert run(capsys, "--db", str(db), "map", "export-json", str(out))[0] == 0
    again = tmp_path / "again.db"
    assert run(capsys, "--db", str(again), "map", "import-json", str(out))[0] == 0
