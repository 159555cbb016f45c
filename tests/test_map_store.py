"""The map (issue 16): what a turn records, the confidence rule, queries, the exits line.

Rooms and turns here are made up; tests/test_map_ground_truth.py plays the real game.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.config import MemstoreConfig
from memstore.manager import SimpleMemoryManager
from memstore.map_graph import (
    BLOCKED,
    DIRECTIONS,
    MOVED,
    STAYED,
    Connection,
    MapEvent,
    MapGraph,
    PrunedExit,
    action_key,
    canonical_direction,
    confidence,
    event_for_turn,
    exits_line,
    exits_line_variants,
)
from memstore.map_store import MapStore, MapView
from memstore.store import MemoryStore
from memstore.tokens import count_tokens
from memstore.triggers import ZMachineContext

WEST, NORTH, BEHIND, KITCHEN, LIVING, ATTIC, FOREST = 64, 137, 85, 27, 75, 187, 87
NAMES = {
    WEST: "West of House",
    NORTH: "North of House",
    BEHIND: "Behind House",
    KITCHEN: "Kitchen",
    LIVING: "Living Room",
    ATTIC: "Attic",
    FOREST: "Forest",
}


def context(before: int, after: int, *, died: bool = False) -> ZMachineContext:
    return ZMachineContext(
        location_before=before, location_after=after, died=died, location_after_name=NAMES[after]
    )


def event(
    before: int, action: str, after: int, turn: int = 1, *, episode: int = 1, prune_after: int = 3
) -> MapEvent:
    found = event_for_turn(
        context(before, after),
        action,
        location_id=before,
        location_name=NAMES[before],
        episode=episode,
        turn=turn,
        prune_after=prune_after,
    )
    assert found is not None
    return found


def recorded(store: MemoryStore, *steps: tuple[int, str, int], prune_after: int = 3) -> MapStore:
    """A MapStore over ``store`` with ``steps`` (before, action, after) recorded in order."""
    the_map = MapStore(store)
    the_map.record(
        event(before, action, after, turn, prune_after=prune_after)
        for turn, (before, action, after) in enumerate(steps, 1)
    )
    return the_map


def play(manager: SimpleMemoryManager, *steps: tuple[int, str, int], response: str = "") -> None:
    for before, action, after in steps:
        manager.record_action_outcome(
            before, NAMES[before], action, response, context(before, after)
        )


@pytest.fixture
def manager(store: MemoryStore) -> SimpleMemoryManager:
    return SimpleMemoryManager(store, MemstoreConfig(), run_id="map")


# --- directions and confidence -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "direction"),
    [
        ("n", "north"),
        ("N", "north"),
        ("north", "north"),
        ("go north", "north"),
        ("Walk  NORTH.", "north"),
        ("ne", "northeast"),
        ("nw", "northwest"),
        ("Se", "southeast"),
        ("sw", "southwest"),
        ("u", "up"),
        ("d", "down"),
        ("go up", "up"),
        ("in", "in"),
        ("out", "out"),
        ("enter", "in"),
        ("exit", "out"),
        ("go inside", "in"),
    ],
)
def test_direction_commands_are_canonicalised(typed: str, direction: str) -> None:
    assert canonical_direction(typed) == direction
    assert action_key(typed) == direction


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        ("Enter  Window", "enter window"),
        ("climb tree", "climb tree"),
        ("Pray", "pray"),
        ("go to the kitchen", "go to the kitchen"),
        ("north door", "north door"),
    ],
)
def test_other_actions_are_labelled_by_their_normalised_text(typed: str, key: str) -> None:
    assert canonical_direction(typed) is None
    assert action_key(typed) == key


def test_confidence_is_the_rule_of_succession() -> None:
    assert confidence(0, 0) == 0.5
    assert confidence(1, 0) == pytest.approx(2 / 3)
    assert confidence(2, 1) == pytest.approx(0.6)
    assert confidence(1, 1) == 0.5  # not above the default threshold: not routed
    assert confidence(30, 0) < 1


# --- what a turn records -------------------------------------------------------------------------


def test_a_move_is_a_change_of_location_id() -> None:
    assert event(WEST, "N", NORTH).kind == MOVED
    assert event(WEST, "W", WEST).kind == BLOCKED
    assert event(WEST, "open mailbox", WEST).kind == STAYED
    assert event(BEHIND, "enter window", KITCHEN).kind == MOVED


def test_a_death_records_nothing() -> None:
    died = context(KITCHEN, FOREST, died=True)
    assert event_for_turn(died, "s", location_id=KITCHEN, location_name="Kitchen", episode=1,
                          turn=3) is None  # fmt: skip
    unknown = ZMachineContext(location_before=KITCHEN)
    assert event_for_turn(unknown, "s", location_id=KITCHEN, location_name="", episode=1,
                          turn=3) is None  # fmt: skip


def test_the_manager_records_moves_from_location_ids_never_from_text(
    store: MemoryStore, manager: SimpleMemoryManager
) -> None:
    # the game says the player went somewhere; the location id says they did not
    play(manager, (WEST, "n", WEST), response="You are in the North of House.")
    play(manager, (WEST, "e", BEHIND), response="Nothing happens.")
    manager.flush()
    the_map = MapStore(store)
    here = the_map.exits(WEST)
    assert [(e.command, e.to_id) for e in here.exits] == [("east", BEHIND)]
    assert here.blocked == ("north",)


def test_the_manager_records_no_exit_for_a_death(
    store: MemoryStore, manager: SimpleMemoryManager
) -> None:
    manager.record_action_outcome(
        KITCHEN, "Kitchen", "s", "**** You have died ****", context(KITCHEN, FOREST, died=True)
    )
    manager.flush()
    the_map = MapStore(store)
    assert the_map.rooms() == []
    assert the_map.exits(KITCHEN).reason is not None


def test_a_direction_that_fails_k_times_and_never_succeeded_is_pruned(store: MemoryStore) -> None:
    the_map = recorded(store, (WEST, "e", WEST), (WEST, "go east", WEST))
    assert the_map.exits(WEST).blocked == ("east",) and the_map.exits(WEST).pruned == ()
    the_map.record([event(WEST, "E", WEST, 3)])
    here = the_map.exits(WEST)
    assert here.pruned == ("east",) and here.blocked == () and "east" not in here.untried
    graph = the_map.graph()
    assert graph.failures[(WEST, "east")].failures == 3
    assert graph.pruned[(WEST, "east")] == PrunedExit(WEST, "east", 1, 3)


def test_k_is_configurable(tmp_path: Path) -> None:
    config = MemstoreConfig(map_prune_after=1)
    with MemoryStore.open(tmp_path / "k.db", config=config) as store:
        manager = SimpleMemoryManager(store, config)
        play(manager, (WEST, "east", WEST))
        manager.flush()
        assert manager.map.exits(WEST).pruned == ("east",)


def test_an_exit_that_once_succeeded_is_never_pruned_but_stops_being_routed(
    store: MemoryStore,
) -> None:
    the_map = recorded(store, *[(BEHIND, "w", KITCHEN)], *[(BEHIND, "w", BEHIND)] * 5)
    (west,) = the_map.exits(BEHIND).exits
    assert (west.verifications, west.failures, west.routable) == (1, 5, False)
    assert the_map.exits(BEHIND).pruned == ()
    assert not the_map.route(BEHIND, KITCHEN).found


def test_a_success_unprunes_the_exit(store: MemoryStore) -> None:
    # the kitchen window: closed three times, then opened
    the_map = recorded(store, *[(BEHIND, "w", BEHIND)] * 3)
    assert the_map.exits(BEHIND).pruned == ("west",)
    the_map.record([event(BEHIND, "W", KITCHEN, 5)])
    here = the_map.exits(BEHIND)
    assert here.pruned == () and [e.to_id for e in here.exits] == [KITCHEN]
    assert the_map.route(BEHIND, KITCHEN).actions == ("west",)


def test_a_new_destination_restarts_the_count_and_counts_a_failure(store: MemoryStore) -> None:
    # a teleport told by what happens next: the same exit lands somewhere else
    the_map = recorded(store, (LIVING, "d", KITCHEN), (LIVING, "d", KITCHEN), (LIVING, "d", ATTIC))
    (down,) = the_map.exits(LIVING).exits
    assert (down.to_id, down.verifications, down.failures) == (ATTIC, 1, 1)
    assert not down.routable


def test_another_action_that_did_not_move_fails_only_its_own_connection(
    store: MemoryStore,
) -> None:
    the_map = recorded(
        store,
        (BEHIND, "open window", BEHIND),  # no connection: nothing recorded
        (BEHIND, "enter window", KITCHEN),
        (BEHIND, "Enter window", BEHIND),  # the window was shut again
    )
    (window,) = the_map.exits(BEHIND).exits
    assert (window.command, window.verifications, window.failures) == ("enter window", 1, 1)
    assert set(the_map.graph().connections) == {(BEHIND, "enter window")}


def test_the_action_keeps_its_first_typed_form_and_counts_every_alias(store: MemoryStore) -> None:
    the_map = recorded(store, (WEST, "N", NORTH), (NORTH, "s", WEST), (WEST, "go north", NORTH))
    connection = the_map.graph().connections[(WEST, "north")]
    assert connection == Connection(WEST, "N", "north", "north", NORTH, 2, 0, 1, 1, 1, 3)


SCRIPT = [
    (WEST, "n", NORTH),
    (NORTH, "e", BEHIND),
    (BEHIND, "w", BEHIND),
    (BEHIND, "open window", BEHIND),
    (BEHIND, "w", BEHIND),
    (BEHIND, "w", BEHIND),
    (BEHIND, "W", KITCHEN),
    (KITCHEN, "up", ATTIC),
    (ATTIC, "d", KITCHEN),
    (KITCHEN, "e", BEHIND),
    (BEHIND, "enter window", KITCHEN),
    (KITCHEN, "w", LIVING),
    (LIVING, "pray", LIVING),
    (LIVING, "e", KITCHEN),
    (KITCHEN, "e", BEHIND),
    (BEHIND, "enter window", BEHIND),
    (BEHIND, "n", NORTH),
    (NORTH, "w", WEST),
    (WEST, "e", WEST),
    (WEST, "e", WEST),
    (WEST, "e", WEST),
    (WEST, "n", NORTH),
]


def test_the_stored_map_follows_the_same_rules_as_the_in_memory_one(store: MemoryStore) -> None:
    events = [event(b, a, c, t) for t, (b, a, c) in enumerate(SCRIPT, 1)]
    the_map = MapStore(store)
    for start in range(0, len(events), 4):  # in batches, as the manager writes them
        the_map.record(events[start : start + 4])
    assert the_map.graph() == MapGraph().apply_all(events)


ROOMS = st.sampled_from([WEST, NORTH, BEHIND])
ACTIONS = st.sampled_from(["n", "north", "go north", "s", "e", "pray", "Enter window", "wait"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(ROOMS, ACTIONS, ROOMS, st.booleans()), max_size=25),
    batch=st.integers(1, 6),
    prune_after=st.integers(1, 3),
)
def test_any_events_give_the_same_map_stored_and_in_memory(
    steps: list[tuple[int, str, int, bool]], batch: int, prune_after: int
) -> None:
    events = [
        found
        for turn, (before, action, after, died) in enumerate(steps, 1)
        if (
            found := event_for_turn(
                context(before, after, died=died),
                action,
                location_id=before,
                location_name=NAMES[before],
                episode=1 + turn // 10,
                turn=turn,
                prune_after=prune_after,
            )
        )
    ]
    with MemoryStore.open("sqlite://", config=MemstoreConfig()) as store:
        the_map = MapStore(store)
        for start in range(0, len(events), batch):
            the_map.record(events[start : start + batch])
        assert the_map.graph() == MapGraph().apply_all(events)


# --- queries -------------------------------------------------------------------------------------


def test_route_is_the_shortest_path_over_confident_exits(store: MemoryStore) -> None:
    the_map = recorded(
        store,
        (WEST, "n", NORTH),
        (NORTH, "e", BEHIND),
        (BEHIND, "w", KITCHEN),
        (KITCHEN, "w", LIVING),
        (WEST, "pray", LIVING),  # a shortcut, then it fails twice: not routed
        (WEST, "pray", WEST),
        (WEST, "pray", WEST),
    )
    route = the_map.route(WEST, LIVING)
    assert route.actions == ("north", "east", "west", "west")
    assert [step.to_id for step in route.steps] == [NORTH, BEHIND, KITCHEN, LIVING]
    assert the_map.route(WEST, WEST).actions == ()
    back = the_map.route(LIVING, WEST)
    assert not back.found and "Living Room (75)" in str(back.reason)


def test_route_never_goes_through_a_pruned_exit(store: MemoryStore) -> None:
    # a map from elsewhere may hold both (issue 16: "a pruned exit is never routed through")
    graph = recorded(store, (WEST, "n", NORTH), (NORTH, "e", BEHIND), (WEST, "ne", BEHIND)).graph()
    assert graph.route(WEST, BEHIND).actions == ("northeast",)
    graph.pruned[(WEST, "northeast")] = PrunedExit(WEST, "northeast", 1, 9)
    the_map = MapStore(store)
    the_map.replace(graph)
    assert the_map.route(WEST, BEHIND).actions == ("north", "east")
    (northeast,) = [e for e in the_map.exits(WEST).exits if e.direction == "northeast"]
    assert not northeast.routable


def test_route_threshold_is_configurable(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "t.db", config=MemstoreConfig()) as store:
        recorded(store, (WEST, "n", NORTH), (WEST, "n", WEST))  # confidence 0.5
        assert not MapStore(store).route(WEST, NORTH).found
        lenient = MapStore(store, MemstoreConfig(map_route_confidence=0.4))
        assert lenient.route(WEST, NORTH).actions == ("north",)


def test_untried_directions_are_the_canonical_ones_never_tried(store: MemoryStore) -> None:
    the_map = recorded(store, (WEST, "n", NORTH), (WEST, "w", WEST), (WEST, "pray", FOREST))
    untried = the_map.untried_directions(WEST)
    assert untried.directions == tuple(d for d in DIRECTIONS if d not in ("north", "west"))
    assert untried.reason is None
    assert the_map.untried_directions(NORTH).directions == DIRECTIONS  # reached, never left


def test_nearest_unexplored_is_the_closest_room_with_an_untried_direction(
    store: MemoryStore,
) -> None:
    the_map = recorded(store, (WEST, "n", NORTH), (NORTH, "e", BEHIND))
    # every direction from West of House and North of House tried
    the_map.record(
        event(room, direction, room, 10 + i)
        for i, (room, direction) in enumerate(
            (room, d) for room in (WEST, NORTH) for d in DIRECTIONS if (room, d) not in
            ((WEST, "north"), (NORTH, "east"))
        )
    )  # fmt: skip
    found = the_map.nearest_unexplored(WEST)
    assert (found.location_id, found.name) == (BEHIND, "Behind House")
    assert found.route is not None and found.route.actions == ("north", "east")
    assert found.directions == DIRECTIONS
    assert the_map.nearest_unexplored(BEHIND).route.actions == ()  # type: ignore[union-attr]


def test_nearest_unexplored_says_when_everything_reachable_was_tried(store: MemoryStore) -> None:
    the_map = recorded(store, *[(WEST, d, WEST) for d in DIRECTIONS])
    found = the_map.nearest_unexplored(WEST)
    assert found.location_id is None and found.route is None
    assert "every direction" in str(found.reason)


def test_rooms_on_the_map_are_listed_by_id(store: MemoryStore) -> None:
    the_map = recorded(store, (WEST, "n", NORTH), (NORTH, "e", BEHIND))
    assert [(r.id, r.name) for r in the_map.rooms()] == [
        (WEST, "West of House"),
        (BEHIND, "Behind House"),
        (NORTH, "North of House"),
    ]


def test_unknown_rooms_get_an_empty_answer_and_a_reason(store: MemoryStore) -> None:
    the_map = recorded(store, (WEST, "n", NORTH))
    nowhere = 999
    assert the_map.exits(nowhere).exits == () and "999" in str(the_map.exits(nowhere).reason)
    assert the_map.untried_directions(nowhere).directions == ()
    assert the_map.untried_directions(nowhere).reason is not None
    for route in (the_map.route(WEST, nowhere), the_map.route(nowhere, WEST)):
        assert route.actions is None and "999" in str(route.reason)
    assert the_map.nearest_unexplored(nowhere).reason is not None
    assert the_map.exits_line(nowhere) == ""
    empty = MapStore(store)
    empty.replace(MapGraph())
    assert empty.rooms() == [] and empty.route(WEST, NORTH).reason is not None


def test_location_ids_must_be_ints(store: MemoryStore) -> None:
    the_map = MapStore(store)
    with pytest.raises(TypeError):
        the_map.exits("64")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        the_map.route(64, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        the_map.nearest_unexplored(-1)


def test_record_refuses_what_is_not_a_map_event(store: MemoryStore) -> None:
    the_map = MapStore(store)
    with pytest.raises(TypeError):
        the_map.record([(WEST, "n", NORTH)])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        the_map.record([event(WEST, "n", NORTH)._replace(episode=0)])
    with pytest.raises(ValueError):
        the_map.record([event(WEST, "n", NORTH)._replace(kind="teleported")])
    with pytest.raises(ValueError):
        the_map.record([event(WEST, "n", NORTH)._replace(action_key="up")])
    assert the_map.rooms() == []


def test_replace_writes_exactly_the_graph_or_nothing(store: MemoryStore) -> None:
    events = [event(b, a, c, t) for t, (b, a, c) in enumerate(SCRIPT, 1)]
    graph = MapGraph().apply_all(events)
    the_map = MapStore(store)
    the_map.replace(graph)
    assert the_map.graph() == graph
    broken = graph.copy()
    broken.rooms.pop(ATTIC)
    with pytest.raises(ValueError, match="unknown room 187; nothing was written"):
        the_map.replace(broken)
    mislabelled = graph.copy()
    up = mislabelled.connections[(KITCHEN, "up")]
    mislabelled.connections[(KITCHEN, "up")] = up._replace(direction="down")
    with pytest.raises(ValueError, match="connection 'up' of room 27 has direction 'down'"):
        the_map.replace(mislabelled)
    assert the_map.graph() == graph


# --- the exits line ------------------------------------------------------------------------------


def test_the_exits_line_names_each_exit_its_room_and_doubtful_counts(store: MemoryStore) -> None:
    the_map = recorded(
        store,
        (WEST, "n", NORTH),
        (WEST, "e", BEHIND),
        (WEST, "e", WEST),
        (WEST, "go east", BEHIND),
        *[(WEST, d, WEST) for d in DIRECTIONS if d not in ("north", "east", "west", "up")],
    )
    assert the_map.exits_line(WEST) == (
        "Exits: north → North of House (137), east → Behind House (85, 2/3 verified); "
        "untried: west, up"
    )


def test_a_room_with_no_known_exit_says_so() -> None:
    graph = MapGraph().apply_all([event(WEST, "n", NORTH)])
    assert exits_line(graph.exits(NORTH)).startswith("Exits: none known; untried: north, south")


def test_the_agent_context_ends_with_the_exits_line(
    store: MemoryStore, manager: SimpleMemoryManager
) -> None:
    play(manager, (WEST, "n", NORTH), (NORTH, "s", WEST))
    text = manager.get_location_memory(WEST)
    assert text.splitlines()[-1].startswith("Exits: north → North of House (137); untried: ")
    assert text.splitlines()[:-1] == store.get_location_memory(WEST).splitlines()
    assert manager.last_context_tokens == count_tokens(text)


def test_the_exits_line_is_left_out_when_switched_off(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, MemstoreConfig(map_exits_line=False))
    play(manager, (WEST, "n", NORTH), (NORTH, "s", WEST))
    assert "Exits:" not in manager.get_location_memory(WEST)
    assert manager.get_location_memory(WEST) == store.get_location_memory(WEST)


def test_the_exits_line_is_not_shown_off_the_map(manager: SimpleMemoryManager) -> None:
    assert manager.get_location_memory(WEST) == ""


@pytest.mark.parametrize("budget", [20, 40, 60, 300])
def test_memories_and_exits_line_stay_within_the_token_budget(tmp_path: Path, budget: int) -> None:
    config = MemstoreConfig(token_budget=budget)
    with MemoryStore.open(tmp_path / "b.db", config=config) as store:
        manager = SimpleMemoryManager(store, config)
        play(manager, *SCRIPT)
        for room in NAMES:
            text = manager.get_location_memory(room)
            assert count_tokens(text) <= budget
            memories = store.get_location_memory(room)
            assert text.startswith(memories)  # the memories are never cut for the line
        if budget == 300:
            assert "untried:" in manager.get_location_memory(KITCHEN)


def test_the_agent_sees_its_last_turn_on_the_map_before_it_is_written(
    store: MemoryStore, manager: SimpleMemoryManager, db_path: Path
) -> None:
    play(manager, (WEST, "n", NORTH), (NORTH, "s", WEST))
    manager.flush()
    play(manager, (WEST, "w", WEST))  # no memory written: the failure waits in the buffer
    assert manager.pending_map_events
    assert "west" not in manager.get_location_memory(WEST).split("untried: ")[1].split(", ")
    with MemoryStore.open(db_path, read_only=True) as reader:
        assert MapStore(reader).exits(WEST).blocked == ()  # not on disk yet: no commit
    manager.flush()
    with MemoryStore.open(db_path, read_only=True) as reader:
        assert MapStore(reader).exits(WEST).blocked == ("west",)


def expected_context(store: MemoryStore, room: int, pending: list[MapEvent]) -> str:
    """What the agent should read: the memories, then the fullest exits line that fits,
    worked out afresh from the database and the buffered events."""
    text = store.get_location_memory(room)
    for line in exits_line_variants(MapStore(store).exits(room, pending=pending)):
        candidate = f"{text}\n{line}" if text else line
        if count_tokens(candidate) <= store.config.token_budget:
            return candidate
    return text


def test_the_agent_s_view_equals_fresh_reads_after_every_turn(
    store: MemoryStore, manager: SimpleMemoryManager
) -> None:
    for turn, step in enumerate(SCRIPT * 2):
        for room in NAMES:  # read (and keep) the view before the turn
            manager.get_location_memory(room)
        play(manager, step)
        if turn % 7 == 6:
            manager.flush()
        if turn % 11 == 10:  # another writer in this process, on the same connection
            MapStore(store).record([event(KITCHEN, "pray", FOREST, 100 + turn)])
        pending = manager.pending_map_events
        for room in NAMES:
            assert manager.get_location_memory(room) == expected_context(store, room, pending)


def test_the_view_follows_writes_it_did_not_make(store: MemoryStore, db_path: Path) -> None:
    the_map = recorded(store, (WEST, "n", NORTH))
    view = MapView(the_map, max_age_s=0)
    assert [e.to_id for e in view.exits(WEST, []).exits] == [NORTH]
    the_map.record([event(WEST, "e", BEHIND, 2)])  # this process, another writer
    assert [e.to_id for e in view.exits(WEST, []).exits] == [NORTH, BEHIND]
    with MemoryStore.open(db_path, config=MemstoreConfig()) as other:  # another connection
        MapStore(other).record([event(WEST, "w", WEST, 3)])
    assert view.exits(WEST, []).blocked == ("west",)
    pending = [event(WEST, "s", WEST, 4)]
    view.recorded(pending[0])
    assert view.exits(WEST, pending).blocked == ("south", "west")
    assert MapStore(store).exits(WEST).blocked == ("west",)  # not written


def test_another_connection_s_writes_are_seen(store: MemoryStore, db_path: Path) -> None:
    the_map = recorded(store, (WEST, "n", NORTH))
    assert [e.to_id for e in the_map.exits(WEST).exits] == [NORTH]
    with MemoryStore.open(db_path, config=MemstoreConfig()) as other:
        MapStore(other).record([event(WEST, "e", BEHIND, 2)])
    assert [e.to_id for e in the_map.exits(WEST).exits] == [NORTH, BEHIND]
    assert the_map.route(WEST, BEHIND).actions == ("east",)


def test_the_map_outlives_episodes_and_the_store(db_path: Path) -> None:
    config = MemstoreConfig()
    with MemoryStore.open(db_path, config=config) as store:
        manager = SimpleMemoryManager(store, config)
        play(manager, (WEST, "n", NORTH), (NORTH, "e", BEHIND))
        first = manager.episode
        manager.reset_episode()
        play(manager, (WEST, "n", NORTH))
        second = manager.episode
        manager.close()
        graph = MapStore(store).graph()
    assert second > first
    north = graph.connections[(WEST, "north")]
    assert (north.verifications, north.first_episode, north.last_episode) == (2, first, second)
    with MemoryStore.open(db_path, config=config) as again:
        assert MapStore(again).graph() == graph
        assert MapStore(again).route(WEST, BEHIND).actions == ("north", "east")


def test_a_room_reached_before_its_name_is_known_is_named_later(
    store: MemoryStore, manager: SimpleMemoryManager
) -> None:
    unnamed = ZMachineContext(location_before=KITCHEN, location_after=ATTIC)
    manager.record_action_outcome(KITCHEN, "Kitchen", "u", "", unnamed)
    assert "up → room (187)" in manager.get_location_memory(KITCHEN)
    play(manager, (ATTIC, "d", KITCHEN))  # the game names the attic once the agent is there
    assert "up → Attic (187)" in manager.get_location_memory(KITCHEN)
    assert manager.get_location_memory(KITCHEN) == expected_context(
        store, KITCHEN, manager.pending_map_events
    )
