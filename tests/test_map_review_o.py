"""Review O of the map (review F's findings): ZorkGPT's inferred ways back are told apart
from real takes at its MapManager's confidence 0.8 and from memstore's own connections
after a trip through ZorkGPT; unknown ``metadata`` keys are reported and protect the file;
the exits line's work per view is bounded; a confidence beyond the derived failures' cap
is refused only when it would flip a routing decision; ``+64`` is a location number; a
pruned exit listed twice is a warning."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import map_exits, tokens
from memstore.cli_args import location_id
from memstore.errors import MapStateError
from memstore.map_events import SHOWN_MAX, shown_text
from memstore.map_exits import EXITS_LISTED, exits_line_variants, with_exits_line
from memstore.map_graph import Connection, MapGraph
from memstore.map_json import (
    MAX_DERIVED_FAILURES,
    WRITTEN_MAX,
    import_map_state,
    map_state,
    map_state_at_risk,
    parse_map_state,
    written_confidence,
)
from memstore.map_json_rules import inferred_way_back
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.tokens import count_tokens
from tests.cli_helpers import one_error_line, run

Capsys = pytest.CaptureFixture[str]

# --- ZorkGPT's MapGraph (id version), restated: add_connection, to_dict, from_dict -----------

_OPPOSITE = {
    "north": "south",
    "south": "north",
    "east": "west",
    "west": "east",
    "up": "down",
    "down": "up",
    "northeast": "southwest",
    "southwest": "northeast",
    "northwest": "southeast",
    "southeast": "northwest",
    "in": "out",
    "out": "in",
}
_SHORT = {"n": "north", "s": "south", "e": "east", "w": "west", "u": "up", "d": "down"}
_SHORT |= {"ne": "northeast", "nw": "northwest", "se": "southeast", "sw": "southwest"}


def _zorkgpt_exit(action: str) -> str:
    """ZorkGPT's ``normalize_direction``, or the action lowered and stripped."""
    lowered = action.lower().strip()
    lowered = lowered.removeprefix("go ").strip() if lowered.startswith("go ") else lowered
    return _SHORT.get(lowered, lowered if lowered in _OPPOSITE else action.lower().strip())


class ZorkGPTMap:
    """ZorkGPT's ``map_graph.MapGraph``: a new exit gets the caller's confidence and 1
    verification; taking it again to the same room adds 1 and 0.1 (at most 1.0); another
    destination replaces it only at a higher confidence; the way back is inferred at 0.9 x
    the caller's confidence with 1 verification, only where that exit is still unknown.
    ``to_dict`` writes no ``metadata.memstore`` (and a timestamp); ``from_dict`` keeps the
    tables as they are."""

    def __init__(self) -> None:
        self.rooms: dict[int, tuple[str, set[str]]] = {}
        self.connections: dict[int, dict[str, int]] = {}
        self.confidence: dict[tuple[int, str], float] = {}
        self.verifications: dict[tuple[int, str], int] = {}
        self.failures: dict[tuple[int, str], int] = {}
        self.pruned: dict[int, set[str]] = {}

    def add_room(self, room: int, name: str) -> None:
        self.rooms.setdefault(room, (name, set()))

    def add_connection(self, room: int, action: str, to: int, caller: float = 1.0) -> None:
        exit_ = _zorkgpt_exit(action)
        key = (room, exit_)
        if exit_ in self.connections.get(room, {}):
            if self.connections[room][exit_] == to:
                self.verifications[key] += 1
                self.confidence[key] = min(1.0, self.confidence[key] + 0.1)
            elif caller > self.confidence[key]:
                self.confidence[key], self.verifications[key] = caller, 1
            else:
                return
        else:
            self.confidence[key], self.verifications[key] = caller, 1
        self.connections.setdefault(room, {})[exit_] = to
        self.rooms[room][1].add(exit_)
        back = _OPPOSITE.get(exit_)
        if back:
            if back not in self.connections.setdefault(to, {}):
                self.connections[to][back] = room
                self.confidence[(to, back)] = caller * 0.9
                self.verifications[(to, back)] = 1
            self.rooms[to][1].add(back)

    def to_dict(self) -> dict[str, Any]:
        def keyed(table: dict[tuple[int, str], Any]) -> dict[str, Any]:
            return {f"{room}_{exit_}": value for (room, exit_), value in table.items()}

        return {
            "rooms": {
                str(room): {"id": room, "name": name, "exits": sorted(exits)}
                for room, (name, exits) in self.rooms.items()
            },
            "room_names": {str(room): name for room, (name, _) in self.rooms.items()},
            "connections": {str(room): dict(c) for room, c in self.connections.items()},
            "connection_confidence": keyed(self.confidence),
            "connection_verifications": keyed(self.verifications),
            "exit_failure_counts": keyed(self.failures),
            "pruned_exits": {str(room): sorted(e) for room, e in self.pruned.items()},
            "metadata": {
                "version": "1.0",
                "total_rooms": len(self.rooms),
                "total_connections": sum(len(c) for c in self.connections.values()),
                "timestamp": "2026-11-24T12:00:00+00:00",
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ZorkGPTMap:
        def unkeyed(table: dict[str, Any]) -> dict[tuple[int, str], Any]:
            return {(int(k.split("_", 1)[0]), k.split("_", 1)[1]): v for k, v in table.items()}

        loaded = cls()
        for key, room in data["rooms"].items():
            loaded.rooms[int(key)] = (room["name"], set(room["exits"]))
        loaded.connections = {int(k): dict(v) for k, v in data["connections"].items()}
        loaded.confidence = unkeyed(data.get("connection_confidence", {}))
        loaded.verifications = unkeyed(data.get("connection_verifications", {}))
        loaded.failures = unkeyed(data.get("exit_failure_counts", {}))
        loaded.pruned = {int(k): set(v) for k, v in data.get("pruned_exits", {}).items()}
        return loaded


def _through_zorkgpt(data: dict[str, Any], then: Callable[[ZorkGPTMap], None] | None = None) -> str:
    """``data`` loaded by ZorkGPT (from_dict), ``then`` done to it, and saved (to_dict)."""
    loaded = ZorkGPTMap.from_dict(data)
    if then is not None:
        then(loaded)
    return json.dumps(loaded.to_dict())


def _memstore_map(*connections: tuple[int, str, int, int, int]) -> MapGraph:
    """A memstore map of ``(from, direction, to, verifications, failures)`` connections."""
    graph = MapGraph()
    for room, direction, to, verified, failed in connections:
        graph.rooms.setdefault(room, f"Room {room}")
        graph.rooms.setdefault(to, f"Room {to}")
        graph.connections[(room, direction)] = Connection(
            room, direction, direction, direction, to, verified, failed, 1, room, 1, room
        )
    return graph


def _write(path: Path, data: dict[str, Any] | str) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --- 1. a real exit taken at ZorkGPT's MapManager's 0.8 is no guess ---------------------------


def _pair(rate: float, back_rate: float, back_verifications: int) -> dict[str, Any]:
    """Forest Path (238) south to North of House (137) once at ``rate``; North of House
    north to Forest Path at ``back_rate`` with ``back_verifications``."""
    return {
        "rooms": {"238": {"name": "Forest Path"}, "137": {"name": "North of House"}},
        "connections": {"238": {"south": 137}, "137": {"north": 238}},
        "connection_confidence": {"238_south": rate, "137_north": back_rate},
        "connection_verifications": {"238_south": 1, "137_north": back_verifications},
    }


def test_an_exit_taken_once_at_0_8_beside_an_opposite_taken_to_the_cap_is_kept() -> None:
    # the reviewer's walk at caller confidence 0.8: 238_south taken once (0.8, 1), and
    # 137_north taken four times (0.8 + 0.1 x 3, capped at 1.0)
    parsed = parse_map_state(json.dumps(_pair(0.8, 1.0, 4)))
    assert set(parsed.graph.connections) == {(238, "south"), (137, "north")}
    assert parsed.graph.route(238, 137).actions == ("south",)
    assert not any("inferred" in note for note in parsed.notes)


@pytest.mark.parametrize(
    ("rate", "back_rate", "back_verifications", "guess"),
    [
        (0.9, 1.0, 1, True),  # caller 1.0: the guess beside the exit taken once
        (0.9, 1.0, 6, True),  # ... taken six times (at the cap)
        (0.72, 0.8, 1, True),  # caller 0.8
        (0.72, 0.8 + 0.1, 2, True),  # taken twice
        (0.72, 0.8 + 0.1 + 0.1, 3, True),  # to the cap, as floats add
        (0.72, 1.0, 4, True),
        (0.72, 1.0, 2, False),  # 0.8 taken twice is 0.9, not the cap
        (0.72, 0.9, 1, False),  # 0.9 is no caller's first take
        (0.8, 1.0, 4, False),  # a real take at 0.8 (finding 1)
        (0.8, 1.0, 2, False),
        (1.0, 1.0, 4, False),  # a real take at 1.0
        (0.6667, 1.0, 5, False),  # memstore's own, taken once (finding 2)
        (0.6667, 0.999, 1000, False),  # ... beside its own 1000 takes
        (0.25, 0.7778, 6, False),  # the reviewer's v=1 f=5 beside v=6 f=1
        (0.9, 0.9999, 30, False),  # at the cap means exactly 1.0
        (0.9, 0.999, 1000, False),
    ],
)
def test_a_guess_is_0_9_x_a_caller_s_confidence_beside_that_caller_s_history(
    rate: float, back_rate: float, back_verifications: int, guess: bool
) -> None:
    found = Connection(238, "south", "south", "south", 137, 1, 0, 0, 0, 0, 0)
    back = Connection(137, "north", "north", "north", 238, back_verifications, 0, 0, 0, 0, 0)
    assert inferred_way_back(found, rate, back, back_rate) is guess
    parsed = parse_map_state(json.dumps(_pair(rate, back_rate, back_verifications)))
    assert ((238, "south") not in parsed.graph.connections) is guess


Taken = set[tuple[tuple[int, str], int]]


def _play(game: Any, zorkgpt: ZorkGPTMap, actions: list[str], caller: float) -> Taken:
    """Play ``actions`` from a reset, recording each move as ZorkGPT does; the exits
    taken, by (room, exit) and destination."""
    taken: Taken = set()
    _, state = game.reset()
    zorkgpt.add_room(state.location_id, state.location_name)
    for action in actions:
        step = game.step(action)
        before, after = step.before, step.after
        if after.location_id != before.location_id and not after.died:
            zorkgpt.add_room(after.location_id, after.location_name)
            zorkgpt.add_connection(before.location_id, action, after.location_id, caller)
            taken.add(((before.location_id, _zorkgpt_exit(action)), after.location_id))
    return taken


Keys = set[tuple[int, str]]


def _sorted_out(data: dict[str, Any], taken: Taken) -> tuple[Keys, Keys, Keys]:
    """What the reader left out as guesses, what of that the player took, and which
    connections the player never took it kept."""
    kept = set(parse_map_state(json.dumps(data)).graph.connections)
    every = {(int(room), e): to for room, c in data["connections"].items() for e, to in c.items()}
    dropped = set(every) - kept
    return (
        dropped,
        {key for key in dropped if (key, every[key]) in taken},
        {key for key in kept if (key, every[key]) not in taken},
    )


@pytest.mark.slow
@pytest.mark.parametrize("caller", [0.8, 1.0])
def test_the_reviewer_s_walk_in_the_game_keeps_the_exit_it_took(caller: float) -> None:
    from tests.fixtures.walkthrough import new_game

    game, zorkgpt = new_game(), ZorkGPTMap()
    try:  # West of House west, east, south; then north, north, up in three more episodes
        taken = _play(game, zorkgpt, ["west", "east", "south"], caller)
        for _ in range(3):
            taken |= _play(game, zorkgpt, ["north", "north", "up"], caller)
    finally:
        game.close()
    data = zorkgpt.to_dict()
    assert data["connection_verifications"]["137_north"] == 4
    assert data["connection_confidence"]["238_south"] == caller  # taken once, in episode 1
    dropped, real_dropped, guesses_kept = _sorted_out(data, taken)
    assert dropped and real_dropped == set() and guesses_kept == set()
    assert parse_map_state(json.dumps(data)).graph.route(238, 137).actions == ("south",)


@pytest.mark.slow
@pytest.mark.parametrize("caller", [0.8, 1.0])
@pytest.mark.parametrize("episodes", [1, 4])
def test_the_walkthrough_through_zorkgpt_leaves_out_its_47_guesses_and_no_exit_taken(
    caller: float, episodes: int
) -> None:
    from tests.fixtures.walkthrough import get_zork1_walkthrough, new_game

    game, zorkgpt, taken = new_game(), ZorkGPTMap(), Taken()
    try:
        for _ in range(episodes):
            taken |= _play(game, zorkgpt, get_zork1_walkthrough(), caller)
    finally:
        game.close()
    dropped, real_dropped, guesses_kept = _sorted_out(zorkgpt.to_dict(), taken)
    assert (len(dropped), real_dropped, guesses_kept) == (47, set(), set())


# --- 2. memstore's own connections after a trip through ZorkGPT ----------------------------------

#: memstore's (verifications, failures) pairs tried: all up to 50, and the reviewer's
MEMSTORE_PAIRS = [(v, f) for v in range(51) for f in range(51)] + [
    (1000, 0),
    (20_000, 0),
    (2**31 - 1, 0),
    (6, 1),
    (1, 5),
]


def test_no_pair_memstore_writes_is_read_as_a_guess_once_its_metadata_is_gone() -> None:
    # ZorkGPT's to_dict drops metadata.memstore: the reader sees memstore's confidences
    # as written (4 places) beside its verifications, as a peer's
    backs = [
        (Connection(2, "east", "east", "east", 1, v, f, 0, 0, 0, 0), written_confidence(v, f))
        for v, f in MEMSTORE_PAIRS
    ]
    read_as_guess = []
    for v, f in MEMSTORE_PAIRS:
        found = Connection(1, "west", "west", "west", 2, v, f, 0, 0, 0, 0)
        rate = written_confidence(v, f)
        read_as_guess += [
            ((v, f), (back.verifications, back.failures))
            for back, back_rate in backs
            if inferred_way_back(found, rate, back, back_rate)
        ]
    assert read_as_guess == []


def test_memstore_never_writes_zorkgpt_s_cap() -> None:
    assert written_confidence(2**31 - 1, 0) == WRITTEN_MAX < 1
    assert written_confidence(1000, 0) == 0.999 and written_confidence(1, 0) == 0.6667
    graph = _memstore_map((1, "north", 2, 2**31 - 1, 0))
    assert map_state(graph)["connection_confidence"]["1_north"] == WRITTEN_MAX


@pytest.mark.parametrize(
    ("taken", "back"),
    [((1, 0), (1000, 0)), ((1, 5), (6, 1)), ((1, 0), (20_000, 0)), ((1, 0), (2**31 - 1, 0))],
    ids=["v1000", "reviewer-pair", "v20000", "vmax"],
)
def test_memstore_s_connections_survive_zorkgpt_s_load_and_save(
    taken: tuple[int, int], back: tuple[int, int]
) -> None:
    graph = _memstore_map((193, "east", 79, *taken), (79, "west", 193, *back))
    parsed = parse_map_state(_through_zorkgpt(map_state(graph)))
    assert set(parsed.graph.connections) == set(graph.connections)
    assert not any("inferred" in note for note in parsed.notes)


def test_memstore_s_connection_survives_zorkgpt_taking_the_opposite_to_the_cap(
    capsys: Capsys, tmp_path: Path
) -> None:
    # the reviewer's pair1: Kitchen (79) west to Living Room (193) and back, each taken
    # once by memstore; ZorkGPT loads the export, takes west 4 more times, saves
    graph = _memstore_map((79, "west", 193, 1, 0), (193, "east", 79, 1, 0))

    def take_west(zorkgpt: ZorkGPTMap) -> None:
        for _ in range(4):
            zorkgpt.add_connection(79, "west", 193, 1.0)

    saved = json.loads(_through_zorkgpt(map_state(graph), take_west))
    assert saved["connection_confidence"] == {"79_west": 1.0, "193_east": 0.6667}
    peer, db = _write(tmp_path / "p1_z.json", saved), tmp_path / "p2.db"
    code, stdout, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "2 rooms, 2 connections" in stdout and "inferred" not in err
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "193", "79")
    assert code == 0 and "actions: east" in stdout


# --- 3. unknown keys under metadata ---------------------------------------------------------------

META1: dict[str, Any] = {
    "rooms": {"64": {"id": 64, "name": "West of House"}, "137": {"name": "North of House"}},
    "connections": {"64": {"north": 137}},
    "connection_confidence": {"64_north": 1.0},
    "connection_verifications": {"64_north": 1},
    "metadata": {
        "version": "1.0",
        "total_rooms": 2,
        "total_connections": 1,
        "timestamp": "2026-11-24T12:00:00+00:00",
        "notes": "hand-written notes the peer keeps",
        "episode_history": [1, 2, 3],
    },
}


def test_an_unknown_key_in_metadata_is_reported_and_counted_as_lost() -> None:
    parsed = parse_map_state(json.dumps(META1))
    assert 'unknown key "notes" in metadata, left out' in parsed.notes
    assert 'unknown key "episode_history" in metadata, left out' in parsed.notes
    assert not any("timestamp" in note or "version" in note for note in parsed.notes)
    assert "2 unknown key(s)" in parsed.lost
    problem = map_state_at_risk(parsed.graph, json.dumps(META1))
    assert problem is not None and "2 unknown key(s)" in problem


def test_zorkgpt_s_own_metadata_keys_are_known() -> None:
    data = json.loads(json.dumps(META1))
    del data["metadata"]["notes"], data["metadata"]["episode_history"]
    parsed = parse_map_state(json.dumps(data))
    assert not any("unknown key" in note for note in parsed.notes)
    assert not any("unknown" in what for what in parsed.lost)
    # memstore's export, loaded and saved by ZorkGPT (a timestamp, no metadata.memstore),
    # is still overwritten freely
    graph = _memstore_map((64, "north", 137, 3, 1), (137, "south", 64, 1, 0))
    assert map_state_at_risk(graph, _through_zorkgpt(map_state(graph))) is None


def test_export_json_refuses_to_lose_unknown_metadata_without_force(
    capsys: Capsys, tmp_path: Path
) -> None:
    peer, db = _write(tmp_path / "meta1.json", META1), tmp_path / "m.db"
    before = peer.read_bytes()
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and 'unknown key "notes" in metadata, left out' in err
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(peer))
    assert code == 1 and peer.read_bytes() == before
    one_error_line(err, "2 unknown key(s)", "--force")
    code, _, _ = run(capsys, "--db", str(db), "map", "export-json", "--force", str(peer))
    assert code == 0 and "notes" not in peer.read_text(encoding="utf-8")


# --- 4. the exits line's work per view is bounded -------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Up a Tree " + "very " * 60_000,
        " \n\t" * 3_000 + "Up a Tree " * 40,  # mostly whitespace at first
        "e" + "\u0301" * 500,  # a cut never leaves a mark dangling
        "a" * 97 + "\u0301\u0302" + "b" * 300,
        "\U0001f1eb\U0001f1f7" * 200,  # flags: never half of one
        "\x1b[31m red \u202e" * 100,  # controls and bidi made visible
        "x" * 101,
        "word " * 20 + " " * 10_000 + "tail",
    ],
)
def test_a_long_name_is_cut_from_its_beginning_exactly_as_shown_text_cuts_it(name: str) -> None:
    map_exits._long_name.cache_clear()
    assert map_exits._shown_name(name) == shown_text(name)


def _hub(name_length: int, actions: int) -> MapGraph:
    """The reviewer's longhub: room 1 with 12 directions (3 to rooms named with
    ``name_length`` characters) and ``actions`` action exits with long actions."""
    graph = MapGraph()
    graph.rooms[1] = "Hub"
    directions = list(_OPPOSITE)
    for number, direction in enumerate(directions, start=100):
        name = ("Up a Tree " + "very " * name_length)[:name_length] if number < 103 else "R"
        graph.rooms[number] = name
        graph.connections[(1, direction)] = Connection(
            1, direction, direction, direction, number, 1, 0, 1, number, 1, number
        )
    for number in range(actions):
        action = f"push button number {number} " + "x" * 170
        graph.rooms[1000 + number] = "Z" * 300
        graph.connections[(1, action)] = Connection(
            1, action, action, None, 1000 + number, 1, 0, 1, number, 1, number
        )
    return graph


def test_the_exits_line_cuts_each_name_once_and_counts_a_few_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    room = _hub(300_000, 300).exits(1)
    counted: list[str] = []
    cut: list[int] = []
    described: list[str] = []
    real_count, real_cut = tokens.count_tokens, map_exits.shown_text
    real_describe = map_exits.describe_exit

    def count(text: str) -> int:
        counted.append(text)
        return real_count(text)

    def cutting(text: str, limit: int | None = SHOWN_MAX) -> str:
        cut.append(len(text))
        return real_cut(text, limit)

    def describe(exit_: Any) -> str:
        described.append(exit_.command)
        return real_describe(exit_)

    monkeypatch.setattr(tokens, "count_tokens", count)
    monkeypatch.setattr(map_exits, "shown_text", cutting)
    monkeypatch.setattr(map_exits, "describe_exit", describe)
    map_exits._long_name.cache_clear()
    text = "A memory.\n" * 20
    combined = with_exits_line(text, room, 300)
    assert combined.startswith(text) and count_tokens(combined) <= 300
    assert "Up a Tree very" in combined and "more)" in combined
    assert len(described) <= EXITS_LISTED  # each exit described once, at most EXITS_LISTED
    assert len(counted) <= 2 + 2 * 7  # the full line, then a binary search over 40
    assert cut and max(cut) <= 4 * SHOWN_MAX  # a 300,000-character name: its start only


def test_the_fullest_variant_that_fits_is_the_one_a_linear_search_finds() -> None:
    rooms = [_hub(300, actions).exits(1) for actions in (0, 3, 30, 60)]
    rooms.append(_memstore_map((5, "north", 6, 1, 0)).exits(5))
    for room in rooms:
        for budget in (20, 40, 60, 100, 150, 200, 300, 600, 1200):
            text = "A memory about the room.\n" * 3
            expected = text
            for line in exits_line_variants(room):
                if count_tokens(f"{text}\n{line}") <= budget:
                    expected = f"{text}\n{line}"
                    break
            assert with_exits_line(text, room, budget) == expected, (len(room.exits), budget)


def test_get_location_memory_beside_huge_names_and_hundreds_of_actions_is_fast(
    db_path: Path,
) -> None:
    from memstore.manager import SimpleMemoryManager

    graph = _hub(3_000_000, 300)
    parsed = parse_map_state(json.dumps(map_state(graph)))
    with MemoryStore.open(db_path) as store:
        import_map_state(MapStore(store), parsed)
        count_tokens("warm the tokenizer up")
        manager = SimpleMemoryManager(store)
        started = time.perf_counter()
        seen = manager.get_location_memory(1)
        took = time.perf_counter() - started
    assert seen.startswith("Exits: north → Up a Tree very") and "more)" in seen
    assert count_tokens(seen) <= store.config.token_budget
    assert took < 2.0, took  # 35 s before: every variant cut every 3 MB name again


# --- 5. a confidence beyond the derived failures' cap --------------------------------------------


def _huge(rate: float, verifications: int) -> str:
    return json.dumps(
        {
            "rooms": {"1": {"name": "a"}, "2": {"name": "b"}},
            "connections": {"1": {"north": 2}},
            "connection_confidence": {"1_north": rate},
            "connection_verifications": {"1_north": verifications},
        }
    )


def test_a_capped_confidence_that_routes_the_same_is_kept_with_a_warning() -> None:
    # memstore's own export of v=20, f=50,000 (0.0004), through ZorkGPT: the cap gives
    # 0.0021; both are far below the route threshold
    parsed = parse_map_state(_huge(0.0004, 20))
    north = parsed.graph.connections[(1, "north")]
    assert north.failures == MAX_DERIVED_FAILURES
    capped = [note for note in parsed.notes if "kept at 10000" in note]
    assert len(capped) == 1 and capped[0].endswith(": 1_north (0.0004 -> 0.0021)")
    assert "the file's confidence of 1 connection(s)" in parsed.lost
    assert parse_map_state(_huge(0, 10)).graph.connections[(1, "north")].failures == 10_000


def test_memstore_s_export_with_many_failures_survives_a_trip_through_zorkgpt(
    capsys: Capsys, tmp_path: Path
) -> None:
    graph = _memstore_map((1, "north", 2, 20, 50_000))
    peer, db = _write(tmp_path / "hf_z.json", _through_zorkgpt(map_state(graph))), tmp_path / "h"
    code, stdout, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "2 rooms, 1 connection" in stdout
    assert "kept at 10000" in err and "ZorkGPT never writes" not in err


def test_a_capped_confidence_across_the_route_threshold_is_refused_with_its_digits() -> None:
    with pytest.raises(MapStateError) as refused:
        parse_map_state(_huge(0.3, 2**31 - 1))
    message = str(refused.value)
    assert "with 10000 it gives 0.999995, above the route threshold 0.5" in message
    assert "the file's 0.30 is not" in message and "ZorkGPT never writes" not in message
    # the threshold is the one routes use (map_route_confidence)
    assert parse_map_state(_huge(0.0004, 20), route=0.2).graph.connections
    with pytest.raises(MapStateError, match="above the route threshold 0.001"):
        parse_map_state(_huge(0.0004, 20), route=0.001)


def test_import_json_reads_the_file_with_the_configured_route_threshold(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    peer, db = _write(tmp_path / "h.json", _huge(0.0004, 20)), tmp_path / "h.db"
    (tmp_path / "pyproject.toml").write_text(
        "[tool.memstore]\nmap_route_confidence = 0.001\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 1
    one_error_line(err, "above the route threshold 0.001")


# --- 6. +64 is a location number ------------------------------------------------------------------


def test_a_location_number_may_carry_a_plus_sign_as_int_takes_it() -> None:
    assert location_id("+64") == 64 and location_id(" +64 ") == 64 and location_id("-0") == 0
    for value in ("+٦٤", "٦٤", "+1_0", "1_0"):
        with pytest.raises(argparse.ArgumentTypeError, match="digits 0-9"):
            location_id(value)
    for value in ("++64", "+-64", "+"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be an integer"):
            location_id(value)


def test_show_history_and_route_take_plus_64(capsys: Capsys, tmp_path: Path) -> None:
    peer, db = _write(tmp_path / "w.json", META1), tmp_path / "w.db"
    assert run(capsys, "--db", str(db), "map", "import-json", str(peer))[0] == 0
    code, stdout, _ = run(capsys, "--db", str(db), "show", "--", "+64")
    assert code == 0 and "Location 64: West of House" in stdout
    code, _, err = run(capsys, "--db", str(db), "history", "--", "+64", "no such title")
    assert "argument location" not in err
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "+64", "137")
    assert code == 0 and "actions: north" in stdout


# --- 7. a pruned exit listed twice -------------------------------------------------------------


def _pruned(*exits: str) -> str:
    return json.dumps({"rooms": {"1": {"name": "a"}}, "pruned_exits": {"1": list(exits)}})


def test_a_pruned_exit_listed_twice_in_one_spelling_is_one_warning() -> None:
    parsed = parse_map_state(_pruned("south", "south", "north"))
    assert set(parsed.graph.pruned) == {(1, "south"), (1, "north")}
    twice = [note for note in parsed.notes if "lists again" in note]
    assert twice == [
        "pruned_exits: 1 exit(s) a room lists again in the same spelling, kept once: 1_south"
    ]
    assert parsed.lost == ()


def test_duplicate_pruned_actions_are_left_out_with_the_other_actions() -> None:
    parsed = parse_map_state(_pruned("climb tree", "Climb  Tree", "west"))
    assert set(parsed.graph.pruned) == {(1, "west")}
    assert (
        "pruned_exits: 2 pruned action(s) that are not directions, left out (memstore "
        "prunes directions only): 1_climb tree, 1_Climb  Tree"
    ) in parsed.notes


@pytest.mark.parametrize("exits", [("north", "n"), ("south", "SOUTH"), ("up", "go up")])
def test_two_spellings_of_one_pruned_direction_are_still_refused(exits: tuple[str, str]) -> None:
    with pytest.raises(MapStateError, match="the same exit as"):
        parse_map_state(_pruned(*exits))
