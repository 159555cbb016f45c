"""The map's pure core: its rows, a loaded graph and the answers it gives (BFS; no I/O).

The map (spec 003 "Map Management", "Cross-Episode Map Persistence") is a graph of rooms
keyed by the Z-machine's integer location ids; names are for display only (several rooms
share one). memstore.map_store keeps it in SQLite and speaks the SQL; this module applies
events to a loaded map and answers questions about it (exits, untried directions, routes).

What a turn records and the confidence rule are in memstore.map_events; the agent's exits
line in memstore.map_exits. Both are importable from here too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

# the events and the exits line, importable from here as before the split
from memstore.map_events import (
    ACTION_KEY_MAX,
    BLOCKED,
    COUNT_MAX,
    DEFAULT_PRUNE_AFTER,
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTION_ORDER,
    DIRECTIONS,
    MOVED,
    SHOWN_MAX,
    STAYED,
    MapEvent,
    action_key,
    canonical_direction,
    confidence,
    event_for_turn,
    normalise_action,
    shown_text,
    stored_action,
    visible,
)
from memstore.map_exits import exits_line, exits_line_variants, with_exits_line
from memstore.map_tables import MAP_TABLES, ByRoom, CountedTable

__all__ = [
    "ACTION_KEY_MAX",
    "BLOCKED",
    "COUNT_MAX",
    "MOVED",
    "STAYED",
    "DEFAULT_PRUNE_AFTER",
    "DEFAULT_ROUTE_CONFIDENCE",
    "DIRECTIONS",
    "Connection",
    "Exit",
    "ExitFailure",
    "MapEvent",
    "MapGraph",
    "PrunedExit",
    "Room",
    "RoomExits",
    "Route",
    "SHOWN_MAX",
    "Unexplored",
    "UntriedDirections",
    "action_key",
    "canonical_direction",
    "confidence",
    "event_for_turn",
    "exits_line",
    "exits_line_variants",
    "normalise_action",
    "shown_text",
    "stored_action",
    "visible",
    "with_exits_line",
]

# --- the map's rows ------------------------------------------------------------------------------


class Connection(NamedTuple):
    """An exit that moved the player: ``action`` (as first typed) from one room to another."""

    from_id: int
    action: str
    action_key: str
    direction: str | None
    to_id: int
    verifications: int
    failures: int
    first_episode: int
    first_turn: int
    last_episode: int
    last_turn: int

    @property
    def confidence(self) -> float:
        return confidence(self.verifications, self.failures)

    @property
    def command(self) -> str:
        """What to type to take it: the canonical direction, else the action as typed."""
        return self.direction or self.action


class ExitFailure(NamedTuple):
    """How often a direction did not move the player from a room."""

    from_id: int
    direction: str
    failures: int
    last_episode: int
    last_turn: int


class PrunedExit(NamedTuple):
    """A direction that failed ``prune_after`` times and never succeeded: not an exit."""

    from_id: int
    direction: str
    episode: int
    turn: int


# --- answers -------------------------------------------------------------------------------------


class Room(NamedTuple):
    id: int
    name: str


class Exit(NamedTuple):
    """A connection as the agent sees it."""

    command: str  # the canonical direction, or the action as typed
    direction: str | None
    to_id: int
    to_name: str
    verifications: int
    failures: int
    confidence: float
    routable: bool  # above the route threshold and not pruned


class RoomExits(NamedTuple):
    """What the map knows about leaving a room; ``reason`` says why it is empty."""

    location_id: int
    name: str | None  # None: the room is not on the map
    exits: tuple[Exit, ...]
    untried: tuple[str, ...]  # canonical directions never tried here
    blocked: tuple[str, ...]  # directions that failed here, not (yet) pruned
    pruned: tuple[str, ...]
    reason: str | None = None


class UntriedDirections(NamedTuple):
    location_id: int
    directions: tuple[str, ...]
    reason: str | None = None


class Route(NamedTuple):
    """A shortest route: ``actions`` to type in order (``()`` when already there), or None
    with the ``reason`` there is none."""

    from_id: int
    to_id: int
    actions: tuple[str, ...] | None
    steps: tuple[Exit, ...] = ()
    reason: str | None = None

    @property
    def found(self) -> bool:
        return self.actions is not None


class Unexplored(NamedTuple):
    """The closest room with an untried direction, and the route there (or a reason)."""

    from_id: int
    location_id: int | None
    name: str | None
    directions: tuple[str, ...]
    route: Route | None
    reason: str | None = None


def _not_on_map(location_id: int) -> str:
    return f"room {location_id} is not on the map (no exit was taken or tried there yet)"


# --- the graph -----------------------------------------------------------------------------------


def exit_order(connection: Connection) -> tuple[int, str]:
    """The order a room's exits are listed in: directions first (DIRECTIONS' order), then
    other actions by name."""
    return (DIRECTION_ORDER.get(connection.direction or "", len(DIRECTIONS)), connection.action_key)


@dataclass
class MapGraph:
    """A loaded map (all of it, or one room's exits) and the rules that change it.

    ``apply`` is the in-memory twin of ``memstore.map_store.write_map_events``'s SQL (a
    test checks they agree); the queries read only what is loaded.

    The tables may be filled directly (memstore.map_sql.read_graph, the JSON reader) and
    their rows replaced under the same key; a room's rows are found through an index of
    the keys by room, built once per map (so ``exits`` of every room is linear in the
    map's size, not quadratic) and built again after any change to a table: each is a
    dict that counts its changes (``CountedTable``; a plain dict given is copied into one).
    """

    rooms: dict[int, str] = field(default_factory=dict)
    connections: dict[tuple[int, str], Connection] = field(default_factory=dict)
    failures: dict[tuple[int, str], ExitFailure] = field(default_factory=dict)
    pruned: dict[tuple[int, str], PrunedExit] = field(default_factory=dict)
    #: the tables' change counts when it was built, and the index by room (not a field:
    #: ``dataclasses.asdict`` and ``MapGraph(**fields)`` never see it)
    _index = None  # type: tuple[tuple[object, ...], ByRoom] | None

    def __setattr__(self, name: str, value: object) -> None:
        # every table is a CountedTable, however it is given (constructor or assignment), so
        # that any change to it is seen, and a table given anew drops the index: it never
        # answers from stale keys
        if name in MAP_TABLES:
            if not isinstance(value, CountedTable):
                value = CountedTable(value)  # type: ignore[call-overload]
            super().__setattr__("_index", None)
        super().__setattr__(name, value)

    def _versions(self) -> tuple[object, ...]:
        return tuple(getattr(self, name).version for name in MAP_TABLES)

    # -- the rules

    def _name(self, room: int, name: str) -> None:
        if name:
            self.rooms[room] = name
        else:
            self.rooms.setdefault(room, "")

    def apply(self, event: MapEvent) -> None:
        """Record one event (see the module docstring for the rules)."""
        self._index = None
        key = (event.from_id, event.action_key)
        if event.kind == STAYED:
            self._fail(key)
            return
        self._name(event.from_id, event.from_name)
        if event.kind == MOVED:
            self._name(event.to_id, event.to_name)
            old = self.connections.get(key)
            if old is None:
                self.connections[key] = Connection(
                    event.from_id,
                    event.action,
                    event.action_key,
                    event.direction,
                    event.to_id,
                    1,
                    0,
                    event.episode,
                    event.turn,
                    event.episode,
                    event.turn,
                )
            else:
                same = old.to_id == event.to_id
                self.connections[key] = Connection(
                    old.from_id,
                    old.action,
                    old.action_key,
                    old.direction,
                    event.to_id,
                    min(old.verifications + 1, COUNT_MAX) if same else 1,
                    old.failures if same else min(old.failures + 1, COUNT_MAX),
                    old.first_episode,
                    old.first_turn,
                    event.episode,
                    event.turn,
                )
            if event.direction is not None:
                self.pruned.pop(key, None)
            return
        # BLOCKED: a direction that did not move
        failed = self.failures.get(key)
        count = min(failed.failures + 1, COUNT_MAX) if failed else 1
        self.failures[key] = ExitFailure(
            event.from_id, event.action_key, count, event.episode, event.turn
        )
        has_connection = self._fail(key)
        if count >= event.prune_after and not has_connection and key not in self.pruned:
            self.pruned[key] = PrunedExit(
                event.from_id, event.action_key, event.episode, event.turn
            )

    def _fail(self, key: tuple[int, str]) -> bool:
        old = self.connections.get(key)
        if old is None:
            return False
        self.connections[key] = old._replace(failures=min(old.failures + 1, COUNT_MAX))
        return True

    def copy(self) -> MapGraph:
        return MapGraph(
            dict(self.rooms), dict(self.connections), dict(self.failures), dict(self.pruned)
        )

    def shown(self, limit: int | None = SHOWN_MAX) -> MapGraph:
        """A copy for a person to read (Map.md, `memstore map`): every room name and action
        as ``shown_text`` gives it (one line, control characters visible, at most
        ``limit`` characters); keys, ids and counts unchanged."""
        return MapGraph(
            {room: shown_text(name, limit) for room, name in self.rooms.items()},
            {
                key: c._replace(action=shown_text(c.action, limit))
                for key, c in self.connections.items()
            },
            dict(self.failures),
            dict(self.pruned),
        )

    def apply_all(self, events: Iterable[MapEvent]) -> MapGraph:
        for event in events:
            self.apply(event)
        return self

    # -- queries

    def room(self, location_id: int) -> Room | None:
        name = self.rooms.get(location_id)
        return None if name is None else Room(location_id, name)

    def _by_room(self) -> ByRoom:
        """The index of the tables' keys by room (see the class docstring)."""
        versions = self._versions()
        if self._index is None or self._index[0] != versions:
            connections: dict[int, list[tuple[int, str]]] = {}
            for key in self.connections:
                connections.setdefault(key[0], []).append(key)
            failures: dict[int, list[str]] = {}
            for room, direction in self.failures:
                failures.setdefault(room, []).append(direction)
            pruned: dict[int, list[str]] = {}
            for room, direction in self.pruned:
                pruned.setdefault(room, []).append(direction)
            self._index = (versions, ByRoom(connections, failures, pruned))
        return self._index[1]

    def _from(self, location_id: int) -> list[Connection]:
        keys = self._by_room().connections.get(location_id, ())
        return sorted([self.connections[key] for key in keys], key=exit_order)

    def _routable(self, connection: Connection, threshold: float) -> bool:
        return connection.confidence > threshold and not (
            connection.direction is not None
            and (connection.from_id, connection.direction) in self.pruned
        )

    def exit(self, connection: Connection, threshold: float = DEFAULT_ROUTE_CONFIDENCE) -> Exit:
        """A connection as the agent sees it (its destination's name, confidence, and
        whether routes use it)."""
        direction = connection.direction
        trust = confidence(connection.verifications, connection.failures)
        return Exit(
            direction or connection.action,
            direction,
            connection.to_id,
            self.rooms.get(connection.to_id, ""),
            connection.verifications,
            connection.failures,
            trust,
            trust > threshold
            and (direction is None or (connection.from_id, direction) not in self.pruned),
        )

    def exits(self, location_id: int, threshold: float = DEFAULT_ROUTE_CONFIDENCE) -> RoomExits:
        """The room's connections (direction order, then actions), untried, blocked and
        pruned directions; for a room not on the map, all empty with the reason."""
        name = self.rooms.get(location_id)
        if name is None:
            return RoomExits(location_id, None, (), (), (), (), _not_on_map(location_id))
        connections = self._from(location_id)
        by_room = self._by_room()
        blocked = set(by_room.failures.get(location_id, ()))
        pruned = set(by_room.pruned.get(location_id, ()))
        exits = {c.direction for c in connections}
        tried = blocked | pruned | exits
        blocked -= pruned | exits
        return RoomExits(
            location_id,
            name,
            tuple([self.exit(c, threshold) for c in connections]),
            tuple([d for d in DIRECTIONS if d not in tried]),
            tuple([d for d in DIRECTIONS if d in blocked]) if blocked else (),
            tuple([d for d in DIRECTIONS if d in pruned]) if pruned else (),
        )

    def untried(self, location_id: int) -> UntriedDirections:
        found = self.exits(location_id)
        return UntriedDirections(location_id, found.untried, found.reason)

    def _adjacency(self, threshold: float) -> dict[int, list[Connection]]:
        adjacency: dict[int, list[Connection]] = {}
        for connection in sorted(self.connections.values(), key=exit_order):
            if self._routable(connection, threshold):
                adjacency.setdefault(connection.from_id, []).append(connection)
        return adjacency

    def _tree(self, start: int, threshold: float) -> dict[int, Connection | None]:
        """Every room reachable from ``start``, in breadth-first order, with the connection
        it was first reached by (None for ``start``)."""
        adjacency = self._adjacency(threshold)
        parents: dict[int, Connection | None] = {start: None}
        queue = deque([start])
        while queue:
            for connection in adjacency.get(queue.popleft(), ()):
                if connection.to_id not in parents:
                    parents[connection.to_id] = connection
                    queue.append(connection.to_id)
        return parents

    def _route_to(
        self, parents: dict[int, Connection | None], from_id: int, goal: int, threshold: float
    ) -> Route:
        steps: list[Exit] = []
        step = parents[goal]
        while step is not None:
            steps.append(self.exit(step, threshold))
            step = parents[step.from_id]
        steps.reverse()
        return Route(from_id, goal, tuple(s.command for s in steps), tuple(steps))

    def route(self, from_id: int, to_id: int, threshold: float = DEFAULT_ROUTE_CONFIDENCE) -> Route:
        """The shortest route (fewest actions) over connections with confidence above
        ``threshold``, never through a pruned exit; ties go to the direction order."""
        for room in (from_id, to_id):
            if room not in self.rooms:
                return Route(from_id, to_id, None, reason=_not_on_map(room))
        parents = self._tree(from_id, threshold)
        if to_id in parents:
            return self._route_to(parents, from_id, to_id, threshold)
        return Route(
            from_id,
            to_id,
            None,
            reason=(
                f"no route from {self._label(from_id)} to {self._label(to_id)} over exits "
                f"with confidence above {threshold:g}"
            ),
        )

    def nearest_unexplored(
        self, from_id: int, threshold: float = DEFAULT_ROUTE_CONFIDENCE
    ) -> Unexplored:
        """The closest room (``from_id`` itself first) with a direction never tried there,
        reachable over the routes ``route`` uses, and the route to it."""
        if from_id not in self.rooms:
            return Unexplored(from_id, None, None, (), None, _not_on_map(from_id))
        tried: dict[int, set[str]] = {}
        for keys in (self.connections, self.failures, self.pruned):
            for room, key in keys:
                tried.setdefault(room, set()).add(key)
        parents = self._tree(from_id, threshold)
        for room in parents:
            untried = tuple(d for d in DIRECTIONS if d not in tried.get(room, ()))
            if untried:
                route = self._route_to(parents, from_id, room, threshold)
                return Unexplored(from_id, room, self.rooms.get(room, ""), untried, route)
        return Unexplored(
            from_id,
            None,
            None,
            (),
            None,
            f"every direction has been tried in every room reachable from {self._label(from_id)}",
        )

    def room_list(self) -> list[Room]:
        return [Room(room, name) for room, name in sorted(self.rooms.items())]

    def _label(self, room: int) -> str:
        name = shown_text(self.rooms.get(room, ""))
        return f"{name} ({room})" if name else f"room {room}"
