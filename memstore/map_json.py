"""ZorkGPT's ``map_state.json``: the map written out and read back (issue 16, spec 003).

A peer who plays with ZorkGPT keeps its map in ``map_state.json``; ``memstore map
export-json FILE`` writes this database's map in that shape and ``memstore map
import-json FILE`` reads one in. The shape (spec 003 "Cross-Episode Map Persistence")::

    {
      "rooms": {"<id>": {"id": <int>, "name": <str>, "exits": [<str>, ...]}},
      "room_names": {"<id>": <str>},
      "connections": {"<from id>": {"<exit or action>": <to id>}},
      "connection_confidence": {"<from id>_<exit>": <float 0..1>},
      "connection_verifications": {"<from id>_<exit>": <int >= 0>},
      "exit_failure_counts": {"<from id>_<exit>": <int >= 0>},
      "pruned_exits": {"<from id>": [<exit>, ...]},
      "metadata": {"version": "1.0", "total_rooms": <int>, "total_connections": <int>, ...}
    }

Ids are the Z-machine's location numbers, written as decimal strings where JSON needs a
key. ``"<from id>_<exit>"`` splits at the first ``_`` (an id has none). An exit is a
canonical direction (``north``, ..., ``in``, ``out``) or another action, normalised as the
map keys it (memstore.map_graph.action_key: ``N`` and ``go north`` are ``north``, ``Enter
Window`` is ``enter window``).

**Writing** (:func:`dump_map_state`) is deterministic: rooms by id, a room's exits in the
map's direction order and then actions; two-space indentation and a final newline. A
room's ``exits`` are the exits that were taken from it (its connections). ``room_names``
(ZorkGPT's display names, which its ``from_dict`` restores only from that key) repeats
each room's name. Confidence is memstore's rule ``(v + 1) / (v + f + 2)``, rounded to 4
places, at most 0.9999 (the rule never reaches 1; ZorkGPT's cap writes 1.0): memstore
keeps counts, not a file's confidence, so a peer's 1.0 for an exit taken once comes back
as 0.6667 (lossy for the peer, whose own rule adds 0.1 a take). No
timestamp is written (the same map gives the same file). What the shape has no place for
goes under ``metadata.memstore``, so that a memstore → JSON → memstore trip loses
nothing::

    "memstore": {
      "confidence": "(v + 1) / (v + f + 2)",
      "connections": {"<from>_<exit>": {"action": "<as first typed>", "failures": <int>,
                                        "first_seen": [<episode>, <turn>],
                                        "last_seen": [<episode>, <turn>]}},
      "exit_failures": {"<from>_<direction>": [<episode>, <turn>]},   # last failed
      "pruned_exits": {"<from>_<direction>": [<episode>, <turn>]}     # when pruned
    }

**Reading** (:func:`parse_map_state`, memstore.map_json_read, which says what is refused
and what is reported and left out) validates everything before anything is written.

**Importing** (:func:`import_map_state`) replaces the stored map with the file's in one
transaction (``MapStore.replace``): all of it or nothing. A database that already has a
map is refused unless ``replace=True`` (``--replace``), so a peer's file never overwrites
what agents learned by accident; merging two maps is not supported.

**Replacing a file** (:func:`map_state_at_risk`): ``export-json`` replaces an existing
file only when that loses no map: the file is empty, or a map_state.json the map written
over it covers (an earlier export of this map, or of a map it grew from): every room and
connection in it is on the map, each connection leads to the same room with no more
verifications or failures than the map has, and every failed exit (no more failures) and
pruned exit is on the map too; and the reader left nothing of it out (``ParsedMapState.lost``:
exits listed but never taken, failure counts and pruned exits of actions, the file's own
confidences, ZorkGPT's inferred ways back, unknown keys ...), which a memstore export never
has. Anything else (a peer's map_state.json, imported or not, a file that is no
map_state.json) is refused unless ``--force``, naming what would be lost.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from memstore.errors import MapStateError
from memstore.map_events import written_exit
from memstore.map_graph import (
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTION_ORDER,
    Connection,
    MapGraph,
    confidence,
    exit_order,
)

# the reader, importable from here too
from memstore.map_json_checks import MAX_COUNT, MAX_INTEGER
from memstore.map_json_connections import CONFIDENCE_RULE, MAX_DERIVED_FAILURES
from memstore.map_json_read import (
    FORMAT_VERSION,
    TOP_LEVEL_KEYS,
    ParsedMapState,
    parse_map_state,
)
from memstore.map_store import read_graph

if TYPE_CHECKING:
    from memstore.map_store import MapStore

__all__ = [
    "CONFIDENCE_RULE",
    "FORMAT_VERSION",
    "MAX_COUNT",
    "MAX_DERIVED_FAILURES",
    "MAX_INTEGER",
    "TOP_LEVEL_KEYS",
    "ImportedMap",
    "ParsedMapState",
    "dump_map_state",
    "import_map_state",
    "map_state",
    "map_state_at_risk",
    "parse_map_state",
]

# --- writing -------------------------------------------------------------------------------------

#: the highest confidence written (4 places below 1: a connection taken 20,000 times would
#: round to 1.0, which only ZorkGPT's cap writes)
WRITTEN_MAX = 0.9999


def _by_room(graph: MapGraph) -> dict[int, list[Connection]]:
    rooms: dict[int, list[Connection]] = {}
    for connection in sorted(graph.connections.values(), key=exit_order):
        rooms.setdefault(connection.from_id, []).append(connection)
    return rooms


def _direction_rows(table: dict[tuple[int, str], Any]) -> list[Any]:
    return [
        table[key]
        for key in sorted(table, key=lambda k: (k[0], DIRECTION_ORDER.get(k[1], 99), k[1]))
    ]


def written_confidence(verifications: int, failures: int) -> float:
    """memstore's rule rounded to 4 places, never 1.0 (at most WRITTEN_MAX): the rule is
    below 1, and ZorkGPT's cap of 1.0 is what tells its guesses from memstore's counts
    (memstore.map_json_rules.inferred_way_back) once ``metadata.memstore`` is gone."""
    return min(WRITTEN_MAX, round(confidence(verifications, failures), 4))


def map_state(graph: MapGraph) -> dict[str, Any]:
    """The map as a ``map_state.json`` object (see the module docstring), ordered."""
    by_room = _by_room(graph)
    rooms = {
        str(room): {
            "id": room,
            "name": graph.rooms[room],
            "exits": [written_exit(c.action_key) for c in by_room.get(room, [])],
        }
        for room in sorted(graph.rooms)
    }
    room_names = {str(room): graph.rooms[room] for room in sorted(graph.rooms)}
    connections: dict[str, dict[str, int]] = {}
    trust: dict[str, float] = {}
    verified: dict[str, int] = {}
    extra_connections: dict[str, dict[str, Any]] = {}
    for room in sorted(by_room):
        for c in by_room[room]:
            exit_ = written_exit(c.action_key)
            key = f"{room}_{exit_}"
            connections.setdefault(str(room), {})[exit_] = c.to_id
            trust[key] = written_confidence(c.verifications, c.failures)
            verified[key] = c.verifications
            extra_connections[key] = {
                "action": c.action,
                "failures": c.failures,
                "first_seen": [c.first_episode, c.first_turn],
                "last_seen": [c.last_episode, c.last_turn],
            }
    failures = _direction_rows(graph.failures)
    pruned = _direction_rows(graph.pruned)
    pruned_exits: dict[str, list[str]] = {}
    for p in pruned:
        pruned_exits.setdefault(str(p.from_id), []).append(p.direction)
    return {
        "rooms": rooms,
        "room_names": room_names,
        "connections": connections,
        "connection_confidence": trust,
        "connection_verifications": verified,
        "exit_failure_counts": {f"{f.from_id}_{f.direction}": f.failures for f in failures},
        "pruned_exits": pruned_exits,
        "metadata": {
            "version": FORMAT_VERSION,
            "total_rooms": len(graph.rooms),
            "total_connections": len(graph.connections),
            "memstore": {
                "confidence": CONFIDENCE_RULE,
                "connections": extra_connections,
                "exit_failures": {
                    f"{f.from_id}_{f.direction}": [f.last_episode, f.last_turn] for f in failures
                },
                "pruned_exits": {f"{p.from_id}_{p.direction}": [p.episode, p.turn] for p in pruned},
            },
        },
    }


def dump_map_state(graph: MapGraph) -> str:
    """``map_state.json`` text for ``graph``: deterministic, UTF-8, a final newline."""
    return json.dumps(map_state(graph), indent=2, ensure_ascii=False) + "\n"


def map_state_at_risk(
    graph: MapGraph, text: str, route: float = DEFAULT_ROUTE_CONFIDENCE
) -> str | None:
    """None when replacing a file holding ``text`` with ``graph``'s map_state.json loses
    no map (see the module docstring); else what it would lose, as the end of a sentence
    that starts with the file's name (one line). ``route``: the route threshold the file
    is read with (memstore.map_json_read.parse_map_state)."""
    if not text.strip():
        return None
    try:
        parsed = parse_map_state(text, route)
    except MapStateError as exc:
        problem = str(exc).removesuffix("; nothing was imported")
        return f"is not a map_state.json memstore reads ({problem})"
    lost = _not_covered(graph, parsed.graph)
    if not lost and not parsed.lost:
        return None
    held = []
    if lost:
        held.append(f"a map with {' and '.join(lost)} that this database's map does not have")
    if parsed.lost:
        held.append(
            f"what memstore's map does not keep, which an export loses ({', '.join(parsed.lost)})"
        )
    return f"holds {' and '.join(held)} (a peer's map_state.json?)"


def _not_covered(graph: MapGraph, held: MapGraph) -> list[str]:
    """What ``held`` knows that ``graph`` does not, counted (``["2 rooms", ...]``): a
    room or connection it lacks, a connection leading elsewhere, more verifications or
    failures than it has (unless it saw that connection last no later than ``graph``
    did), a failed exit it lacks or has failed fewer times, a pruned exit it lacks (unless
    it has taken that exit since, which un-prunes it)."""
    mine = graph.connections
    # a connection the file last saw (memstore's own export says when) no later than the
    # database did holds nothing new, whatever its destination or counts then: the map
    # follows an exit's latest destination, and starts its count again there
    shared = [
        (c, mine[k])
        for k, c in held.connections.items()
        if k in mine
        and not (
            c.last_episode > 0
            and (c.last_episode, c.last_turn) <= (mine[k].last_episode, mine[k].last_turn)
        )
    ]
    counts = (
        (sum(1 for room in held.rooms if room not in graph.rooms), "room", "rooms"),
        (sum(1 for key in held.connections if key not in mine), "connection", "connections"),
        (
            sum(1 for c, m in shared if c.to_id != m.to_id),
            "connection leading elsewhere",
            "connections leading elsewhere",
        ),
        (
            sum(
                1
                for c, m in shared
                if c.to_id == m.to_id
                and (c.verifications > m.verifications or c.failures > m.failures)
            ),
            "connection seen more often",
            "connections seen more often",
        ),
        (
            sum(
                1
                for k, f in held.failures.items()
                if k not in graph.failures or f.failures > graph.failures[k].failures
            ),
            "failed exit",
            "failed exits",
        ),
        (
            sum(1 for k in held.pruned if k not in graph.pruned and k not in mine),
            "pruned exit",
            "pruned exits",
        ),
    )
    return [f"{n} {one if n == 1 else many}" for n, one, many in counts if n]


# --- importing -----------------------------------------------------------------------------------


class ImportedMap(NamedTuple):
    """What ``import_map_state`` wrote, and what the map held before (replaced)."""

    rooms: int
    connections: int
    replaced_rooms: int
    replaced_connections: int


def import_map_state(
    map_store: MapStore, parsed: ParsedMapState, *, replace: bool = False
) -> ImportedMap:
    """Make the stored map the file's, in one write transaction: all or nothing. A
    database whose map is not empty is refused (MapStateError) unless ``replace``."""
    graph = parsed.graph
    with map_store.store.transaction(write=True) as conn:
        current = read_graph(conn)
        if current.rooms and not replace:
            raise MapStateError(
                f"the database already has a map ({len(current.rooms)} rooms, "
                f"{len(current.connections)} connections): --replace replaces it with the "
                "file's; nothing was imported"
            )
        try:
            map_store.replace(graph)
        except ValueError as exc:  # pragma: no cover - the reader checks what replace checks
            raise MapStateError(str(exc)) from exc
    return ImportedMap(
        len(graph.rooms), len(graph.connections), len(current.rooms), len(current.connections)
    )
