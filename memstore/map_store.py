"""MapStore: the map's repository over the store's transactions (issue 16, spec 003).

The map lives in four tables on disk (revision 0006): ``map_rooms``, ``map_connections``,
``map_exit_failures`` and ``map_pruned_exits``. memstore.map_graph holds the rules (what a
turn records, the confidence formula, BFS); this module is their SQL and runs only through
the store's public transaction (``MemoryStore.transaction``), with statements prebuilt at
import time and run by memstore.executor.

Three ways in:

* **per turn**, the manager buffers one MapEvent per turn with its other bookkeeping;
  ``write_map_events`` writes them inside the transaction that writes the rest (the next
  memory write, a flush, the episode's end), so a turn that changes no memory costs no
  commit;
* **queries** (``MapStore.exits``, ``route``, ``untried_directions``,
  ``nearest_unexplored``, ``rooms``) read the map in one read transaction each and answer
  with typed results; a location the map does not know gets an empty answer and the
  reason, never an exception. Each accepts the caller's ``pending`` events (not yet
  written), so an agent sees the map as it is after its own last turn;
* **the agent's view** (``MapView``): the rooms the agent has looked at, read once and
  then kept up to date event by event, so the exits line in its context costs no query
  on most turns.

Confidence of a connection with ``v`` verifications and ``f`` failures is
``(v + 1) / (v + f + 2)``; routes use connections above ``map_route_confidence`` (default
0.5: more verifications than failures) and never a pruned exit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection as SQLConnection

from memstore.connection import change_token
from memstore.map_graph import (
    MOVED,
    STAYED,
    MapEvent,
    MapGraph,
    Room,
    RoomExits,
    Route,
    Unexplored,
    UntriedDirections,
    exits_line,
)
from memstore.map_sql import (
    WRITES,
    check_event,
    graph_problems,
    read_graph,
    read_room,
    replace_graph,
    write_map_events,
)
from memstore.models import check_location_id

if TYPE_CHECKING:
    from memstore.config import MemstoreConfig
    from memstore.store import MemoryStore

__all__ = ["MapStore", "MapView", "read_graph", "read_room", "write_map_events"]


# --- the repository ------------------------------------------------------------------------------


def _data_version(conn: SQLConnection) -> object:
    """Changes whenever another connection committed (connection.change_token)."""
    return change_token(conn)


class MapStore:
    """The map over a MemoryStore: queries with typed answers, and whole-map writes.

    ``pending`` (every query's keyword) holds MapEvents not yet written (the manager's
    buffer): the answer is the map as it will be once they are. Each query is one read
    transaction; the whole map (for routes) is kept until this process writes the map or
    SQLite's ``data_version`` says another connection committed.
    """

    def __init__(self, store: MemoryStore, config: MemstoreConfig | None = None) -> None:
        self.store = store
        self.config = config or store.config
        self._graph: tuple[tuple[object, int], MapGraph] | None = None

    @property
    def threshold(self) -> float:
        """Connections above this confidence are used for routes."""
        return self.config.map_route_confidence

    # -- reading

    def graph(self, *, pending: Iterable[MapEvent] = ()) -> MapGraph:
        """The whole map (a copy the caller may change), with ``pending`` applied."""
        with self.store.transaction(write=False) as conn:
            key = (_data_version(conn), WRITES.count)
            if self._graph is None or self._graph[0] != key:
                self._graph = (key, read_graph(conn))
            graph = self._graph[1].copy()
        return graph.apply_all(pending)

    def room_graph(self, location_id: int, *, pending: Iterable[MapEvent] = ()) -> MapGraph:
        """One room's part of the map, with the pending events that change it."""
        check_location_id(location_id)
        with self.store.transaction(write=False) as conn:
            part = read_room(conn, location_id)
        return _apply_relevant(part, location_id, pending)

    def exits(self, location_id: int, *, pending: Iterable[MapEvent] = ()) -> RoomExits:
        """The room's known exits, untried, blocked and pruned directions."""
        return self.room_graph(location_id, pending=pending).exits(location_id, self.threshold)

    def untried_directions(
        self, location_id: int, *, pending: Iterable[MapEvent] = ()
    ) -> UntriedDirections:
        """Canonical directions never tried at the room (empty, with a reason, when the
        room is not on the map)."""
        found = self.exits(location_id, pending=pending)
        return UntriedDirections(location_id, found.untried, found.reason)

    def route(self, from_id: int, to_id: int, *, pending: Iterable[MapEvent] = ()) -> Route:
        """The shortest route as actions to type, over connections above the confidence
        threshold and never through a pruned exit; ``actions`` None with the reason when
        there is none."""
        check_location_id(from_id)
        check_location_id(to_id)
        return self.graph(pending=pending).route(from_id, to_id, self.threshold)

    def nearest_unexplored(self, from_id: int, *, pending: Iterable[MapEvent] = ()) -> Unexplored:
        """The closest room with a direction never tried there, and the route to it."""
        check_location_id(from_id)
        return self.graph(pending=pending).nearest_unexplored(from_id, self.threshold)

    def rooms(self) -> list[Room]:
        """Every room on the map, by id."""
        return self.graph().room_list()

    def exits_line(self, location_id: int, *, pending: Iterable[MapEvent] = ()) -> str:
        """The agent's one-line summary of the room's exits ("" off the map)."""
        return exits_line(self.exits(location_id, pending=pending))

    # -- writing

    def record(self, events: Iterable[MapEvent]) -> None:
        """Write map events now, in one write transaction (the manager batches them with
        its bookkeeping instead)."""
        checked = [check_event(e) for e in events]
        if checked:
            with self.store.transaction(write=True, changes_memories=False) as conn:
                write_map_events(conn, checked)

    def replace(self, graph: MapGraph) -> None:
        """Make the stored map exactly ``graph``, in one write transaction: all or nothing.
        A graph whose rows point at rooms it does not have is refused (ValueError)."""
        problems = graph_problems(graph)
        if problems:
            raise ValueError(f"not a consistent map: {problems[0]}; nothing was written")
        with self.store.transaction(write=True, changes_memories=False) as conn:
            replace_graph(conn, graph)


# --- the agent's view, kept up to date event by event ------------------------------------------


class _Part(NamedTuple):
    """A room's part of the view: its rows with the buffered events applied, and its
    exits once worked out."""

    graph: MapGraph
    exits: RoomExits | None = None


class MapView:
    """The map as one agent sees it every turn: what is stored, plus the events its
    manager has buffered and not written yet (``pending``).

    Each room's part is read once and then kept up to date event by event: ``recorded``
    applies a new buffered event, ``settle`` notes that the buffer was written (nothing
    changes: the view already had it). So a turn's exits line costs no query. Map writes
    by anything else in this process (the write log) drop the parts they change; another
    connection's commits (SQLite's ``data_version``, asked at most every ``max_age_s``
    seconds) drop everything. A dropped part is read again and the buffer re-applied.
    """

    def __init__(self, map_store: MapStore, max_age_s: float = 0.0) -> None:
        self.map = map_store
        self.max_age_s = max_age_s
        self._parts: dict[int, _Part] = {}
        self._names: dict[int, str] = {}  # room names as the parts show them
        self._count = WRITES.count  # the map writes in this process accounted for
        self._version: object = None
        self._checked = float("-inf")  # time.monotonic() when data_version was asked
        self._buffered = False  # events were recorded since the last write
        #: for the caller: anything worked out from an answer (cleared with the parts)
        self.memo: dict[int, Any] = {}

    def _drop(self, location_ids: Iterable[int] | None = None) -> None:
        if location_ids is None:
            self._parts.clear()
            self._names.clear()
            self.memo.clear()
            return
        for location_id in list(location_ids):
            self._parts.pop(location_id, None)

    def _catch_up(self) -> None:
        """Drop the parts that other map writes in this process changed."""
        if WRITES.count == self._count:
            return
        if WRITES.everything > self._count:
            self._drop()
        else:
            changed = {room for room, at in WRITES.rooms.items() if at > self._count}
            self._drop(
                location_id
                for location_id, part in self._parts.items()
                if location_id in changed or not changed.isdisjoint(part.graph.rooms)
            )
        self._count = WRITES.count

    def recorded(self, event: MapEvent) -> None:
        """A new event in the buffer: applied to the parts it changes (the room it was
        taken in, the room it led to, and on a rare rename every part showing it)."""
        self._buffered = True
        parts = self._parts
        from_id = event.from_id
        part = parts.get(from_id)
        if event.kind == STAYED:  # most turns: nothing, or one connection's failures
            if part is not None and (from_id, event.action_key) in part.graph.connections:
                self._apply(from_id, part, event)
            return
        renamed = self._learn_name(from_id, event.from_name)
        if event.kind == MOVED:
            renamed |= self._learn_name(event.to_id, event.to_name)
        if renamed:
            targets = [
                location_id
                for location_id, found in parts.items()
                if from_id in found.graph.rooms or event.to_id in found.graph.rooms
            ]
        else:
            targets = [from_id] if event.to_id == from_id else [from_id, event.to_id]
        for location_id in targets:
            part = parts.get(location_id)
            if part is not None and _changes(part.graph, location_id, event):
                self._apply(location_id, part, event)

    def _learn_name(self, room: int, name: str) -> bool:
        """Note a room's name; True when a part may show another name for it."""
        if not name:
            return False
        known = self._names.get(room)
        self._names[room] = name
        return known is not None and known != name

    def _apply(self, location_id: int, part: _Part, event: MapEvent) -> None:
        """Apply an event to a part; when it only changed the counts of one of the room's
        connections (the usual case), its exits are patched rather than worked out."""
        graph, key = part.graph, (event.from_id, event.action_key)
        before = graph.connections.get(key)
        pruned = key in graph.pruned
        graph.apply(event)
        exits = part.exits
        if (
            exits is not None
            and location_id == event.from_id
            and before is not None
            and graph.connections[key].to_id == before.to_id
            and (key in graph.pruned) == pruned
        ):
            changed = graph.exit(graph.connections[key], self.map.threshold)
            command = changed.command
            exits = RoomExits(
                exits.location_id,
                exits.name,
                tuple([changed if e.command == command else e for e in exits.exits]),
                exits.untried,
                exits.blocked,
                exits.pruned,
                exits.reason,
            )
        else:
            exits = None
        self._parts[location_id] = _Part(graph, exits)

    def settle(self, pending: Sequence[MapEvent]) -> None:
        """Call after anything that may have written the buffer: when it is empty again
        and exactly one map write happened, that write was the buffer, which the view
        already shows."""
        if self._buffered and not pending:
            self._buffered = False
            if WRITES.count == self._count + 1:
                self._count = WRITES.count

    def exits(self, location_id: int, pending: Sequence[MapEvent]) -> RoomExits:
        """The room's exits as the agent should see them (``pending``: the buffer)."""
        self._catch_up()
        part = self._parts.get(location_id)
        if part is None or time.monotonic() - self._checked > self.max_age_s:
            with self.map.store.transaction(write=False) as conn:
                version = _data_version(conn)
                self._checked = time.monotonic()
                if version != self._version:
                    self._version = version
                    self._drop()
                part = self._parts.get(location_id)
                if part is None:
                    graph = read_room(conn, location_id)
                    part = _Part(_apply_relevant(graph, location_id, pending))
                    self._names.update(graph.rooms)
        if part.exits is None:
            part = _Part(part.graph, part.graph.exits(location_id, self.map.threshold))
        self._parts[location_id] = part
        return part.exits  # type: ignore[return-value]


def _apply_relevant(part: MapGraph, location_id: int, events: Iterable[MapEvent]) -> MapGraph:
    """Apply to a room's part, in order, the events that change what it shows."""
    for event in events:
        if _changes(part, location_id, event):
            part.apply(event)
    return part


def _changes(part: MapGraph, location_id: int, event: MapEvent) -> bool:
    """Whether an event changes what a room's part shows: the room's own exits (an
    action with no connection here changes nothing), or the name of the room or of a
    room it shows (a destination)."""
    if event.from_id == location_id:
        return event.kind != STAYED or (location_id, event.action_key) in part.connections
    rooms = part.rooms
    return event.kind != STAYED and (
        _names(rooms, location_id, event.from_id, event.from_name)
        or (event.kind == MOVED and _names(rooms, location_id, event.to_id, event.to_name))
    )


def _names(rooms: dict[int, str], location_id: int, room: int, name: str) -> bool:
    """An event naming ``room`` changes a part showing ``rooms`` (of ``location_id``)."""
    if room in rooms:
        return bool(name) and name != rooms[room]
    return room == location_id
