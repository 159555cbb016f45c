"""Review I of the map (review C's map findings): ZorkGPT's inferred ways back are left out
of routes, export-json keeps what the reader left out of a peer's file, ``room_names`` in
and out, a pair of confidence and verifications the rule cannot give is refused, a long
neighbour name is cut in the exits line, and one exit or room number is read one way."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memstore.cli_args import location_id
from memstore.errors import MapStateError
from memstore.map_events import ELLIPSIS, SHOWN_MAX
from memstore.map_graph import MapGraph, exits_line
from memstore.map_json import (
    MAX_DERIVED_FAILURES,
    dump_map_state,
    map_state,
    map_state_at_risk,
    parse_map_state,
)
from memstore.map_lookup import find_room
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.map_helpers import KITCHEN, NORTH, WEST, map_event, record_sample, sample_graph

Capsys = pytest.CaptureFixture[str]


def _zorkgpt_walk() -> dict[str, Any]:
    """What ZorkGPT's MapGraph writes after West of House north to North of House (137),
    then east to Behind House (85). ``add_connection`` adds, for each direction taken, the
    opposite direction leading back at confidence x 0.9 with 1 verification, never taken:
    North of House south (wrong in the game: the windows are boarded) and Behind House
    west."""
    return {
        "rooms": {
            "64": {"id": 64, "name": "West of House", "exits": ["north"]},
            "137": {"id": 137, "name": "North of House", "exits": ["east", "south"]},
            "85": {"id": 85, "name": "Behind House", "exits": ["west"]},
        },
        "room_names": {"64": "West of House", "137": "North of House", "85": "Behind House"},
        "connections": {
            "64": {"north": 137},
            "137": {"south": 64, "east": 85},
            "85": {"west": 137},
        },
        "connection_confidence": {
            "64_north": 1.0,
            "137_south": 0.9,
            "137_east": 1.0,
            "85_west": 0.9,
        },
        "connection_verifications": {"64_north": 1, "137_south": 1, "137_east": 1, "85_west": 1},
        "exit_failure_counts": {},
        "pruned_exits": {},
        "metadata": {"version": "1.0", "total_rooms": 3, "total_connections": 4},
    }


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- 3. ZorkGPT's inferred ways back are never routed --------------------------------------------


def test_an_inferred_way_back_is_left_out_of_the_map_and_reported_once() -> None:
    parsed = parse_map_state(json.dumps(_zorkgpt_walk()))
    graph = parsed.graph
    assert set(graph.connections) == {(64, "north"), (137, "east")}
    assert not graph.route(137, 64).found  # the boarded windows: no "south"
    assert graph.route(64, 85).actions == ("north", "east")
    assert "south" in graph.exits(137).untried and "west" in graph.exits(85).untried
    inferred = [note for note in parsed.notes if "inferred way(s) back" in note]
    assert len(inferred) == 1 and inferred[0].startswith("connections: 2 inferred way(s) back")
    assert "kept out of routes" in inferred[0] and inferred[0].endswith(": 137_south, 85_west")
    # reported on their own line, not again among the listed exits never taken, and the
    # file's confidence of a way back left out is no mismatch to report
    assert not any(note.startswith("rooms:") for note in parsed.notes)
    assert not any("137_south" in note for note in parsed.notes if note is not inferred[0])


@pytest.mark.parametrize(
    ("verifications", "trust"),
    [(2, 1.0), (1, 1.0), (3, None)],
    ids=["taken-again", "taken-to-elsewhere", "no-confidence"],
)
def test_a_way_back_that_was_taken_is_still_routed(verifications: int, trust: Any) -> None:
    # taken again adds a verification and 0.1; a take that led elsewhere replaces it at
    # the caller's confidence 1.0 with 1 verification
    data = _zorkgpt_walk()
    data["connection_verifications"]["137_south"] = verifications
    if trust is None:
        del data["connection_confidence"]["137_south"]
    else:
        data["connection_confidence"]["137_south"] = trust
    parsed = parse_map_state(json.dumps(data))
    assert parsed.graph.route(137, 64).actions == ("south",)
    inferred = [note for note in parsed.notes if "inferred way(s) back" in note]
    assert len(inferred) == 1 and inferred[0].endswith(": 85_west")


def _at(data: dict[str, Any], trust: dict[str, float], verified: dict[str, int]) -> str:
    data["connection_confidence"] = trust
    data["connection_verifications"] = verified
    return json.dumps(data)


def test_zorkgpt_s_map_manager_confidence_of_0_8_is_read_the_same_way() -> None:
    # ZorkGPT's MapManager passes confidence=0.8: an exit taken once is 0.8 (1 verification,
    # not a guess), its inferred way back 0.72; each later take adds 0.1
    data = _zorkgpt_walk()
    once = {"64_north": 0.8, "137_south": 0.72, "137_east": 0.8, "85_west": 0.72}
    parsed = parse_map_state(_at(data, once, dict.fromkeys(once, 1)))
    assert set(parsed.graph.connections) == {(64, "north"), (137, "east")}
    assert parsed.graph.route(64, 85).actions == ("north", "east")
    # north taken twice more (0.8 + 0.1 + 0.1, as floats add); the way back still a guess
    again = once | {"64_north": 0.8 + 0.1 + 0.1}
    parsed = parse_map_state(_at(data, again, dict.fromkeys(once, 1) | {"64_north": 3}))
    assert (137, "south") not in parsed.graph.connections
    # the way back taken since: 0.72 + 0.1 with 2 verifications, and north (0.8, once) is
    # no guess beside it
    taken = once | {"137_south": 0.72 + 0.1}
    parsed = parse_map_state(_at(data, taken, dict.fromkeys(once, 1) | {"137_south": 2}))
    assert {(64, "north"), (137, "south")} <= set(parsed.graph.connections)
    assert parsed.graph.route(137, 64).actions == ("south",)


def test_a_memstore_map_that_went_through_zorkgpt_keeps_every_connection(
    store: MemoryStore,
) -> None:
    # ZorkGPT keeps no metadata.memstore: memstore's confidences (2/3 for a take) are then
    # read as a peer's, and no pair of them looks like add_connection's guess
    graph = record_sample(store).graph()
    data = map_state(graph)
    del data["metadata"]["memstore"]
    parsed = parse_map_state(json.dumps(data))
    assert set(parsed.graph.connections) == set(graph.connections)
    assert not any("inferred" in note for note in parsed.notes)


def test_import_json_of_a_zorkgpt_map_routes_no_inferred_way_back(
    capsys: Capsys, tmp_path: Path
) -> None:
    peer, db = _write(tmp_path / "map_state.json", _zorkgpt_walk()), tmp_path / "zw.db"
    code, stdout, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "3 rooms, 2 connections" in stdout
    warned = [line for line in err.splitlines() if "inferred way(s) back" in line]
    assert len(warned) == 1 and "ZorkGPT never took" in warned[0]
    code, _, err = run(capsys, "--db", str(db), "map", "route", "137", "64")
    assert code == 1
    one_error_line(err, "no route from North of House (137) to West of House (64)")


def test_memstore_s_own_file_has_no_inferred_way_back_and_round_trips(store: MemoryStore) -> None:
    # the recorder's connections taken once (1 verification, confidence 2/3) are moves,
    # never guesses: metadata.memstore says so, and the round trip keeps every one
    graph = record_sample(store).graph()
    once = [key for key, c in graph.connections.items() if c.verifications == 1 and c.direction]
    assert once
    exported = dump_map_state(graph)
    parsed = parse_map_state(exported)
    assert parsed.notes == () and parsed.lost == () and parsed.graph == graph
    assert dump_map_state(parsed.graph) == exported


# --- 4. export-json over a peer's file keeps what the reader left out ----------------------------

#: the reviewer's peer2.json: a listed exit never taken, a failed and a pruned action, the
#: file's own confidence, and (ZorkGPT's) room_names
PEER2: dict[str, Any] = {
    "rooms": {
        "64": {"id": 64, "name": "West of House", "exits": ["north", "south", "west"]},
        "137": {"id": 137, "name": "North of House", "exits": []},
    },
    "room_names": {"64": "West of House", "137": "North of House"},
    "connections": {"64": {"north": 137}},
    "connection_confidence": {"64_north": 1.0},
    "connection_verifications": {"64_north": 1},
    "exit_failure_counts": {"64_enter window": 2},
    "pruned_exits": {"64": ["climb tree"]},
    "metadata": {"version": "1.0", "total_rooms": 2, "total_connections": 1},
}


def test_export_json_refuses_to_lose_what_the_reader_left_out(
    capsys: Capsys, tmp_path: Path
) -> None:
    peer, db = _write(tmp_path / "peer2.json", PEER2), tmp_path / "p2.db"
    before = peer.read_bytes()
    assert run(capsys, "--db", str(db), "map", "import-json", str(peer))[0] == 0
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(peer))
    assert code == 1
    line = one_error_line(err, "what memstore's map does not keep", "--force")
    for lost in (
        "2 exit(s) listed but never taken",
        "1 failure count(s) of actions",
        "1 pruned action(s)",
        "the file's confidence of 1 connection(s)",
    ):
        assert lost in line
    assert "does not have" not in line  # the map has every room and connection
    assert peer.read_bytes() == before
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(peer), "--force")
    assert code == 0, err
    assert json.loads(peer.read_text(encoding="utf-8"))["exit_failure_counts"] == {}


def test_export_json_refuses_to_drop_inferred_ways_back(capsys: Capsys, tmp_path: Path) -> None:
    peer, db = _write(tmp_path / "map_state.json", _zorkgpt_walk()), tmp_path / "zw.db"
    assert run(capsys, "--db", str(db), "map", "import-json", str(peer))[0] == 0
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(peer))
    assert code == 1
    one_error_line(err, "2 inferred way(s) back", "the file's confidence of 2 connection(s)")


def test_an_unedited_memstore_export_is_overwritten_freely(capsys: Capsys, tmp_path: Path) -> None:
    db, out = tmp_path / "mine.db", tmp_path / "map_state.json"
    with MemoryStore.open(db) as store:
        the_map = record_sample(store)
        assert run(capsys, "--db", str(db), "map", "export-json", str(out))[0] == 0
        the_map.record([map_event(KITCHEN, "e", WEST, 40)])  # the map grows
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(out))
    assert code == 0, err
    assert map_state_at_risk(sample_graph(), dump_map_state(sample_graph())) is None


def test_an_unknown_key_makes_a_file_at_risk() -> None:
    data = map_state(sample_graph())
    data["rooms"][str(WEST)]["visited"] = True
    problem = map_state_at_risk(sample_graph(), json.dumps(data))
    assert problem is not None and "1 unknown key(s)" in problem and "\n" not in problem


# --- 7. room_names out and in ---------------------------------------------------------------------


def test_export_writes_room_names_and_reads_them_back_without_a_warning() -> None:
    graph = sample_graph()
    data = map_state(graph)
    assert list(data)[:3] == ["rooms", "room_names", "connections"]  # ZorkGPT's order
    assert data["room_names"] == {str(room): name for room, name in sorted(graph.rooms.items())}
    parsed = parse_map_state(json.dumps(data))
    assert parsed.notes == () and parsed.graph == graph


def test_room_names_fill_a_missing_name_and_rooms_win_a_disagreement() -> None:
    data = _zorkgpt_walk()
    data["rooms"]["137"]["name"] = ""
    data["room_names"]["64"] = "West Of House"  # rooms' "West of House" is kept
    data["room_names"]["200"] = "Clearing"  # a room rooms lacks: added, named
    parsed = parse_map_state(json.dumps(data))
    assert parsed.graph.rooms[137] == "North of House"
    assert parsed.graph.rooms[64] == "West of House"
    assert parsed.graph.rooms[200] == "Clearing"
    differ = [note for note in parsed.notes if note.startswith("room_names:")]
    assert len(differ) == 1 and "1 name(s) that differ" in differ[0]
    assert differ[0].endswith(': 64 ("West Of House", rooms: "West of House")')
    assert "1 room_names that differ from rooms" in parsed.lost
    assert not any("unknown key" in note for note in parsed.notes)


@pytest.mark.parametrize(
    ("room_names", "message"),
    [
        ([], "room_names must be an object"),
        ({"x": "a"}, 'room_names["x"] is not a location number'),
        ({"64": 3}, 'room_names["64"] must be a string'),
        ({"64": "a\x00b"}, 'room_names["64"]'),
    ],
)
def test_a_bad_room_names_is_refused_naming_its_key(room_names: Any, message: str) -> None:
    data = _zorkgpt_walk()
    data["room_names"] = room_names
    with pytest.raises(MapStateError, match="nothing was imported") as refused:
        parse_map_state(json.dumps(data))
    assert str(refused.value).startswith(message)


# --- 10. a confidence the verifications cannot give -----------------------------------------------


@pytest.mark.parametrize("trust", [0.3, 1e-300, 5e-324, 0])
def test_a_low_confidence_beside_huge_verifications_is_refused(trust: float) -> None:
    data = {
        "rooms": {"1": {"name": "a"}, "2": {"name": "b"}},
        "connections": {"1": {"north": 2}},
        "connection_confidence": {"1_north": trust},
        "connection_verifications": {"1_north": 2_147_483_647},
    }
    with pytest.raises(MapStateError) as refused:
        parse_map_state(json.dumps(data))
    message = str(refused.value)
    assert message.startswith('connection_confidence["1_north"] is ')
    assert f"more than {MAX_DERIVED_FAILURES} failures" in message and "\n" not in message
    assert message.endswith("; nothing was imported")


def test_a_confidence_the_capped_failures_give_is_still_imported() -> None:
    data = {
        "rooms": {"1": {"name": "a"}, "2": {"name": "b"}},
        "connections": {"1": {"north": 2}},
        "connection_confidence": {"1_north": 0},
        "connection_verifications": {"1_north": 2},
    }
    north = parse_map_state(json.dumps(data)).graph.connections[(1, "north")]
    assert north.failures == MAX_DERIVED_FAILURES and north.confidence < 0.001


def test_import_json_of_a_huge_verification_pair_is_one_line_and_writes_nothing(
    capsys: Capsys, tmp_path: Path
) -> None:
    data = {
        "rooms": {"1": {"name": "a"}, "2": {"name": "b"}},
        "connections": {"1": {"north": 2}},
        "connection_confidence": {"1_north": 0.3},
        "connection_verifications": {"1_north": 2_147_483_647},
    }
    peer, db = _write(tmp_path / "v.json", data), tmp_path / "v.db"
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 1
    one_error_line(err, 'connection_confidence["1_north"] is 0.3 beside 2147483647')
    assert not db.exists()  # the file is read and checked before the database is opened


# --- 11. a long neighbour name is cut in the exits line -------------------------------------------

LONG_NAME = "Up a Tree " + "very " * 600_000  # 3 MB


def test_a_long_neighbour_name_is_cut_in_the_exits_line() -> None:
    graph = MapGraph().apply_all([map_event(WEST, "n", NORTH)])
    graph.rooms[NORTH] = LONG_NAME
    line = exits_line(graph.exits(WEST))
    assert line.startswith("Exits: north → Up a Tree very") and f"{ELLIPSIS} (137);" in line
    assert len(line.split(";")[0]) < SHOWN_MAX + 30


def test_show_keeps_the_exits_line_of_a_room_beside_a_long_named_one(
    capsys: Capsys, tmp_path: Path
) -> None:
    data = {
        "rooms": {"1": {"name": "Forest Path"}, "2": {"name": LONG_NAME}},
        "connections": {"1": {"north": 2}},
    }
    peer, db = _write(tmp_path / "long.json", data), tmp_path / "long.db"
    assert run(capsys, "--db", str(db), "map", "import-json", str(peer))[0] == 0
    code, stdout, err = run(capsys, "--db", str(db), "show", "1")
    assert code == 0, err
    exits = [line for line in stdout.splitlines() if line.startswith("Exits:")]
    assert len(exits) == 1 and exits[0].startswith("Exits: north → Up a Tree very")
    assert f"{ELLIPSIS} (2);" in exits[0] and len(exits[0].split(";")[0]) < SHOWN_MAX + 30


# --- 12. one exit, one room number: read one way --------------------------------------------------


def test_a_pruned_exit_listed_under_two_spellings_is_refused() -> None:
    data = {"rooms": {"1": {"name": "a"}}, "pruned_exits": {"1": ["north", "n", "NORTH"]}}
    with pytest.raises(MapStateError) as refused:
        parse_map_state(json.dumps(data))
    message = str(refused.value)
    assert message.startswith('pruned_exits["1"] lists "n", the same exit as "north" (north)')
    assert message.endswith("; nothing was imported")


def test_a_room_number_in_other_digits_is_refused_as_json_refuses_it(
    capsys: Capsys, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    with MemoryStore.open(db) as store:
        record_sample(store)
    with MemoryStore.open(db, read_only=True) as store:
        found = find_room(MapStore(store).rooms(), "٦٤")
    assert found.room is None and found.problem is not None and "digits 0-9" in found.problem
    code, _, err = run(capsys, "--db", str(db), "map", "route", "٦٤", "27")
    assert code == 1
    one_error_line(err, "no room called '٦٤'", "digits 0-9")
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "64", "137")
    assert code == 0 and "route from West of House (64) to North of House (137)" in stdout


@pytest.mark.parametrize("value", ["٦٤", "６４", "1_0"])
def test_the_location_number_argument_takes_the_digits_0_to_9_only(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="digits 0-9"):
        location_id(value)
    assert location_id(" 64 ") == 64


def test_show_refuses_a_location_in_other_digits(capsys: Capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:  # a usage error: argparse's exit code 2
        run(capsys, "--db", str(tmp_path / "m.db"), "show", "٦٤")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "memstore show: error: argument location: location must be written in the digits "
        "0-9, got '٦٤'"
    )
