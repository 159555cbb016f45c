"""What an import of Memories.md would do: the plan's values (no SQL, no planning here).

``memstore.importing.plan_import`` makes an ``ImportPlan``; ``memstore.store_import``
applies it. A memory in the plan is a ``memstore.models.MemoryRow`` (the import's data
path) or a ``Memory`` (``plan_import`` called with the public models): both have the same
fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from memstore.md_rows import LocationRow, MemoryRow
from memstore.models import MEMORY_RULES, LocationInfo, Memory

__all__ = [
    "CONTENT_FIELDS",
    "STATUS_FIELDS",
    "ChangeKind",
    "ImportPlan",
    "ImportProblem",
    "LocationChange",
    "MemoryChange",
    "MemoryKey",
    "MemoryLike",
    "LocationLike",
    "change_kind",
    "differences",
    "memory_key",
]

#: A memory as the plan holds it: a plain row, or the public model with the same fields.
MemoryLike = MemoryRow | Memory
#: A location as the plan reads it.
LocationLike = LocationRow | LocationInfo

#: The largest episode a file may give a memory or a location: the model's (MEMORY_RULES,
#: ``memstore.models.MAX_EPISODE``), so the store accepts exactly what its export imports.
MAX_EPISODE: int = MEMORY_RULES["episode"].maximum or 0

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


class MemoryKey(NamedTuple):
    """The identity of a memory: where it is, its title, and when it was learned."""

    location_id: int
    title: str
    episode: int
    turns: str


def memory_key(location_id: int, memory: MemoryLike) -> MemoryKey:
    return MemoryKey(location_id, memory.title, memory.episode, memory.turns)


@dataclass(frozen=True, slots=True)
class ImportProblem:
    """Something that makes the file unsafe to import: its 1-based line (0 if unknown)."""

    line: int
    message: str
    #: ``--prune`` resolves it (a retitle, move or turns fix of a memory missing from the
    #: file, skipped because the old one would stay): not an edit of its own
    pruned: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class MemoryChange(NamedTuple):
    """One memory of the plan.

    ``old`` is the database's version (None when added), ``new`` the file's (None when
    missing). ``occurrence`` says which of the database memories with the same key this is
    (0 for the first stored), so the store can find its row. ``fields`` names what differs.
    """

    kind: ChangeKind
    location_id: int
    location_name: str
    old: MemoryLike | None
    new: MemoryLike | None
    occurrence: int = 0
    fields: tuple[str, ...] = ()

    @property
    def key(self) -> MemoryKey:
        memory = self.new if self.new is not None else self.old
        assert memory is not None
        return memory_key(self.location_id, memory)

    @property
    def memory(self) -> MemoryLike:
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
    old: LocationLike | None
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
    #: how many of the unchanged memories are the database's that the file does not hold
    #: (the 3-way merge kept them: learned after the export, or kept for a conflict)
    unseen: int = 0
    #: locations whose visits or episodes the file lists lower than the database has
    #: them: never applied (they only grow), so "the database matches the file" is no
    #: answer there
    lowered: tuple[int, ...] = ()
    #: the file's values the database had after the export and went back from, where the
    #: database's were kept (memstore.merge_types.merge_fields), each a line: an edit the
    #: import does not take, which an export does not replace (memstore.export_risk)
    left_again: tuple[str, ...] = ()

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
            f"unchanged {len(self.unchanged) - self.unseen}",
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


def differences(old: MemoryLike, new: MemoryLike) -> tuple[str, ...]:
    """The fields (CONTENT_FIELDS, then STATUS_FIELDS) in which ``new`` differs from ``old``."""
    if old == new and type(old) is type(new):
        return ()  # the common case: the same row (every field, the key's too)
    return tuple(
        name
        for name in (*CONTENT_FIELDS, *STATUS_FIELDS)
        if getattr(old, name) != getattr(new, name)
    )


def change_kind(fields: Sequence[str]) -> ChangeKind:
    """The kind of change that differs in ``fields`` (``differences``)."""
    if any(name in CONTENT_FIELDS for name in fields):
        return ChangeKind.CHANGED
    if fields:
        return ChangeKind.STATUS_CHANGED
    return ChangeKind.UNCHANGED
