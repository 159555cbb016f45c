"""The reader of a ``map_state.json`` (memstore.map_json_read), its state and the
connection tables: ``connections`` with their verifications and confidences (and
memstore's own counts and times in ``metadata.memstore.connections``), the failures a
ZorkGPT confidence stands for (memstore's rule, at most MAX_DERIVED_FAILURES), the
confidences the counts kept do not give, and ZorkGPT's inferred ways back, left out.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from memstore.map_graph import (
    DEFAULT_ROUTE_CONFIDENCE,
    DIRECTION_ORDER,
    Connection,
    MapGraph,
    action_key,
    confidence,
    stored_action,
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
    refusal,
    shown_value,
    split_key,
)
from memstore.map_json_rules import WAY_BACK, check_move, inferred_way_back, listed

__all__ = ["CONFIDENCE_RULE", "MAX_DERIVED_FAILURES", "ConnectionsReader"]

CONFIDENCE_RULE = "(v + 1) / (v + f + 2)"
#: failures derived from a confidence of 0 (or nearly): the connection is never routed
MAX_DERIVED_FAILURES = 10_000
_EXTRA_CONNECTION_KEYS = ("action", "failures", "first_seen", "last_seen")
#: a file's confidence further than this from memstore's rule for the counts kept is reported
_CONFIDENCE_TOLERANCE = 0.001


class ConnectionsReader:
    """One pass over a loaded file: the map it describes and the notes (its state), and
    the connection tables (memstore.map_json_read's reader reads the rest)."""

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
        return as_object(self.data.get(name, {}), name)

    def room(self, room: int) -> None:
        if room not in self.graph.rooms:
            self.graph.rooms[room] = ""
            self.missing_rooms.add(room)

    def index(self, table: dict[str, Any], name: str) -> dict[tuple[int, str], tuple[str, Any]]:
        """``table``'s ``"<room>_<exit>"`` entries by (room, exit key); two spellings of
        one exit (``15_n`` and ``15_north``) are refused."""
        found: dict[tuple[int, str], tuple[str, Any]] = {}
        for spelled, value in table.items():
            key = split_key(spelled, name)
            if key in found:
                raise refusal(
                    key_path(name, spelled), f"is the same exit as {shown_value(found[key][0])}"
                )
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
            room = as_room_id(room_key, key_path("connections", room_key))
            spelled: dict[str, str] = {}
            for exit_, to in as_object(exits, key_path("connections", room_key)).items():
                where = key_path("connections", room_key, exit_)
                key = as_exit_key(exit_, where)
                if key in spelled:
                    raise refusal(where, f"is the same exit as {shown_value(spelled[key])} ({key})")
                spelled[key] = exit_
                to_id = as_whole(to, where)
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
                shown = f"{spelled} ({shown_value(rate)} -> {_rate(kept)})"
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
        v = (
            1
            if found is None
            else as_count(found[1], key_path("connection_verifications", found[0]))
        )
        rate = trust.get((room, key))
        if rate is not None:
            value = rate[1]
            if type(value) not in (int, float) or not 0 <= value <= 1:
                raise refusal(
                    key_path("connection_confidence", rate[0]),
                    f"must be a number from 0 to 1, got {shown_value(value)}",
                )
        more = extra.get((room, key))
        action, first, last = stored_action(exit_), (0, 0), (0, 0)
        if more is not None:
            where = key_path("metadata", "memstore", "connections", more[0])
            fields = as_object(more[1], where)
            for name in fields:
                if name not in _EXTRA_CONNECTION_KEYS:
                    self.unknown[f"{shown_value(name)} in metadata.memstore.connections"] += 1
            action = stored_action(as_text(fields.get("action", exit_), f'{where}["action"]'))
            if action_key(action) != key:
                raise refusal(f'{where}["action"]', f"is not the exit {shown_value(key)}")
            f = as_count(fields.get("failures", 0), f'{where}["failures"]')
            first = as_time(fields.get("first_seen", [0, 0]), f'{where}["first_seen"]')
            last = as_time(fields.get("last_seen", [0, 0]), f'{where}["last_seen"]')
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
        raise refusal(
            key_path("connection_confidence", spelled),
            f"is {shown_value(rate)} beside {verifications} verifications: memstore's rule "
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
