"""The map against the game itself (issue 16, "Done when").

The manager records the map while Jericho's walkthrough is played; every recorded
connection is then checked against the Z-machine: restoring the game state from before
the move (Jericho's get_state/set_state) and taking the action again lands in the
recorded room. Routes are compared with a breadth-first search over the moves the game
actually made, for every pair of rooms visited.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memstore.config import MemstoreConfig
from memstore.game import StepResult, ZorkGame, z_machine_context
from memstore.manager import SimpleMemoryManager
from memstore.map_graph import MapGraph, PrunedExit, action_key
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.fixtures.walkthrough import GRUE_DEATH_SEQUENCE, get_zork1_walkthrough, new_game

ROOT = Path(__file__).resolve().parents[1]
WEST_OF_HOUSE, BEHIND_HOUSE, KITCHEN, TREASURE_ROOM = 64, 85, 27, 82

#: ground truth: (room, action key) -> the room the game moved the player to
Edges = dict[tuple[int, str], int]


@dataclass
class Played:
    game: ZorkGame
    states: list[Any]  # the game state before each turn (index: turn - 1)
    results: list[StepResult]
    store: MemoryStore
    manager: SimpleMemoryManager
    db: Path


def play(game: ZorkGame, manager: SimpleMemoryManager, actions: list[str]) -> Played:
    states, results = [], []
    here = game.snapshot()
    for action in actions:
        states.append(game.env.get_state())
        manager.get_location_memory(here.location_id)
        result = game.step(action)
        manager.record_action_outcome(
            result.before.location_id,
            result.before.location_name,
            action,
            result.response,
            z_machine_context(result.before, result.after, result.response),
        )
        results.append(result)
        here = result.after
    manager.flush()
    return Played(game, states, results, manager.store, manager, Path())


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    db = tmp_path_factory.mktemp("map") / "walkthrough.db"
    config = MemstoreConfig()
    game = new_game()
    store = MemoryStore.open(db, config=config)
    played = play(game, SimpleMemoryManager(store, config), get_zork1_walkthrough())
    played.db = db
    yield played
    store.close()
    game.close()


def ground_truth(results: list[StepResult]) -> Edges:
    """The moves the game made (deaths left out), by room and action key."""
    edges: Edges = {}
    for r in results:
        if r.moved and not r.after.died:
            edges[(r.before.location_id, action_key(r.action))] = r.after.location_id
    return edges


def distances(edges: Edges, start: int) -> dict[int, int]:
    """A plain breadth-first search over the ground truth, written independently here."""
    neighbours: dict[int, set[int]] = {}
    for (room, _key), there in edges.items():
        neighbours.setdefault(room, set()).add(there)
    found = {start: 0}
    queue = deque([start])
    while queue:
        room = queue.popleft()
        for there in neighbours.get(room, ()):
            if there not in found:
                found[there] = found[room] + 1
                queue.append(there)
    return found


def test_every_recorded_connection_is_reproduced_by_the_game(walkthrough: Played) -> None:
    graph = MapStore(walkthrough.store).graph()
    assert len(graph.connections) > 100
    game, checked = walkthrough.game, 0
    for connection in graph.connections.values():
        for turn in sorted({connection.first_turn, connection.last_turn}):
            taken = walkthrough.results[turn - 1]
            assert taken.before.location_id == connection.from_id
            assert action_key(taken.action) == connection.action_key
            game.env.set_state(walkthrough.states[turn - 1])
            again = game.step(taken.action)
            assert again.before.location_id == connection.from_id
            assert again.after.location_id == connection.to_id, connection
            assert not again.after.died
            checked += 1
    assert checked >= len(graph.connections)


def test_the_map_holds_every_move_the_game_made_and_nothing_else(walkthrough: Played) -> None:
    graph = MapStore(walkthrough.store).graph()
    edges = ground_truth(walkthrough.results)
    assert {key: c.to_id for key, c in graph.connections.items()} == edges
    visited = {r.before.location_id for r in walkthrough.results}
    assert set(graph.rooms) == visited | set(edges.values())
    names = {r.after.location_id: r.after.location_name for r in walkthrough.results}
    assert all(graph.rooms[room] == name for room, name in names.items())
    # the action-labelled exits of the walkthrough
    labelled = {c.action_key for c in graph.connections.values() if c.direction is None}
    assert {"pray", "touch mirror", "launch", "wait", "land"} <= labelled


def test_no_connection_comes_from_a_death(tmp_path: Path) -> None:
    config = MemstoreConfig()
    with new_game() as game, MemoryStore.open(tmp_path / "grue.db", config=config) as store:
        played = play(game, SimpleMemoryManager(store, config), list(GRUE_DEATH_SEQUENCE))
        death = played.results[-1]
        assert death.after.died and death.moved  # the grue's meal lands the player elsewhere
        graph = MapStore(store).graph()
    cellar = death.before.location_id
    assert (cellar, "south") not in graph.connections
    assert (cellar, "south") not in graph.failures
    assert all(c.to_id != death.after.location_id for c in graph.connections.values())
    assert {c.last_turn for c in graph.connections.values()} <= set(range(1, len(played.results)))
    assert graph.connections == {
        key: c for key, c in graph.connections.items() if key[0] != cellar
    }  # nothing was ever left from the cellar but by dying


def route_follows_the_game(edges: Edges, start: int, steps: tuple[Any, ...]) -> int:
    here = start
    for step in steps:
        assert edges[(here, action_key(step.command))] == step.to_id
        here = step.to_id
    return here


def test_routes_equal_a_breadth_first_search_over_the_game_for_every_pair(
    walkthrough: Played,
) -> None:
    the_map = MapStore(walkthrough.store)
    graph = the_map.graph()
    edges = ground_truth(walkthrough.results)
    rooms = sorted(graph.rooms)
    pairs = 0
    for start in rooms:
        expected = distances(edges, start)
        for goal in rooms:
            route = graph.route(start, goal, the_map.threshold)
            if goal not in expected:
                assert not route.found and route.reason
                continue
            assert route.actions is not None and len(route.actions) == expected[goal]
            assert route_follows_the_game(edges, start, route.steps) == goal
            pairs += 1
    assert pairs > 5000
    # through the store too, from the start of the game
    to_treasure = the_map.route(WEST_OF_HOUSE, TREASURE_ROOM)
    assert len(to_treasure.actions or ()) == distances(edges, WEST_OF_HOUSE)[TREASURE_ROOM]


def test_a_pruned_exit_is_never_routed_through(walkthrough: Played, tmp_path: Path) -> None:
    graph = MapStore(walkthrough.store).graph()
    pruned = MapGraph(dict(graph.rooms), dict(graph.connections))
    for index, ((room, key), connection) in enumerate(sorted(graph.connections.items())):
        if connection.direction is not None and index % 3 == 0:
            pruned.pruned[(room, key)] = PrunedExit(room, key, 1, 1)
    with MemoryStore.open(tmp_path / "pruned.db", config=MemstoreConfig()) as store:
        the_map = MapStore(store)
        the_map.replace(pruned)
        graph = the_map.graph()
    edges = {
        key: there
        for key, there in ground_truth(walkthrough.results).items()
        if key not in pruned.pruned
    }
    for start in sorted(graph.rooms)[::4]:
        expected = distances(edges, start)
        for goal in graph.rooms:
            route = graph.route(start, goal, the_map.threshold)
            assert route.found == (goal in expected)
            if route.actions is not None:
                assert len(route.actions) == expected[goal]
                assert route_follows_the_game(edges, start, route.steps) == goal


def test_the_closed_window_is_pruned_and_opening_it_unprunes_the_exit(tmp_path: Path) -> None:
    config = MemstoreConfig()
    with new_game() as game, MemoryStore.open(tmp_path / "window.db", config=config) as store:
        manager = SimpleMemoryManager(store, config)
        play(game, manager, ["N", "E", "W", "W", "W"])  # "The kitchen window is closed."
        behind = manager.map.exits(BEHIND_HOUSE)
        assert behind.pruned == ("west",) and not manager.map.route(BEHIND_HOUSE, KITCHEN).found
        assert "west" not in behind.untried
        play(game, manager, ["Open window", "W"])
        behind = manager.map.exits(BEHIND_HOUSE)
        assert behind.pruned == () and [e.to_id for e in behind.exits] == [KITCHEN]
        assert manager.map.route(BEHIND_HOUSE, KITCHEN).actions == ("west",)
        assert manager.map.graph().failures[(BEHIND_HOUSE, "west")].failures == 3


READ_MAP = """
import json, sys
from memstore.map_store import MapStore
from memstore.store import MemoryStore
with MemoryStore.open(sys.argv[1], read_only=True) as store:
    the_map = MapStore(store)
    graph = the_map.graph()
    print(json.dumps({
        "rooms": sorted(graph.rooms.items()),
        "connections": sorted(graph.connections.values()),
        "route": the_map.route(int(sys.argv[2]), int(sys.argv[3])).actions,
    }))
"""


def read_in_another_process(db: Path, start: int, goal: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", READ_MAP, str(db), str(start), str(goal)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    return json.loads(done.stdout)


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_the_map_persists_across_processes_and_episodes(tmp_path: Path) -> None:
    db, config = tmp_path / "episodes.db", MemstoreConfig()
    actions = get_zork1_walkthrough()[:30]
    with new_game() as game:
        with MemoryStore.open(db, config=config) as store:
            manager = SimpleMemoryManager(store, config)
            play(game, manager, actions)
            first = manager.episode
            manager.reset_episode()
            after_one = MapStore(store).graph()
        seen = read_in_another_process(db, WEST_OF_HOUSE, KITCHEN)
        assert seen["rooms"] == as_json(sorted(after_one.rooms.items()))
        assert seen["connections"] == as_json(sorted(after_one.connections.values()))
        assert seen["route"] == list(after_one.route(WEST_OF_HOUSE, KITCHEN).actions or ())

        game.reset()
        with MemoryStore.open(db, config=config) as store:  # the next episode, a new store
            manager = SimpleMemoryManager(store, config)
            play(game, manager, actions)
            second = manager.episode
            after_two = MapStore(store).graph()
    assert second > first
    assert after_two.rooms == after_one.rooms
    for key, connection in after_one.connections.items():
        again = after_two.connections[key]
        assert again.verifications > connection.verifications
        assert (again.first_episode, again.last_episode) == (first, second)
    assert read_in_another_process(db, WEST_OF_HOUSE, KITCHEN)["connections"] == as_json(
        sorted(after_two.connections.values())
    )
