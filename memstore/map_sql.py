"""The map's SQL: statements built once, the per-turn writes and the reads (spec 003).

memstore.map_store's MapStore and MapView run these through the store's public
transactions; memstore.map_graph holds the rules they apply. ``WRITES`` counts what this
process wrote, for what MapStore and MapView keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

from memstore.dialect import OnConflict, one_more
from memstore.executor import run, run_many
from memstore.map_graph import (
    ACTION_KEY_MAX,
    BLOCKED,
    COUNT_MAX,
    DIRECTIONS,
    MOVED,
    STAYED,
    Connection,
    ExitFailure,
    MapEvent,
    MapGraph,
    PrunedExit,
    action_key,
    stored_action,
)
from memstore.models import check_location_id, unstorable_text
from memstore.schema import map_connections, map_exit_failures, map_pruned_exits, map_rooms

__all__ = [
    "WRITES",
    "forget_cached_maps",
    "check_event",
    "graph_problems",
    "read_graph",
    "read_room",
    "replace_graph",
    "write_map_events",
]

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
            (same_destination, one_more(map_connections.c.verifications, COUNT_MAX)),
            else_=literal_column("1"),
        ),
        "failures": case(
            (same_destination, map_connections.c.failures),
            else_=one_more(map_connections.c.failures, COUNT_MAX),
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
        verifications=one_more(map_connections.c.verifications, COUNT_MAX),
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
        "count": one_more(map_exit_failures.c.count, COUNT_MAX),
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
    .values(failures=one_more(map_connections.c.failures, COUNT_MAX))
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


class WriteLog:
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


WRITES = WriteLog()


def forget_cached_maps() -> None:
    """What every MapStore and MapView of this process keeps is read again: a write
    transaction was rolled back, and they may have cached what it wrote."""
    WRITES.everything = WRITES.next()


def _name_room(
    conn: SQLConnection, named: dict[int, str], room: int, name: str, stamp: int
) -> None:
    """Upsert a room once per batch (again only when a batch brings its name); a room
    that was added or renamed is marked changed."""
    known = named.get(room)
    if known is not None and (not name or name == known):
        return
    if run(conn, _UPSERT_ROOM, {"id": room, "name": name}).rowcount:
        WRITES.rooms[room] = stamp
    named[room] = name or (known or "")


def write_map_events(conn: SQLConnection, events: Sequence[MapEvent]) -> None:
    """Write buffered map events, in order, inside the caller's write transaction.

    The SQL twin of ``MapGraph.apply`` (memstore.map_graph): a test checks that both give
    the same map for the same events.
    """
    stamp = WRITES.next()
    changed = WRITES.rooms
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


def check_event(event: object) -> MapEvent:
    """The event as the map writes it (its action as ``stored_action`` keeps it), or
    TypeError / ValueError for one that cannot be written."""
    if not isinstance(event, MapEvent):
        raise TypeError(f"a map event must be a MapEvent, got {type(event).__name__}")
    for name in ("from_name", "action", "action_key", "to_name"):
        problem = unstorable_text(getattr(event, name))
        if problem is not None:
            raise ValueError(f"a map event's {name} {problem}: {getattr(event, name)[:60]!r}")
    key = event.action_key
    if not key or len(key) > ACTION_KEY_MAX or action_key(event.action) != key:
        raise ValueError(f"a map event's key must be its action's key (action_key): {key[:60]!r}")
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
    return event._replace(action=stored_action(event.action))


# --- reading -------------------------------------------------------------------------------------


#: the kinds of each read's columns ("i" an int, "s" a str, "n" a str or None): a row
#: holding another (SQLite keeps what a hand edit put there: 'many' as a count) is passed
#: over, and ``memstore check`` names it (review S5 C F5: the agent loop got a TypeError)
_ROOM_KINDS, _CONNECTION_KINDS, _FAILURE_KINDS, _PRUNED_KINDS = "is", "issniiiiiii", "isiii", "isii"
_NAMED_CONNECTION_KINDS = _CONNECTION_KINDS + "s"


def _readable(row: Sequence[Any], kinds: str) -> bool:
    """Whether each value of ``row`` is of its column's kind (``kinds``)."""
    for value, kind in zip(row, kinds, strict=True):
        if kind == "i":
            if type(value) is not int:
                return False
        elif not (type(value) is str or (kind == "n" and value is None)):
            return False
    return True


def read_graph(conn: SQLConnection) -> MapGraph:
    """The whole map (inside the caller's transaction); a row holding a value of the wrong
    kind is passed over (``_readable``)."""
    graph = MapGraph()
    graph.rooms.update(row for row in run(conn, _ROOMS, {}) if _readable(row, _ROOM_KINDS))
    for row in run(conn, _CONNECTIONS, {}):
        if _readable(row, _CONNECTION_KINDS):
            graph.connections[(row[0], row[2])] = Connection(*row)
    for row in run(conn, _FAILURES, {}):
        if _readable(row, _FAILURE_KINDS):
            graph.failures[(row[0], row[1])] = ExitFailure(*row)
    for row in run(conn, _PRUNED, {}):
        if _readable(row, _PRUNED_KINDS):
            graph.pruned[(row[0], row[1])] = PrunedExit(*row)
    return graph


def read_room(conn: SQLConnection, location_id: int) -> MapGraph:
    """One room's part of the map: its name, connections (with their destinations'
    names), exit failures and pruned exits; empty for a room not on the map."""
    graph = MapGraph()
    named = run(conn, _ROOM_NAME, {"room": location_id}).fetchall()
    if not named or type(named[0][0]) is not str:
        return graph
    graph.rooms[location_id] = named[0][0]
    for row in run(conn, _ROOM_CONNECTIONS, {"room": location_id}):
        if _readable(row, _NAMED_CONNECTION_KINDS):
            found = Connection(*row[:-1])
            graph.connections[(location_id, found.action_key)] = found
            graph.rooms.setdefault(found.to_id, row[-1])
    for row in run(conn, _ROOM_FAILURES, {"room": location_id}):
        if _readable(row, _FAILURE_KINDS):
            graph.failures[(location_id, row[1])] = ExitFailure(*row)
    for row in run(conn, _ROOM_PRUNED, {"room": location_id}):
        if _readable(row, _PRUNED_KINDS):
            graph.pruned[(location_id, row[1])] = PrunedExit(*row)
    return graph


def graph_problems(graph: MapGraph) -> list[str]:
    """What keeps a map from being stored as it is (for ``MapStore.replace``)."""
    problems = []
    for room, name in graph.rooms.items():
        problem = unstorable_text(name)
        if problem is not None:
            problems.append(f"the name of room {room} {problem}")
    for (room, key), connection in graph.connections.items():
        where = f"connection {key[:60]!r} of room {room}"
        if (room, key) != (connection.from_id, connection.action_key) or not key.strip():
            problems.append(f"{where} is filed under another room or key")
        for text in (key, connection.action):
            problem = unstorable_text(text)
            if problem is not None:
                problems.append(f"{where} {problem}")
        if len(key) > ACTION_KEY_MAX or len(connection.action) > ACTION_KEY_MAX:
            problems.append(f"{where} is longer than {ACTION_KEY_MAX} characters")
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


def replace_graph(conn: SQLConnection, graph: MapGraph) -> None:
    """Make the stored map exactly ``graph`` (inside the caller's write transaction)."""
    forget_cached_maps()
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


def _row(item: Connection | ExitFailure) -> dict[str, Any]:
    row = item._asdict()
    if isinstance(item, ExitFailure):  # the table's column is `count`
        row["count"] = row.pop("failures")
    return row
