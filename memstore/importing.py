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

Problems make the import unsafe: the parser's problems, and the plan's own (two
non-superseded memories with the same title at one location, an EPHEMERAL memory, a new
non-superseded memory whose title is already live in the database on a memory missing from
the file - which only ``--prune`` can replace; a SUPERSEDED memory whose successor title
no memory at its location will have after the import). The memories a problem touches are
left out of the plan, so ``--skip-invalid`` can apply the rest - except the one with a
missing successor, which is imported with no successor (its link keeps turn and episode).
``memstore.store_import.apply_import`` applies a plan.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memstore.models import LocationInfo, LocationMemories, Memory, Persistence, Status

__all__ = [
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

#: The largest episode a file may give a memory or a location: the database hands out the
#: episode after the largest it holds, which must still fit SQLite's 64-bit integer.
MAX_EPISODE = 2**63 - 2

#: The fields whose change makes a memory "changed".
CONTENT_FIELDS = ("text", "category", "score_change", "persistence")
#: The fields whose change makes a memory "status changed".
STATUS_FIELDS = (
    "status",
    "superseded_by",
    "superseded_at_turn",
    "superseded_at_episode",
    "invalidation_reason",
)


class ChangeKind(StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    STATUS_CHANGED = "status changed"
    UNCHANGED = "unchanged"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class MemoryKey:
    """The identity of a memory: where it is, its title, and when it was learned."""

    location_id: int
    title: str
    episode: int
    turns: str


def memory_key(location_id: int, memory: Memory) -> MemoryKey:
    return MemoryKey(location_id, memory.title, memory.episode, memory.turns)


@dataclass(frozen=True, slots=True)
class ImportProblem:
    """Something that makes the file unsafe to import: its 1-based line (0 if unknown)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True, slots=True)
class MemoryChange:
    """One memory of the plan.

    ``old`` is the database's version (None when added), ``new`` the file's (None when
    missing). ``occurrence`` says which of the database memories with the same key this is
    (0 for the first stored), so the store can find its row. ``fields`` names what differs.
    """

    kind: ChangeKind
    location_id: int
    location_name: str
    old: Memory | None
    new: Memory | None
    occurrence: int = 0
    fields: tuple[str, ...] = ()

    @property
    def key(self) -> MemoryKey:
        memory = self.new if self.new is not None else self.old
        assert memory is not None
        return memory_key(self.location_id, memory)

    @property
    def memory(self) -> Memory:
        memory = self.new if self.new is not None else self.old
        assert memory is not None
        return memory

    @property
    def status_changed(self) -> bool:
        return any(name in STATUS_FIELDS for name in self.fields)

    @property
    def content_changed(self) -> bool:
        return any(name in CONTENT_FIELDS for name in self.fields)


@dataclass(frozen=True, slots=True)
class LocationChange:
    """A location the import creates or updates: the values it will have afterwards.

    Visits become max(file, database) and episodes the union of both; the name is the
    file's. ``old`` is None for a location new to the database.
    """

    location_id: int
    old: LocationInfo | None
    name: str
    visit_count: int
    episodes: tuple[int, ...]

    @property
    def is_new(self) -> bool:
        return self.old is None

    @property
    def new_episodes(self) -> tuple[int, ...]:
        before = set(self.old.episodes) if self.old is not None else set()
        return tuple(e for e in self.episodes if e not in before)

    def describe(self) -> str:
        if self.old is None:
            return f"location {self.location_id} ({self.name}) is new"
        parts = []
        if self.name != self.old.name:
            parts.append(f"name {self.old.name!r} -> {self.name!r}")
        if self.visit_count != self.old.visit_count:
            parts.append(f"visits {self.old.visit_count} -> {self.visit_count}")
        if self.new_episodes:
            parts.append(f"episodes + {', '.join(map(str, self.new_episodes))}")
        return f"location {self.location_id}: {'; '.join(parts)}"


@dataclass(frozen=True)
class ImportPlan:
    """Everything an import would do; ``summary()`` says it in a few lines."""

    memories: tuple[MemoryChange, ...]
    missing: tuple[MemoryChange, ...]
    locations: tuple[LocationChange, ...]
    problems: tuple[ImportProblem, ...]
    #: the id of every location in the file (with or without changes)
    file_location_ids: frozenset[int] = field(default_factory=frozenset)
    #: memories that the file and the database both changed since the export, differently
    #: (memstore.merge); what the plan does with each depends on the resolution chosen
    conflicts: tuple[Any, ...] = ()
    #: things the user should know that do not stop the import (no export base, ...)
    warnings: tuple[str, ...] = ()

    def _of(self, kind: ChangeKind) -> tuple[MemoryChange, ...]:
        return tuple(change for change in self.memories if change.kind is kind)

    @property
    def added(self) -> tuple[MemoryChange, ...]:
        return self._of(ChangeKind.ADDED)

    @property
    def changed(self) -> tuple[MemoryChange, ...]:
        return self._of(ChangeKind.CHANGED)

    @property
    def status_changed(self) -> tuple[MemoryChange, ...]:
        return self._of(ChangeKind.STATUS_CHANGED)

    @property
    def unchanged(self) -> tuple[MemoryChange, ...]:
        return self._of(ChangeKind.UNCHANGED)

    @property
    def ok(self) -> bool:
        """True when the file had no problem at all."""
        return not self.problems

    @property
    def has_changes(self) -> bool:
        return bool(self.locations) or any(
            change.kind is not ChangeKind.UNCHANGED for change in self.memories
        )

    def summary(self, *, prune: bool = False) -> str:
        """A few lines: counts per kind, then each problem as ``line L: message`` and each
        conflict, in line order (those with no known line last)."""

        def by_line(item: Any) -> tuple[bool, int]:
            return (not item.line, item.line)

        delete_note = "deleted with --prune" if prune else "only with --prune"
        if prune and self.problems:
            delete_note = "not deleted: the file has problems"
        new_locations = sum(1 for change in self.locations if change.is_new)
        lines = [
            f"added {len(self.added)}",
            f"changed {len(self.changed)}",
            f"status changed {len(self.status_changed)}",
            f"unchanged {len(self.unchanged)}",
            f"would delete {len(self.missing)} ({delete_note})",
            f"locations: {new_locations} new, {len(self.locations) - new_locations} updated",
            f"problems {len(self.problems)}",
        ]
        lines.extend(f"  {problem}" for problem in sorted(self.problems, key=by_line))
        if self.conflicts:
            lines.append(f"conflicts {len(self.conflicts)}")
            lines.extend(f"  {conflict}" for conflict in sorted(self.conflicts, key=by_line))
        lines.extend(f"warning: {warning}" for warning in self.warnings)
        return "\n".join(lines)

    def details(self) -> str:
        """One line per memory or location that would change (for ``--verbose`` output)."""
        lines = [f"  {change.describe()}" for change in self.locations]
        for change in self.memories:
            if change.kind is ChangeKind.UNCHANGED:
                continue
            what = f" ({', '.join(change.fields)})" if change.fields else ""
            lines.append(
                f"  {change.kind.value}: location {change.location_id} "
                f"{change.memory.title!r}{what}"
            )
        lines.extend(
            f"  missing from the file: location {change.location_id} {change.memory.title!r}"
            for change in self.missing
        )
        return "\n".join(lines)


# --- line numbers -------------------------------------------------------------------------

_LOCATION_LINE = re.compile(r"##[ \t]+Location[ \t]+([0-9]+)[ \t]*:")


class LineFinder:
    """Best-effort line numbers for the plan's own problems (0 when not found)."""

    def __init__(self, source: str | None) -> None:
        self.sections: dict[int, list[tuple[int, str]]] = {}
        self.location_lines: dict[int, int] = {}
        if not source:
            return
        current: list[tuple[int, str]] | None = None
        for number, line in enumerate(source.replace("\r\n", "\n").split("\n"), 1):
            match = _LOCATION_LINE.match(line)
            if match is not None:
                location_id = int(match.group(1))
                if location_id in self.sections:  # a duplicate section: the parser skips it
                    current = None
                    continue
                current = self.sections.setdefault(location_id, [])
                self.location_lines[location_id] = number
            elif current is not None and line.startswith("**["):
                current.append((number, line))

    def memory_lines(self, location_id: int, title: str) -> list[int]:
        escaped = _escape_inline(title)
        needles = {f"] {escaped}** *(", f"] {title}** *("}
        return [
            number
            for number, line in self.sections.get(location_id, ())
            if any(needle in line for needle in needles)
        ]

    def memory_line(self, location_id: int, title: str, nth: int = 0) -> int:
        found = self.memory_lines(location_id, title)
        if nth < len(found):
            return found[nth]
        return self.location_lines.get(location_id, 0)

    def reference_line(self, location_id: int, title: str, nth: int = 0) -> int:
        """The line after the ``nth`` header titled ``title``: its reference line, if any."""
        found = self.memory_lines(location_id, title)
        if nth < len(found):
            return found[nth] + 1
        return self.location_lines.get(location_id, 0)


def _escape_inline(value: str) -> str:
    try:  # the exporters' escaping, when available; the raw title is tried as well
        from exporters.escaping import escape_inline
    except ImportError:  # pragma: no cover - exporters is part of this distribution
        return value
    return escape_inline(value)


# --- planning -----------------------------------------------------------------------------


def _differences(old: Memory, new: Memory) -> tuple[str, ...]:
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


def _location_change(old: LocationInfo | None, new: LocationInfo) -> LocationChange | None:
    if old is None:
        return LocationChange(new.id, None, new.name, new.visit_count, new.episodes)
    visits = max(old.visit_count, new.visit_count)
    episodes = tuple(sorted(set(old.episodes) | set(new.episodes)))
    if new.name == old.name and visits == old.visit_count and episodes == old.episodes:
        return None
    return LocationChange(new.id, old, new.name, visits, episodes)


def plan_import(
    current: Iterable[LocationMemories],
    incoming: Iterable[LocationMemories],
    problems: Iterable[object] = (),
    *,
    source: str | None = None,
    prune: bool = False,
    conflicts: Sequence[Any] = (),
    warnings: Sequence[str] = (),
) -> ImportPlan:
    """Compare the database (``current``) with a parsed file (``incoming``).

    ``problems`` are the parser's (objects with ``line`` and ``message``); ``source`` is
    the file's text, used only to give the plan's own problems line numbers. With
    ``prune`` the memories missing from the file will be deleted, so a new live memory
    may take the title of a missing one (without it that is a problem), and they cannot be
    the successor of a memory in the file.
    """
    all_problems = [
        ImportProblem(int(getattr(p, "line", 0) or 0), str(getattr(p, "message", p)))
        for p in problems
    ]
    lines = LineFinder(source)

    db_locations: dict[int, LocationInfo] = {}
    # key -> the database memories with that key, in stored order
    db_memories: dict[MemoryKey, list[Memory]] = {}
    db_order: list[tuple[int, str, MemoryKey]] = []  # (location id, name, key) in stored order
    for entry in current:
        db_locations[entry.location.id] = entry.location
        for memory in entry.memories:
            key = memory_key(entry.location.id, memory)
            db_memories.setdefault(key, []).append(memory)
            db_order.append((entry.location.id, entry.location.name, key))

    changes: list[MemoryChange] = []
    location_changes: list[LocationChange] = []
    file_ids: set[int] = set()
    used: dict[MemoryKey, int] = {}  # how many database memories of a key are matched
    # keys of memories the file has but whose changes are skipped because of a problem:
    # their database counterparts are not "missing" (never pruned)
    protected: set[MemoryKey] = set()
    # (location id, title, successor title, nth memory so titled in the file's section)
    references: list[tuple[int, str, str, int]] = []

    for entry in incoming:
        location = _episodes_in_range(entry.location, lines, all_problems)
        file_ids.add(location.id)
        location_change = _location_change(db_locations.get(location.id), location)
        if location_change is not None:
            location_changes.append(location_change)

        live_titles: dict[str, int] = {}
        for memory in entry.memories:
            if memory.status is not Status.SUPERSEDED:
                live_titles[memory.title] = live_titles.get(memory.title, 0) + 1
        duplicates = {title for title, count in live_titles.items() if count > 1}
        for title in sorted(duplicates):
            found = lines.memory_lines(location.id, title) or [
                lines.location_lines.get(location.id, 0)
            ]
            all_problems.append(
                ImportProblem(
                    found[min(1, len(found) - 1)],
                    f"location {location.id} has {live_titles[title]} non-superseded memories "
                    f"titled {title!r} (one is allowed): all of them skipped",
                )
            )

        titled: dict[str, int] = {}  # memories so far in this section, by title
        for memory in entry.memories:
            key = memory_key(location.id, memory)
            nth = titled.get(memory.title, 0)
            titled[memory.title] = nth + 1
            if memory.episode > MAX_EPISODE:
                all_problems.append(
                    ImportProblem(
                        lines.memory_line(location.id, memory.title, nth),
                        f"memory {memory.title[:60]!r} at location {location.id} is from "
                        f"episode {memory.episode}: at most {MAX_EPISODE} (the next episode "
                        f"must still be numbered): memory skipped",
                    )
                )
                protected.add(key)
                continue
            if memory.persistence is Persistence.EPHEMERAL:
                all_problems.append(
                    ImportProblem(
                        lines.memory_line(location.id, memory.title),
                        f"EPHEMERAL memory {memory.title!r} at location {location.id} skipped: "
                        f"ephemeral memories are never stored from Memories.md",
                    )
                )
                protected.add(key)
                continue
            if memory.status is not Status.SUPERSEDED and memory.title in duplicates:
                protected.add(key)
                continue
            if memory.superseded_by is not None:
                references.append((location.id, memory.title, memory.superseded_by, nth))
            candidates = db_memories.get(key, [])
            occurrence = used.get(key, 0)
            if occurrence < len(candidates):
                used[key] = occurrence + 1
                old = candidates[occurrence]
                fields = _differences(old, memory)
                changes.append(
                    MemoryChange(
                        _kind(fields), location.id, location.name, old, memory, occurrence, fields
                    )
                )
            else:
                changes.append(
                    MemoryChange(ChangeKind.ADDED, location.id, location.name, None, memory)
                )

    missing: list[MemoryChange] = []
    seen: dict[MemoryKey, int] = {}
    for location_id, name, key in db_order:
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if occurrence < used.get(key, 0) or key in protected:
            continue
        old = db_memories[key][occurrence]
        missing.append(MemoryChange(ChangeKind.MISSING, location_id, name, old, None, occurrence))

    changes = _drop_title_conflicts(changes, missing, prune, lines, all_problems)
    titles = _titles_after(changes, missing if prune else [], db_order)
    for location_id, title, successor, nth in references:
        itself = 1 if successor == title else 0  # a memory cannot succeed itself
        if titles[(location_id, successor)] > itself:
            continue
        where = "the file" if prune else "the file or the database"
        all_problems.append(
            ImportProblem(
                lines.reference_line(location_id, title, nth),
                f"memory {title!r} at location {location_id} is superseded by "
                f"{successor!r}, but no other memory there in {where} has that title: "
                f"with --skip-invalid it is imported with no successor",
            )
        )
    all_problems.extend(_reference_cycles(changes, lines, () if prune else missing))
    return ImportPlan(
        memories=tuple(changes),
        missing=tuple(missing),
        locations=tuple(location_changes),
        problems=tuple(all_problems),
        file_location_ids=frozenset(file_ids),
        conflicts=tuple(conflicts),
        warnings=tuple(warnings),
    )


def _episodes_in_range(
    location: LocationInfo, lines: LineFinder, problems: list[ImportProblem]
) -> LocationInfo:
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
    for change in changes:
        memory = change.memory
        key = (change.location_id, memory.title)
        if memory.status is not Status.SUPERSEDED or memory.superseded_by in (None, memory.title):
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
    titles = Counter((c.location_id, c.memory.title) for c in changes)
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
) -> list[MemoryChange]:
    """Without prune, a missing live memory keeps its title: a file memory may not take it."""
    if prune:
        return changes
    held = {
        (change.location_id, change.memory.title): change
        for change in missing
        if change.memory.status is not Status.SUPERSEDED
    }
    if not held:
        return changes
    kept: list[MemoryChange] = []
    for change in changes:
        memory = change.memory
        holder = held.get((change.location_id, memory.title))
        becomes_live = memory.status is not Status.SUPERSEDED and (
            change.old is None or change.old.status is Status.SUPERSEDED
        )
        if holder is not None and becomes_live:
            old = holder.memory
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    f"memory {memory.title!r} (Ep{memory.episode}, T{memory.turns}) at location "
                    f"{change.location_id} would replace the database's live memory with that "
                    f"title (Ep{old.episode}, T{old.turns}), which is not in the file: "
                    f"use --prune to delete it, or keep it in the file; memory skipped",
                )
            )
            continue
        kept.append(change)
    return kept
