"""The store's rows and results: what a write stores, what a read gives back.

Pure values and checks (no SQL): the checks a public write makes at the door, a memory as
a row and back, decision-log rows, buffered bookkeeping, and what ``apply_synthesis`` and
``supersede_memory`` report.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from memstore.errors import DamagedDatabase
from memstore.map_graph import MapEvent
from memstore.md_rows import MemoryRow, memory_of_row, memory_row_of, memory_row_problem
from memstore.models import (
    INT64_MAX,
    MAX_EPISODE,
    NOT_UNICODE,
    TEXT_MAX,
    Category,
    LocationInfo,
    Memory,
    Persistence,
    Status,
    blank_for_sqlite,
    check_int,
    check_location_id,
    check_location_name,
    format_turns,
    lone_surrogate,
    parse_turns,
    plain_str,
)
from memstore.schema import synthesis_decisions

#: the second of the last ``now()`` and that second's text (one tuple: threads share it)
_second: tuple[int, str] = (-1, "")


def now() -> str:
    """The time now, in UTC, as ``datetime.isoformat`` writes it with microseconds
    (``2026-11-25T08:17:10.263275+00:00``); the date and time of day formatted once a
    second (a third of the cost of formatting all of it every time)."""
    global _second
    second, micro = divmod(time.time_ns() // 1000, 1_000_000)
    known = _second
    if known[0] != second:
        known = _second = (
            second,
            datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        )
    return f"{known[1]}.{micro:06d}+00:00"


#: how long a write receipt is kept (memstore.commit_doubt): its writer asks for it at its
#: next write, which replaces it; a manager's last one goes after this (by the
#: clock of the writer that deletes it: a writer whose clock runs this far ahead of another
#: could delete that one's receipt while its write is in doubt)
RECEIPTS_KEPT = timedelta(days=30)


def receipts_cutoff() -> str:
    """The ``created_at`` before which a receipt is deleted (the same format as ``now``)."""
    return (datetime.now(UTC) - RECEIPTS_KEPT).isoformat(timespec="microseconds")


def check_memory(memory: object) -> Memory:
    """The Memory to store: ``memory`` when its every value is one its rules allow
    (MEMORY_RULES, every number within the database's 64 bits), TypeError for anything but
    a Memory. pydantic checked it when it was made, unless it was made by
    ``model_copy(update=...)`` or ``model_construct``, which skip the checks: the plain
    row's check (about 1 µs) runs again at the store's door, and a memory that fails it is
    validated by the model, which normalises what it may (``"permanent"`` for
    ``Persistence.PERMANENT``) and refuses the rest: one ValueError line."""
    if not isinstance(memory, Memory):
        raise TypeError(f"memory must be a memstore.Memory, got {type(memory).__name__}")
    if memory_row_problem(memory_row_of(memory)) is None:
        return memory
    try:
        validated = Memory.model_validate(dict(memory))
    except ValidationError as exc:
        problem = memory_row_problem(memory_row_of(memory))
        raise ValueError(f"the memory breaks a rule of Memory: {problem}") from exc
    problem = memory_row_problem(memory_row_of(validated))
    if problem is not None:  # pragma: no cover - the model and the rows' rules agree
        raise ValueError(f"the memory breaks a rule of Memory: {problem}")
    return validated


#: SQLite's largest integer (memstore.models.INT64_MAX)
MAX_INT = INT64_MAX


def check_clock(location_name: object, episode: object, turn: object) -> str:
    """The episode, turn and location name of a write, checked before any SQL (the name by
    ``check_location_name``: a str the database can store, within LOCATION_NAME_MAX); the
    name as a plain str."""
    name = check_location_name(location_name)
    if type(episode) is not int or not 1 <= episode <= MAX_EPISODE:
        raise ValueError(f"episode must be an int from 1 to 2**63-2, got {episode!r}")
    if type(turn) is not int or not 0 <= turn <= MAX_INT:
        raise ValueError(f"turn must be an int from 0 to 2**63-1, got {turn!r}")
    return name


def check_reason(reason: object) -> str:
    """The reason of an invalidation an agent gives, as a plain str (``plain_str``): at
    most TEXT_MAX characters (a memory's text's bound; a stored row is read whatever its
    reason's length) and Unicode; a one-line ValueError otherwise."""
    if not isinstance(reason, str) or blank_for_sqlite(reason):
        raise ValueError("an invalidation needs a non-empty reason")
    reason = plain_str("reason", reason)
    if len(reason) > TEXT_MAX:
        raise ValueError(
            f"an invalidation reason is {len(reason):,} characters; at most {TEXT_MAX:,}"
        )
    if lone_surrogate(reason):
        raise ValueError(f"an invalidation reason {NOT_UNICODE}")
    return reason


def titles_of(memory_titles: Iterable[str]) -> list[str]:
    """The titles of an invalidation, as a list of plain strs (``plain_str``: TypeError
    for a title that is not a str); one string is the caller's mistake (a list of its
    characters would invalidate the memories titled by them)."""
    if isinstance(memory_titles, str):
        raise TypeError("memory_titles must be a collection of titles, not one string")
    return [plain_str("a memory title", title) for title in memory_titles]


def memory_row(location_id: int, memory: Memory, created_at: str | None = None) -> dict[str, Any]:
    """The row of a memory written now (or at ``created_at``, the write's own time)."""
    start, end = parse_turns(memory.turns)
    return {
        "location_id": location_id,
        "category": memory.category.value,
        "title": memory.title,
        "text": memory.text,
        "episode": memory.episode,
        "turn_start": start,
        "turn_end": end,
        "score_change": memory.score_change,
        "persistence": memory.persistence.value,
        "status": memory.status.value,
        "created_at": created_at or now(),
    }


def link_turn(memory: Memory) -> int:
    start, end = parse_turns(memory.turns)
    return end if end is not None else start


DECISION_COLUMNS = tuple(c.name for c in synthesis_decisions.columns if c.name != "id")


def decision_row(log: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A full decision-log row: every column present (None where not given)."""
    row = dict.fromkeys(DECISION_COLUMNS)
    row.update(log)
    row.update(fields)
    row["created_at"] = row["created_at"] or now()
    return row


@dataclass
class Bookkeeping:
    """Writes that may wait for the next transaction: visits, no-op decisions, turn records
    and map events (memstore.map_store).

    The manager buffers these and hands them to the next memory write (or flushes them at
    episode end and on close), so a turn that changes no memory costs no commit.
    """

    visits: list[tuple[int, str, int]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    map_events: list[MapEvent] = field(default_factory=list)
    #: this transaction's receipt (``write_receipts``), and the writer's earlier ones it
    #: no longer needs, deleted in it: for a COMMIT a lost connection leaves in doubt
    receipt: str | None = None
    forget_receipts: tuple[str, ...] = ()
    #: delete the receipts older than RECEIPTS_KEPT (a manager's first receipt does)
    prune_receipts: bool = False

    @property
    def empty(self) -> bool:
        """Nothing to write (receipts alone are not worth a transaction: a later write
        replaces what is left)."""
        return not (self.visits or self.decisions or self.turns or self.map_events)

    def check(self) -> None:
        """The visits' values, before any SQL: a location id and an episode the database
        holds (ValueError, TypeError for a wrong type), a location name that is a str."""
        for location_id, name, episode in self.visits:
            check_location_id(location_id)
            check_location_name(name)
            check_int("episode", episode, 1, maximum=MAX_EPISODE)

    def clear(self) -> None:
        self.visits.clear()
        self.decisions.clear()
        self.turns.clear()
        self.map_events.clear()


class SupersedeOutcome(StrEnum):
    """What ``supersede_memory`` did; true only when it superseded, as its old ``bool``."""

    SUPERSEDED = "superseded"
    NOT_FOUND = "no live memory has that title here"
    FORBIDDEN_TRANSITION = (
        "the old memory's persistence may not be superseded by the new one's (core or "
        "permanent by ephemeral, permanent by core)"
    )
    DUPLICATE_TITLE = "another live memory here already has the new title"
    #: (the manager's ``supersede_memory`` only: the store raises StoreBusy; a database
    #: with no room, StorageFull, a StoreBusy, answers it too)
    STORE_BUSY = (
        "the database could not take the write (locked by another process past the busy "
        "timeout, full, or out of reach)"
    )

    def __bool__(self) -> bool:
        return self is SupersedeOutcome.SUPERSEDED

    # spec 004's ``supersede_memory(...) == False`` (or ``== True``) keeps its meaning
    # (review S6 A F11); ``is False`` cannot: the outcome says why
    def __eq__(self, other: object) -> bool:
        if isinstance(other, bool):
            return bool(self) is other
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


class AppliedSynthesis(BaseModel):
    """What one synthesis decision actually changed (the decision log's ``applied``)."""

    model_config = ConfigDict(frozen=True)

    location_id: int
    location_name: str
    new_memory: Memory | None
    superseded: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()
    invalidation_reason: str | None = None
    #: memories the model was shown that were no longer live when this was written
    #: (another agent retired them meanwhile): neither superseded nor invalidated here
    stale: tuple[str, ...] = ()
    episode: int
    turn: int

    @property
    def changed_anything(self) -> bool:
        return bool(self.new_memory or self.superseded or self.invalidated)


CATEGORY_OF = {category.value: category for category in Category}
PERSISTENCE_OF = {persistence.value: persistence for persistence in Persistence}
STATUS_OF = {status.value: status for status in Status}


def to_memory(row: Any) -> Memory:
    """The Memory of a stored row. A row the model refuses (a damaged database: a wrong
    type or an impossible value written around memstore) raises DamagedDatabase, one line
    that points at ``memstore check``."""
    memory_row = stored_row(row)
    try:
        return memory_of_row(memory_row)
    except (ValueError, TypeError) as exc:  # a pydantic ValidationError too
        raise _damaged(row, exc) from exc


def to_memory_row(row: Any) -> MemoryRow:
    """The MemoryRow of a stored row, checked against the model's rules (no pydantic object
    when it passes); DamagedDatabase, as ``to_memory`` says it, when it does not."""
    memory_row = stored_row(row)
    problem = memory_row_problem(memory_row)
    if problem is not None:
        to_memory(row)  # raises DamagedDatabase, with pydantic's words for what is wrong
        # pydantic took it (it reads "EPHEMERAL" as "ephemeral"), but the row is not what
        # memstore writes: never read past it (an export would leave it out)
        raise _damaged(row, ValueError(f"\n{problem}"))
    return memory_row


def stored_location(
    location_id: Any, name: Any, visit_count: Any, episodes: tuple[Any, ...]
) -> LocationInfo:
    """The LocationInfo of a stored location's row and episodes; DamagedDatabase, one line,
    when its values break the model's rules (written around the database's checks)."""
    try:
        return LocationInfo(id=location_id, name=name, visit_count=visit_count, episodes=episodes)
    except (ValidationError, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()
        detail = first[1].strip() if len(first) > 1 else (first[0] if first else "")
        raise DamagedDatabase(
            f"a stored location cannot be read (location {str(location_id)[:30]}: "
            f"{detail[:120]}); run `memstore check` to list what is damaged"
        ) from None


def _damaged(row: Any, exc: Exception) -> DamagedDatabase:
    first = str(exc).strip().splitlines()
    detail = first[1].strip() if len(first) > 1 else (first[0] if first else "")
    return DamagedDatabase(
        f"a stored memory cannot be read (title {str(row.title)[:60]!r}: {detail[:120]}); "
        f"run `memstore check` to list what is damaged"
    )


def stored_row(row: Any) -> MemoryRow:
    """A stored memory row (the columns of ``queries.load_query`` or ``memory_history``) as a
    MemoryRow, unchecked. Enum members are looked up by value; a value that is none (a
    damaged row) stays as it is, and the check or the model refuses it."""
    status = STATUS_OF.get(row.status, row.status)
    superseded = status is Status.SUPERSEDED
    start, end = row.turn_start, row.turn_end
    if type(start) is int and (end is None or type(end) is int):
        turns = str(start) if end is None else f"{start}-{end}"
    else:
        turns = format_turns(start, end)
    return MemoryRow(
        CATEGORY_OF.get(row.category, row.category),
        row.title,
        row.text,
        row.episode,
        turns,
        row.score_change,
        PERSISTENCE_OF.get(row.persistence, row.persistence),
        status,
        row.successor_title if superseded and row.link_reason is None else None,
        row.link_turn if superseded else None,
        row.link_episode if superseded else None,
        row.link_reason if superseded else None,
    )
