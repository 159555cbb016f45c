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

from collections.abc import Iterator
from typing import Any, NamedTuple

from memstore.map_graph import (
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTION_ORDER,
    ExitFailure,
    MapGraph,
    PrunedExit,
)
from memstore.map_json_checks import (
    as_count,
    as_exit_key,
    as_object,
    as_room_id,
    as_text,
    as_time,
    as_whole,
    key_path,
    load_json,
    refusal,
    shown_value,
    split_key,
)
from memstore.map_json_connections import ConnectionsReader
from memstore.map_json_rules import count_failures, listed, unprune_taken
from memstore.moved_names import forwarding

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
_ROOM_KEYS = ("id", "name", "exits")
#: the keys of ``metadata``: ZorkGPT's ``to_dict`` writes the first four, memstore's export
#: the first three and ``memstore``; any other is an unknown key (reported, and lost)
_METADATA_KEYS = ("version", "total_rooms", "total_connections", "timestamp", "memstore")
_EXTRA_KEYS = ("confidence", "connections", "exit_failures", "pruned_exits")


class ParsedMapState(NamedTuple):
    """A file read and checked: the map it holds, what was left out or changed (one line
    each), and ``lost``: what of the file the map does not keep, counted in a few words
    each (``"2 exit(s) listed but never taken"``): an export written over the file loses
    it (memstore.map_json.map_state_at_risk)."""

    graph: MapGraph
    notes: tuple[str, ...]
    lost: tuple[str, ...] = ()


class _Reader(ConnectionsReader):
    """One pass over a loaded file: the map it describes and the notes (the connection
    tables: memstore.map_json_connections)."""

    def read(self) -> ParsedMapState:
        for key in self.data:
            if key not in TOP_LEVEL_KEYS:
                self.unknown[shown_value(key)] += 1
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
                self.unknown[f"{shown_value(key)} in metadata"] += 1
        extras = as_object(metadata.get("memstore", {}), key_path("metadata", "memstore"))
        for key in extras:
            if key not in _EXTRA_KEYS:
                self.unknown[f"{shown_value(key)} in metadata.memstore"] += 1
        for key in _EXTRA_KEYS[1:]:
            as_object(extras.get(key, {}), key_path("metadata", "memstore", key))
        return extras

    def rooms(self) -> None:
        for key, value in self.table("rooms").items():
            where = key_path("rooms", key)
            room = as_room_id(key, where)
            fields = as_object(value, where)
            for name in fields:
                if name not in _ROOM_KEYS:
                    self.unknown[f"{shown_value(name)} in rooms"] += 1
            if "id" in fields and as_whole(fields["id"], key_path("rooms", key, "id")) != room:
                raise refusal(key_path("rooms", key, "id"), f"is {fields['id']}, not {room}")
            self.graph.rooms[room] = as_text(fields.get("name", ""), key_path("rooms", key, "name"))
            exits = fields.get("exits", [])
            if not isinstance(exits, list):
                raise refusal(key_path("rooms", key, "exits"), "must be a list of exits")
            self.listed_exits[room] = [
                as_exit_key(
                    as_text(e, key_path("rooms", key, "exits")), key_path("rooms", key, "exits")
                )
                for e in exits
            ]

    def room_names(self) -> None:
        """ZorkGPT's top-level ``room_names`` (``{"<id>": name}``, its display names): a
        name for a room ``rooms`` gives none (a room ``rooms`` lacks is added with it);
        where both name a room and differ, ``rooms``' name is kept (spec 003's shape, and
        the one memstore writes both from), with one warning line."""
        differ = []
        for key, value in self.table("room_names").items():
            where = key_path("room_names", key)
            room = as_room_id(key, where)
            name = as_text(value, where)
            known = self.graph.rooms.get(room)
            if not known:
                if name or known is None:
                    self.graph.rooms[room] = name
            elif name != known:
                differ.append(f"{room} ({shown_value(name)}, rooms: {shown_value(known)})")
        if differ:
            self.notes.append(
                f"room_names: {len(differ)} name(s) that differ from the room's name in "
                f"rooms, left out (rooms' name is kept): {listed(differ)}"
            )
            self.lost.append(f"{len(differ)} room_names that differ from rooms")

    def exit_failures(self, extra: dict[str, Any]) -> None:
        times = self.index(extra, "metadata.memstore.exit_failures")
        kept_out = []
        for key, count in self.table("exit_failure_counts").items():
            where = key_path("exit_failure_counts", key)
            room, direction = split_key(key, "exit_failure_counts")
            count = as_count(count, where)
            if direction not in DIRECTION_ORDER:
                kept_out.append(key)
                continue
            if (room, direction) in self.graph.failures:
                raise refusal(where, "counts an exit that another key counts too")
            found = times.get((room, direction))
            at = (0, 0)
            if found is not None:
                at = as_time(found[1], key_path("metadata", "memstore", "exit_failures", found[0]))
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
            where = key_path("pruned_exits", room_key)
            room = as_room_id(room_key, where)
            if not isinstance(exits, list):
                raise refusal(where, "must be a list of exits")
            spelled: dict[str, str] = {}
            for exit_ in exits:
                direction = as_exit_key(as_text(exit_, where), where)
                if direction not in DIRECTION_ORDER:  # left out, duplicates with the rest
                    kept_out.append(f"{room}_{exit_}")
                    continue
                if direction in spelled:
                    if spelled[direction] == exit_:  # the same exit, listed again
                        self.twice.append(f"{room}_{exit_}")
                        continue
                    raise refusal(
                        where,
                        f"lists {shown_value(exit_)}, the same exit as "
                        f"{shown_value(spelled[direction])} ({direction})",
                    )
                spelled[direction] = exit_
                found = times.get((room, direction))
                at = (0, 0)
                if found is not None:
                    at = as_time(
                        found[1], key_path("metadata", "memstore", "pruned_exits", found[0])
                    )
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
                    f"metadata.{name} is {shown_value(metadata[name])} but the file holds {actual}"
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


def parse_map_state(text: str, route: float = DEFAULT_ROUTE_CONFIDENCE) -> ParsedMapState:
    """Read ``map_state.json`` text: the map it holds and the notes on what was left out.
    Raises :class:`~memstore.errors.MapStateError` (one line naming the key) for anything
    memstore will not import as it is. ``route``: the route threshold
    (``map_route_confidence``), for a confidence that needs more failures than the reader
    works out (memstore.map_json_connections)."""
    return _Reader(load_json(text), route).read()


#: names that moved when this module was split (issue 15), found here as before
__getattr__ = forwarding(
    __name__,
    {
        "MAX_COUNT": "memstore.map_json_checks",
        "MAX_INTEGER": "memstore.map_json_checks",
        "CONFIDENCE_RULE": "memstore.map_json_connections",
        "MAX_DERIVED_FAILURES": "memstore.map_json_connections",
    },
)
