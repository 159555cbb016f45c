"""ZorkGPT's map_state.json (memstore.map_json): written in its shape, read back losslessly,
a peer's file read with what memstore has no place for reported, bad values refused with
the key named, and nothing partly written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memstore.errors import MapStateError
from memstore.map_graph import MapGraph
from memstore.map_json import (
    TOP_LEVEL_KEYS,
    dump_map_state,
    import_map_state,
    map_state,
    parse_map_state,
)
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.map_helpers import BEHIND, KITCHEN, WEST, record_sample, sample_graph

#: the example of spec 003 ("Cross-Episode Map Persistence"), as ZorkGPT writes it
ZORKGPT_EXAMPLE = {
    "rooms": {"15": {"id": 15, "name": "West of House", "exits": ["north", "south", "west"]}},
    "connections": {"15": {"north": 180}},
    "connection_confidence": {"15_north": 0.95},
    "connection_verifications": {"15_north": 3},
    "exit_failure_counts": {"15_west": 2},
    "pruned_exits": {"15": ["east"]},
    "metadata": {
        "version": "1.0",
        "total_rooms": 42,
        "total_connections": 67,
        "timestamp": "2025-10-31T12:00:00Z",
    },
}


def as_text(data: dict[str, Any]) -> str:
    return json.dumps(data)


def test_export_import_export_is_identical(store: MemoryStore, tmp_path: Any) -> None:
    exported = dump_map_state(record_sample(store).graph())
    with MemoryStore.open(tmp_path / "other.db") as other:
        import_map_state(MapStore(other), parse_map_state(exported))
        again = dump_map_state(MapStore(other).graph())
        assert MapStore(other).graph() == MapStore(store).graph()  # every count and time
    assert again == exported


def test_the_file_has_zorkgpt_s_shape() -> None:
    data = map_state(sample_graph())
    assert tuple(data) == TOP_LEVEL_KEYS
    assert data["rooms"][str(WEST)] == {"id": WEST, "name": "West of House", "exits": ["north"]}
    assert data["rooms"][str(BEHIND)]["exits"] == ["enter window"]
    assert data["connections"][str(WEST)] == {"north": 137}
    assert data["connections"][str(KITCHEN)] == {"west": 75, "up": 187}
    assert data["connection_confidence"][f"{WEST}_north"] == 0.75
    assert data["connection_confidence"][f"{BEHIND}_enter window"] == 0.5
    assert data["connection_verifications"][f"{WEST}_north"] == 2
    assert data["exit_failure_counts"] == {f"{WEST}_west": 1, f"{BEHIND}_west": 3}
    assert data["pruned_exits"] == {str(BEHIND): ["west"]}
    metadata = data["metadata"]
    assert (metadata["version"], metadata["total_rooms"], metadata["total_connections"]) == (
        "1.0",
        9,
        12,
    )
    window = metadata["memstore"]["connections"][f"{BEHIND}_enter window"]
    assert window == {"action": "Enter Window", "failures": 1, "first_seen": [1, 7],
                      "last_seen": [1, 7]}  # fmt: skip


def test_the_text_is_deterministic_and_has_no_timestamp() -> None:
    text = dump_map_state(sample_graph())
    assert text == dump_map_state(sample_graph()) and text.endswith("}\n")
    assert "timestamp" not in text
    assert list(json.loads(text)["rooms"]) == [str(r) for r in sorted(sample_graph().rooms)]


def test_an_empty_map_round_trips() -> None:
    text = dump_map_state(MapGraph())
    parsed = parse_map_state(text)
    assert parsed.graph == MapGraph() and parsed.notes == ()
    assert dump_map_state(parsed.graph) == text


def test_a_zorkgpt_file_is_read_and_what_has_no_place_is_reported() -> None:
    parsed = parse_map_state(as_text(ZORKGPT_EXAMPLE))
    graph = parsed.graph
    assert graph.rooms == {15: "West of House", 180: ""}  # 180 added, unnamed
    north = graph.connections[(15, "north")]
    assert (north.to_id, north.verifications, north.failures, north.direction) == (
        180,
        3,
        0,
        "north",
    )
    assert (north.first_episode, north.last_episode) == (0, 0)  # unknown times
    assert graph.failures[(15, "west")].failures == 2
    assert (15, "east") in graph.pruned
    assert parsed.notes == (
        "rooms: 2 listed exit(s) with no connection, left out (memstore keeps the exits that "
        "moved the player): 15_south, 15_west",
        "rooms: 1 room(s) used elsewhere but not in rooms, added without a name: 180",
        "connection_confidence: 1 value(s) that memstore's rule (v + 1) / (v + f + 2) does "
        "not give for the counts kept; memstore keeps counts and works confidence out from "
        "them: 15_north (0.95 -> 0.80)",
        "metadata.total_rooms is 42 but the file holds 2",
        "metadata.total_connections is 67 but the file holds 1",
    )


def test_failures_are_worked_out_from_a_peer_s_confidence() -> None:
    data = json.loads(as_text(ZORKGPT_EXAMPLE))
    data["connection_confidence"]["15_north"] = 0.5  # v=3: (3+1)/(3+f+2) = 0.5 at f=3
    data["metadata"] = {}
    parsed = parse_map_state(as_text(data))
    assert parsed.graph.connections[(15, "north")].failures == 3
    assert not any("connection_confidence" in note for note in parsed.notes)
    del data["connection_verifications"]  # taken at least once
    del data["connection_confidence"]
    north = parse_map_state(as_text(data)).graph.connections[(15, "north")]
    assert (north.verifications, north.failures) == (1, 0)


def test_unknown_keys_are_reported_one_line_each() -> None:
    data = json.loads(as_text(ZORKGPT_EXAMPLE))
    data["agent_notes"] = []
    data["rooms"]["16"] = {"id": 16, "name": "Forest", "visited": True}
    data["rooms"]["15"]["visited"] = False
    data["metadata"]["memstore"] = {"colour": "blue"}
    notes = parse_map_state(as_text(data)).notes
    assert notes[:3] == (
        'unknown key "agent_notes", left out',
        'unknown key "colour" in metadata.memstore, left out',
        'unknown key "visited" in rooms (2 times), left out',
    )
    assert not any("unknown key" in note for note in notes[3:])


def test_exits_are_canonicalised_and_actions_kept() -> None:
    data = {
        "rooms": {"1": {"id": 1, "name": "A"}, "2": {"id": 2, "name": "B"}},
        "connections": {"1": {"N": 2, "Enter  Window": 2}, "2": {"go south": 1}},
        "connection_verifications": {"1_n": 2},
        "pruned_exits": {"2": ["w", "jump"]},
        "exit_failure_counts": {"2_open door": 4},
    }
    parsed = parse_map_state(as_text(data))
    connections = parsed.graph.connections
    assert set(connections) == {(1, "north"), (1, "enter window"), (2, "south")}
    assert connections[(1, "north")].verifications == 2
    assert connections[(1, "enter window")].direction is None
    assert set(parsed.graph.pruned) == {(2, "west")}
    assert any("2_jump" in note and "pruned" in note for note in parsed.notes)
    assert any("2_open door" in note for note in parsed.notes)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["connection_verifications"].update({"15_north": "three"}),
            'connection_verifications["15_north"] must be a whole number 0 or more, got "three"',
        ),
        (
            lambda d: d["connection_verifications"].update({"15_north": True}),
            'connection_verifications["15_north"] must be a whole number 0 or more, got true',
        ),
        (
            lambda d: d["connection_verifications"].update({"15_north": -1}),
            'connection_verifications["15_north"] must be a whole number 0 or more, got -1',
        ),
        (  # review S5 B F11: this said "must be a whole number 0 or more"
            lambda d: d["connection_verifications"].update({"15_north": 2**63}),
            'connection_verifications["15_north"] must be at most 2147483647, '
            "got 9223372036854775808",
        ),
        (
            lambda d: d["connection_confidence"].update({"15_north": 1.5}),
            'connection_confidence["15_north"] must be a number from 0 to 1, got 1.5',
        ),
        (
            lambda d: d["exit_failure_counts"].update({"15_west": 2.5}),
            'exit_failure_counts["15_west"] must be a whole number 0 or more, got 2.5',
        ),
        (
            lambda d: d["rooms"].update({"x": {"id": 1, "name": "X"}}),
            'rooms["x"] is not a location number',
        ),
        (
            lambda d: d["rooms"].update({"015": {"id": 15, "name": "X"}}),
            'rooms["015"] is not a location number',
        ),
        (
            lambda d: d["rooms"]["15"].update({"id": 16}),
            'rooms["15"]["id"] is 16, not 15',
        ),
        (
            lambda d: d["rooms"]["15"].update({"name": 7}),
            'rooms["15"]["name"] must be a string, got 7',
        ),
        (
            lambda d: d["connections"]["15"].update({"north": "180"}),
            'connections["15"]["north"] must be a whole number 0 or more, got "180"',
        ),
        (
            lambda d: d["connections"]["15"].update({"n": 180}),
            'connections["15"]["n"] is the same exit as "north" (north)',
        ),
        (
            lambda d: d["connections"]["15"].update({"north": 2**63}),
            'connections["15"]["north"] must be at most 9223372036854775807, got '
            "9223372036854775808",
        ),
        (
            lambda d: d["connection_verifications"].update({"15north": 1}),
            'connection_verifications["15north"] is not "<room id>_<exit>"',
        ),
        (
            lambda d: d["connection_verifications"].update({"15_n": 1}),
            'connection_verifications["15_n"] is the same exit as "15_north"',
        ),
        (lambda d: d.update({"pruned_exits": ["east"]}), "pruned_exits must be an object"),
        (lambda d: d["pruned_exits"].update({"15": "east"}), 'pruned_exits["15"] must be a list'),
        (lambda d: d.update({"metadata": {"memstore": []}}), 'metadata["memstore"] must be an'),
    ],
)
def test_bad_values_are_refused_naming_their_key(change: Any, message: str) -> None:
    data = json.loads(as_text(ZORKGPT_EXAMPLE))
    change(data)
    with pytest.raises(MapStateError) as raised:
        parse_map_state(as_text(data))
    text = str(raised.value)
    assert message in text and text.endswith("nothing was imported") and "\n" not in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "the top level must be an object"),
        ('{"connections": {}}', 'it has no "rooms"'),
        ("{not json", "not JSON (Expecting property name"),
        ('{"rooms": {}, "x": NaN}', "the value NaN is not a number JSON allows"),
        ('{"rooms": {}, "x": -Infinity}', "the value -Infinity is not a number JSON allows"),
        ('{"rooms": {"1": {"id": 1}, "1": {"id": 1}}}', 'key "1" appears twice in one object'),
        ("[" * 100_000, "nested too deeply"),
        ('{"rooms": {}, "x": ' + "1" * 5000 + "}", "not readable JSON"),
    ],
)
def test_files_that_are_not_a_map_state_are_refused(text: str, message: str) -> None:
    with pytest.raises(MapStateError, match=message.replace("(", r"\(")):
        parse_map_state(text)


def test_an_import_never_overwrites_a_map_unless_asked(store: MemoryStore) -> None:
    the_map = record_sample(store)
    before = the_map.graph()
    peer = parse_map_state(as_text(ZORKGPT_EXAMPLE))
    with pytest.raises(MapStateError, match=r"already has a map \(9 rooms, 12 connections\)"):
        import_map_state(the_map, peer)
    assert the_map.graph() == before
    done = import_map_state(the_map, peer, replace=True)
    assert done == (2, 1, 9, 12)
    assert the_map.graph() == peer.graph


def test_a_refused_file_writes_nothing(store: MemoryStore) -> None:
    the_map = record_sample(store)
    before = the_map.graph()
    data = json.loads(dump_map_state(before))
    data["pruned_exits"]["1"] = [3]  # the last table read: everything else was fine
    with pytest.raises(MapStateError, match=r'pruned_exits\["1"\] must be a string'):
        import_map_state(the_map, parse_map_state(as_text(data)), replace=True)
    assert the_map.graph() == before


def test_an_import_is_one_transaction(store: MemoryStore, monkeypatch: Any) -> None:
    the_map = record_sample(store)
    before = the_map.graph()
    peer = parse_map_state(as_text(ZORKGPT_EXAMPLE))

    def fail_after_clearing(graph: MapGraph) -> None:
        with store.transaction(write=True) as conn:
            conn.exec_driver_sql("DELETE FROM map_connections")
            raise RuntimeError("disk gone")

    monkeypatch.setattr(the_map, "replace", fail_after_clearing)
    with pytest.raises(RuntimeError):
        import_map_state(the_map, peer, replace=True)
    assert MapStore(store).graph() == before
