"""The 3-way merge's pairing of what a re-run of an import finds and its warnings: part of
memstore.merge (its helpers that need no state of the merge).

A re-run of an import finds the file's copies of memories in the database (an earlier
run took them): ``origins_again`` pairs each with the export's memory it came from as the
first run did. ``moved_origin`` and ``dropped_elsewhere`` find a memory the file moved;
``likeliest`` picks the row the database gained that stands for the file's memory. The
``*_warning`` functions say, in one line each, what the merge kept and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from memstore.import_plan import STATUS_FIELDS
from memstore.md_rows import MemoryRow
from memstore.merge_types import StoredMemory
from memstore.pairing import edited_from

__all__ = [
    "dropped_elsewhere",
    "kept_again_warning",
    "left_again_warning",
    "likeliest",
    "moved_origin",
    "origins_again",
]


def origins_again(
    unbased: Mapping[int, Sequence[tuple[MemoryRow, int, int]]],
    dropped: dict[int, list[StoredMemory[MemoryRow]]],
    changed: Callable[[StoredMemory[MemoryRow]], bool],
    tied: set[int],
) -> Iterator[tuple[int, MemoryRow, int, StoredMemory[MemoryRow]]]:
    """The export's memory each file's memory the database gained since (an earlier import
    of this file took it) was edited or moved from, found as that import found it, pass by
    pass, each export memory once: by title, then text, where the file dropped it; moved,
    with its title and text; moved with its text alone (one only); by place only, the
    first the database changed (review S6 E F2, G F2: a re-run looked at the same location
    only, and without taking each once saw two where the first run saw one).
    (location id, the file's memory, its title_nth, the origin)."""
    left = {location: list(there) for location, there in dropped.items()}
    waiting = [
        (location_id, memory, nth)
        for location_id, gained in unbased.items()
        for memory, nth, _written in gained
    ]

    def take(origin: StoredMemory[MemoryRow]) -> StoredMemory[MemoryRow]:
        there = left[origin.location_id]
        if origin in there:  # (edited_from takes its own out)
            there.remove(origin)
        return origin

    for find in (
        lambda loc, memory: edited_from(memory, left.get(loc, []), 0, changed, tied),
        lambda loc, memory: edited_from(memory, left.get(loc, []), 1, changed, tied),
        lambda loc, memory: moved_origin(left, loc, memory, changed, same_title=True),
        lambda loc, memory: moved_origin(left, loc, memory, changed, same_title=False),
        lambda loc, memory: next((w for w in left.get(loc, []) if changed(w)), None),
    ):
        still = []
        for location_id, memory, nth in waiting:
            origin = find(location_id, memory)
            if origin is None:
                still.append((location_id, memory, nth))
            else:
                yield location_id, memory, nth, take(origin)
        waiting = still


def moved_origin(
    left: dict[int, list[StoredMemory[MemoryRow]]],
    location_id: int,
    memory: MemoryRow,
    changed: Callable[[StoredMemory[MemoryRow]], bool],
    *,
    same_title: bool,
) -> StoredMemory[MemoryRow] | None:
    """The memory the file moved ``memory`` from, as the first run paired it: with its
    title and text, the one the database changed first; with its text alone, the only one."""
    moved = dropped_elsewhere(left, location_id, memory, same_title=same_title)
    if same_title and moved:
        elsewhere, k = next((m for m in moved if changed(left[m[0]][m[1]])), moved[0])
        return left[elsewhere][k]
    return left[moved[0][0]][moved[0][1]] if not same_title and len(moved) == 1 else None


def likeliest(fresh: list[StoredMemory[MemoryRow]], memory: MemoryRow) -> int:
    """Which of the rows the database gained since the export with ``memory``'s key stands
    for it: the one that holds exactly it, else the first."""
    return next((n for n, stored in enumerate(fresh) if stored.memory == memory), 0)


def kept_again_warning(
    line: int | None, origin: StoredMemory[MemoryRow], memory: MemoryRow | None
) -> str:
    where = f"line {line}: " if line else ""
    edit = (
        f"the database retired or changed it since the export, and the file's "
        f"{memory.title!r} (which an earlier import took) may be an edit of it"
        if memory is not None
        else "a memory the file changed has its text, and may be an edit of it"
    )
    return (
        f"{where}{origin.memory.title!r} (location {origin.location_id}) is kept, though the "
        f"file dropped it: {edit}; export again and delete it there to delete it"
    )


def left_again_warning(line: int | None, title: str, fields: list[str]) -> str:
    where = f"line {line}: " if line else ""
    names = list(dict.fromkeys("status" if f in STATUS_FIELDS else f for f in fields))
    return (
        f"{where}{title!r}: the file's {' and '.join(names)} "
        f"{'is one' if len(names) == 1 else 'are ones'} the database "
        f"had since the export and a later change left (this file imported before?); the "
        f"database's {'is' if len(names) == 1 else 'are'} kept: set it again in a new export "
        f"(to another file, or with --force: this one holds it)"
    )


def dropped_elsewhere(
    dropped: dict[int, list[StoredMemory[MemoryRow]]],
    location_id: int,
    memory: MemoryRow,
    *,
    same_title: bool,
) -> list[tuple[int, int]]:
    """Where the file dropped, at another location than ``location_id``, a memory with
    ``memory``'s text (and, with ``same_title``, its title): (location id, place there)."""
    return [
        (elsewhere, k)
        for elsewhere, there in dropped.items()
        if elsewhere != location_id
        for k, was in enumerate(there)
        if was.memory.text == memory.text and (not same_title or was.memory.title == memory.title)
    ]
