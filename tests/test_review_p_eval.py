"""Review P3: the evaluation's figures and the map's names for a room.

F1. "You have neither the tools nor the expertise." (``open egg``: only the thief opens
    it) was no refusal: with the game's clock adding a line to one of two such answers,
    the repeat went uncounted as well.
F2. The table rounded a mean's half to the even neighbour: 50.5 showed as 50, 19.5 as 20.
F3. A room with no name was "room 10" in Map.md, and ``map route "room 10" ...`` found none.
"""

from __future__ import annotations

from memstore.eval_results import fmt
from memstore.map_graph import Room
from memstore.map_lookup import find_room
from memstore.outcome import Outcome, RefusalKind, classify_refusal, judge_outcome
from memstore.triggers import ZMachineContext


def test_the_egg_s_refusal_is_a_refusal_whatever_the_clock_adds() -> None:
    answer = "You have neither the tools nor the expertise.\nYou hear a song bird."
    refusal = classify_refusal(answer)
    assert refusal is not None and refusal.kind is RefusalKind.IMPOSSIBLE and refusal.rule
    same = ZMachineContext(location_before=5, location_after=5)
    assert judge_outcome(answer, same, None) is Outcome.REFUSED


def test_a_half_is_rounded_up_in_the_table() -> None:
    assert [fmt(50.5, 0), fmt(19.5, 0), fmt(2.25), fmt(None)] == ["51", "20", "2.3", "-"]


def test_a_room_with_no_name_is_found_by_its_map_md_label() -> None:
    rooms = [Room(10, ""), Room(64, "West of House")]
    assert find_room(rooms, "room 10").room == Room(10, "")
    assert find_room(rooms, "Room 64").room == Room(64, "West of House")
    assert find_room(rooms, "room 11").problem == (
        "room 11 is not on the map (no exit was taken or tried there yet)"
    )


def test_a_room_named_like_a_number_s_label_is_found_by_its_name() -> None:
    # R2 F5: "Room 5" took room number 5 where a room is named "Room 5"
    rooms = [Room(5, "Kitchen"), Room(200, "Room 5")]
    assert find_room(rooms, "Room 5").room == Room(200, "Room 5")
    assert find_room(rooms, "5").room == Room(5, "Kitchen")
    assert find_room(rooms, "room 7").problem is not None
