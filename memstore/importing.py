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
database already holds that name there: the location and its memories are skipped; two
non-superseded memories with the same title at one location, an EPHEMERAL memory, a new
non-superseded memory whose title is already live in the database on a memory missing from
the file - which only ``--prune`` can replace -, or that the 3-way merge paired as a retitle
or move of a memory missing from the file, live or superseded (the same text: its link from
a predecessor stays the database's); a SUPERSEDED memory whose successor title
no memory at its location will have after the import). The memories a problem touches are
left out of the plan, so ``--skip-invalid`` can apply the rest - except the one with a
missing successor, which is imported with no successor (its link keeps turn and episode).
``memstore.store_import.apply_import`` applies a plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

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
    memory_key,
)
from memstore.md_rows import LocationRow, LocationRows
from memstore.models import (
    LocationMemories,
    Persistence,
    Status,
    check_location_name,
    title_spelling,
)
from memstore.pairing import pair_by_content

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


def _differences(old: MemoryLike, new: MemoryLike) -> tuple[str, ...]:
    if old == new and type(old) is type(new):
        return ()  # the common case: the same row (every field, the key's too)
    return tuple(
        name
        for name in (*CONTENT_FIELDS, *STATUS_FIELDS)
        if getattr(old, name) != getattr(new, name)
    )


def _kind(fields: Sequence[str]) -> ChangeKind:
    if any(name in CONTENT_FIELDS for name in fields):
        return ChangeKind.CHANGED
    if fields:
        return ChangeKind.STATUS_CHANGED
    return ChangeKind.UNCHANGED


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
    (``MergeResult.unseen``): not counted as the file's unchanged memories. The memories
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
    for entry in current:
        db_locations[entry.location.id] = entry.location
        for memory in entry.memories:
            key = memory_key(entry.location.id, memory)
            db_memories.setdefault(key, []).append(memory)
            db_order.append((entry.location.id, entry.location.name, key))

    changes: list[MemoryChange] = []
    database_only = 0  # unchanged memories the merge kept that the file does not hold
    location_changes: list[LocationChange] = []
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
        refused = _unstorable_name(entry.location, db_locations.get(entry.location.id))
        if refused is not None:  # skipped as the parser skips a section it cannot read
            all_problems.append(
                ImportProblem(lines.location_lines.get(entry.location.id, 0), refused)
            )
            skipped_locations.add(entry.location.id)
            continue
        location = _episodes_in_range(entry.location, lines, all_problems)
        location_id, location_name = location.id, location.name
        file_ids.add(location_id)
        location_change = _location_change(db_locations.get(location_id), location)
        if location_change is not None:
            location_changes.append(location_change)

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
                    _duplicate_message(location_id, title, entry.memories, not_the_files),
                )
            )

        section: Sequence[MemoryLike] = entry.memories
        twins = _twin_choices(location_id, section, db_memories, twin_keys)
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
                fields = _differences(old, memory)
                changes.append(
                    MemoryChange(
                        _kind(fields), location_id, location_name, old, memory, occurrence, fields
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
    changes = _drop_title_conflicts(
        changes, missing, prune, lines, all_problems, retitled, relinked
    )
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
    titles = _titles_after(changes, missing if prune else [], db_order)
    pruned_titles = {(change.location_id, change.memory.title) for change in missing}
    unlinked: set[int] = set()  # the references reported: no memory will have that title
    for n, (location_id, title, successor, nth) in enumerate(references):
        itself = 1 if successor == title else 0  # a memory cannot succeed itself
        if titles[(location_id, successor)] > itself:
            continue
        if (
            prune
            and (location_id, successor) in pruned_titles
            and not _file_says_superseded(lines, location_id, title, nth)
        ):  # the database's link (the file has the memory live: a conflict kept the
            # database's status), to a memory only the database has: --prune deleting it
            # cuts the link as it cuts any (its refusals name what it would delete)
            continue
        unlinked.add(n)
        all_problems.append(_no_successor(lines, location_id, title, successor, nth, prune))
    all_problems.extend(_reference_cycles(changes, lines, () if prune else missing))
    if prune and all_problems:  # nothing is pruned: a replacement would stand beside the old
        relinked.clear()
        changes = _drop_title_conflicts(
            changes, missing, False, lines, all_problems, retitled, relinked, unpruned=True
        )
        # what that left out may be a successor the check above counted on: a link to it
        # the database has to the old title is kept (relinked), any other is reported
        titles = _titles_after(changes, [], db_order)
        for n, (location_id, title, successor, nth) in enumerate(references):
            successor = relinked.get((location_id, title, successor), successor)
            itself = 1 if successor == title else 0
            if n not in unlinked and titles[(location_id, successor)] <= itself:
                all_problems.append(_no_successor(lines, location_id, title, successor, nth, False))
    return ImportPlan(
        memories=tuple(changes),
        missing=tuple(reported),
        locations=tuple(location_changes),
        problems=tuple(all_problems),
        file_location_ids=frozenset(file_ids),
        conflicts=tuple(conflicts),
        warnings=tuple(warnings),
        unseen=database_only,
    )


def _no_successor(
    lines: LineFinder, location_id: int, title: str, successor: str, nth: int, prune: bool
) -> ImportProblem:
    """The problem of a memory superseded by a title no memory at its location will have."""
    where = "the file" if prune else "the file or the database"
    return ImportProblem(
        lines.reference_line(location_id, title, nth),
        f"memory {title!r} at location {location_id} is superseded by "
        f"{successor!r}, but no other memory there in {where} has that title: "
        f"with --skip-invalid it is imported with no successor",
    )


def _file_says_superseded(lines: LineFinder, location_id: int, title: str, nth: int) -> bool:
    """Whether the file's ``nth`` memory titled ``title`` at the location has a SUPERSEDED
    header (True when it cannot be told: no source text)."""
    number = lines.memory_line(location_id, title, nth)
    for found, header in lines.sections.get(location_id, ()):
        if found == number:
            return "SUPERSEDED" in header.split("]", 1)[0].upper()
    return True


def _duplicate_message(
    location_id: int, title: str, memories: Sequence[MemoryLike], not_the_files: Collection[int]
) -> str:
    """The problem of a title several live memories of a location have: the file's, or the
    file's beside the database's that the file does not hold (learned after the export:
    the database's stays as it is, only the file's are skipped)."""
    live = [
        n
        for n, memory in enumerate(memories)
        if memory.title == title and memory.status is not Status.SUPERSEDED
    ]
    theirs = [memories[n] for n in live if n in not_the_files]
    in_file = len(live) - len(theirs)
    if not theirs or not in_file:
        return (
            f"location {location_id} has {len(live)} non-superseded memories titled "
            f"{title!r} (one is allowed): all of them skipped"
        )
    old = theirs[0]
    mine, are = ("memory", "is") if in_file == 1 else (f"{in_file} memories", "are")
    return (
        f"the file's {mine} titled {title!r} at location {location_id} would be live beside "
        f"the database's memory with that title (Ep{old.episode}, T{old.turns}), which is not "
        f"in the file (learned after the export): one live memory per title is allowed, so "
        f"the file's {are} skipped and the database's stays"
    )


def _twin_choices(
    location_id: int,
    memories: Sequence[MemoryLike],
    db_memories: dict[MemoryKey, list[MemoryLike]],
    twin_keys: set[MemoryKey],
) -> dict[int, int | None]:
    """For each memory of a section (by its place) whose key several database memories
    have, which of them it is (``pair_by_content``; None: none left for it)."""
    if not twin_keys:
        return {}
    places: dict[MemoryKey, list[int]] = {}
    for position, memory in enumerate(memories):
        key = memory_key(location_id, memory)
        if key in twin_keys:
            places.setdefault(key, []).append(position)
    chosen: dict[int, int | None] = {}
    for key, at in places.items():
        found = pair_by_content([memories[n] for n in at], db_memories[key])
        chosen.update(zip(at, found, strict=True))
    return chosen


def _unstorable_name(location: LocationLike, stored: LocationLike | None) -> str | None:
    """The problem of a location whose name a write could not store now (the one rule,
    ``memstore.models.check_location_name``: a NUL, a lone surrogate, more than
    LOCATION_NAME_MAX characters), or None. A name the database already holds for that
    location is not written again, so it passes whatever it is: an older database whose
    names are longer than the rule allows imports its own export."""
    if stored is not None and stored.name == location.name:
        return None
    try:
        check_location_name(location.name, "its name")
    except (TypeError, ValueError) as exc:
        return f"location {location.id}: {exc}: the location and its memories skipped"
    return None


def _episodes_in_range(
    location: LocationLike, lines: LineFinder, problems: list[ImportProblem]
) -> LocationLike:
    """``location`` without the episodes past MAX_EPISODE, each one a problem."""
    too_large = [episode for episode in location.episodes if episode > MAX_EPISODE]
    if not too_large:
        return location
    problems.append(
        ImportProblem(
            lines.location_lines.get(location.id, 0) + 1,
            f"location {location.id} lists episode {too_large[0]}: at most {MAX_EPISODE} "
            f"(the next episode must still be numbered): that episode skipped",
        )
    )
    kept = tuple(episode for episode in location.episodes if episode <= MAX_EPISODE)
    if isinstance(location, LocationRow):
        return location._replace(episodes=kept)
    return location.model_copy(update={"episodes": kept})


def _reference_cycles(
    changes: Sequence[MemoryChange],
    lines: LineFinder,
    kept: Sequence[MemoryChange] = (),
) -> list[ImportProblem]:
    """Supersession references in the file that can only go round in a circle (A by B, B
    by A): the database cannot link them (a problem at the first line).

    Titles are not unique: a chain may come back to a title on another memory (A by B, B
    by a newer A, which was invalidated) and end there. So a title *ends* a chain when some
    memory with it is live (in the file, or ``kept`` from the database), has no successor
    (invalidated, or superseded with none named), or names a successor that itself ends;
    a circle is a set of titles none of which ends.
    """
    successors: dict[tuple[int, str], set[str]] = {}
    ends: set[tuple[int, str]] = set()
    for change in kept:
        if change.memory.status is not Status.SUPERSEDED:
            ends.add((change.location_id, change.memory.title))
    superseded = Status.SUPERSEDED
    for change in changes:
        memory = change.new if change.new is not None else change.old
        assert memory is not None
        key = (change.location_id, memory.title)
        if memory.status is not superseded or memory.superseded_by in (None, memory.title):
            ends.add(key)  # live, no successor, or itself (reported above)
        else:
            successors.setdefault(key, set()).add(memory.superseded_by)
    grown = True
    while grown:
        grown = False
        for key, names in successors.items():
            if key not in ends and any(
                (key[0], name) in ends or (key[0], name) not in successors for name in names
            ):  # a title no memory in the file has: reported above, not a circle
                ends.add(key)
                grown = True
    problems = []
    reported: set[tuple[int, str]] = set()
    for start in successors:
        if start in ends or start in reported:
            continue
        location_id, title = start
        path = [title]
        current = start
        while True:  # follow successors that do not end (every title on a circle has one)
            following = sorted(
                name
                for name in successors.get(current, ())
                if (location_id, name) in successors and (location_id, name) not in ends
            )
            if not following:
                break
            current = (location_id, following[0])
            if current[1] in path:
                path = path[path.index(current[1]) :]
                break
            path.append(current[1])
        reported.update((location_id, t) for t in path)
        first = path[0]
        circle = " -> ".join(repr(t[:60]) for t in [*path, first])
        problems.append(
            ImportProblem(
                lines.reference_line(location_id, first),
                f"supersession references at location {location_id} go round "
                f"in a circle ({circle}): no memory ends it (with --skip-invalid "
                f"the link that closes the circle is left out)",
            )
        )
    return problems


def _titles_after(
    changes: Sequence[MemoryChange],
    pruned: Iterable[MemoryChange],
    db_order: Iterable[tuple[int, str, MemoryKey]],
) -> Counter[tuple[int, str]]:
    """How many memories each (location id, title) will have once the plan is applied.

    The file's memories in ``changes``, plus the database's that no change writes to and
    that are not ``pruned``.
    """
    written = {(c.key, c.occurrence) for c in changes if c.old is not None}
    written.update((c.key, c.occurrence) for c in pruned)
    titles = Counter(
        [(c.location_id, c.new.title if c.new is not None else c.memory.title) for c in changes]
    )
    seen: dict[MemoryKey, int] = {}
    for _location_id, _name, key in db_order:
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if (key, occurrence) not in written:
            titles[(key.location_id, key.title)] += 1
    return titles


def _drop_title_conflicts(
    changes: list[MemoryChange],
    missing: list[MemoryChange],
    prune: bool,
    lines: LineFinder,
    problems: list[ImportProblem],
    retitled: Sequence[tuple[MemoryKey, MemoryKey, MemoryLike]] = (),
    relinked: dict[tuple[int, str, str], str] | None = None,
    *,
    unpruned: bool = False,
) -> list[MemoryChange]:
    """Without prune, a missing live memory keeps its title: a file memory may not take it,
    nor take its place under another title or at another location (a retitle or a move the
    merge paired with it, live or superseded: the old one would stay beside the new one).
    ``unpruned``: --prune was asked for, but the file has problems, so it deletes nothing
    (``--skip-invalid`` applies the rest).

    A memory the file links to such a retitle that the database links to the old title
    keeps the database's link (its status change is left out, and the retitle's problem
    says so): skipping the retitle never cuts an agent's link. ``relinked`` gets each
    (location id, title, the file's successor) -> the database's successor so kept."""
    if prune:
        return changes
    advice = (
        "--prune deletes nothing while the file has other problems"
        if unpruned
        else "use --prune to delete it, or keep it in the file"
    )
    held = {
        (change.location_id, title_spelling(change.memory.title)): change
        for change in missing
        if change.memory.status is not Status.SUPERSEDED
    }
    # the file's retitles and moves (by the new memory's key) of a memory missing from it
    missing_keys = {change.key for change in missing}
    edits: dict[MemoryKey, list[tuple[MemoryKey, MemoryLike]]] = {}
    for key, origin_key, origin in retitled:
        if origin_key in missing_keys:
            edits.setdefault(key, []).append((origin_key, origin))
    if not held and not edits:
        return changes
    # the titles live in the database now, exactly: one the database already has beside a
    # differently spelled one brings no second spelling in
    live_now = {
        (change.location_id, old.title)
        for change in (*changes, *missing)
        if (old := change.old) is not None and old.status is not Status.SUPERSEDED
    }
    kept: list[MemoryChange] = []
    # (location id, the skipped retitle's title) -> (its problem's place, the old title)
    skipped: dict[tuple[int, str], tuple[int, str]] = {}
    for change in changes:
        memory = change.memory
        holder = held.get((change.location_id, title_spelling(memory.title)))
        becomes_live = memory.status is not Status.SUPERSEDED and (
            change.old is None or change.old.status is Status.SUPERSEDED
        )
        if (
            holder is not None
            and holder.memory.title != memory.title
            and (change.location_id, memory.title) in live_now
        ):
            holder = None  # both spellings live already: not the file's doing
        if holder is not None and becomes_live:
            old = holder.memory
            respelled = (
                f", spelled {ascii(old.title)} there (the file's is {ascii(memory.title)}: an "
                f"editor's Unicode normalisation or whitespace?)"
                if old.title != memory.title
                else ""
            )
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    f"memory {memory.title!r} (Ep{memory.episode}, T{memory.turns}) at location "
                    f"{change.location_id} would replace the database's live memory with that "
                    f"title (Ep{old.episode}, T{old.turns}){respelled}, which is not in the "
                    f"file: {advice}; memory skipped",
                    pruned=not unpruned,
                )
            )
            continue
        origins = edits.get(change.key) if change.old is None else None
        if origins:
            origin_key, old = origins.pop(0)
            if origin_key.location_id == change.location_id:
                skipped.setdefault((change.location_id, memory.title), (len(problems), old.title))
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    _edit_message(change.location_id, memory, origin_key, old, unpruned),
                    pruned=not unpruned,
                )
            )
            continue
        kept.append(change)
    if skipped:
        kept = _keep_links(kept, skipped, problems, relinked)
    return kept


def _edit_message(
    location_id: int, memory: MemoryLike, origin_key: MemoryKey, old: MemoryLike, unpruned: bool
) -> str:
    """The problem of a retitle or move of a database's memory missing from the file."""
    live = old.status is not Status.SUPERSEDED
    if unpruned:
        advice = "--prune deletes nothing while the file has other problems"
    elif origin_key.location_id != location_id:
        advice = f"use --prune to move it, or keep it at location {origin_key.location_id}"
    else:
        advice = "use --prune to replace it, or keep the old title"
    which = "live memory" if live else "superseded memory"
    if origin_key.location_id != location_id:
        return (
            f"memory {memory.title!r} at location {location_id} is the database's {which} "
            f"{old.title!r} of location {origin_key.location_id} moved (the same text; "
            f"Ep{old.episode}, T{old.turns}), which is not in the file there: importing it "
            f"would leave {'it live in both' if live else 'a copy in both'}; {advice}; "
            f"memory skipped"
        )
    both = "both live" if live else "both in its history"
    return (
        f"memory {memory.title!r} at location {location_id} is an edit of the database's "
        f"{which} {old.title!r} (the same text; Ep{old.episode}, T{old.turns}), which is not "
        f"in the file: importing it would leave {both}; {advice}; memory skipped"
    )


def _keep_links(
    changes: list[MemoryChange],
    skipped: dict[tuple[int, str], tuple[int, str]],
    problems: list[ImportProblem],
    relinked: dict[tuple[int, str, str], str] | None,
) -> list[MemoryChange]:
    """``changes`` with each status change that links a memory to a ``skipped`` retitle
    (location id, new title) -> (its problem's place, the old title), where the database
    links it to the old title, left out: the memory keeps the database's link; the
    retitle's problem names it."""
    titles = {(change.location_id, change.memory.title) for change in changes}
    kept: list[MemoryChange] = []
    for change in changes:
        old, new = change.old, change.new
        found = (
            skipped.get((change.location_id, new.superseded_by))
            if old is not None and new is not None and new.superseded_by is not None
            else None
        )
        if (
            found is None
            or old is None
            or new is None
            or old.superseded_by != found[1]
            or (change.location_id, new.superseded_by) in titles
        ):
            kept.append(change)
            continue
        assert new.superseded_by is not None
        if relinked is not None:
            relinked[(change.location_id, new.title, new.superseded_by)] = found[1]
        status = {name: getattr(old, name) for name in STATUS_FIELDS}
        new = new._replace(**status) if isinstance(new, tuple) else new.model_copy(update=status)
        fields = _differences(old, new)
        kept.append(change._replace(kind=_kind(fields), new=new, fields=fields))
        place, was = found
        problem = problems[place]
        problems[place] = replace(
            problem,
            message=problem.message.removesuffix("; memory skipped")
            + f"; memory skipped, and {new.title!r} (superseded by it in the file) keeps "
            f"its link to {was!r}",
        )
    return kept
