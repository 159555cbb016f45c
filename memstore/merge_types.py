"""The values of the 3-way merge (``memstore.merge``): how a run resolves conflicts, a stored
memory, a conflict (and how it is told, in one line) and the merge's result. No logic
beyond their wording.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from memstore.import_plan import CONTENT_FIELDS, STATUS_FIELDS, ImportProblem, MemoryKey
from memstore.md_rows import LocationRows, MemoryRow
from memstore.models import Memory, Status
from memstore.name_merge import NameConflict

__all__ = ["GROUPS", "MergeConflict", "MergeResult", "Resolution", "StoredMemory", "merge_fields"]

#: the groups merged as a unit: each content field alone, the status with its link
GROUPS: tuple[tuple[str, ...], ...] = (*((name,) for name in CONTENT_FIELDS), STATUS_FIELDS)


class Resolution(StrEnum):
    """How conflicts are resolved in one run (``--ours``, ``--theirs``, ``--skip-invalid``)."""

    OURS = "ours"
    THEIRS = "theirs"
    SKIP = "skip"


#: the memory a StoredMemory holds: a plain row (the import) or the public model (the store)
M = TypeVar("M", MemoryRow, Memory)


@dataclass(frozen=True, slots=True)
class StoredMemory(Generic[M]):
    """A persistent memory as stored: its row id, location, the version that created it.

    ``memory`` is a plain row on the import's path (``memstore.md_store``), the public model
    where the store reads one for its API."""

    id: int
    location_id: int
    created_version: int
    memory: M


def _clip(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status_text(memory: MemoryRow) -> str:
    if memory.status is not Status.SUPERSEDED:
        return memory.status.value
    if memory.invalidation_reason is not None:
        return f"invalidated ({_clip(memory.invalidation_reason)})"
    if memory.superseded_by is not None:
        return f"superseded by {_clip(memory.superseded_by)}"
    return "superseded"


def _group_text(memory: MemoryRow, group: tuple[str, ...]) -> str:
    if group == STATUS_FIELDS:
        return _status_text(memory)
    return _clip(getattr(memory, group[0]))


@dataclass(frozen=True, slots=True)
class MergeConflict:
    """A memory both sides changed differently since the export (or one side deleted)."""

    line: int
    location_id: int
    title: str
    fields: tuple[str, ...]
    file: MemoryRow | None  # None: the file dropped it
    database: MemoryRow | None  # None: the database deleted it
    #: the export's memory whose title, episode or turns the file changed (``file`` is the
    #: edited copy, ``database`` that memory now); ``guessed``: not found by its title or
    #: text, only by its place (the file dropped it there and added ``file``)
    edited_from: MemoryRow | None = None
    guessed: bool = False
    #: the location the export had ``edited_from`` at, when the file moved it elsewhere
    moved_from: int | None = None
    #: new in the file, and written in the database since the export under its key (an
    #: agent's, or an earlier import's)
    unbased: bool = False

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        head = f"{where}location {self.location_id} {_clip(self.title)}"
        if self.edited_from is not None:
            was = self.edited_from
            origin = f"{_clip(was.title)} (Ep{was.episode}, T{was.turns})"
            if self.guessed:
                origin = f"new in the file where it dropped {origin}, maybe an edit of it"
            elif self.moved_from is not None:
                origin = f"moved in the file from location {self.moved_from}"
            else:
                origin = f"edited in the file from {origin}"
            if self.database is None:
                now = "deleted from"
            elif self.database.status is Status.SUPERSEDED:
                now = f"{_status_text(self.database)} in"
            else:
                now = "changed in"
            return f"{head}: {origin}; {now} the database since the export"
        if self.file is None:
            return f"{head}: removed in the file, changed in the database since the export"
        if self.database is None:
            return f"{head}: changed in the file, deleted from the database since the export"
        parts = []
        for group in GROUPS:
            if group[0] in self.fields:
                name = "status" if group == STATUS_FIELDS else group[0]
                parts.append(
                    f"{name}: file {_group_text(self.file, group)}, "
                    f"database {_group_text(self.database, group)}"
                )
        if self.unbased:
            return (
                f"{head}: new in the file, and written in the database since the export "
                f"(an agent's, or an earlier import's): {'; '.join(parts)}"
            )
        return f"{head}: {'; '.join(parts)}"


@dataclass(frozen=True, slots=True)
class MergeResult:
    """The file as it should be read against the database now, and what conflicted."""

    locations: tuple[LocationRows, ...]
    conflicts: tuple[MergeConflict | NameConflict, ...]
    warnings: tuple[str, ...]
    #: the file's retitles and moves of a memory the database did not change since the
    #: export, live or superseded: (the file's memory's key, the key of the database's
    #: memory it was edited from - the same text -, that memory); without --prune the plan
    #: makes each a problem (``memstore.importing``), never a second copy beside the old
    retitled: tuple[tuple[MemoryKey, MemoryKey, MemoryRow], ...] = ()
    #: location id -> the places, among that location's ``locations`` memories, of the
    #: database's memories the merge kept that the file does not hold (learned after the
    #: export, or kept for a conflict): not the file's, so not counted as its unchanged ones
    unseen: Mapping[int, frozenset[int]] = field(default_factory=dict)
    #: location id -> the database row each of that location's ``locations`` memories
    #: stands for, by place (None: new in the file): twins (one key) are paired by these
    #: rows, never again by what they say (an agent's write may have made two say the same)
    row_ids: Mapping[int, tuple[int | None, ...]] = field(default_factory=dict)
    #: the file's changes the merge could not place (a twin among several it cannot tell
    #: apart): each skipped, the database's memory kept
    problems: tuple[ImportProblem, ...] = ()
    #: the warnings of the file's values the database went back from (``merge_fields``'s
    #: ``left``), for the plan's ``left_again``
    left_again: tuple[str, ...] = ()


def _values(memory: MemoryRow, group: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(getattr(memory, name) for name in group)


def merge_fields(
    base: MemoryRow | None,
    file: MemoryRow,
    database: MemoryRow,
    resolution: Resolution | None,
    since: Sequence[MemoryRow] = (),
    left: list[str] | None = None,
) -> tuple[MemoryRow, tuple[str, ...]]:
    """The 3-way merge of one memory, field group by field group (``GROUPS``): (the merged
    memory, the fields in conflict). Without a base every difference is one.

    ``since``: the states the memory had after the base and left (``state_at``'s). Where
    the database went back to the base's value, a file value that is one of them is not
    new: an import set it and a later change took it back (a reviewer's revert, then the
    first file imported again: review S6 B F2), so the database's stays, as a location's
    name an import set does (memstore.name_merge); ``left`` gets those fields (an export
    does not replace a file holding them: memstore.export_risk). Where the database holds
    a third value, it stays a conflict, which ``theirs`` may take (review S6 E F6)."""
    if file == database:  # the common case: nothing to merge
        return database, ()
    update: dict[str, Any] = {}
    conflicted: list[str] = []
    for group in GROUPS:
        f, d = _values(file, group), _values(database, group)
        if f == d:
            continue
        b = _values(base, group) if base is not None else None
        if b == f:
            continue  # only the database changed it: keep the database's
        if b == d and any(_values(state, group) == f for state in since):
            if left is not None:
                left.extend(group)
            continue  # the database had the file's value since, and went back
        if b != d:  # both changed it, differently
            conflicted.extend(group)
            if resolution is not Resolution.THEIRS:
                continue
        update.update(zip(group, f, strict=True))
    if not update:
        return database, tuple(conflicted)
    if len(update) == len(CONTENT_FIELDS) + len(STATUS_FIELDS):
        return file, tuple(conflicted)
    return database._replace(**update), tuple(conflicted)
