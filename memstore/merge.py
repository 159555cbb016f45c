"""The 3-way merge of an import: the export's base, the reviewed file, the database now.

Pure (no SQL). A Memories.md records the database and the change counter it was exported
at (``exporters.base_line``); the store rebuilds the persistent memories as they were then
(``memstore.versions.state_at``). For each memory, each field group (text, category,
score change, persistence, and the status with its supersession link) is merged:

* changed only in the database since the base (an agent superseded it after the export):
  the database's value stays - nothing an agent learned is reverted;
* changed only in the file: the file's value (the reviewer's edit);
* changed in both, differently: a conflict, which the user resolves per run with
  ``ours`` (keep the database), ``theirs`` (take the file) or ``skip`` (leave that memory
  as the database has it and apply the rest); without a resolution nothing is applied.

A memory the database created after the export is kept as it is (never pruned); one the
file dropped is left to ``--prune`` only when the database did not change it since (and
when the file retitled or moved it, ``MergeResult.retitled`` says so: without ``--prune``
the plan makes that a problem, never a second copy). The
result is the file as it should be read against the database now; ``plan_import`` then
plans it 2-way as before. Memories are plain rows (``memstore.models.MemoryRow``) here.

A file with no base (hand-written, or exported before revision 0004) is compared 2-way,
with a warning, and a status moved backwards (SUPERSEDED in the database, live in the
file) is a conflict: only ``theirs`` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from memstore.import_lines import LineFinder
from memstore.import_plan import (
    STATUS_FIELDS,
    ImportProblem,
    MemoryKey,
    memory_key,
)
from memstore.md_rows import LocationRow, LocationRows, MemoryRow
from memstore.merge_again import (
    dropped_elsewhere,
    kept_again_warning,
    left_again_warning,
    likeliest,
    origins_again,
)
from memstore.merge_types import (
    MergeConflict,
    MergeResult,
    Resolution,
    StoredMemory,
    merge_fields,
)
from memstore.models import Status
from memstore.name_merge import NameConflict, NameHistory, merge_name
from memstore.pairing import edited_from, pair_by_content, pair_section

__all__ = [
    "MergeConflict",
    "MergeResult",
    "NameConflict",
    "Resolution",
    "StoredMemory",
    "merge_import",
    "pair_by_content",
]


def _numbered(entry: LocationRows) -> Iterator[tuple[MemoryRow, MemoryKey, int, int]]:
    """Each memory of a file's section with its key, and how many before it in the section
    had the same key (which database memory it matches) and the same title (its line)."""
    seen: dict[MemoryKey, int] = {}
    titled: dict[str, int] = {}
    for memory in entry.memories:
        key = memory_key(entry.location.id, memory)
        nth = seen.get(key, 0)
        seen[key] = nth + 1
        title_nth = titled.get(memory.title, 0)
        titled[memory.title] = title_nth + 1
        yield memory, key, nth, title_nth


def _memory_of(stored: StoredMemory[MemoryRow]) -> MemoryRow:
    return stored.memory


def _itself(memory: MemoryRow) -> MemoryRow:
    return memory


def _own_ids(
    base: dict[int, StoredMemory[MemoryRow]], by_id: Mapping[int, StoredMemory[MemoryRow]]
) -> dict[int, StoredMemory[MemoryRow]]:
    """``base`` with the rows deleted since the export whose row id a newer row took (SQLite
    gives a new row the largest id + 1, so deleting the last row frees its id: an import
    that retitles the last memory stores the new title under the old one's id) under an id
    of their own (the negative of theirs): a row is the export's only when it was created
    then (the same ``created_version``), else a re-run would read the import's own row as
    the export's memory changed in the database since."""
    reused = [
        row_id
        for row_id, was in base.items()
        if (now := by_id.get(row_id)) is not None and now.created_version != was.created_version
    ]
    if not reused:
        return base
    own = dict(base)
    for row_id in reused:
        was = own.pop(row_id)
        own[-row_id] = StoredMemory(-row_id, was.location_id, was.created_version, was.memory)
    return own


def _stored_order(stored: StoredMemory[MemoryRow]) -> int:
    """The place of an export's memory in stored order (``_own_ids``' ids negated)."""
    return abs(stored.id)


def _item_order(item: tuple[int, StoredMemory[MemoryRow]]) -> int:
    return abs(item[0])


def _backwards(file: MemoryRow, database: MemoryRow) -> bool:
    return database.status is Status.SUPERSEDED and file.status is not Status.SUPERSEDED


def merge_import(
    incoming: Sequence[LocationRows],
    current: Sequence[StoredMemory[MemoryRow]],
    current_locations: dict[int, LocationRow],
    base: dict[int, StoredMemory[MemoryRow]] | None,
    *,
    resolution: Resolution | None,
    prune: bool,
    lines: LineFinder,
    warnings: Iterable[str] = (),
    base_names: Mapping[int, NameHistory] | None = None,
    since: Mapping[int, Sequence[MemoryRow]] | None = None,
    changed_at: Mapping[int, int] | None = None,
) -> MergeResult:
    """Merge ``incoming`` (the parsed file) with ``current`` (every persistent memory now,
    in stored order) against ``base`` (the memories at the file's export, by row id; None
    for a file with no usable base). ``base_names``: the names each location renamed since
    the export had from then on (``memstore.versions.names_since``; the others had the one
    they have now), for the 3-way merge of the names (``memstore.name_merge``);
    ``since``: the states each memory had after the export and left, by row id
    (``memstore.versions.state_at``), for ``merge_fields``; ``changed_at``: when each
    memory changed since the export was first changed (the same), for a re-run's pairing."""
    if base is None:
        return _two_way(incoming, current, resolution, lines, tuple(warnings))
    by_id = {stored.id: stored for stored in current}
    base = _own_ids(base, by_id)
    base_by_key: dict[MemoryKey, list[StoredMemory[MemoryRow]]] = {}
    # each of the export's memories' place in its section, as the export wrote it
    base_place: dict[int, int] = {}
    section_sizes: dict[int, int] = {}
    base_sections: dict[int, list[StoredMemory[MemoryRow]]] = {}  # in the export's order
    for stored in sorted(base.values(), key=_stored_order):
        base_by_key.setdefault(memory_key(stored.location_id, stored.memory), []).append(stored)
        base_sections.setdefault(stored.location_id, []).append(stored)
        base_place[stored.id] = section_sizes.get(stored.location_id, 0)
        section_sizes[stored.location_id] = base_place[stored.id] + 1

    def placed(stored: StoredMemory[MemoryRow]) -> tuple[int, int]:
        """An export's memory's place in its section: from its start, from its end."""
        place = base_place[stored.id]
        return place, section_sizes[stored.location_id] - 1 - place

    # database memories the base did not have, by key: an agent's, or an earlier import's
    fresh_by_key: dict[MemoryKey, list[StoredMemory[MemoryRow]]] = {}
    for stored in current:
        if stored.id not in base:
            fresh_by_key.setdefault(memory_key(stored.location_id, stored.memory), []).append(
                stored
            )

    conflicts: list[MergeConflict | NameConflict] = []
    left_again: list[str] = []  # (merge_fields' ``left``, said once each)
    kept_again: list[str] = []  # retired memories a re-run keeps where --prune would not
    problems: list[ImportProblem] = []  # twins the file changed that cannot be told apart
    kept: dict[int, list[tuple[int, MemoryRow]]] = {}  # location -> (row id, memory)
    added: dict[int, list[MemoryRow]] = {}  # location -> memories new in the file
    claimed: set[int] = set()  # row ids the file speaks for
    names: dict[int, LocationRow] = {}

    new_in_file: list[tuple[int, MemoryRow, int]] = []  # (location, memory, title_nth)
    # location -> the file's memories there that the database gained since the export (an
    # agent's, or an earlier import's)
    unbased: dict[int, list[tuple[MemoryRow, int, int]]] = {}  # (memory, title_nth, the
    # database row's created_version)

    database_only: set[int] = set()  # row ids kept that the file does not hold

    def keep(location_id: int, row_id: int, memory: MemoryRow, *, unseen: bool = False) -> None:
        kept.setdefault(location_id, []).append((row_id, memory))
        claimed.add(row_id)
        if unseen:
            database_only.add(row_id)

    tied: set[int] = set()  # export memories a pairing could not tell from the one it took
    for entry in incoming:
        location_id = entry.location.id
        names[location_id] = entry.location
        numbered = list(_numbered(entry))
        unsure: set[int] = set()
        section = base_sections.get(location_id, ())
        chosen = pair_section(numbered, base_by_key, _memory_of, placed, unsure, section)
        for place, ((memory, key, _nth, title_nth), index) in enumerate(
            zip(numbered, chosen, strict=True)
        ):
            bases = base_by_key.get(key, [])
            written_since = False  # (the database's row: an earlier import took it back)
            if index is not None and index < len(bases):
                was = bases[index]
                now = by_id.get(was.id)
                claimed.add(was.id)
                if now is None:  # deleted from the database since the export
                    if memory == was.memory:
                        continue
                    taken_back = fresh_by_key.get(key)
                    if not taken_back:  # and changed in the file
                        conflicts.append(
                            MergeConflict(
                                lines.memory_line(location_id, memory.title, title_nth),
                                location_id,
                                memory.title,
                                (),
                                memory,
                                None,
                            )
                        )
                        if resolution is Resolution.THEIRS:
                            added.setdefault(location_id, []).append(memory)
                        continue
                    # an earlier run of this import (--theirs) took it back: that row,
                    # whatever became of it since (review S6 B F1: each run added another
                    # copy; E F4: once an agent retired it, another live one)
                    now = taken_back.pop(likeliest(taken_back, memory))
                    unbased.setdefault(location_id, []).append(
                        (memory, title_nth, now.created_version)
                    )
                    merged, fields = merge_fields(None, memory, now.memory, resolution)
                    written_since = True
                elif place in unsure:  # which twin the file changed cannot be told
                    problems.append(_unsure_twin(lines, location_id, memory, title_nth, bases))
                    keep(location_id, now.id, now.memory)
                    continue
                else:
                    left: list[str] = []
                    merged, fields = merge_fields(
                        was.memory, memory, now.memory, resolution,
                        (since or {}).get(was.id, ()), left,
                    )  # fmt: skip
                    if left:
                        line = lines.memory_line(location_id, memory.title, title_nth)
                        left_again.append(left_again_warning(line, memory.title, left))
            else:  # new in the file; the database may have gained the same memory meanwhile
                fresh = fresh_by_key.get(key)
                if not fresh:
                    new_in_file.append((location_id, memory, title_nth))
                    continue
                now = fresh.pop(likeliest(fresh, memory))
                unbased.setdefault(location_id, []).append((memory, title_nth, now.created_version))
                merged, fields = merge_fields(None, memory, now.memory, resolution)
                if fields and resolution is not Resolution.THEIRS:
                    # an export's memory the file's may be an edit of: never pruned for it
                    tied.update(
                        was.id
                        for was in base_sections.get(location_id, ())
                        if was.memory.text == memory.text
                    )
            if fields:
                conflicts.append(
                    MergeConflict(
                        lines.memory_line(location_id, memory.title, title_nth),
                        location_id,
                        memory.title,
                        fields,
                        memory,
                        now.memory,
                        # written since the export (an agent's, or an earlier import's)
                        unbased=written_since or index is None or index >= len(bases),
                    )
                )
                if resolution is Resolution.SKIP:
                    merged = now.memory
            keep(location_id, now.id, merged)

    dropped: dict[int, list[StoredMemory[MemoryRow]]] = {}  # the export's, unnamed by the file
    for row_id, was in sorted(base.items(), key=_item_order):
        if row_id not in claimed:
            dropped.setdefault(was.location_id, []).append(was)

    def changed(was: StoredMemory[MemoryRow]) -> bool:  # by the database since the export
        now = by_id.get(was.id)
        return now is None or now.memory != was.memory

    # the pairs by title, then by text (each export memory taken once); then by place only:
    # a memory new where the file dropped one the database changed since (and still holds)
    # may be that one rewritten whole, and so may every other new one there: each is a
    # conflict, so that no live copy of what an agent retired slips in unseen
    pairs: dict[int, tuple[StoredMemory[MemoryRow], bool]] = {}  # new_in_file index -> origin
    for level in range(2):
        for n, (location_id, memory, _nth) in enumerate(new_in_file):
            if n not in pairs:
                origin = edited_from(memory, dropped.get(location_id, []), level, changed, tied)
                if origin is not None:
                    pairs[n] = (origin, False)
    # moved: the same title and text where the file dropped it at another location
    for n, (location_id, memory, _nth) in enumerate(new_in_file):
        if n not in pairs:
            moved = dropped_elsewhere(dropped, location_id, memory, same_title=True)
            if moved:
                elsewhere, k = next((m for m in moved if changed(dropped[m[0]][m[1]])), moved[0])
                pairs[n] = (dropped[elsewhere].pop(k), False)
    # moved and retitled: the only memory with that text the file dropped at another location
    for n, (location_id, memory, _nth) in enumerate(new_in_file):
        if n not in pairs:
            moved = dropped_elsewhere(dropped, location_id, memory, same_title=False)
            if len(moved) == 1:
                elsewhere, k = moved[0]
                pairs[n] = (dropped[elsewhere].pop(k), False)
    for n, (location_id, _memory, _nth) in enumerate(new_in_file):
        if n not in pairs:
            retired = [w for w in dropped.get(location_id, []) if changed(w) and w.id in by_id]
            if retired:
                pairs[n] = (retired[0], True)
    # the file's memories the database gained since the export (an earlier import of this
    # file took them) paired the same way: one edited from a memory the database changed
    # keeps that memory, as the import that took it kept it (a re-run changes nothing)
    renamed: set[int] = set()
    retitled: list[tuple[MemoryKey, MemoryKey, MemoryRow]] = []
    for location_id, memory, title_nth, origin in origins_again(unbased, dropped, changed, tied):
        now = by_id.get(origin.id)
        written = next(w for m, n, w in unbased[location_id] if m is memory and n == title_nth)
        # kept only if the run that took the file's memory could have kept it: the origin
        # had changed by then (review S6 G F1: a keep for a file's memory imported before
        # the agent retired that one hid the deletion the file asked for)
        if now is None or not changed(origin) or written <= (changed_at or {}).get(origin.id, 0):
            continue
        renamed.add(origin.id)  # kept, as the import that took it kept it
        if prune:  # where --prune would have deleted it: said (review S6 B F3, E F2, F3)
            line = lines.memory_line(location_id, memory.title, title_nth)
            kept_again.append(kept_again_warning(line, origin, memory))
    for n, (location_id, memory, title_nth) in enumerate(new_in_file):
        origin, guessed = pairs.get(n, (None, False))
        now = by_id.get(origin.id) if origin is not None else None
        if origin is None or (now is not None and now.memory == origin.memory):
            added.setdefault(location_id, []).append(memory)  # (the old one: --prune's)
            if origin is not None and (
                origin.location_id != location_id or origin.memory.title != memory.title
            ):  # a retitle or a move: the old one stays unless --prune deletes it
                retitled.append(
                    (
                        memory_key(location_id, memory),
                        memory_key(origin.location_id, origin.memory),
                        origin.memory,
                    )
                )
            continue
        # the reviewer fixed the title, episode or turns of a memory the database changed
        # since: the file's copy would bring back what an agent superseded or invalidated.
        # The database's memory is kept whatever the resolution (never pruned for it).
        if now is not None and now.id not in claimed:
            keep(now.location_id, now.id, now.memory, unseen=True)
        claimed.add(origin.id)
        conflicts.append(
            MergeConflict(
                lines.memory_line(location_id, memory.title, title_nth),
                location_id,
                memory.title,
                (),
                memory,
                now.memory if now is not None else None,
                origin.memory,
                guessed,
                origin.location_id if origin.location_id != location_id else None,
            )
        )
        if resolution is Resolution.THEIRS:
            added.setdefault(location_id, []).append(memory)

    for row_id, was in sorted(base.items(), key=_item_order):
        if row_id in claimed:
            continue
        now = by_id.get(row_id)
        if now is None:
            continue  # gone from both
        if row_id in tied or row_id in renamed:
            keep(now.location_id, now.id, now.memory, unseen=True)  # maybe the file's edit
            if prune and row_id not in renamed:  # (said: review S6 G F4)
                line = lines.location_lines.get(now.location_id, 0)
                kept_again.append(kept_again_warning(line, was, None))
            continue
        if now.memory == was.memory or not prune:
            continue  # the reviewer removed it: missing, deleted only by --prune
        conflicts.append(
            MergeConflict(
                lines.location_lines.get(now.location_id, 0),
                now.location_id,
                now.memory.title,
                (),
                None,
                now.memory,
            )
        )
        if resolution is not Resolution.THEIRS:
            keep(now.location_id, now.id, now.memory, unseen=True)
    for stored in current:
        if stored.id not in base and stored.id not in claimed:
            keep(stored.location_id, stored.id, stored.memory, unseen=True)  # learned since

    locations = []
    unseen: dict[int, frozenset[int]] = {}
    row_ids: dict[int, tuple[int | None, ...]] = {}
    earlier = base_names or {}
    theirs = resolution is Resolution.THEIRS
    for location_id in sorted(set(kept) | set(added) | set(names)):
        where = current_locations.get(location_id)
        info = names.get(location_id) or current_locations[location_id]
        if where is not None and info is not where:
            line = lines.location_lines.get(location_id, 0)
            info, clash = merge_name(info, where, earlier.get(location_id, ()), theirs, line)
            if clash is not None:
                conflicts.append(clash)
        here = sorted(kept.get(location_id, ()))
        ordered = [memory for _id, memory in here]
        ordered.extend(added.get(location_id, ()))
        row_ids[location_id] = (
            *(row_id for row_id, _m in here),
            *(None for _m in added.get(location_id, ())),
        )
        if database_only:
            places = frozenset(n for n, (row_id, _m) in enumerate(here) if row_id in database_only)
            if places:
                unseen[location_id] = places
        locations.append(LocationRows(info, tuple(ordered)))
    return MergeResult(
        tuple(locations),
        tuple(conflicts),
        (*warnings, *left_again, *kept_again),
        tuple(retitled),
        unseen,
        row_ids,
        tuple(problems),
        tuple(left_again),
    )


def _unsure_twin(
    lines: LineFinder,
    location_id: int,
    memory: MemoryRow,
    title_nth: int,
    twins: list[StoredMemory[MemoryRow]],
) -> ImportProblem:
    """The problem of a twin whose change the file makes to one of several exported twins
    it cannot be told apart from (the file deleted or retitled another of them too)."""
    return ImportProblem(
        lines.memory_line(location_id, memory.title, title_nth),
        f"memory {memory.title[:60]!r} (Ep{memory.episode}, T{memory.turns}) at location "
        f"{location_id}: the file changes one of the {len(twins)} exported memories with "
        f"that title, episode and turns, and which one cannot be told (it also deleted or "
        f"retitled one of them): memory skipped, the database's kept; make the change in a "
        f"file that keeps all of them",
    )


def _two_way(
    incoming: Sequence[LocationRows],
    current: Sequence[StoredMemory[MemoryRow]],
    resolution: Resolution | None,
    lines: LineFinder,
    warnings: tuple[str, ...],
) -> MergeResult:
    """No base: the file against the database, but a status never moves backwards unless
    the user takes the file's side (``theirs``)."""
    by_key: dict[MemoryKey, list[MemoryRow]] = {}
    for stored in current:
        by_key.setdefault(memory_key(stored.location_id, stored.memory), []).append(stored.memory)
    conflicts: list[MergeConflict] = []
    if not by_key:  # a database with no persistent memory: the file as it is
        return MergeResult(tuple(incoming), (), warnings)
    locations = []
    for entry in incoming:
        location_id = entry.location.id
        memories = []
        numbered = list(_numbered(entry))
        chosen = pair_section(numbered, by_key, _itself)
        for (memory, key, _nth, title_nth), index in zip(numbered, chosen, strict=True):
            olds = by_key.get(key, [])
            if index is not None and index < len(olds) and _backwards(memory, olds[index]):
                old = olds[index]
                line = lines.memory_line(location_id, memory.title, title_nth)
                conflicts.append(
                    MergeConflict(line, location_id, memory.title, STATUS_FIELDS, memory, old)
                )
                if resolution is Resolution.SKIP:
                    memory = old
                elif resolution is not Resolution.THEIRS:
                    memory = memory._replace(**{n: getattr(old, n) for n in STATUS_FIELDS})
            memories.append(memory)
        locations.append(LocationRows(entry.location, tuple(memories)))
    return MergeResult(tuple(locations), tuple(conflicts), warnings)
