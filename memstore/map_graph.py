"""The map's pure core: direction names, the confidence rule, map events and BFS (no I/O).

The map (spec 003 "Map Management", "Cross-Episode Map Persistence") is a graph of rooms
keyed by the Z-machine's integer location ids; names are for display only (several rooms
share one). memstore.map_store keeps it in SQLite and speaks the SQL; this module says
what a turn means for the map and answers questions about a loaded map.

**What a turn records** (``event_for_turn``), from the Z-machine's ground truth only:

* a **move** is ``location_before != location_after`` (never the text). The action that
  moved the player becomes a connection from the room before to the room after: a
  direction command under its canonical direction (``n``, ``go north`` -> ``north``), any
  other action (``enter window``, ``climb tree``, ``pray``) under its own label;
* a **death** records nothing (the death flag): being carried to the Forest after a grue
  is not an exit, and the turn is not a failure either;
* a direction command that did **not** move counts a failure for that exit; after
  ``prune_after`` failures (default 3) an exit that never succeeded (no connection) is
  **pruned**; a later success un-prunes it;
* another action that did not move counts a failure for that action's connection from
  that room, if there is one (``enter window`` while the window is shut).

A teleport is told from an exit by what happens next: a non-direction move is kept as an
action-labelled connection, but if taking the same action in the same room later does
not move the player (a failure) or lands somewhere else, the connection loses
confidence. A connection that leads somewhere new keeps the new destination, with its
verifications restarted at 1 and one more failure, so an exit whose destination changes
(the vampire bat's drop) is not routed through until it proves itself again.

**Confidence** of a connection with ``v`` verifications (times it moved the player
there) and ``f`` failures (times it did not)::

    confidence = (v + 1) / (v + f + 2)

Laplace's rule of succession: a prior of one success and one failure, so one traversal
gives 2/3, never 1. ``route`` uses connections whose confidence is above a threshold
(default 0.5: more verifications than failures) and never a pruned exit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from memstore.triggers import ZMachineContext

__all__ = [
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
    "Unexplored",
    "UntriedDirections",
    "action_key",
    "canonical_direction",
    "confidence",
    "event_for_turn",
    "exits_line",
    "exits_line_variants",
    "normalise_action",
]

#: the canonical directions, in the order exits and untried directions are listed
DIRECTIONS = (
    "north",
    "south",
    "east",
    "west",
    "northeast",
    "northwest",
    "southeast",
    "southwest",
    "up",
    "down",
    "in",
    "out",
)
_ORDER = {direction: index for index, direction in enumerate(DIRECTIONS)}
_ALIASES = {
    **{direction: direction for direction in DIRECTIONS},
    "n": "north",
    "s": "south",
    "e": "east",
    "w": "west",
    "ne": "northeast",
    "nw": "northwest",
    "se": "southeast",
    "sw": "southwest",
    "u": "up",
    "d": "down",
    "inside": "in",
    "outside": "out",
    # Zork's parser walks in / out for a bare ENTER / EXIT
    "enter": "in",
    "exit": "out",
}
#: "go north", "walk north", ...: a verb of motion and a direction is that direction
_MOTION_VERBS = frozenset({"go", "walk", "run", "head"})

#: failures after which an exit that never succeeded is pruned (MemstoreConfig.map_prune_after)
DEFAULT_PRUNE_AFTER = 3
#: route over connections whose confidence is above this (MemstoreConfig.map_route_confidence)
DEFAULT_ROUTE_CONFIDENCE = 0.5

#: MapEvent kinds
MOVED = "moved"  # the action moved the player: a verification of its connection
BLOCKED = "blocked"  # a direction command that did not move: a failure of that exit
STAYED = "stayed"  # another action that did not move: a failure of its connection, if any


def normalise_action(action: str) -> str:
    """An action as a key: lower case, runs of whitespace one space, no trailing stop."""
    return " ".join(action.lower().split()).rstrip(".!").rstrip()


def _direction_of(normalised: str) -> str | None:
    words = normalised.split(" ")
    if len(words) == 2 and words[0] in _MOTION_VERBS:
        words = words[1:]
    return _ALIASES.get(words[0]) if len(words) == 1 else None


def canonical_direction(action: str) -> str | None:
    """The canonical direction an action walks (``n``, ``go north``, ``NORTH.`` ->
    ``north``; a bare ``enter``/``exit`` -> ``in``/``out``), or None for any other action."""
    return _direction_of(normalise_action(action))


@lru_cache(maxsize=4096)  # agents type the same few commands turn after turn
def action_key(action: str) -> str:
    """What makes two actions the same connection: the canonical direction, else the
    normalised action (``Enter  Window`` and ``enter window`` are one)."""
    normalised = normalise_action(action)
    return _direction_of(normalised) or normalised


def confidence(verifications: int, failures: int) -> float:
    """(v + 1) / (v + f + 2): the rule of succession (see the module docstring)."""
    return (verifications + 1) / (verifications + failures + 2)


# --- events: what one turn means for the map ---------------------------------------------------


class MapEvent(NamedTuple):
    """One turn's effect on the map, buffered with the manager's bookkeeping."""

    kind: str  # MOVED, BLOCKED or STAYED
    from_id: int
    from_name: str
    action: str  # as typed
    action_key: str
    direction: str | None
    to_id: int  # where the player was after the action (from_id unless MOVED)
    to_name: str
    episode: int
    turn: int
    prune_after: int = DEFAULT_PRUNE_AFTER


def event_for_turn(
    ctx: ZMachineContext,
    action: str,
    *,
    location_id: int,
    location_name: str,
    episode: int,
    turn: int,
    prune_after: int = DEFAULT_PRUNE_AFTER,
) -> MapEvent | None:
    """The map event of one action, from the context's location ids and death flag.

    ``location_id``/``location_name`` are the room the action was taken in (the context's
    ``location_before`` when it has one). None when the turn says nothing about exits: a
    death, an unknown location after the action, or an empty action.
    """
    if ctx.died or ctx.location_after is None:
        return None
    key = action_key(action)
    if not key:
        return None
    before = ctx.location_before if ctx.location_before is not None else location_id
    name = location_name if before == location_id else ""
    direction = key if key in _ORDER else None
    after = ctx.location_after
    if before != after:
        kind = MOVED
    elif direction is not None:
        kind = BLOCKED
    else:
        kind = STAYED
    to_name = (ctx.location_after_name or "") if kind == MOVED else name
    return MapEvent(
        kind, before, name, action, key, direction, after, to_name, episode, turn, prune_after
    )


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


def _exit_order(connection: Connection) -> tuple[int, str]:
    return (_ORDER.get(connection.direction or "", len(DIRECTIONS)), connection.action_key)


@dataclass
class MapGraph:
    """A loaded map (all of it, or one room's exits) and the rules that change it.

    ``apply`` is the in-memory twin of ``memstore.map_store.write_map_events``'s SQL (a
    test checks they agree); the queries read only what is loaded.
    """

    rooms: dict[int, str] = field(default_factory=dict)
    connections: dict[tuple[int, str], Connection] = field(default_factory=dict)
    failures: dict[tuple[int, str], ExitFailure] = field(default_factory=dict)
    pruned: dict[tuple[int, str], PrunedExit] = field(default_factory=dict)

    # -- the rules

    def _name(self, room: int, name: str) -> None:
        if name:
            self.rooms[room] = name
        else:
            self.rooms.setdefault(room, "")

    def apply(self, event: MapEvent) -> None:
        """Record one event (see the module docstring for the rules)."""
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
                    old.verifications + 1 if same else 1,
                    old.failures if same else old.failures + 1,
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
        count = failed.failures + 1 if failed else 1
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
        self.connections[key] = old._replace(failures=old.failures + 1)
        return True

    def copy(self) -> MapGraph:
        return MapGraph(
            dict(self.rooms), dict(self.connections), dict(self.failures), dict(self.pruned)
        )

    def apply_all(self, events: Iterable[MapEvent]) -> MapGraph:
        for event in events:
            self.apply(event)
        return self

    # -- queries

    def room(self, location_id: int) -> Room | None:
        name = self.rooms.get(location_id)
        return None if name is None else Room(location_id, name)

    def _from(self, location_id: int) -> list[Connection]:
        found = [c for (room, _key), c in self.connections.items() if room == location_id]
        return sorted(found, key=_exit_order)

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
        blocked = {d for room, d in self.failures if room == location_id}
        pruned = {d for room, d in self.pruned if room == location_id}
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
        for connection in sorted(self.connections.values(), key=_exit_order):
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
        name = self.rooms.get(room)
        return f"{name} ({room})" if name else f"room {room}"


# --- the agent's exits line -----------------------------------------------------------------------


def _describe(exit_: Exit) -> str:
    detail = str(exit_.to_id)
    if exit_.failures:
        detail += f", {exit_.verifications}/{exit_.verifications + exit_.failures} verified"
    return f"{exit_.command} → {exit_.to_name or 'room'} ({detail})"


def exits_line(room: RoomExits, *, untried: bool = True, limit: int | None = None) -> str:
    """``Exits: north → North of House (137), east → Behind House (85, 2/3 verified);
    untried: west, up``; "" for a room not on the map. ``limit`` keeps the first exits
    and says how many more there are; ``untried=False`` leaves the untried list out."""
    if room.name is None:
        return ""
    shown = room.exits if limit is None else room.exits[:limit]
    parts = ", ".join(_describe(e) for e in shown) or "none known"
    if len(shown) < len(room.exits):
        parts += f" (+{len(room.exits) - len(shown)} more)"
    line = f"Exits: {parts}"
    if untried and room.untried:
        line += f"; untried: {', '.join(room.untried)}"
    return line


def exits_line_variants(room: RoomExits) -> Iterator[str]:
    """The exits line from the fullest to the shortest, for fitting a token budget."""
    if room.name is None:
        return
    yield exits_line(room)
    for limit in range(len(room.exits), 0, -1):
        yield exits_line(room, untried=False, limit=limit)


def with_exits_line(text: str, room: RoomExits, budget: int) -> str:
    """``text`` and the room's exits line, the fullest variant that keeps the whole within
    ``budget`` tokens (the memories are never cut for it); ``text`` alone if none fits or
    the room is not on the map. The one rule for the manager and ``memstore show``."""
    from memstore.tokens import count_tokens

    for shorter, line in enumerate(exits_line_variants(room)):
        # a shorter line is counted alone first (short, and cached): joining the two saves
        # at most a token where they meet, so most lines are ruled out cheaply
        if shorter and count_tokens(text) + count_tokens(line) > budget + 1:
            continue
        candidate = f"{text}\n{line}" if text else line
        if count_tokens(candidate) <= budget:
            return candidate
    return text
