"""Reading ZorkGPT's ``map_state.json`` (memstore.map_json describes the shape): a parsed,
checked map and what was left out, before anything is written.

**Reading** (:func:`parse_map_state`) validates everything before anything is written.
A bad value (a count that is not a whole number, a confidence outside 0..1, an id that is
not a location number (digits 0-9 only), an exit listed twice under two spellings in
``connections`` or ``pruned_exits`` (a direction there), a duplicate key, NaN, a name,
exit or action the database cannot store: a NUL, a lone surrogate, a confidence that
memstore's rule cannot give beside the verifications within MAX_DERIVED_FAILURES failures
when the cap's confidence and the file's fall on two sides of the route threshold) is
refused with one line naming its key (:class:`~memstore.errors.MapStateError`). An exit
or action longer than the map keeps is kept by its beginning
(memstore.map_events.stored_action). What memstore has no place for is reported, one line
each, and left out, never fatal: an unknown key (grouped: ``unknown key 'visited' in rooms
(42 times)``; in ``metadata``, any but ZorkGPT's own and ``memstore``), a confidence kept
at MAX_DERIVED_FAILURES, a pruned exit listed twice in one spelling (kept once), an
exit a room lists that was never taken (memstore keeps exits that moved the player), a
failure count or pruned exit that is not a direction, counts for a connection that is not
in ``connections``, and rooms that connections point at but ``rooms`` lacks (added, unnamed).
ZorkGPT's top-level ``room_names`` is read: it names a room ``rooms`` leaves unnamed;
where both name a room and differ, ``rooms``' name is kept, with one warning line. What
is left out (an added room is not) is also counted in ``ParsedMapState.lost``: what an
export written over the file would lose (a memstore export has none), with the file's
confidences that the counts kept do not give and ZorkGPT's inferred ways back (below).
A file without ``metadata.memstore`` (ZorkGPT's own) gets: verifications from
``connection_verifications`` (1 when missing: the connection was taken), failures as the
whole number that brings memstore's rule closest to the file's ``connection_confidence``
(0 without one; at most 10,000), and episode 0, turn 0 for times (unknown; Map.md leaves
them empty).

**The map's own rules** across fields (memstore.map_json_rules, which gives what memstore
and ZorkGPT can each write): a room connected to itself is refused; a ZorkGPT connection's
failures are at least its exit's count in ``exit_failure_counts``; a pruned exit that
``connections`` holds is un-pruned where the file shows it taken (one line); ZorkGPT's
inferred way back, never taken, is left out of the map (one line counting them); a
connection first seen after it was last seen is kept (memstore's recorder writes it when
agents share a database).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

from memstore.errors import MapStateError
from memstore.export_file import BOM
from memstore.map_graph import (
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTION_ORDER,
    Connection,
    ExitFailure,
    MapGraph,
    PrunedExit,
    action_key,
    confidence,
    stored_action,
    visible,
)
from memstore.map_json_rules import (
    WAY_BACK,
    check_move,
    count_failures,
    inferred_way_back,
    listed,
    unprune_taken,
)
from memstore.models import INT64_MAX, unstorable_text

#: metadata.version written (ZorkGPT's)
FORMAT_VERSION = "1.0"
TOP_LEVEL_KEYS = (
    "rooms",
    "room_names",
    "connections",
    "connection_confidence",
    "connection_verifications",
    "exit_failure_counts",
    "pruned_exits",
    "metadata",
)
CONFIDENCE_RULE = "(v + 1) / (v + f + 2)"
#: SQLite's largest integer: no location number, count, episode or turn is larger
MAX_INTEGER = INT64_MAX
#: the largest verification or failure count imported: the map adds one to a count on every
#: traversal or failure, and SQLite turns an integer past MAX_INTEGER into a float (which
#: export-json would then write and import-json refuse)
MAX_COUNT = 2**31 - 1
#: failures derived from a confidence of 0 (or nearly): the connection is never routed
MAX_DERIVED_FAILURES = 10_000
_ROOM_KEYS = ("id", "name", "exits")
#: the keys of ``metadata``: ZorkGPT's ``to_dict`` writes the first four, memstore's export
#: the first three and ``memstore``; any other is an unknown key (reported, and lost)
_METADATA_KEYS = ("version", "total_rooms", "total_connections", "timestamp", "memstore")
_EXTRA_KEYS = ("confidence", "connections", "exit_failures", "pruned_exits")
_EXTRA_CONNECTION_KEYS = ("action", "failures", "first_seen", "last_seen")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
#: the most digits a location number has (a longer key is refused before it is converted)
_MAX_DIGITS = len(str(MAX_INTEGER))
#: a file's confidence further than this from memstore's rule for the counts kept is reported
_CONFIDENCE_TOLERANCE = 0.001


class ParsedMapState(NamedTuple):
    """A file read and checked: the map it holds, what was left out or changed (one line
    each), and ``lost``: what of the file the map does not keep, counted in a few words
    each (``"2 exit(s) listed but never taken"``): an export written over the file loses
    it (memstore.map_json.map_state_at_risk)."""

    graph: MapGraph
    notes: tuple[str, ...]
    lost: tuple[str, ...] = ()


def _shown(value: Any) -> str:
    """A value as JSON, cut to 60 characters: control characters escaped (by JSON, or
    made ``visible``), a text that is not valid Unicode written with ASCII escapes."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        if unstorable_text(text) is not None:  # a lone surrogate, which no file can hold
            text = json.dumps(value)
    except (TypeError, ValueError):  # pragma: no cover - values come from json.loads
        text = repr(value)
    text = visible(text)
    return text if len(text) <= 60 else text[:57] + "..."


def _path(*keys: str) -> str:
    """``connections["15"]["north"]``: where a value sits, each key quoted."""
    return keys[0] + "".join(f"[{_shown(key)}]" for key in keys[1:])


def _refuse(where: str, problem: str) -> MapStateError:
    return MapStateError(f"{where} {problem}; nothing was imported")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _refuse(where, f"must be an object, got {_shown(value)}")
    return value


def _whole(value: Any, where: str, least: int = 0, most: int = MAX_INTEGER) -> int:
    if type(value) is not int or not least <= value <= MAX_INTEGER:
        raise _refuse(where, f"must be a whole number {least} or more, got {_shown(value)}")
    if value > most:
        raise _refuse(where, f"must be at most {most}, got {_shown(value)}")
    return value


def _count(value: Any, where: str) -> int:
    """A verification or failure count: 0 to MAX_COUNT."""
    return _whole(value, where, most=MAX_COUNT)


def _room_id(key: str, where: str) -> int:
    if len(key) > _MAX_DIGITS or not _DECIMAL.fullmatch(key) or int(key) > MAX_INTEGER:
        raise _refuse(
            where,
            f"is not a location number (a whole number 0 to {MAX_INTEGER}, as digits)",
        )
    return int(key)


def _storable(text: str, where: str) -> str:
    """``text`` if the database can store it (no NUL, no lone surrogate); else refused."""
    problem = unstorable_text(text)
    if problem is not None:
        raise _refuse(where, problem)
    return text


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _refuse(where, f"must be a string, got {_shown(value)}")
    return _storable(value, where)


def _exit_key(exit_: str, where: str) -> str:
    key = action_key(_storable(exit_, where))
    if not key:
        raise _refuse(where, "is an empty exit")
    return key


def _split_key(key: str, table: str) -> tuple[int, str]:
    """``"15_north"`` -> (15, ``north``); the exit as the map keys it."""
    where = _path(table, key)
    room, sep, exit_ = key.partition("_")
    if not sep:
        raise _refuse(where, 'is not "<room id>_<exit>"')
    return _room_id(room, where), _exit_key(exit_, where)


def _time(value: Any, where: str) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise _refuse(where, f"must be [episode, turn], got {_shown(value)}")
    return _whole(value[0], where), _whole(value[1], where)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _refuse(f"key {_shown(key)}", "appears twice in one object")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise _refuse(f"the value {name}", "is not a number JSON allows")


def _load(text: str) -> dict[str, Any]:
    text = text.removeprefix(BOM)  # as an editor may save it (memstore.export_file)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise MapStateError(
            f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); nothing was imported"
        ) from None
    except RecursionError:
        raise MapStateError(
            "nested too deeply to be a map_state.json; nothing was imported"
        ) from None
    except ValueError as exc:  # an integer longer than Python reads
        raise MapStateError(f"not readable JSON ({exc}); nothing was imported") from None
    if not isinstance(data, dict):
        raise MapStateError("not a map_state.json: the top level must be an object")
    if "rooms" not in data:
        raise MapStateError('not a map_state.json: it has no "rooms"; nothing was imported')
    return data


class _Reader:
    """One pass over a loaded file: the map it describes and the notes."""

    def __init__(self, data: dict[str, Any], route: float = DEFAULT_ROUTE_CONFIDENCE) -> None:
        self.data = data
        self.route = route  # routes take a connection above this (map_route_confidence)
        self.graph = MapGraph()
        self.notes: list[str] = []
        self.unknown: Counter[str] = Counter()
        self.listed_exits: dict[int, list[str]] = {}
        self.missing_rooms: set[int] = set()
        self.rates: dict[tuple[int, str], tuple[str, Any]] = {}  # the file's confidences
        #: ZorkGPT's connections (failures from confidence); those the file shows taken
        self.peer: list[tuple[int, str]] = []  # in the file's order
        self.taken: set[tuple[int, str]] = set()
        #: ZorkGPT's inferred ways back, never taken: left out of the map
        self.inferred: list[tuple[int, str]] = []
        #: connections whose file confidence needs more than MAX_DERIVED_FAILURES failures
        self.capped: set[tuple[int, str]] = set()
        #: pruned exits a room lists twice in the same spelling (kept once)
        self.twice: list[str] = []
        #: what the map does not keep of the file, counted (ParsedMapState.lost)
        self.lost: list[str] = []

    def table(self, name: str) -> dict[str, Any]:
        return _object(self.data.get(name, {}), name)

    def read(self) -> ParsedMapState:
        for key in self.data:
            if key not in TOP_LEVEL_KEYS:
                self.unknown[_shown(key)] += 1
        extras = self.extras()
        self.rooms()
        self.room_names()
        self.connections(extras.get("connections", {}))
        self.exit_failures(extras.get("exit_failures", {}))
        self.pruned(extras.get("pruned_exits", {}))
        self.leave_out_inferred()
        raised = count_failures(self.graph, self.peer)
        self.mismatched()
        taken = [k for k in self.graph.pruned if k in self.graph.connections and k in self.taken]
        if taken:  # un-pruned: the file's pruned_exits lose them
            self.lost.append(f"{len(taken)} pruned exit(s) it also took")
        self.notes += raised + unprune_taken(self.graph, self.taken, set(self.peer))
        self.metadata()
        notes = tuple(self.report())
        return ParsedMapState(self.graph, notes, tuple(self.lost))

    def extras(self) -> dict[str, Any]:
        metadata = self.table("metadata")
        for key in metadata:
            if key not in _METADATA_KEYS:
                self.unknown[f"{_shown(key)} in metadata"] += 1
        extras = _object(metadata.get("memstore", {}), _path("metadata", "memstore"))
        for key in extras:
            if key not in _EXTRA_KEYS:
                self.unknown[f"{_shown(key)} in metadata.memstore"] += 1
        for key in _EXTRA_KEYS[1:]:
            _object(extras.get(key, {}), _path("metadata", "memstore", key))
        return extras

    def rooms(self) -> None:
        for key, value in self.table("rooms").items():
            where = _path("rooms", key)
            room = _room_id(key, where)
            fields = _object(value, where)
            for name in fields:
                if name not in _ROOM_KEYS:
                    self.unknown[f"{_shown(name)} in rooms"] += 1
            if "id" in fields and _whole(fields["id"], _path("rooms", key, "id")) != room:
                raise _refuse(_path("rooms", key, "id"), f"is {fields['id']}, not {room}")
            self.graph.rooms[room] = _text(fields.get("name", ""), _path("rooms", key, "name"))
            exits = fields.get("exits", [])
            if not isinstance(exits, list):
                raise _refuse(_path("rooms", key, "exits"), "must be a list of exits")
            self.listed_exits[room] = [
                _exit_key(_text(e, _path("rooms", key, "exits")), _path("rooms", key, "exits"))
                for e in exits
            ]

    def room_names(self) -> None:
        """ZorkGPT's top-level ``room_names`` (``{"<id>": name}``, its display names): a
        name for a room ``rooms`` gives none (a room ``rooms`` lacks is added with it);
        where both name a room and differ, ``rooms``' name is kept (spec 003's shape, and
        the one memstore writes both from), with one warning line."""
        differ = []
        for key, value in self.table("room_names").items():
            where = _path("room_names", key)
            room = _room_id(key, where)
            name = _text(value, where)
            known = self.graph.rooms.get(room)
            if not known:
                if name or known is None:
                    self.graph.rooms[room] = name
            elif name != known:
                differ.append(f"{room} ({_shown(name)}, rooms: {_shown(known)})")
        if differ:
            self.notes.append(
                f"room_names: {len(differ)} name(s) that differ from the room's name in "
                f"rooms, left out (rooms' name is kept): {listed(differ)}"
            )
            self.lost.append(f"{len(differ)} room_names that differ from rooms")

    def room(self, room: int) -> None:
        if room not in self.graph.rooms:
            self.graph.rooms[room] = ""
            self.missing_rooms.add(room)

    def index(self, table: dict[str, Any], name: str) -> dict[tuple[int, str], tuple[str, Any]]:
        """``table``'s ``"<room>_<exit>"`` entries by (room, exit key); two spellings of
        one exit (``15_n`` and ``15_north``) are refused."""
        found: dict[tuple[int, str], tuple[str, Any]] = {}
        for spelled, value in table.items():
            key = _split_key(spelled, name)
            if key in found:
                raise _refuse(_path(name, spelled), f"is the same exit as {_shown(found[key][0])}")
            found[key] = (spelled, value)
        return found

    def connections(self, extra: dict[str, Any]) -> None:
        tables = {
            "connection_verifications": self.index(
                self.table("connection_verifications"), "connection_verifications"
            ),
            "connection_confidence": self.index(
                self.table("connection_confidence"), "connection_confidence"
            ),
            "metadata.memstore.connections": self.index(extra, "metadata.memstore.connections"),
        }
        for room_key, exits in self.table("connections").items():
            room = _room_id(room_key, _path("connections", room_key))
            spelled: dict[str, str] = {}
            for exit_, to in _object(exits, _path("connections", room_key)).items():
                where = _path("connections", room_key, exit_)
                key = _exit_key(exit_, where)
                if key in spelled:
                    raise _refuse(where, f"is the same exit as {_shown(spelled[key])} ({key})")
                spelled[key] = exit_
                to_id = _whole(to, where)
                check_move(room, to_id, where)
                self.room(room)
                self.room(to_id)
                self.graph.connections[(room, key)] = self.connection(
                    room, exit_, key, to_id, *tables.values()
                )
        for name, table in tables.items():
            orphans = [
                spelled for k, (spelled, _) in table.items() if k not in self.graph.connections
            ]
            if orphans:
                self.notes.append(
                    f"{name}: {len(orphans)} key(s) name no connection in connections, "
                    f"left out: {listed(orphans)}"
                )
                self.lost.append(f"{len(orphans)} {name} for no connection")

    def mismatched(self) -> None:
        """One line for the file's confidences that the counts kept do not give."""
        found: list[str] = []
        capped: list[str] = []
        for key, (spelled, rate) in self.rates.items():
            kept = self.graph.connections[key].confidence
            if abs(kept - rate) > _CONFIDENCE_TOLERANCE:
                shown = f"{spelled} ({_shown(rate)} -> {_rate(kept)})"
                (capped if key in self.capped else found).append(shown)
        if found or capped:
            self.lost.append(f"the file's confidence of {len(found) + len(capped)} connection(s)")
        if capped:
            self.notes.append(
                f"connection_confidence: {len(capped)} value(s) that memstore's rule "
                f"{CONFIDENCE_RULE} gives beside their verifications only with more than "
                f"{MAX_DERIVED_FAILURES} failures, kept at {MAX_DERIVED_FAILURES} (routes take "
                f"a connection above {self.route:g} either way, or skip it either way): "
                f"{listed(capped)}"
            )
        if found:
            self.notes.append(
                f"connection_confidence: {len(found)} value(s) that memstore's rule "
                f"{CONFIDENCE_RULE} does not give for the counts kept; memstore keeps counts "
                f"and works confidence out from them: {listed(found)}"
            )

    def connection(
        self,
        room: int,
        exit_: str,
        key: str,
        to_id: int,
        verified: dict[tuple[int, str], tuple[str, Any]],
        trust: dict[tuple[int, str], tuple[str, Any]],
        extra: dict[tuple[int, str], tuple[str, Any]],
    ) -> Connection:
        found = verified.get((room, key))
        v = 1 if found is None else _count(found[1], _path("connection_verifications", found[0]))
        rate = trust.get((room, key))
        if rate is not None:
            value = rate[1]
            if type(value) not in (int, float) or not 0 <= value <= 1:
                raise _refuse(
                    _path("connection_confidence", rate[0]),
                    f"must be a number from 0 to 1, got {_shown(value)}",
                )
        more = extra.get((room, key))
        action, first, last = stored_action(exit_), (0, 0), (0, 0)
        if more is not None:
            where = _path("metadata", "memstore", "connections", more[0])
            fields = _object(more[1], where)
            for name in fields:
                if name not in _EXTRA_CONNECTION_KEYS:
                    self.unknown[f"{_shown(name)} in metadata.memstore.connections"] += 1
            action = stored_action(_text(fields.get("action", exit_), f'{where}["action"]'))
            if action_key(action) != key:
                raise _refuse(f'{where}["action"]', f"is not the exit {_shown(key)}")
            f = _count(fields.get("failures", 0), f'{where}["failures"]')
            first = _time(fields.get("first_seen", [0, 0]), f'{where}["first_seen"]')
            last = _time(fields.get("last_seen", [0, 0]), f'{where}["last_seen"]')
        else:
            f = 0 if rate is None else _failures_for(v, float(rate[1]), rate[0], self.route)
            if f == MAX_DERIVED_FAILURES:
                self.capped.add((room, key))
            self.peer.append((room, key))
        if rate is not None:
            self.rates[(room, key)] = rate
        direction = key if key in DIRECTION_ORDER else None
        return Connection(room, action, key, direction, to_id, v, f, *first, *last)

    def rate(self, key: tuple[int, str]) -> float | None:
        found = self.rates.get(key)
        return None if found is None else float(found[1])

    def leave_out_inferred(self) -> None:
        """Leave out each way back ZorkGPT inferred and never took (memstore.map_json_rules
        ``inferred_way_back``): memstore keeps the exits that moved the player, and about
        half of these guesses are wrong in the game (the boarded window of North of House).
        So routes and the agent's exits line never use one, and the direction stays untried
        until a move takes it. Its failures and pruning stay on the exit. Every other
        ZorkGPT connection with a verification was taken (``taken``)."""
        connections = self.graph.connections
        for key in self.peer:
            found = connections[key]
            back_key = (found.to_id, WAY_BACK.get(key[1], ""))
            back = connections.get(back_key)
            if inferred_way_back(found, self.rate(key), back, self.rate(back_key)):
                self.inferred.append(key)
            elif found.verifications >= 1:
                self.taken.add(key)
        if not self.inferred:
            return
        for key in self.inferred:
            del self.graph.connections[key]
            self.rates.pop(key, None)
        dropped = set(self.inferred)
        self.peer = [key for key in self.peer if key not in dropped]
        count = len(self.inferred)
        self.notes.append(
            f"connections: {count} inferred way(s) back ZorkGPT never took (add_connection's "
            "guess at the opposite of an exit taken: 1 verification, 0.9 x that exit's first "
            "confidence), left out: kept out of routes and the exits line, the direction "
            "untried until a move takes it: "
            f"{listed(f'{room}_{direction}' for room, direction in self.inferred)}"
        )
        self.lost.append(f"{count} inferred way(s) back")

    def exit_failures(self, extra: dict[str, Any]) -> None:
        times = self.index(extra, "metadata.memstore.exit_failures")
        kept_out = []
        for key, count in self.table("exit_failure_counts").items():
            where = _path("exit_failure_counts", key)
            room, direction = _split_key(key, "exit_failure_counts")
            count = _count(count, where)
            if direction not in DIRECTION_ORDER:
                kept_out.append(key)
                continue
            if (room, direction) in self.graph.failures:
                raise _refuse(where, "counts an exit that another key counts too")
            found = times.get((room, direction))
            at = (0, 0)
            if found is not None:
                at = _time(found[1], _path("metadata", "memstore", "exit_failures", found[0]))
            self.room(room)
            self.graph.failures[(room, direction)] = ExitFailure(room, direction, count, *at)
        if kept_out:
            self.notes.append(
                f"exit_failure_counts: {len(kept_out)} count(s) of actions that are not "
                f"directions, left out (memstore counts failed directions only): "
                f"{listed(kept_out)}"
            )
            self.lost.append(f"{len(kept_out)} failure count(s) of actions")

    def pruned(self, extra: dict[str, Any]) -> None:
        times = self.index(extra, "metadata.memstore.pruned_exits")
        kept_out = []
        for room_key, exits in self.table("pruned_exits").items():
            where = _path("pruned_exits", room_key)
            room = _room_id(room_key, where)
            if not isinstance(exits, list):
                raise _refuse(where, "must be a list of exits")
            spelled: dict[str, str] = {}
            for exit_ in exits:
                direction = _exit_key(_text(exit_, where), where)
                if direction not in DIRECTION_ORDER:  # left out, duplicates with the rest
                    kept_out.append(f"{room}_{exit_}")
                    continue
                if direction in spelled:
                    if spelled[direction] == exit_:  # the same exit, listed again
                        self.twice.append(f"{room}_{exit_}")
                        continue
                    raise _refuse(
                        where,
                        f"lists {_shown(exit_)}, the same exit as {_shown(spelled[direction])} "
                        f"({direction})",
                    )
                spelled[direction] = exit_
                found = times.get((room, direction))
                at = (0, 0)
                if found is not None:
                    at = _time(found[1], _path("metadata", "memstore", "pruned_exits", found[0]))
                self.room(room)
                self.graph.pruned[(room, direction)] = PrunedExit(room, direction, *at)
        if self.twice:
            self.notes.append(
                f"pruned_exits: {len(self.twice)} exit(s) a room lists again in the same "
                f"spelling, kept once: {listed(self.twice)}"
            )
        if kept_out:
            self.notes.append(
                f"pruned_exits: {len(kept_out)} pruned action(s) that are not directions, "
                f"left out (memstore prunes directions only): {listed(kept_out)}"
            )
            self.lost.append(f"{len(kept_out)} pruned action(s)")

    def metadata(self) -> None:
        metadata = self.table("metadata")
        for name, actual in (
            ("total_rooms", len(self.graph.rooms)),
            ("total_connections", len(self.graph.connections) + len(self.inferred)),
        ):
            if name in metadata and metadata[name] != actual:
                self.notes.append(
                    f"metadata.{name} is {_shown(metadata[name])} but the file holds {actual}"
                )

    def report(self) -> Iterator[str]:
        """The notes, in order; counts what they leave out in ``lost`` as it goes."""
        for what, times in self.unknown.items():
            count = f" ({times} times)" if times > 1 else ""
            yield f"unknown key {what}{count}, left out"
        if self.unknown:
            self.lost.append(f"{sum(self.unknown.values())} unknown key(s)")
        inferred = set(self.inferred)  # reported on their own line
        untaken = [
            f"{room}_{exit_}"
            for room, exits in sorted(self.listed_exits.items())
            for exit_ in exits
            if (room, exit_) not in self.graph.connections and (room, exit_) not in inferred
        ]
        if untaken:
            self.lost.append(f"{len(untaken)} exit(s) listed but never taken")
            yield (
                f"rooms: {len(untaken)} listed exit(s) with no connection, left out (memstore "
                f"keeps the exits that moved the player): {listed(untaken)}"
            )
        if self.missing_rooms:
            missing = [str(room) for room in sorted(self.missing_rooms)]
            yield (
                f"rooms: {len(missing)} room(s) used elsewhere but not in rooms, added "
                f"without a name: {listed(missing)}"
            )
        yield from self.notes


def _rate(value: float) -> str:
    """A confidence with the digits that tell it apart (``0.80``, ``0.6667``, ``0.0021``,
    ``0.999995``): at least 2 places, and more until it is within 0.00005 and no value
    between 0 and 1 reads as 0 or 1."""
    for places in range(2, 11):
        text = f"{value:.{places}f}"
        shown = float(text)
        if abs(shown - value) <= 0.00005 and (shown not in (0.0, 1.0) or shown == value):
            return text
    return repr(value)


def _failures_for(verifications: int, rate: float, spelled: str, route: float) -> int:
    """The failures f (0 to MAX_DERIVED_FAILURES) whose (v + 1) / (v + f + 2) is closest
    to ``rate``. A pair that needs more (a low confidence beside many verifications:
    ZorkGPT's confidence rises with verifications; memstore's export writes one only
    after more than MAX_DERIVED_FAILURES failures) keeps the cap, which the reader reports
    (one warning line), unless the cap's confidence and the file's fall on two sides of
    ``route`` (routes take a connection above it): that would route a connection the file
    does not (or the other way round), so the file is refused (``spelled``: its key)."""
    if rate <= 0:
        best = float(MAX_DERIVED_FAILURES)
    else:
        best = min(MAX_DERIVED_FAILURES, max(0.0, (verifications + 1) / rate - verifications - 2))
    candidates = {max(0, math.floor(best)), max(0, math.ceil(best))}
    found = min(sorted(candidates), key=lambda f: abs(confidence(verifications, f) - rate))
    given = confidence(verifications, found)
    if (
        found == MAX_DERIVED_FAILURES
        and abs(given - rate) > _CONFIDENCE_TOLERANCE
        and (given > route) != (rate > route)
    ):
        routed = given > route
        raise _refuse(
            _path("connection_confidence", spelled),
            f"is {_shown(rate)} beside {verifications} verifications: memstore's rule "
            f"{CONFIDENCE_RULE} gives it only with more than {MAX_DERIVED_FAILURES} failures; "
            f"with {MAX_DERIVED_FAILURES} it gives {_rate(given)}, "
            + (
                f"above the route threshold {route:g} where the file's {_rate(rate)} is not: "
                "routes would take a connection the file does not trust"
                if routed
                else f"not above the route threshold {route:g} where the file's {_rate(rate)} "
                "is: routes would skip a connection the file trusts"
            ),
        )
    return found


def parse_map_state(text: str, route: float = DEFAULT_ROUTE_CONFIDENCE) -> ParsedMapState:
    """Read ``map_state.json`` text: the map it holds and the notes on what was left out.
    Raises :class:`~memstore.errors.MapStateError` (one line naming the key) for anything
    memstore will not import as it is. ``route``: the route threshold
    (``map_route_confidence``), for a confidence that needs more failures than the reader
    works out (``_failures_for``)."""
    return _Reader(_load(text), route).read()
