"""map_state.json read against the map's own rules (memstore.map_json_rules): what neither
memstore's recorder nor ZorkGPT writes is refused, what only the peer writes is brought to
memstore's rules with one warning per kind, and what memstore itself writes is kept."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from memstore.errors import MapStateError
from memstore.manager import SimpleMemoryManager
from memstore.map_graph import MapGraph
from memstore.map_json import dump_map_state, import_map_state, parse_map_state
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.cli_helpers import one_error_line, run
from tests.map_helpers import map_event, record_sample

#: the reviewer's file: a pruned exit taken 5 times, and a room connected to itself
REVIEWED: dict[str, Any] = {
    "rooms": {
        "15": {"id": 15, "name": "West of House", "exits": ["north"]},
        "180": {"id": 180, "name": "North of House", "exits": []},
    },
    "connections": {"15": {"north": 180}, "180": {"up": 180}},
    "connection_verifications": {"15_north": 5, "180_up": 3},
    "pruned_exits": {"15": ["north"]},
}


def without_self_loop() -> dict[str, Any]:
    data = json.loads(json.dumps(REVIEWED))
    data["connections"]["180"] = {"south": 15}
    data["connection_verifications"] = {"15_north": 5, "180_south": 1}
    return data


# --- a pruned exit that the file also took: the peer writes it ---------------------------------


def test_a_pruned_exit_that_was_taken_is_unpruned_with_one_warning() -> None:
    parsed = parse_map_state(json.dumps(without_self_loop()))
    graph = parsed.graph
    assert (15, "north") in graph.connections and (15, "north") not in graph.pruned
    assert graph.connections[(15, "north")].verifications == 5
    assert graph.route(15, 180).actions == ("north",)
    lines = [note for note in parsed.notes if note.startswith("pruned_exits:")]
    assert len(lines) == 1 and "1 pruned exit " in lines[0] and "un-pruned" in lines[0]
    assert lines[0].endswith(": 15_north")


def test_the_peer_s_own_pruning_is_counted_one_line_for_taken_one_for_inferred() -> None:
    # ZorkGPT's prune_invalid_exits prunes any exit of room.exits (add_connection put the
    # exits it took there, and the inferred way back) that failed 3 times, and
    # add_connection never un-prunes: connections, failures and pruned_exits all hold it
    data = {
        "rooms": {
            "15": {"id": 15, "name": "West of House", "exits": ["north"]},
            "180": {"id": 180, "name": "North of House", "exits": ["south", "east"]},
        },
        "connections": {"15": {"north": 180}, "180": {"south": 15, "east": 15, "up": 15}},
        # 15 north taken twice at confidence 1.0 (ZorkGPT's arithmetic: 1.0, then at most
        # 1.0), so 180 south at 0.9 is the way back add_connection inferred
        "connection_confidence": {"15_north": 1.0, "180_south": 0.9, "180_east": 1.0},
        "connection_verifications": {"15_north": 2, "180_south": 1, "180_east": 3},
        "exit_failure_counts": {"180_south": 3, "180_east": 4, "15_west": 3, "180_up": 5},
        "pruned_exits": {"180": ["east", "south", "up"], "15": ["west"]},
    }
    parsed = parse_map_state(json.dumps(data))
    graph = parsed.graph
    # 180 south is the inferred way back, never taken: left out, its exit still failed and
    # pruned; 180 up has no confidence: taken, as add_connection writes one
    assert set(graph.pruned) == {(15, "west"), (180, "south")}
    assert (180, "south") not in graph.connections
    assert graph.failures[(180, "south")].failures == 3  # the failures are kept
    assert graph.failures[(180, "east")].failures == 4
    assert [graph.connections[(180, d)].failures for d in ("east", "up")] == [4, 5]
    lines = [note for note in parsed.notes if note.startswith("pruned_exits:")]
    assert len(lines) == 1 and lines[0].startswith("pruned_exits: 2 pruned exits that")
    assert "un-pruned" in lines[0] and lines[0].endswith(": 180_east, 180_up")
    inferred = [note for note in parsed.notes if "inferred way(s) back" in note]
    assert len(inferred) == 1 and inferred[0].endswith(": 180_south")
    raised = [note for note in parsed.notes if note.startswith("exit_failure_counts:")]
    assert len(raised) == 1 and raised[0].startswith("exit_failure_counts: 2 failed exits")


def test_import_json_warns_and_routes_over_the_unpruned_exit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    peer, db = tmp_path / "map_state.json", tmp_path / "peer.db"
    peer.write_text(json.dumps(without_self_loop()), encoding="utf-8")
    code, stdout, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "imported" in stdout
    warnings = [line for line in err.splitlines() if "un-pruned" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"memstore: warning: {peer}: ")
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "15", "180")
    assert code == 0 and "1. north" in stdout


# --- a room connected to itself: neither memstore nor the peer writes it -----------------------


def test_a_room_connected_to_itself_is_refused_naming_the_first_key() -> None:
    data = json.loads(json.dumps(REVIEWED))
    data["connections"]["15"]["in"] = 15  # a later self-loop in the same file
    data["connections"] = {"180": data["connections"]["180"], "15": data["connections"]["15"]}
    with pytest.raises(MapStateError) as refused:
        parse_map_state(json.dumps(data))
    message = str(refused.value)
    assert message.startswith('connections["180"]["up"] leads from room 180 back to room 180')
    assert message.endswith("; nothing was imported") and "\n" not in message


def test_import_json_of_a_self_loop_is_one_error_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    peer, db = tmp_path / "pj.json", tmp_path / "pj.db"
    peer.write_text(json.dumps(REVIEWED), encoding="utf-8")
    with MemoryStore.open(db) as store:
        before = record_sample(store).graph()
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer), "--replace")
    assert code == 1
    one_error_line(err, f'{peer}: connections["180"]["up"] leads from room 180 back')
    with MemoryStore.open(db, read_only=True) as store:
        assert MapStore(store).graph() == before


# --- first_seen later than last_seen: memstore's own recorder writes it -------------------------


def _moved(manager: SimpleMemoryManager) -> None:
    manager.record_action_outcome(
        64,
        "West of House",
        "north",
        "North of House",
        ZMachineContext(location_before=64, location_after=137, location_after_name="North"),
    )
    manager.flush()


def test_a_connection_last_seen_in_an_earlier_episode_is_kept_as_written(
    store: MemoryStore, tmp_path: Path
) -> None:
    # two agents share the database: the one numbered first (the lower episode) takes the
    # exit after the other did; the recorder keeps the latest event's time as last_seen
    first_agent, second_agent = SimpleMemoryManager(store), SimpleMemoryManager(store)
    assert first_agent.episode < second_agent.episode
    _moved(second_agent)
    _moved(first_agent)
    graph = MapStore(store).graph()
    north = graph.connections[(64, "north")]
    first, last = (north.first_episode, north.first_turn), (north.last_episode, north.last_turn)
    assert first > last
    exported = dump_map_state(graph)
    parsed = parse_map_state(exported)
    assert parsed.notes == ()
    with MemoryStore.open(tmp_path / "other.db") as other:
        import_map_state(MapStore(other), parsed)
        assert MapStore(other).graph() == graph
        assert dump_map_state(MapStore(other).graph()) == exported


def test_memstore_s_own_file_reads_back_without_a_warning(store: MemoryStore) -> None:
    exported = dump_map_state(record_sample(store).graph())
    parsed = parse_map_state(exported)
    assert parsed.notes == ()
    assert dump_map_state(parsed.graph) == exported


def test_maps_the_recorder_writes_never_meet_a_rule(store: MemoryStore) -> None:
    # random turns in a few rooms (moves, blocked directions that get pruned and then
    # taken, actions that fail, episodes out of order): the file reads back unchanged
    rng = random.Random(3)
    actions = ("n", "s", "e", "w", "up", "d", "in", "out", "enter window", "pray")
    events = []
    for turn in range(1, 400):
        before = rng.randint(1, 8)
        after = rng.randint(1, 8) if rng.random() < 0.3 else before
        action = rng.choice(actions)
        events.append(map_event(before, action, after, turn, episode=rng.randint(1, 4)))
    the_map = MapStore(store)
    the_map.record(events)
    graph = the_map.graph()
    assert graph == MapGraph().apply_all(events)
    assert graph.pruned and all(c.from_id != c.to_id for c in graph.connections.values())
    exported = dump_map_state(graph)
    parsed = parse_map_state(exported)
    assert parsed.notes == () and parsed.graph == graph
    assert dump_map_state(parsed.graph) == exported


# --- ZorkGPT's inferred way back that failed: counted on the connection, kept pruned -----------

#: the reviewer's file (round 2, finding 3): add_connection(15, "north", 180) also wrote the
#: way back 180 south -> 15 (confidence 1.0 x 0.9, 1 verification), never taken; it failed
#: three times (track_exit_failure) and prune_invalid_exits pruned it
INFERRED: dict[str, Any] = {
    "rooms": {
        "15": {"id": 15, "name": "West of House", "exits": ["north"]},
        "180": {"id": 180, "name": "North of House", "exits": ["south"]},
    },
    "connections": {"15": {"north": 180}, "180": {"south": 15}},
    "connection_confidence": {"15_north": 1.0, "180_south": 0.9},
    "connection_verifications": {"15_north": 1, "180_south": 1},
    "exit_failure_counts": {"180_south": 3},
    "pruned_exits": {"180": ["south"]},
}


def test_an_inferred_way_back_that_failed_is_what_the_recorder_would_hold() -> None:
    # never taken, failed three times: the recorder holds the failures and the pruning of
    # the direction, and no connection (review I, finding 3: the way back is left out)
    parsed = parse_map_state(json.dumps(INFERRED))
    graph = parsed.graph
    assert (180, "south") not in graph.connections
    assert graph.failures[(180, "south")].failures == 3
    assert (180, "south") in graph.pruned  # never taken: no success to un-prune it
    assert not graph.route(180, 15).found and graph.route(15, 180).actions == ("north",)
    assert graph.connections[(15, "north")].failures == 0
    assert not any("as taken" in note or "un-pruned" in note for note in parsed.notes)
    assert not any(note.startswith("exit_failure_counts:") for note in parsed.notes)
    assert not any(note.startswith("pruned_exits:") for note in parsed.notes)
    inferred = [note for note in parsed.notes if "inferred way(s) back" in note]
    assert len(inferred) == 1 and inferred[0].endswith(": 180_south")


def test_failures_of_a_taken_exit_are_counted_on_its_connection_pruned_or_not() -> None:
    data = json.loads(json.dumps(INFERRED))
    data["connection_verifications"] = {"15_north": 4, "180_south": 2}  # both taken
    data["connection_confidence"] = {"15_north": 1.0, "180_south": 1.0}
    data["exit_failure_counts"] = {"180_south": 3, "15_north": 1}
    graph = parse_map_state(json.dumps(data)).graph
    assert graph.connections[(15, "north")].failures == 1
    assert graph.connections[(180, "south")].failures == 3
    assert (180, "south") not in graph.pruned  # taken: a success un-prunes it
    assert not graph.route(180, 15).found  # 3 / 7: below the route threshold


def test_import_json_of_the_inferred_way_back_routes_around_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    peer, db = tmp_path / "peer.json", tmp_path / "peer.db"
    peer.write_text(json.dumps(INFERRED), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "un-pruned" not in err and "1 inferred way(s) back" in err
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "180", "15")
    assert "1. south" not in stdout
    exported = tmp_path / "again.json"
    code, _, _ = run(capsys, "--db", str(db), "map", "export-json", str(exported))
    assert code == 0
    again = tmp_path / "again.db"
    code, _, err = run(capsys, "--db", str(again), "map", "import-json", str(exported))
    assert code == 0 and err == ""
    with MemoryStore.open(db, read_only=True) as one, MemoryStore.open(again) as two:
        assert MapStore(two).graph() == MapStore(one).graph()
    assert (again_graph := parse_map_state(exported.read_text(encoding="utf-8")).graph).pruned
    assert dump_map_state(again_graph) == exported.read_text(encoding="utf-8")
