"""The map's own rules, held against a map read from ``map_state.json``
(memstore.map_json_read reads it; these are the checks across its fields).

Each combination a file can hold is sorted by who can write it: memstore's recorder
(memstore.map_graph ``MapGraph.apply`` and its SQL twin, memstore.map_sql), ZorkGPT's
``map_graph.py`` (``add_connection``, ``prune_invalid_exits``, ``to_dict``), or neither.

* **A failed exit whose connection holds fewer failures** (``exit_failure_counts`` has
  ``180_south: 3``, and ``connection_confidence`` gives 180 south no failure). ZorkGPT
  writes it: ``track_exit_failure`` adds to ``exit_failure_counts`` only, and neither it
  nor ``add_connection`` lowers ``connection_confidence`` or ``connection_verifications``,
  so the file's confidence never holds a failure. memstore's recorder counts a failure of
  an exit that has a connection on the connection too (``MapGraph._fail``). Which came
  first the file does not say; the failures are counted on the connection, as the recorder
  does for failures after a move, and as ZorkGPT's pruning (three failures: invalid) reads
  them: a ZorkGPT connection's failures are at least its exit's failure count, with one
  warning line giving each change (failures and confidence). A connection of memstore's
  own file (``metadata.memstore``) keeps its failures as written: the recorder holds an
  exit's failures from before the move on the exit only.
* **A pruned exit that connections hold** (``pruned_exits`` lists ``south`` of a room
  whose ``connections`` has ``south``). memstore never writes it: a move un-prunes the
  exit, and a failure prunes only an exit with no connection. ZorkGPT does:
  ``prune_invalid_exits`` prunes every exit in the room's ``exits`` that failed three times,
  ``add_connection`` puts there each exit it took and the way back it infers, and nothing
  un-prunes. memstore's rule (a success un-prunes) applies where the file shows a success:
  a ZorkGPT connection with a verification that is not an inferred way back (below):
  un-pruned, with one warning line. Any other one (0 verifications: a hand edit) is kept
  pruned, with one warning line; routes skip it, and a later move un-prunes it. A
  connection of memstore's own file is kept pruned without a warning (the recorder never
  writes one, so it is a hand edit, or an export of one; export-json, import-json,
  export-json gives the same bytes).
* **ZorkGPT's inferred way back** (:func:`inferred_way_back`). For every direction it
  takes, ``add_connection`` writes the opposite direction leading back, unless that exit
  is known already, though the player never took it: 1 verification, confidence 0.9 x the
  confidence the taken exit was given (the caller's: 1.0 in ZorkGPT's orchestrator, 0.8 in
  its MapManager). Each later take of an exit adds a verification and 0.1 to its
  confidence (at most 1); a take that leads elsewhere replaces it at the caller's
  confidence with 1 verification. So a way back never taken is a direction with 1
  verification, whose opposite leads back from where it goes, whose confidence is 0.9 x a
  caller's (0.9 or 0.72), and whose opposite's confidence is that caller's plus 0.1 a later
  take, or exactly 1.0 once that reached the cap. An exit taken once holds the caller's
  own (1.0 or 0.8): never read as a guess, whatever its opposite holds. memstore writes no
  such pair, with ``metadata.memstore`` or without it (ZorkGPT's ``to_dict`` drops it): a
  connection it recorded once holds 2 / (f + 3), at most 2/3, and it never writes 1.0
  (its rule is below 1; the export writes at most 0.9999). About half of the guesses are
  wrong in Zork (North of House's ``south``: the windows are boarded), and memstore keeps
  the exits that moved the player: each is left out (memstore.map_json_read), with one
  warning line counting them, so routes and the agent's exits line never use one and the
  direction stays untried; its failures and pruning stay on the exit. A way back ZorkGPT
  did take has 2 verifications or more, or a confidence of its own: kept.
* **A room connected to itself** (``connections["180"]["up"]`` is 180). memstore never
  writes it: a move is ``location_before != location_after``. ZorkGPT's ``add_connection``
  does not check, but its only caller (``MapManager.update_from_movement``) adds a
  connection only when the location id changed, and the way back it infers leads to the
  other room. So only a corrupt or hand-made file has one: refused, naming the first such
  key in the file, and nothing is imported.
* **first_seen later than last_seen** (``metadata.memstore.connections``). ZorkGPT writes
  no times; memstore's recorder does write this: ``last_seen`` is the latest event written,
  and agents sharing a database play under their own episode numbers, so the one numbered
  first can take an exit after the other did (first_seen ``[6, 1]``, last_seen ``[5, 1]``).
  Kept as it is, without a warning: the file is memstore's own, and the round trip
  (export-json, import-json, export-json) gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from memstore.errors import MapStateError
from memstore.map_graph import Connection, MapGraph

#: at most this many keys are named in one reported line
LISTED = 5
#: the direction ZorkGPT's ``add_connection`` infers back for each direction it takes
WAY_BACK = {
    "north": "south",
    "south": "north",
    "east": "west",
    "west": "east",
    "northeast": "southwest",
    "southwest": "northeast",
    "northwest": "southeast",
    "southeast": "northwest",
    "up": "down",
    "down": "up",
    "in": "out",
    "out": "in",
}
#: ZorkGPT's ``add_connection``: an inferred way back's confidence is the taken exit's times
#: INFERRED, and each later take of an exit adds a verification and TAKE to its confidence
INFERRED, TAKE = 0.9, 0.1
#: the confidences ZorkGPT's callers give ``add_connection`` for an exit taken: 1.0 (its
#: orchestrator) and 0.8 (its MapManager); a guess is INFERRED x one of them (0.9, 0.72)
CALLER_CONFIDENCES = (1.0, 0.8)
#: ZorkGPT's ``min(1.0, confidence + 0.1)``: the confidence of an exit taken often enough
CAP = 1.0
#: float noise in ZorkGPT's sums (0.8 + 0.1 + 0.1 is 1.0000000000000002, then capped)
_FLOAT = 1e-9
#: how far a file's confidence may be from what ZorkGPT's arithmetic gives (floats)
_CLOSE = 0.001


def listed(keys: Iterable[str]) -> str:
    """The first LISTED keys, comma separated, and how many more."""
    keys = list(keys)
    shown = ", ".join(keys[:LISTED])
    return shown + (f" and {len(keys) - LISTED} more" if len(keys) > LISTED else "")


def check_move(room: int, to_id: int, where: str) -> None:
    """Refuse a connection from ``room`` back to itself (``where``: its key)."""
    if to_id == room:
        raise MapStateError(
            f"{where} leads from room {room} back to room {room}: memstore maps moves only "
            "(location_before != location_after), and neither memstore nor ZorkGPT writes "
            "one; nothing was imported"
        )


def inferred_way_back(
    found: Connection, rate: float | None, back: Connection | None, back_rate: float | None
) -> bool:
    """Whether ``found`` (a ZorkGPT connection, with its file confidence ``rate``) is the
    way back ``add_connection`` inferred and ZorkGPT never took (the module docstring):
    ``back`` is the connection the other way (its opposite direction from where ``found``
    leads), with its file confidence ``back_rate``.

    Exactly the values a guess can hold: ``rate`` is INFERRED x a caller's confidence c
    (CALLER_CONFIDENCES), and ``back`` was first taken at that c and since then
    ``back.verifications - 1`` times more: its confidence is c + TAKE a later take, or
    exactly the cap (1.0) once that reaches it. A real take taken once holds c itself
    (0.8 or 1.0), never INFERRED x c; and memstore's own connection taken once holds
    2 / (f + 3) <= 2/3 (``metadata.memstore`` stripped by ZorkGPT's ``to_dict``): neither
    is read as a guess."""
    if found.direction is None or found.verifications != 1 or rate is None:
        return False
    if back is None or back_rate is None or back.to_id != found.from_id:
        return False
    if back.verifications < 1:
        return False
    for caller in CALLER_CONFIDENCES:
        if abs(rate - INFERRED * caller) > _CLOSE:
            continue
        reached = caller + TAKE * (back.verifications - 1)  # back's confidence, uncapped
        if reached >= CAP - _FLOAT:  # at the cap: exactly 1.0 (memstore never writes it)
            return back_rate >= CAP - _FLOAT
        return abs(back_rate - reached) <= _CLOSE
    return False


def count_failures(graph: MapGraph, peer: Iterable[tuple[int, str]]) -> list[str]:
    """Count each failed exit's failures on its connection, for the ``peer`` (ZorkGPT)
    connections whose failures came from their confidence; the warning giving each
    change (none when there was none)."""
    raised = []
    for key in peer:
        failed, old = graph.failures.get(key), graph.connections[key]
        if failed is None or failed.failures <= old.failures:
            continue
        new = old._replace(failures=failed.failures)
        graph.connections[key] = new
        raised.append(
            f"{key[0]}_{key[1]} ({old.failures} -> {new.failures} failures, "
            f"confidence {old.confidence:.2f} -> {new.confidence:.2f})"
        )
    if not raised:
        return []
    return [
        f"exit_failure_counts: {_many(len(raised), 'failed exit')} whose connection's confidence "
        "holds fewer failures, counted on the connection as memstore does (ZorkGPT counts "
        f"them only here; routes take a connection above confidence 0.5): {listed(raised)}"
    ]


def unprune_taken(
    graph: MapGraph, taken: Set[tuple[int, str]], peer: Set[tuple[int, str]]
) -> list[str]:
    """Un-prune every pruned exit that ``graph`` has a connection for and the file shows
    ``taken`` (memstore's rule: a success un-prunes); keep the others pruned. One warning
    line for each, counting them: un-pruned, and kept pruned among ``peer`` (ZorkGPT's)
    connections."""
    held = [key for key in graph.pruned if key in graph.connections]
    unpruned = [key for key in held if key in taken]
    kept = [key for key in held if key not in taken and key in peer]
    for key in unpruned:
        del graph.pruned[key]
    notes = []
    if unpruned:
        notes.append(
            f"pruned_exits: {_many(len(unpruned), 'pruned exit')} that connections hold and the "
            "file shows taken (a verification, not ZorkGPT's inferred way back), un-pruned "
            f"(memstore: a success un-prunes an exit): {_keys(unpruned)}"
        )
    if kept:
        notes.append(
            f"pruned_exits: {_many(len(kept), 'pruned exit')} that connections hold but the file "
            "never shows taken (0 verifications), kept pruned: routes skip them until a move "
            f"takes them: {_keys(kept)}"
        )
    return notes


def _many(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _keys(keys: Iterable[tuple[int, str]]) -> str:
    return listed(f"{room}_{direction}" for room, direction in keys)
