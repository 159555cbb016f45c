"""Review of the map's library: what it keeps of a runaway action (one limit, with the same
key), what it shows of a name (one line, bounded, no control character), which texts it
refuses to store, map_state.json files it must not replace, and a room's exits found
through an index (linear in the map's size)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from exporters.map_md import render_map_md
from memstore.errors import MapStateError
from memstore.map_events import (
    ACTION_KEY_MAX,
    ELLIPSIS,
    SHOWN_MAX,
    action_key,
    event_for_turn,
    shown_text,
    stored_action,
    written_exit,
)
from memstore.map_graph import Connection, ExitFailure, MapGraph
from memstore.map_json import dump_map_state, import_map_state, map_state_at_risk, parse_map_state
from memstore.map_sql import check_event
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.map_helpers import KITCHEN, LIVING, WEST, map_event, sample_graph, script_events

LONG_ACTION = "climb " + "very " * 20_000 + "tall tree"


def _moved(action: str, before: int = 1, after: int = 2, turn: int = 1) -> Any:
    event = event_for_turn(
        ZMachineContext(location_before=before, location_after=after, location_after_name="Up"),
        action,
        location_id=before,
        location_name="Forest Path",
        episode=1,
        turn=turn,
    )
    assert event is not None
    return event


# --- 2. one limit, one place: the action as typed is kept with its key --------------------------


#: 206 characters, 202 with runs of spaces as one, a key of 200 that ends in a stop: the
#: kept action (cut at 200) had another key, so one exit became two connections
SPACED_LONG_ACTION = "go" + " x" * 98 + " ." + " " * 5 + "."


@given(st.text(max_size=600) | st.text(alphabet=" .!aİ\tN", max_size=600))
@example(SPACED_LONG_ACTION)
@example("go" + " x" * 98 + "  . !")
def test_the_kept_action_is_bounded_and_has_the_action_s_key(action: str) -> None:
    key = action_key(action)
    kept = stored_action(action)
    assert len(key) <= ACTION_KEY_MAX and len(kept) <= ACTION_KEY_MAX
    assert action_key(kept) == key
    assert action_key(written_exit(key)) == key and len(written_exit(key)) <= ACTION_KEY_MAX
    if len(" ".join(action.split())) > ACTION_KEY_MAX:  # a cut key reads back as itself
        assert action_key(key) == key  # (a short one keeps the rule the stored keys have)
    if len(action) <= ACTION_KEY_MAX:
        assert kept == action  # a command of ordinary length is kept as typed


def test_a_runaway_command_is_stored_by_its_beginning(store: MemoryStore) -> None:
    event = _moved(LONG_ACTION)
    assert len(event.action) <= ACTION_KEY_MAX and event.action.startswith("climb very very")
    assert event.action_key == action_key(LONG_ACTION)
    the_map = MapStore(store)
    the_map.record([event, _moved(LONG_ACTION, turn=2)])  # the same connection again
    graph = the_map.graph()
    (connection,) = graph.connections.values()
    assert connection.action == event.action and connection.verifications == 2
    route = the_map.route(1, 2)
    assert route.actions == (event.action,)
    text = render_map_md(graph)
    assert max(len(line) for line in text.splitlines()) < 2 * ACTION_KEY_MAX
    assert len(the_map.exits_line(1)) < 2 * ACTION_KEY_MAX


def test_a_cut_that_ends_in_a_stop_round_trips_through_map_state_json(store: MemoryStore) -> None:
    # the key of this command used to end in "." after the cut: read back, "." was dropped
    # and the file's own action no longer matched its key, so the export was refused
    action = "x" * (ACTION_KEY_MAX - 1) + ". then some more words"
    the_map = MapStore(store)
    the_map.record([_moved(action)])
    graph = the_map.graph()
    assert parse_map_state(dump_map_state(graph)).graph == graph


def test_the_store_keeps_a_long_action_a_caller_built_itself(store: MemoryStore) -> None:
    event = _moved("pray")._replace(action=LONG_ACTION, action_key=action_key(LONG_ACTION))
    MapStore(store).record([event])
    (connection,) = MapStore(store).graph().connections.values()
    assert connection.action == stored_action(LONG_ACTION)


def test_a_long_exit_in_a_peer_file_is_kept_by_its_beginning(store: MemoryStore) -> None:
    data = {
        "rooms": {"1": {"name": "a"}, "2": {"name": "b"}},
        "connections": {"1": {LONG_ACTION: 2}},
    }
    parsed = parse_map_state(json.dumps(data))
    import_map_state(MapStore(store), parsed)
    (connection,) = MapStore(store).graph().connections.values()
    assert connection.action == stored_action(LONG_ACTION)
    assert connection.action_key == action_key(LONG_ACTION)


# --- 2 and 5. what the map shows a person --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("West of House", "West of House"),
        ("Cellar\x00", "Cellar␀"),
        ("Red\x1b[2J\x1b[31m Room", "Red␛[2J␛[31m Room"),
        ("a\x07b\x7fc\x9bd", "a␇b␡c\ufffdd"),
        ("two\nlines\tand  spaces", "two lines and spaces"),
        ("x" * (SHOWN_MAX + 1), "x" * (SHOWN_MAX - 1) + ELLIPSIS),
        ("x" * SHOWN_MAX, "x" * SHOWN_MAX),
    ],
)
def test_shown_text_is_one_bounded_line_with_control_characters_visible(
    text: str, shown: str
) -> None:
    assert shown_text(text) == shown
    assert len(shown_text(text)) <= SHOWN_MAX


def test_the_shown_map_keeps_keys_ids_and_counts() -> None:
    graph = sample_graph()
    graph.rooms[KITCHEN] = "Kitchen\x1b[2J" + " very" * 100
    shown = graph.shown()
    assert shown.rooms[KITCHEN].startswith("Kitchen␛[2J very") and len(shown.rooms[KITCHEN]) == 100
    assert set(shown.connections) == set(graph.connections)
    assert [c._replace(action="") for c in shown.connections.values()] == [
        c._replace(action="") for c in graph.connections.values()
    ]
    assert shown.failures == graph.failures and shown.pruned == graph.pruned


# --- 3. texts the database cannot store are refused, naming the key -----------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (json.dumps({"rooms": {"1" * 5000: {"name": "x"}}}), 'rooms["1111'),
        (
            '{"rooms": {"1": {"name": "a"}, "2": {"name": "b"}}, '
            '"connections": {"1": {"\\u0000": 2}}}',
            'connections["1"]["\\u0000"] holds a NUL character',
        ),
        ('{"rooms": {"1": {"name": "a\\ud800"}}}', 'rooms["1"]["name"] is not valid Unicode'),
        (
            '{"rooms": {"1": {"name": "a"}, "2": {"name": "b"}}, '
            '"connections": {"1": {"jump\\udc00": 2}}}',
            'connections["1"]["jump\\udc00"] is not valid Unicode',
        ),
        ('{"rooms": {"1": {"name": "a", "exits": ["n\\u0000"]}}}', 'rooms["1"]["exits"] holds'),
        ('{"rooms": {}, "pruned_exits": {"1": ["w\\u0000"]}}', 'pruned_exits["1"] holds a NUL'),
        ('{"rooms": {}, "exit_failure_counts": {"1_\\u0000": 1}}', 'counts["1_\\u0000"] holds'),
        (
            '{"rooms": {"1": {"name": "a"}, "2": {"name": "b"}}, "connections": {"1": {"n": 2}},'
            ' "metadata": {"memstore": {"connections": {"1_north": {"action": "n\\u0000"}}}}}',
            '["1_north"]["action"] holds a NUL character',
        ),
    ],
)
def test_a_hostile_map_state_is_a_map_state_error_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(MapStateError) as raised:
        parse_map_state(text)
    line = str(raised.value)
    assert message in line and line.endswith("; nothing was imported"), line
    assert "\n" not in line and "\x00" not in line and len(line) < 300


def test_a_room_key_of_5000_digits_says_it_is_not_a_location_number() -> None:
    with pytest.raises(MapStateError, match="is not a location number"):
        parse_map_state(json.dumps({"rooms": {"1" * 5000: {"name": "x"}}}))


def test_the_store_refuses_a_map_it_cannot_keep_the_same_on_every_database(
    store: MemoryStore,
) -> None:
    the_map = MapStore(store)
    the_map.record(script_events())
    before = the_map.graph()
    broken = before.copy()
    broken.rooms[KITCHEN] = "Kitchen\x00"
    with pytest.raises(ValueError, match="holds a NUL character"):
        the_map.replace(broken)
    event = map_event(WEST, "n", LIVING)._replace(to_name="Living\x00")
    with pytest.raises(ValueError, match="to_name holds a NUL character"):
        the_map.record([event])
    with pytest.raises(ValueError, match="key"):
        check_event(map_event(WEST, "pray", WEST)._replace(action_key="\x00"))
    assert the_map.graph() == before


# --- 1. which map_state.json an export may replace ----------------------------------------------


def test_a_map_state_whose_map_the_database_has_may_be_replaced() -> None:
    graph = sample_graph()
    assert map_state_at_risk(graph, "") is None
    assert map_state_at_risk(graph, dump_map_state(graph)) is None
    smaller = MapGraph().apply_all(script_events()[:3])
    assert map_state_at_risk(graph, dump_map_state(smaller)) is None  # the map grew since


def test_a_map_state_the_database_lacks_or_no_map_state_is_at_risk() -> None:
    graph = MapGraph().apply_all(script_events()[:3])
    problem = map_state_at_risk(graph, dump_map_state(sample_graph()))
    assert problem is not None and "that this database's map does not have" in problem
    assert "rooms and" in problem and "connections" in problem
    problem = map_state_at_risk(graph, "# README\n")
    assert problem is not None and problem.startswith("is not a map_state.json memstore reads")
    assert "nothing was imported" not in problem


# --- 4. a room's exits through an index of the map's rows by room -------------------------------


def _naive_exits(graph: MapGraph, room: int) -> Any:
    """What ``exits`` answers, worked out from a fresh graph (no index kept)."""
    return MapGraph(
        dict(graph.rooms), dict(graph.connections), dict(graph.failures), dict(graph.pruned)
    ).exits(room)


def test_exits_follow_every_change_after_the_index_was_built() -> None:
    graph = MapGraph()
    events = script_events()
    for event in events:  # the index is built between events, then changed by each
        graph.apply(event)
        for room in list(graph.rooms):
            assert graph.exits(room) == _naive_exits(graph, room)
    reread = parse_map_state(dump_map_state(graph)).graph  # filled directly by the reader
    for room in graph.rooms:
        assert reread.exits(room) == graph.exits(room)
    graph.exits(WEST)
    graph.connections[(WEST, "pray")] = graph.connections[(WEST, "north")]._replace(
        action="pray", action_key="pray", direction=None
    )  # a row added directly after the index was built
    assert "pray" in [e.command for e in graph.exits(WEST).exits]


class _CountedTable(dict[Any, Any]):
    """A table that counts how often it is read whole (iterated, or its items listed)."""

    reads = 0

    def __iter__(self) -> Any:
        _CountedTable.reads += 1
        return super().__iter__()

    def items(self) -> Any:
        _CountedTable.reads += 1
        return super().items()


def test_every_room_s_exits_reads_the_map_s_tables_once_not_once_per_room() -> None:
    rooms = 2_000
    graph = MapGraph(rooms={room: f"Room {room}" for room in range(rooms)})
    for room in range(rooms):
        for direction, to in (("north", (room + 1) % rooms), ("south", (room - 1) % rooms)):
            graph.connections[(room, direction)] = Connection(
                room, direction, direction, direction, to, 1, 0, 1, 1, 1, 1
            )
    graph.failures[(0, "west")] = ExitFailure(0, "west", 1, 1, 1)
    graph.connections = _CountedTable(graph.connections)
    graph.failures = _CountedTable(graph.failures)
    graph.pruned = _CountedTable(graph.pruned)
    _CountedTable.reads = 0
    every = [graph.exits(room) for room in range(rooms)]
    assert all(len(found.exits) == 2 for found in every) and every[0].blocked == ("west",)
    assert _CountedTable.reads <= 3  # once each: linear in the map's size, not quadratic
    render_map_md(graph)
    assert _CountedTable.reads <= 10


@pytest.mark.parametrize(
    ("action", "key"),
    [("go . .", "go ."), ("n. .", "n."), ("pray ! !", "pray !"), ("Open  Window.", "open window")],
)
def test_keys_are_made_by_the_rule_the_stored_keys_were_made_by(action: str, key: str) -> None:
    """A key rule that stripped every trailing stop once split the maps written before it
    (``go .`` stored, ``go`` recorded beside it, each verified half as often), and their
    own exports no longer imported: short actions keep the rule they were stored by."""
    assert action_key(action) == key


def test_a_table_given_anew_drops_the_index_whatever_its_address() -> None:
    """Round 3: the index was keyed by the tables' ids, and a new table built where the
    old one was freed answered from the old keys (KeyError, or a wrong exit list)."""
    graph = MapGraph()
    graph.apply(_moved("north", before=1, after=2))
    for attempt in range(50):
        assert [e.command for e in graph.exits(1).exits]  # the index is built
        graph.connections = {
            (1, f"up{attempt}"): graph.connections[next(iter(graph.connections))]._replace(
                action_key=f"up{attempt}", action=f"up{attempt}", direction=None
            )
        }
        graph.connections = dict(graph.connections)  # assigned twice: the first is freed
        assert [e.command for e in graph.exits(1).exits] == [f"up{attempt}"]
    copy = MapGraph(**dataclasses.asdict(graph))  # the index is no field
    assert copy.connections == graph.connections


@pytest.mark.parametrize("action", ["go . .", "wait. .", "go north. .", "go ! .", "pray ! !"])
def test_a_key_ending_in_a_stop_round_trips_through_map_state_json(
    store: MemoryStore, action: str
) -> None:
    """Round 3: an action with two runs of trailing stops (``wait. .``) has a key that ends
    in one (``wait.``), which is not its own key: written out as it was, the database's own
    map_state.json could not be imported, nor replaced by the next export without --force."""
    the_map = MapStore(store)
    the_map.record([_moved(action)])
    graph = the_map.graph()
    assert parse_map_state(dump_map_state(graph)).graph == graph
