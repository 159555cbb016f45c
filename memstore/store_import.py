"""Applying an import plan to the database: the SQL half of ``memstore import --apply``.

Part of the store layer (it writes the store's tables inside ``MemoryStore._write()``);
``memstore.importing`` makes the plan without touching the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memstore.errors import MemstoreError
from memstore.importing import ChangeKind, ImportPlan, MemoryChange, MemoryKey
from memstore.models import Memory, Status, parse_turns
from memstore.schema import location_episodes, locations, memories, memory_links

__all__ = ["ImportConflict", "apply_import"]


class ImportConflict(MemstoreError):
    """The database changed between planning and applying; nothing was written."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def apply_import(store: Any, plan: ImportPlan, *, prune: bool) -> None:
    """Write ``plan`` to ``store`` in one transaction (any exception rolls everything back).

    Order: locations (name from the file, visits = max(file, database), episodes = union);
    field and status updates (memories becoming SUPERSEDED first, so a title is free before
    another memory takes it); with ``prune`` (and only when the plan has no problems), the
    deletion of the memories missing from the file - never a location; the inserts, in
    file order; then the supersession links of every added or status-changed SUPERSEDED
    memory, re-created from the successor's exact title at the same location (the memory
    with that title that ``_successor_order`` ranks first and that does not close a cycle).
    When no memory has that title the link keeps its turn and episode but no successor.
    """
    with store._write() as conn:
        _apply(conn, plan, prune=prune and plan.ok)


def _apply(conn: Connection, plan: ImportPlan, *, prune: bool) -> None:
    _write_locations(conn, plan)
    touched = {c.location_id for c in plan.memories if c.kind is not ChangeKind.UNCHANGED}
    if prune:
        touched.update(c.location_id for c in plan.missing)
    if not touched:
        return
    ids: dict[MemoryKey, list[int]] | None = None

    def row_id(change: MemoryChange) -> int:
        nonlocal ids
        if ids is None:  # only plans that update or delete need the existing rows' ids
            ids = _ids_by_key(conn, touched)
        found = ids.get(change.key, [])
        if change.occurrence >= len(found):
            raise ImportConflict(
                f"memory {change.memory.title!r} at location {change.location_id} is no longer "
                f"in the database (it changed since the import was planned); nothing was "
                f"written: run the import again"
            )
        return found[change.occurrence]

    updating = (ChangeKind.CHANGED, ChangeKind.STATUS_CHANGED)
    updates = [c for c in plan.memories if c.kind in updating]
    # Memories leaving the live set first: the partial unique index allows one live title.
    updates.sort(key=lambda c: c.memory.status is not Status.SUPERSEDED)
    relink: list[tuple[int, int, Memory]] = []  # (row id, location id, memory)
    for change in updates:
        memory_id = row_id(change)
        new = change.new
        assert new is not None
        conn.execute(
            update(memories)
            .where(memories.c.id == memory_id)
            .values(
                category=new.category.value,
                text=new.text,
                score_change=new.score_change,
                persistence=new.persistence.value,
                status=new.status.value,
            )
        )
        if change.status_changed:
            conn.execute(delete(memory_links).where(memory_links.c.memory_id == memory_id))
            relink.append((memory_id, change.location_id, new))

    if prune and plan.missing:
        doomed = [row_id(change) for change in plan.missing]
        conn.execute(delete(memories).where(memories.c.id.in_(doomed)))

    added = [c for c in plan.memories if c.kind is ChangeKind.ADDED]
    if added:
        before = conn.execute(select(func.coalesce(func.max(memories.c.id), 0))).scalar_one()
        now = _now()
        # plain executemany: SQLAlchemy's per-row parameter processing would double the time
        conn.exec_driver_sql(_INSERT_MEMORY, [_row(c.location_id, c.new, now) for c in added])
        new_ids = (
            conn.execute(
                select(memories.c.id).where(memories.c.id > before).order_by(memories.c.id)
            )
            .scalars()
            .all()
        )
        if len(new_ids) != len(added):  # pragma: no cover - we hold the write lock
            raise ImportConflict("the database changed while the import was writing")
        relink.extend(
            (memory_id, change.location_id, change.new)  # type: ignore[misc]
            for memory_id, change in zip(new_ids, added, strict=True)
        )
    _write_links(conn, [entry for entry in relink if entry[2].status is Status.SUPERSEDED])


def _write_locations(conn: Connection, plan: ImportPlan) -> None:
    if not plan.locations:
        return
    stmt = sqlite_insert(locations)
    stmt = stmt.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "name": stmt.excluded.name,
            "visit_count": func.max(locations.c.visit_count, stmt.excluded.visit_count),
        },
    )
    conn.execute(
        stmt,
        [
            {"id": change.location_id, "name": change.name, "visit_count": change.visit_count}
            for change in plan.locations
        ],
    )
    episodes = [
        {"location_id": change.location_id, "episode": episode}
        for change in plan.locations
        for episode in change.episodes
    ]
    if episodes:
        conn.execute(sqlite_insert(location_episodes).on_conflict_do_nothing(), episodes)


def _ids_by_key(conn: Connection, location_ids: Iterable[int]) -> dict[MemoryKey, list[int]]:
    found: dict[MemoryKey, list[int]] = {}
    rows = conn.execute(
        select(
            memories.c.id,
            memories.c.location_id,
            memories.c.title,
            memories.c.episode,
            memories.c.turn_start,
            memories.c.turn_end,
        )
        .where(memories.c.location_id.in_(sorted(location_ids)))
        .order_by(memories.c.id)
    )
    for memory_id, location_id, title, episode, start, end in rows:
        turns = str(start) if end is None else f"{start}-{end}"
        found.setdefault(MemoryKey(location_id, title, episode, turns), []).append(memory_id)
    return found


_MEMORY_COLUMNS = (
    "location_id",
    "category",
    "title",
    "text",
    "episode",
    "turn_start",
    "turn_end",
    "score_change",
    "persistence",
    "status",
    "created_at",
)
_INSERT_MEMORY = (
    f"INSERT INTO {memories.name} ({', '.join(_MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_MEMORY_COLUMNS))})"
)


def _row(location_id: int, memory: Memory | None, now: str) -> tuple[Any, ...]:
    """The values of ``_MEMORY_COLUMNS`` for one memory."""
    assert memory is not None
    start, end = parse_turns(memory.turns)
    return (
        location_id,
        memory.category.value,
        memory.title,
        memory.text,
        memory.episode,
        start,
        end,
        memory.score_change,
        memory.persistence.value,
        memory.status.value,
        now,
    )


def _has_link(memory: Memory) -> bool:
    return any(
        value is not None
        for value in (
            memory.superseded_by,
            memory.invalidation_reason,
            memory.superseded_at_turn,
            memory.superseded_at_episode,
        )
    )


class _Candidate(NamedTuple):
    """A memory that may be a successor: its row id, whether it is live, and when learned."""

    id: int
    live: bool
    episode: int
    start: int
    last: int


def _successor_order(
    candidates: Iterable[_Candidate], memory_id: int, at: tuple[int, int] | None
) -> list[_Candidate]:
    """The possible successors of memory ``memory_id``, the most likely first.

    ``at`` is the link's (episode, turn). The store links a memory to its successor at the
    successor's own episode and last turn (``supersede_memory``; ``apply_synthesis`` at the
    current turn, which is the new memory's), so a candidate learned exactly then comes
    first - the first stored after the memory among several, as the store inserts the
    successor after it. Then, for a hand-edited link, the latest learned before it, then
    the earliest learned after it. Without a link turn: the live one, then the latest
    stored after the memory, then the latest stored before it.
    """
    if at is None:
        return sorted(candidates, key=lambda c: (not c.live, c.id < memory_id, -c.id))

    def rank(c: _Candidate) -> tuple[int, ...]:
        if (c.episode, c.last) == at:
            return (0, c.id < memory_id, c.id)
        if (c.episode, c.start) <= at:
            return (1, -c.episode, -c.start, -c.id)
        return (2, c.episode, c.start, c.id)

    return sorted(candidates, key=rank)


def _write_links(conn: Connection, entries: list[tuple[int, int, Memory]]) -> None:
    entries = [entry for entry in entries if _has_link(entry[2])]
    if not entries:
        return
    location_ids = sorted({entry[1] for entry in entries})
    # every memory of the locations concerned, by title, in stored order
    by_title: dict[tuple[int, str], list[_Candidate]] = {}
    rows = conn.execute(
        select(
            memories.c.id,
            memories.c.location_id,
            memories.c.title,
            memories.c.status,
            memories.c.episode,
            memories.c.turn_start,
            memories.c.turn_end,
        )
        .where(memories.c.location_id.in_(location_ids))
        .order_by(memories.c.id)
    )
    for memory_id, location_id, title, status, episode, start, end in rows:
        by_title.setdefault((location_id, title), []).append(
            _Candidate(
                memory_id,
                status != Status.SUPERSEDED.value,
                episode,
                start,
                end if end is not None else start,
            )
        )
    # the links already there (memory -> successor), so a new link never closes a cycle
    next_of: dict[int, int] = dict(
        conn.execute(
            select(memory_links.c.memory_id, memory_links.c.superseded_by_id)
            .join(memories, memories.c.id == memory_links.c.memory_id)
            .where(
                memories.c.location_id.in_(location_ids),
                memory_links.c.superseded_by_id.is_not(None),
            )
        ).all()
    )

    def leads_back(start: int, memory_id: int) -> bool:
        seen = set()
        current: int | None = start
        while current is not None and current not in seen:
            if current == memory_id:
                return True
            seen.add(current)
            current = next_of.get(current)
        return False

    links = []
    now = _now()
    for memory_id, location_id, memory in entries:
        episode = memory.superseded_at_episode or memory.episode
        successor: _Candidate | None = None
        if memory.superseded_by is not None:
            candidates = [
                c
                for c in by_title.get((location_id, memory.superseded_by), [])
                if c.id != memory_id
            ]
            at = None if memory.superseded_at_turn is None else (episode, memory.superseded_at_turn)
            ordered = _successor_order(candidates, memory_id, at)
            successor = next((c for c in ordered if not leads_back(c.id, memory_id)), None)
            if successor is not None:
                next_of[memory_id] = successor.id
        turn = memory.superseded_at_turn
        if turn is None:
            turn = (
                successor.last
                if successor is not None
                else (memory.turn_end if memory.turn_end is not None else memory.turn_start)
            )
        links.append(
            {
                "memory_id": memory_id,
                "superseded_by_id": successor.id if successor is not None else None,
                "episode": episode,
                "turn": turn,
                "reason": memory.invalidation_reason,
                "created_at": now,
            }
        )
    conn.execute(insert(memory_links), links)
