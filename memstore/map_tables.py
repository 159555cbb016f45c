"""The bookkeeping behind MapGraph's index of its rows by room (memstore.map_graph).

Part of the map: MapGraph keeps its tables as CountedTables, dicts that count their
changes, so its index of each room's keys (ByRoom) is built once per map and built again
after any change to a table, at no cost per query.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MAP_TABLES", "ByRoom", "CountedTable"]


class ByRoom(NamedTuple):
    """The keys of each room's rows (MapGraph's index by room): its connections' keys, its
    failed directions and its pruned ones."""

    connections: dict[int, list[tuple[int, str]]]
    failures: dict[int, list[str]]
    pruned: dict[int, list[str]]


class CountedTable(dict):  # type: ignore[type-arg]
    """A dict that counts its changes (``version``), so that MapGraph's index of its keys
    by room is rebuilt after any change, whatever its size, at no cost per query."""

    version = 0


def _counting(name: str) -> object:
    change = getattr(dict, name)

    def counted(self: CountedTable, *args: object, **kwargs: object) -> object:
        self.version += 1
        return change(self, *args, **kwargs)

    return counted


for _name in (
    "__setitem__",
    "__delitem__",
    "__ior__",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
):
    setattr(CountedTable, _name, _counting(_name))

#: MapGraph's tables, whose changes its index follows (each is a CountedTable)
MAP_TABLES = ("connections", "failures", "pruned")
