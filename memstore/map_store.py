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

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    delete,
    exists,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy import Connection as SQLConnection

from memstore.connection import change_token
from memstore.dialect import OnConflict
from memstore.executor import run, run_many
from memstore.map_graph import (
    BLOCKED,
    DIRECTIONS,
    MOVED,
    STAYED,
    Connection,
    ExitFailure,
    MapEvent,
    MapGraph,
    PrunedExit,
    Room,
    RoomExits,
    Route,
    Unexplored,
    UntriedDirections,
    exits_line,
)
from memstore.models import check_location_id
from memstore.schema import map_connections, map_exit_failures, map_pruned_exits, map_rooms

if TYPE_CHECKING:
    from memstore.config import MemstoreConfig
    from memstore.store import MemoryStore

__all__ = ["MapStore", "MapView", "read_graph", "read_room", "write_map_events"]

# --- statements, built once ---------------------------------------------------------------------

_EMPTY: ColumnElement[str] = literal_column("''")
#: a room, named when the game gave a name ("" until then); a new name replaces the old
_UPSERT_ROOM = OnConflict(
    map_rooms,
    ["id"],
    values={"id": bindparam("id"), "name": bindparam("name")},
    update=lambda excluded: {"name": excluded.name},
    where=lambda excluded: and_(excluded.name != _EMPTY, map_rooms.c.name != excluded.name),
)


def _moved_again(excluded: Any) -> dict[str, Any]:
    """A move: one more verification, or a new destination (verifications restart at 1 and
    the old destination's miss is one more failure); the action keeps its first typed form."""
    same_destination = map_connections.c.to_id == excluded.to_id
    return {
        "verifications": case(
            (same_destination, map_connections.c.verifications + literal_column("1")),
            else_=literal_column("1"),
        ),
        "failures": case(
            (same_destination, map_connections.c.failures),
            else_=map_connections.c.failures + literal_column("1"),
        ),
        "to_id": excluded.to_id,
        "last_episode": excluded.last_episode,
        "last_turn": excluded.last_turn,
    }


_MOVED = OnConflict(
    map_connections,
    ["from_id", "action_key"],
    values={
        "from_id": bindparam("from_id"),
        "action": bindparam("action"),
        "action_key": bindparam("action_key"),
        "direction": bindparam("direction"),
        "to_id": bindparam("to_id"),
        "verifications": literal_column("1"),
        "failures": literal_column("0"),
        "first_episode": bindparam("episode"),
        "first_turn": bindparam("turn"),
        "last_episode": bindparam("episode"),
        "last_turn": bindparam("turn"),
    },
    update=_moved_again,
)
_to_room = map_rooms.alias("to_room")


def _named(table: Any, room: str, name: str) -> Any:
    """The room exists and the event does not rename it (an empty name renames nothing)."""
    return (
        exists()
        .where(table.c.id == bindparam(room))
        .where(or_(bindparam(name) == _EMPTY, table.c.name == bindparam(name)))
    )


#: the usual move: an exit known to lead there, taken again, naming no room anew and not
#: pruned; anything else (no row changed) goes through the full path below
_REVERIFY = (
    update(map_connections)
    .where(
        map_connections.c.from_id == bindparam("room"),
        map_connections.c.action_key == bindparam("key"),
        map_connections.c.to_id == bindparam("to"),
        ~exists().where(
            map_pruned_exits.c.from_id == bindparam("room"),
            map_pruned_exits.c.direction == bindparam("key"),
        ),
        _named(map_rooms, "room", "from_name"),
        _named(_to_room, "to", "to_name"),
    )
    .values(
        verifications=map_connections.c.verifications + literal_column("1"),
        last_episode=bindparam("episode"),
        last_turn=bindparam("turn"),
    )
)
_UNPRUNE = delete(map_pruned_exits).where(
    map_pruned_exits.c.from_id == bindparam("room"),
    map_pruned_exits.c.direction == bindparam("key"),
)
#: a direction that did not move: one more failure there; returns the count
_BLOCKED = OnConflict(
    map_exit_failures,
    ["from_id", "direction"],
    values={
        "from_id": bindparam("from_id"),
        "direction": bindparam("direction"),
        "count": literal_column("1"),
        "last_episode": bindparam("last_episode"),
        "last_turn": bindparam("last_turn"),
    },
    update=lambda excluded: {
        "count": map_exit_failures.c.count + literal_column("1"),
        "last_episode": excluded.last_episode,
        "last_turn": excluded.last_turn,
    },
    returning=[map_exit_failures.c.count],
)
#: an action that did not move: a failure of its connection from here, if there is one
_FAIL_CONNECTION = (
    update(map_connections)
    .where(
        map_connections.c.from_id == bindparam("room"),
        map_connections.c.action_key == bindparam("key"),
    )
    .values(failures=map_connections.c.failures + literal_column("1"))
)
_PRUNE = OnConflict(map_pruned_exits)

_CONNECTION_COLUMNS = (
    map_connections.c.from_id,
    map_connections.c.action,
    map_connections.c.action_key,
    map_connections.c.direction,
    map_connections.c.to_id,
    map_connections.c.verifications,
    map_connections.c.failures,
    map_connections.c.first_episode,
    map_connections.c.first_turn,
    map_connections.c.last_episode,
    map_connections.c.last_turn,
)
_FAILURE_COLUMNS = (
    map_exit_failures.c.from_id,
    map_exit_failures.c.direction,
    map_exit_failures.c.count,
    map_exit_failures.c.last_episode,
    map_exit_failures.c.last_turn,
)
_PRUNED_COLUMNS = (
    map_pruned_exits.c.from_id,
    map_pruned_exits.c.direction,
    map_pruned_exits.c.pruned_episode,
    map_pruned_exits.c.pruned_turn,
)
_ROOMS = select(map_rooms.c.id, map_rooms.c.name)
_CONNECTIONS = select(*_CONNECTION_COLUMNS)
_FAILURES = select(*_FAILURE_COLUMNS)
_PRUNED = select(*_PRUNED_COLUMNS)

_ROOM_NAME = select(map_rooms.c.name).where(map_rooms.c.id == bindparam("room"))
_ROOM_CONNECTIONS = (
    select(*_CONNECTION_COLUMNS, _to_room.c.name)
    .join_from(map_connections, _to_room, _to_room.c.id == map_connections.c.to_id)
    .where(map_connections.c.from_id == bindparam("room"))
)
_ROOM_FAILURES = select(*_FAILURE_COLUMNS).where(map_exit_failures.c.from_id == bindparam("room"))
_ROOM_PRUNED = select(*_PRUNED_COLUMNS).where(map_pruned_exits.c.from_id == bindparam("room"))

_INSERT_ROOMS = insert(map_rooms)
_INSERT_CONNECTIONS = insert(map_connections)
_INSERT_FAILURES = insert(map_exit_failures)
_INSERT_PRUNED = insert(map_pruned_exits)
#: children first: connections, failures and pruned exits point at rooms
_CLEAR = tuple(delete(t) for t in (map_pruned_exits, map_exit_failures, map_connections, map_rooms))


# --- writing -------------------------------------------------------------------------------------


class _WriteLog:
    """What this process wrote to maps, for what MapStore and MapView keep: a counter of
    writes, and for each room the last write that changed its exits or added or renamed
    it (a view's part showing that room is read again). Several databases share it: a
    room id written in one only makes another's view read again, never wrong."""

    def __init__(self) -> None:
        self.count = 0
        self.rooms: dict[int, int] = {}
        self.everything = 0  # a write after which no cached part is trusted (replace)

    def next(self) -> int:
        self.count += 1
        return self.count


_WRITES = _WriteLog()


def _name_room(
    conn: SQLConnection, named: dict[int, str], room: int, name: str, stamp: int
) -> None:
    """Upsert a room once per batch (again only when a batch brings its name); a room
    that was added or renamed is marked changed."""
    known = named.get(room)
    if known is not None and (not name or name == known):
        return
    if run(conn, _UPSERT_ROOM, {"id": room, "name": name}).rowcount:
        _WRITES.rooms[room] = stamp
    named[room] = name or (known or "")


def write_map_events(conn: SQLConnection, events: Sequence[MapEvent]) -> None:
    """Write buffered map events, in order, inside the caller's write transaction.

    The SQL twin of ``MapGraph.apply`` (memstore.map_graph): a test checks that both give
    the same map for the same events.
    """
    stamp = _WRITES.next()
    changed = _WRITES.rooms
    named: dict[int, str] = {}
    # Most turns are other actions that did not move (take, open, read): their failures
    # commute with each other, so those of exits no move or direction of this batch
    # touches are written at the end in one executemany (and their rooms marked).
    moving = {(e.from_id, e.action_key) for e in events if e.kind != STAYED}
    stayed: list[dict[str, Any]] = []
    for event in events:
        if event.kind == STAYED:
            params = {"room": event.from_id, "key": event.action_key}
            if (event.from_id, event.action_key) not in moving:
                stayed.append(params)
                changed[event.from_id] = stamp
            elif run(conn, _FAIL_CONNECTION, params).rowcount:
                changed[event.from_id] = stamp
            continue
        changed[event.from_id] = stamp
        if event.kind == MOVED:
            again = {
                "room": event.from_id,
                "key": event.action_key,
                "to": event.to_id,
                "from_name": event.from_name,
                "to_name": event.to_name,
                "episode": event.episode,
                "turn": event.turn,
            }
            if run(conn, _REVERIFY, again).rowcount:
                continue
        _name_room(conn, named, event.from_id, event.from_name, stamp)
        if event.kind == MOVED:
            _name_room(conn, named, event.to_id, event.to_name, stamp)
            run(
                conn,
                _MOVED,
                {
                    "from_id": event.from_id,
                    "action": event.action,
                    "action_key": event.action_key,
                    "direction": event.direction,
                    "to_id": event.to_id,
                    "episode": event.episode,
                    "turn": event.turn,
                },
            )
            if event.direction is not None:
                run(conn, _UNPRUNE, {"room": event.from_id, "key": event.direction})
            continue
        # BLOCKED: a direction command that did not move
        ((count,),) = run(
            conn,
            _BLOCKED,
            {
                "from_id": event.from_id,
                "direction": event.action_key,
                "last_episode": event.episode,
                "last_turn": event.turn,
            },
        ).fetchall()
        params = {"room": event.from_id, "key": event.action_key}
        has_connection = run(conn, _FAIL_CONNECTION, params).rowcount > 0
        if count >= event.prune_after and not has_connection:
            run(
                conn,
                _PRUNE,
                {
                    "from_id": event.from_id,
                    "direction": event.action_key,
                    "pruned_episode": event.episode,
                    "pruned_turn": event.turn,
                },
            )

    run_many(conn, _FAIL_CONNECTION, stayed)


def _check_event(event: object) -> MapEvent:
    if not isinstance(event, MapEvent):
        raise TypeError(f"a map event must be a MapEvent, got {type(event).__name__}")
    if event.kind not in (MOVED, BLOCKED, STAYED):
        raise ValueError(f"unknown map event kind {event.kind!r}")
    if (event.kind == BLOCKED or event.direction is not None) and (
        event.direction != event.action_key
    ):
        raise ValueError(f"a direction's event must have its direction as its key: {event!r}")
    for value in (event.from_id, event.to_id):
        check_location_id(value)
    for name in ("episode", "turn", "prune_after"):
        value, least = getattr(event, name), 0 if name == "turn" else 1
        if type(value) is not int or value < least:
            raise ValueError(f"a map event's {name} must be an int >= {least}, got {value!r}")
    if event.direction is not None and event.direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {event.direction!r}")
    return event


# --- reading -------------------------------------------------------------------------------------


def read_graph(conn: SQLConnection) -> MapGraph:
    """The whole map (inside the caller's transaction)."""
    graph = MapGraph()
    graph.rooms.update(run(conn, _ROOMS, {}).fetchall())
    for row in run(conn, _CONNECTIONS, {}):
        graph.connections[(row[0], row[2])] = Connection(*row)
    for row in run(conn, _FAILURES, {}):
        graph.failures[(row[0], row[1])] = ExitFailure(*row)
    for row in run(conn, _PRUNED, {}):
        graph.pruned[(row[0], row[1])] = PrunedExit(*row)
    return graph


def read_room(conn: SQLConnection, location_id: int) -> MapGraph:
    """One room's part of the map: its name, connections (with their destinations'
    names), exit failures and pruned exits; empty for a room not on the map."""
    graph = MapGraph()
    named = run(conn, _ROOM_NAME, {"room": location_id}).fetchall()
    if not named:
        return graph
    graph.rooms[location_id] = named[0][0]
    for *values, to_name in run(conn, _ROOM_CONNECTIONS, {"room": location_id}):
        found = Connection(*values)
        graph.connections[(location_id, found.action_key)] = found
        graph.rooms.setdefault(found.to_id, to_name)
    for row in run(conn, _ROOM_FAILURES, {"room": location_id}):
        graph.failures[(location_id, row[1])] = ExitFailure(*row)
    for row in run(conn, _ROOM_PRUNED, {"room": location_id}):
        graph.pruned[(location_id, row[1])] = PrunedExit(*row)
    return graph


def _graph_problems(graph: MapGraph) -> list[str]:
    """What keeps a map from being stored as it is (for ``MapStore.replace``)."""
    problems = []
    for (room, key), connection in graph.connections.items():
        where = f"connection {key!r} of room {room}"
        if (room, key) != (connection.from_id, connection.action_key) or not key.strip():
            problems.append(f"{where} is filed under another room or key")
        if connection.direction is not None and connection.direction != key:
            problems.append(f"{where} has direction {connection.direction!r}")
        if key in DIRECTIONS and connection.direction != key:
            problems.append(f"{where} is a direction but not marked as one")
        if min(connection.verifications, connection.failures) < 0:
            problems.append(f"{where} has a negative count")
        for end in (connection.from_id, connection.to_id):
            if end not in graph.rooms:
                problems.append(f"{where} uses unknown room {end}")
    for table in (graph.failures, graph.pruned):
        for (room, direction), row in table.items():
            if (room, direction) != (row.from_id, row.direction):
                problems.append(f"exit {direction!r} of room {room} is filed under another")
            if room not in graph.rooms:
                problems.append(f"exit {direction!r} of unknown room {room}")
            if direction not in DIRECTIONS:
                problems.append(f"exit {direction!r} of room {room} is not a direction")
    return problems


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
            key = (_data_version(conn), _WRITES.count)
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
        checked = [_check_event(e) for e in events]
        if checked:
            with self.store.transaction(write=True, changes_memories=False) as conn:
                write_map_events(conn, checked)

    def replace(self, graph: MapGraph) -> None:
        """Make the stored map exactly ``graph``, in one write transaction: all or nothing.
        A graph whose rows point at rooms it does not have is refused (ValueError)."""
        problems = _graph_problems(graph)
        if problems:
            raise ValueError(f"not a consistent map: {problems[0]}; nothing was written")
        with self.store.transaction(write=True, changes_memories=False) as conn:
            _WRITES.everything = _WRITES.next()
            for statement in _CLEAR:
                conn.execute(statement)
            run_many(conn, _INSERT_ROOMS, [{"id": k, "name": v} for k, v in graph.rooms.items()])
            run_many(conn, _INSERT_CONNECTIONS, [_row(c) for c in graph.connections.values()])
            run_many(conn, _INSERT_FAILURES, [_row(f) for f in graph.failures.values()])
            run_many(
                conn,
                _INSERT_PRUNED,
                [
                    {
                        "from_id": p.from_id,
                        "direction": p.direction,
                        "pruned_episode": p.episode,
                        "pruned_turn": p.turn,
                    }
                    for p in graph.pruned.values()
                ],
            )


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
        self._count = _WRITES.count  # the map writes in this process accounted for
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
        if _WRITES.count == self._count:
            return
        if _WRITES.everything > self._count:
            self._drop()
        else:
            changed = {room for room, at in _WRITES.rooms.items() if at > self._count}
            self._drop(
                location_id
                for location_id, part in self._parts.items()
                if location_id in changed or not changed.isdisjoint(part.graph.rooms)
            )
        self._count = _WRITES.count

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
            if _WRITES.count == self._count + 1:
                self._count = _WRITES.count

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


def _row(item: Connection | ExitFailure) -> dict[str, Any]:
    row = item._asdict()
    if isinstance(item, ExitFailure):  # the table's column is `count`
        row["count"] = row.pop("failures")
    return row
