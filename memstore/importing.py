"""Planning an import of Memories.md: what would change in the database (no SQL here).

``plan_import`` compares the locations read from a file with the locations in the
database (``MemoryStore.export_locations()``) and says, per memory, whether it is

* **added** - in the file, not in the database;
* **changed** - its text, category, score change or persistence differ (it may also have
  a new status; the memory is counted once, here);
* **status changed** - only its status or its supersession link (successor, turn,
  episode, invalidation reason) differ;
* **unchanged**;
* **missing** - in the database, not in the file: deleted only by ``--prune``.

A memory's identity is (location id, title, episode, turns). Two database memories with
the same identity are matched to the file's in the order they were stored.

Problems make the import unsafe: the parser's problems, and the plan's own (a location
whose name a write could not store, ``memstore.models.check_location_name``, unless the
database already holds that name there, or whose header lost the name the database has:
the location and its memories are skipped; two
non-superseded memories with the same title at one location, an EPHEMERAL memory, a new
non-superseded memory whose title is already live in the database on a memory missing from
the file - which only ``--prune`` can replace -, or that the 3-way merge paired as a retitle
or move of a memory missing from the file, live or superseded (the same text: its link from
a predecessor stays the database's); a SUPERSEDED memory whose successor title
no memory at its location will have after the import). The memories a problem touches are
left out of the plan, so ``--skip-invalid`` can apply the rest; so is a memory whose
successor is one left out, or that closes a circle of titles.
``memstore.store_import.apply_import`` applies a plan.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from memstore.import_checks import (
    circle_links_skipped,
    duplicate_message,
    episodes_in_range,
    file_says_superseded,
    no_successor,
    reference_cycles,
    twin_choices,
    unlinked_skipped,
    unstorable_name,
)
from memstore.import_lines import LineFinder
from memstore.import_plan import (
    CONTENT_FIELDS,
    MAX_EPISODE,
    STATUS_FIELDS,
    ChangeKind,
    ImportPlan,
    ImportProblem,
    LocationChange,
    LocationLike,
    MemoryChange,
    MemoryKey,
    MemoryLike,
    change_kind,
    differences,
    memory_key,
)
from memstore.import_titles import drop_title_conflicts, titles_after
from memstore.md_rows import LocationRows
from memstore.models import (
    LocationMemories,
    Persistence,
    Status,
    title_spelling,
)

__all__ = [
    "CONTENT_FIELDS",
    "STATUS_FIELDS",
    "LineFinder",
    "ChangeKind",
    "ImportPlan",
    "ImportProblem",
    "LocationChange",
    "MemoryChange",
    "MemoryKey",
    "memory_key",
    "plan_import",
]

#: The file's or the database's locations with their memories: plain rows (the import's
#: data path) or the public models.
Entry = LocationRows | LocationMemories


def _location_change(old: LocationLike | None, new: LocationLike) -> LocationChange | None:
    if old is None:
        return LocationChange(new.id, None, new.name, new.visit_count, new.episodes)
    visits = max(old.visit_count, new.visit_count)
    episodes = tuple(sorted(set(old.episodes) | set(new.episodes)))
    if new.name == old.name and visits == old.visit_count and episodes == old.episodes:
        return None
    return LocationChange(new.id, old, new.name, visits, episodes)


#: builds a NamedTuple from its values without the Python-level ``__new__`` of the class
#: (the plan's loop makes one key and one change per memory of the file)
_new = tuple.__new__


def plan_import(
    current: Iterable[Entry],
    incoming: Iterable[Entry],
    problems: Iterable[object] = (),
    *,
    source: str | None = None,
    prune: bool = False,
    conflicts: Sequence[Any] = (),
    warnings: Sequence[str] = (),
    lines: LineFinder | None = None,
    retitled: Sequence[tuple[MemoryKey, MemoryKey, MemoryLike]] = (),
    unseen: Mapping[int, Collection[int]] | None = None,
    row_ids: Mapping[int, Sequence[int | None]] | None = None,
    current_ids: Mapping[int, Sequence[int]] | None = None,
    left_again: Sequence[str] = (),
) -> ImportPlan:
    """Compare the database (``current``) with a parsed file (``incoming``).

    ``problems`` are the parser's (objects with ``line`` and ``message``); ``source`` is
    the file's text, used only to give the plan's own problems line numbers. With
    ``prune`` the memories missing from the file will be deleted, so a new live memory
    may take the title of a missing one (without it that is a problem), and they cannot be
    the successor of a memory in the file. ``lines`` may stand for ``source`` (the caller's
    LineFinder of it, so the text is indexed once). ``retitled``: the 3-way merge's
    retitles of memories the database did not change since the export (the file's
    memory's key, the database's memory it was edited from: ``MergeResult.retitled``);
    without ``prune`` each is a problem while the old title is live and missing from the
    file. ``unseen``: per location, the places among ``incoming``'s memories there of the
    database's memories the merge kept that the file does not hold
    (``MergeResult.unseen``): not counted as the file's unchanged memories. ``row_ids``:
    per location, the database row each of ``incoming``'s memories there stands for
    (``MergeResult.row_ids``), with ``current_ids`` the row ids of ``current``'s memories
    (per location, in its order): twins are paired by these rows. The memories
    of the plan are those given: plain rows
    (``memstore.models.MemoryRow``) or the public models.
    """
    all_problems: list[ImportProblem] = []
    # (location id, title spelling) and (location id, text) of the memories the parser
    # skipped for a problem: the database's memory they may stand for is not "missing"
    skipped_titles: set[tuple[int, str]] = set()
    skipped_texts: set[tuple[int, str]] = set()
    skipped_locations: set[int] = set()  # a whole section skipped
    for p in problems:
        all_problems.append(
            ImportProblem(int(getattr(p, "line", 0) or 0), str(getattr(p, "message", p)))
        )
        skipped = getattr(p, "skipped", None)
        if skipped is None:
            continue
        where, title, text = skipped
        if title is None:
            skipped_locations.add(where)
            continue
        skipped_titles.add((where, title_spelling(title)))
        if text:
            skipped_texts.add((where, text))
    if lines is None:
        lines = LineFinder(source)

    db_locations: dict[int, LocationLike] = {}
    # key -> the database memories with that key, in stored order
    db_memories: dict[MemoryKey, list[MemoryLike]] = {}
    db_order: list[tuple[int, str, MemoryKey]] = []  # (location id, name, key) in stored order
    # row id -> (its key, its index among that key's memories): the merge's rows
    db_rows: dict[int, tuple[MemoryKey, int]] = {}
    by_rows = bool(row_ids) and current_ids is not None
    for entry in current:
        db_locations[entry.location.id] = entry.location
        ids = current_ids.get(entry.location.id, ()) if by_rows and current_ids else ()
        n = 0
        for memory in entry.memories:
            key = memory_key(entry.location.id, memory)
            same_key = db_memories.setdefault(key, [])
            if ids:
                db_rows[ids[n]] = (key, len(same_key))
                n += 1
            same_key.append(memory)
            db_order.append((entry.location.id, entry.location.name, key))

    changes: list[MemoryChange] = []
    database_only = 0  # unchanged memories the merge kept that the file does not hold
    location_changes: list[LocationChange] = []
    lowered: list[int] = []  # locations whose visits or episodes the file lowers
    file_ids: set[int] = set()
    # (key, occurrence): the database memories matched, by their place among their key's
    taken: set[tuple[MemoryKey, int]] = set()
    # keys several database memories have (twins): paired by what they say (pair_by_content)
    twin_keys = {key for key, found in db_memories.items() if len(found) > 1}
    # keys of memories the file has but whose changes are skipped because of a problem:
    # their database counterparts are not "missing" (never pruned)
    protected: set[MemoryKey] = set()
    # (location id, title, successor title, nth memory so titled in the file's section)
    references: list[tuple[int, str, str, int]] = []

    superseded, ephemeral, added = Status.SUPERSEDED, Persistence.EPHEMERAL, ChangeKind.ADDED
    for entry in incoming:
        refused = unstorable_name(entry.location, db_locations.get(entry.location.id))
        if refused is not None:  # skipped as the parser skips a section it cannot read
            all_problems.append(
                ImportProblem(lines.location_lines.get(entry.location.id, 0), refused)
            )
            skipped_locations.add(entry.location.id)
            continue
        location = episodes_in_range(entry.location, lines, all_problems)
        location_id, location_name = location.id, location.name
        file_ids.add(location_id)
        stored_location = db_locations.get(location_id)
        location_change = _location_change(stored_location, location)
        if location_change is not None:
            location_changes.append(location_change)
        if stored_location is not None and (
            location.visit_count < stored_location.visit_count
            or not set(stored_location.episodes).issubset(location.episodes)
        ):
            lowered.append(location_id)

        live_titles: dict[str, int] = {}
        for memory in entry.memories:
            if memory.status is not superseded:
                live_titles[memory.title] = live_titles.get(memory.title, 0) + 1
        duplicates = (
            {title for title, count in live_titles.items() if count > 1}
            if len(live_titles) < len(entry.memories)  # else every title is there once
            else set()
        )
        not_the_files = unseen.get(location_id, ()) if unseen else ()
        for title in sorted(duplicates):
            found = lines.memory_lines(location_id, title) or [
                lines.location_lines.get(location_id, 0)
            ]
            all_problems.append(
                ImportProblem(
                    found[min(1, len(found) - 1)],
                    duplicate_message(location_id, title, entry.memories, not_the_files),
                )
            )

        section: Sequence[MemoryLike] = entry.memories
        rows = None
        if twin_keys and db_rows and row_ids:
            rows = {
                place: None if row_id is None else db_rows[row_id]
                for place, row_id in enumerate(row_ids.get(location_id, ()))
                if row_id is None or row_id in db_rows
            }
        twins = twin_choices(location_id, section, db_memories, twin_keys, rows)
        titled: dict[str, int] = {}  # memories so far in this section, by title
        for position, memory in enumerate(section):
            title = memory.title
            key = _new(MemoryKey, (location_id, title, memory.episode, memory.turns))
            nth = titled.get(title, 0)
            titled[title] = nth + 1
            if memory.episode > MAX_EPISODE:
                all_problems.append(
                    ImportProblem(
                        lines.memory_line(location_id, title, nth),
                        f"memory {title[:60]!r} at location {location_id} is from "
                        f"episode {memory.episode}: at most {MAX_EPISODE} (the next episode "
                        f"must still be numbered): memory skipped",
                    )
                )
                protected.add(key)
                skipped_titles.add((location_id, title_spelling(title)))
                continue
            if memory.persistence is ephemeral:
                all_problems.append(
                    ImportProblem(
                        lines.memory_line(location_id, title),
                        f"EPHEMERAL memory {title!r} at location {location_id} skipped: "
                        f"ephemeral memories are never stored from Memories.md",
                    )
                )
                protected.add(key)
                skipped_titles.add((location_id, title_spelling(title)))
                continue
            if duplicates and memory.status is not superseded and title in duplicates:
                protected.add(key)
                skipped_titles.add((location_id, title_spelling(title)))
                continue
            if memory.superseded_by is not None:
                references.append((location_id, title, memory.superseded_by, nth))
            candidates = db_memories.get(key)
            if candidates is None:
                occurrence: int | None = None
            elif key in twin_keys:
                occurrence = twins.get(position)
            else:
                occurrence = None if (key, 0) in taken else 0
            if candidates is not None and occurrence is not None:
                taken.add((key, occurrence))
                old = candidates[occurrence]
                fields = differences(old, memory)
                changes.append(
                    MemoryChange(
                        change_kind(fields),
                        location_id,
                        location_name,
                        old,
                        memory,
                        occurrence,
                        fields,
                    )
                )
                if not fields and position in not_the_files:
                    database_only += 1
            else:
                changes.append(
                    _new(MemoryChange, (added, location_id, location_name, None, memory, 0, ()))
                )

    missing: list[MemoryChange] = []
    seen: dict[MemoryKey, int] = {}
    for location_id, name, key in db_order:
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if (key, occurrence) in taken or key in protected:
            continue
        old = db_memories[key][occurrence]
        missing.append(MemoryChange(ChangeKind.MISSING, location_id, name, old, None, occurrence))

    relinked: dict[tuple[int, str, str], str] = {}  # links kept as the database has them
    changes = drop_title_conflicts(changes, missing, prune, lines, all_problems, retitled, relinked)
    # what the file still holds, skipped for a problem, is counted as that problem (and
    # never pruned: a plan with problems prunes nothing), not as a deletion; the checks
    # above and below still see it as the database's memory missing from the file
    reported = missing
    if skipped_titles or skipped_locations:
        reported = [
            change
            for change in missing
            if change.location_id not in skipped_locations
            and (change.location_id, title_spelling(change.memory.title)) not in skipped_titles
            and (change.location_id, change.memory.text) not in skipped_texts
        ]
    if relinked:
        references = [
            (location_id, title, relinked.get((location_id, title, successor), successor), nth)
            for location_id, title, successor, nth in references
        ]
    titles = titles_after(changes, missing if prune else [], db_order)
    pruned_titles = {(change.location_id, change.memory.title) for change in missing}
    unlinked: set[int] = set()  # the references reported: no memory will have that title
    told: set[tuple[int, str]] = set()  # (location id, title) of those
    for n, (location_id, title, successor, nth) in enumerate(references):
        itself = 1 if successor == title else 0  # a memory cannot succeed itself
        if titles[(location_id, successor)] > itself:
            continue
        if (
            prune
            and (location_id, successor) in pruned_titles
            and not file_says_superseded(lines, location_id, title, nth)
        ):  # the database's link (the file has the memory live: a conflict kept the
            # database's status), to a memory only the database has: --prune deleting it
            # cuts the link as it cuts any (its refusals name what it would delete)
            continue
        unlinked.add(n)
        told.add((location_id, title))
        all_problems.append(no_successor(lines, location_id, title, successor, nth, prune))
    circles: set[tuple[int, str]] = set()
    all_problems.extend(reference_cycles(changes, lines, () if prune else missing, circles))
    if circles:  # (a plan with problems is applied only with --skip-invalid)
        changes = circle_links_skipped(changes, circles)
    if prune and all_problems:  # nothing is pruned: a replacement would stand beside the old
        relinked.clear()
        changes = drop_title_conflicts(
            changes, missing, False, lines, all_problems, retitled, relinked, unpruned=True
        )
        # what that left out may be a successor the check above counted on: a link to it
        # the database has to the old title is kept (relinked), any other is reported
        titles = titles_after(changes, [], db_order)
        for n, (location_id, title, successor, nth) in enumerate(references):
            successor = relinked.get((location_id, title, successor), successor)
            itself = 1 if successor == title else 0
            if n not in unlinked and titles[(location_id, successor)] <= itself:
                told.add((location_id, title))
                all_problems.append(no_successor(lines, location_id, title, successor, nth, False))
    if all_problems:  # (applied only with --skip-invalid, which prunes nothing)
        # a memory whose successor no memory will have (a skipped one's, above) is skipped
        # too, kept as the database has it: never stored superseded with no successor
        changes, skipped = unlinked_skipped(changes, titles_after(changes, [], db_order), relinked)
        for change in skipped:
            new = change.new
            assert new is not None and new.superseded_by is not None
            if (change.location_id, new.title) not in told:
                told.add((change.location_id, new.title))
                all_problems.append(
                    no_successor(lines, change.location_id, new.title, new.superseded_by, 0, False)
                )
    return ImportPlan(
        memories=tuple(changes),
        missing=tuple(reported),
        locations=tuple(location_changes),
        problems=tuple(all_problems),
        file_location_ids=frozenset(file_ids),
        conflicts=tuple(conflicts),
        warnings=tuple(warnings),
        unseen=database_only,
        lowered=tuple(lowered),
        left_again=tuple(left_again),
    )
