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
  a ZorkGPT connection with 2 verifications or more, or confidence 1 or none
  (``add_connection`` gives an exit it took the caller's confidence, 1.0 at every call
  site, and each later take adds a verification and 0.1): un-pruned, with one warning
  line. The way back ``add_connection`` infers (confidence x 0.9, 1 verification) was never
  taken: kept pruned, with one warning line; routes skip it, and a later move un-prunes it.
  A connection of memstore's own file is kept pruned without a warning (the recorder never
  writes one, so it is such a kept way back, exported, or a hand edit; export-json,
  import-json, export-json gives the same bytes).
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
from memstore.map_graph import MapGraph

#: at most this many keys are named in one reported line
LISTED = 5


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
            "file shows taken (2 verifications or more, or confidence 1 or none), un-pruned "
            f"(memstore: a success un-prunes an exit): {_keys(unpruned)}"
        )
    if kept:
        notes.append(
            f"pruned_exits: {_many(len(kept), 'pruned exit')} that connections hold but the file "
            "never shows taken (ZorkGPT's inferred way back: 1 verification, confidence "
            f"below 1), kept pruned: routes skip them until a move takes them: {_keys(kept)}"
        )
    return notes


def _many(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _keys(keys: Iterable[tuple[int, str]]) -> str:
    return listed(f"{room}_{direction}" for room, direction in keys)
