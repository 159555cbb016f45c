"""The map's own rules, held against a map read from ``map_state.json``
(memstore.map_json_read reads it; these are the checks across its fields).

Each combination a file can hold is sorted by who can write it: memstore's recorder
(memstore.map_graph ``MapGraph.apply`` and its SQL twin, memstore.map_sql), ZorkGPT's
``map_graph.py`` (``add_connection``, ``prune_invalid_exits``, ``to_dict``), or neither.

* **A pruned exit that connections hold as taken** (``pruned_exits`` lists ``north`` of a
  room whose ``connections`` has ``north``). memstore never writes it: a move un-prunes the
  exit, and a failure prunes only an exit with no connection. ZorkGPT does:
  ``prune_invalid_exits`` prunes every exit in the room's ``exits`` that failed three times,
  ``add_connection`` puts there each exit it took (and the inferred way back), and nothing
  un-prunes. Accepted, brought to memstore's rule (a success un-prunes the exit: ZorkGPT
  keeps using the connection too), with one warning line counting them; the connection
  and the exit's failure count are kept as the file has them.
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

from collections.abc import Iterable

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


def unprune_taken(graph: MapGraph) -> str | None:
    """Un-prune every pruned exit that ``graph`` has a connection for (memstore's rule: a
    success un-prunes); the warning that counts them, or None when there was none."""
    taken = [key for key in graph.pruned if key in graph.connections]
    for key in taken:
        del graph.pruned[key]
    if not taken:
        return None
    many = "exit" if len(taken) == 1 else "exits"
    return (
        f"pruned_exits: {len(taken)} pruned {many} that connections hold as taken, un-pruned "
        f"(memstore: a success un-prunes an exit; the failure counts are kept): "
        f"{listed(f'{room}_{direction}' for room, direction in taken)}"
    )
