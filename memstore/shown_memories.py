"""The memories a prompt shows, with the row each was read from (no I/O).

A Memory carries no identity of its own, and a title does not name one memory: two agents
may each hold a live memory of one title at one room (one agent's ephemeral memory beside
another's persistent one), and while a model answers, another agent may replace the memory
it was shown by a new one of the same title. So what ``MemoryStore.memories`` lists
(:class:`ShownMemories`) keeps the row each memory was read from, ``synthesis`` numbers them
for the prompt keeping those rows, a title resolved from a handle (:class:`ShownTitle`)
names its row, and the store retires exactly that row, or nothing when it is no longer
live (``memstore.live_titles.find_shown``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from memstore.models import Memory, Persistence, format_turns

__all__ = ["MemoryRow", "ShownMemories", "ShownRows", "ShownTitle"]


class MemoryRow(NamedTuple):
    """Where a memory is stored: its tier ("persistent" or "ephemeral") and its id there."""

    tier: str
    id: int


class ShownRows:
    """The row each Memory object was read from, by object (never by content: two equal
    memories of two rows stay two)."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: dict[int, tuple[Memory, MemoryRow]] = {}

    def add(self, memory: Memory, row: MemoryRow) -> None:
        self._rows[id(memory)] = (memory, row)

    def row_of(self, memory: Memory) -> MemoryRow | None:
        """The row ``memory`` (this very object) was read from, or None."""
        found = self._rows.get(id(memory))
        return found[1] if found is not None and found[0] is memory else None


class ShownMemories(list[Memory]):
    """Memories as ``MemoryStore.memories`` lists them (a list), with the row each was read
    from: ``rows.row_of(memory)``. Reordering or copying the list keeps the rows."""

    __slots__ = ("rows",)

    def __init__(self, memories: Iterable[Memory] = (), rows: ShownRows | None = None) -> None:
        super().__init__(memories)
        self.rows = rows if rows is not None else ShownRows()

    @classmethod
    def read(cls, loaded: Iterable[tuple[str, int, Memory]]) -> ShownMemories:
        """From the store's (tier, id, Memory) rows."""
        shown = cls()
        for tier, memory_id, memory in loaded:
            shown.append(memory)
            shown.rows.add(memory, MemoryRow(tier, memory_id))
        return shown

    def copy(self) -> ShownMemories:
        return ShownMemories(self, self.rows)

    def after(
        self,
        removed: Iterable[tuple[str, int]],
        added: Iterable[tuple[tuple[str, int], Memory]],
    ) -> ShownMemories | None:
        """The live memories after a write here that retired the ``removed`` rows and stored
        ``added`` (each the newest of its tier), in the order ``memories`` reads them:
        persistent before ephemeral, each tier oldest first, a new memory's turns as the
        database stores them. None when a memory here has no row (read them again)."""
        gone = set(removed)
        rows = ShownRows()
        tiers: dict[bool, list[Memory]] = {False: [], True: []}  # ephemeral?
        for memory in self:
            row = self.rows.row_of(memory)
            if row is None:
                return None
            if row not in gone:
                tiers[memory.persistence is Persistence.EPHEMERAL].append(memory)
                rows.add(memory, row)
        for (tier, memory_id), memory in added:
            if (tier, memory_id) in gone:
                continue
            turns = format_turns(memory.turn_start, memory.turn_end)
            if turns != memory.turns:
                memory = memory.model_copy(update={"turns": turns})
            tiers[memory.persistence is Persistence.EPHEMERAL].append(memory)
            rows.add(memory, MemoryRow(tier, memory_id))
        return ShownMemories([*tiers[False], *tiers[True]], rows)


class ShownTitle(str):
    """A memory's title as a prompt showed it, naming the row it was read from (``row``):
    the store retires that row, or none when it is no longer live there. It is the title
    wherever a str is (the decision log, the counts)."""

    row: MemoryRow

    def __new__(cls, title: str, row: MemoryRow) -> ShownTitle:
        made = super().__new__(cls, title)
        made.row = row
        return made
