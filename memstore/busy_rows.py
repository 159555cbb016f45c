"""The rows that wait for a busy database (memstore.busy_buffer), one at a time: what a
waiting synthesis leaves of a location's live memories (``store.apply_synthesis``'s rules),
a row's value class and age in the drop order, and its size as the bound estimates it
(``BusyBuffer.waiting_bytes``: texts as Python holds them, ``sys.getsizeof``, plus a fixed
overhead for the objects around them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from memstore.models import Memory, Persistence
from memstore.shown_memories import ShownMemories, ShownTitle

__all__ = [
    "MEMORY_OVERHEAD_BYTES",
    "ROW_OVERHEAD_BYTES",
    "SYNTHESIS_OVERHEAD_BYTES",
    "applied",
    "clock",
    "decision_bytes",
    "event_bytes",
    "named",
    "synthesis_bytes",
    "synthesis_value",
    "turn_bytes",
    "visit_bytes",
]

#: what ``waiting_bytes`` adds for the objects of a waiting synthesis (its dicts, its
#: memory), and of a bookkeeping row, to the size of their texts (``sys.getsizeof``)
SYNTHESIS_OVERHEAD_BYTES = 1500
MEMORY_OVERHEAD_BYTES = 700
ROW_OVERHEAD_BYTES = 300


def applied(shown: ShownMemories, synthesis: dict[str, Any]) -> ShownMemories:
    """``shown`` as ``synthesis`` leaves it (``store.apply_synthesis``'s rules)."""
    new = synthesis["new_memory"]
    session = new is not None and new.persistence is Persistence.EPHEMERAL
    supersede = list(synthesis["supersede_titles"])
    invalidate = list(synthesis["invalidate_titles"])
    kept = ShownMemories(rows=shown.rows)
    for memory in shown:
        if named(invalidate, memory, shown) or (
            named(supersede, memory, shown)
            and not (session and memory.persistence is not Persistence.EPHEMERAL)
        ):
            continue
        kept.append(memory)
    if new is not None and all(memory.title != new.title for memory in kept):
        kept.append(new)
    return kept


def named(titles: Iterable[str], memory: Memory, shown: ShownMemories) -> bool:
    """Whether one of ``titles`` names ``memory``: a ShownTitle its very row, a title any
    memory of that title."""
    for title in titles:
        if isinstance(title, ShownTitle):
            if shown.rows.row_of(memory) == title.row:
                return True
        elif title == memory.title:
            return True
    return False


def synthesis_value(synthesis: dict[str, Any]) -> int:
    """0: only its decision-log row is left; 1: a session memory, nothing retired; 2: the rest."""
    memory = synthesis["new_memory"]
    retires = bool(synthesis["supersede_titles"] or synthesis["invalidate_titles"])
    if retires:
        return 2
    if memory is None:
        return 0
    return 1 if memory.persistence is Persistence.EPHEMERAL else 2


def clock(row: Any) -> tuple[int, int]:
    return row.episode, row.turn


def _texts(values: Iterable[object]) -> int:
    """The texts' size as Python holds them, each object once (the offline recorder's
    answer is its decision)."""
    seen: set[int] = set()
    size = 0
    for value in values:
        if isinstance(value, str) and id(value) not in seen:
            seen.add(id(value))
            size += sys.getsizeof(value)
    return size


def _text(value: str | None) -> int:
    return 0 if value is None else sys.getsizeof(value)


def synthesis_bytes(synthesis: dict[str, Any]) -> int:
    """A waiting synthesis's size, estimated."""
    size = SYNTHESIS_OVERHEAD_BYTES + _texts(synthesis["log"].values())
    size += _text(synthesis["invalidation_reason"])
    size += _texts(synthesis["supersede_titles"]) + _texts(synthesis["invalidate_titles"])
    memory = synthesis["new_memory"]
    if memory is not None:
        size += MEMORY_OVERHEAD_BYTES + _text(memory.title) + _text(memory.text)
    return size


def decision_bytes(row: Any) -> int:
    log_entry = row.log
    return (
        ROW_OVERHEAD_BYTES * 2
        + _text(row.location_name)
        + _texts((log_entry.raw_answer, log_entry.decision, log_entry.error, log_entry.model))
    )


def turn_bytes(row: Any) -> int:
    return ROW_OVERHEAD_BYTES + _text(row.action) + _text(row.triggers)


def visit_bytes(visit: tuple[int, str, int]) -> int:
    return ROW_OVERHEAD_BYTES // 4  # its name is the map event's


def event_bytes(event: Any) -> int:
    return ROW_OVERHEAD_BYTES // 2 + _texts((event.from_name, event.to_name))
