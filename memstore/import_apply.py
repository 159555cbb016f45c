"""Applying an import plan to the database: the SQL half of ``memstore import --apply``.

Part of the store layer: ``apply_plan`` writes inside the caller's write transaction
(``MemoryStore.transaction()``), with statements built once here and run through
``memstore.executor`` (one ``executemany`` per kind of write), in SQL that SQLite and
PostgreSQL both speak (``memstore.dialect``). ``memstore.importing`` makes the plan without
touching the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from memstore.dialect import OnConflict, greatest, resolve
from memstore.errors import ImportConflict
from memstore.executor import run, run_many, run_rows
from memstore.import_links import MEMORY_KEYS, SUCCESSOR_LINKS, write_links
from memstore.import_plan import ChangeKind, ImportPlan, MemoryChange, MemoryKey, MemoryLike
from memstore.models import Category, Persistence, Status, parse_turns
from memstore.rows import now
from memstore.schema import location_episodes, locations, memories, memory_links
from memstore.versions import next_version, record_history, record_renames

__all__ = ["apply_plan"]

UPSERT_LOCATION = OnConflict(
    locations,
    ["id"],
    update=lambda excluded: {
        "name": excluded.name,
        "visit_count": greatest(locations.c.visit_count, excluded.visit_count),
    },
)
ADD_EPISODE = OnConflict(location_episodes)
UPDATE_MEMORY = (
    update(memories)
    .where(memories.c.id == bindparam("memory_id"))
    .values(
        category=bindparam("new_category"),
        text=bindparam("new_text"),
        score_change=bindparam("new_score_change"),
        persistence=bindparam("new_persistence"),
        status=bindparam("new_status"),
        changed_version=bindparam("version"),
    )
)
DELETE_LINK = delete(memory_links).where(memory_links.c.memory_id == bindparam("memory_id"))
DELETE_MEMORY = delete(memories).where(memories.c.id == bindparam("memory_id"))
INSERT_MEMORY = insert(memories)
LAST_ID = select(func.coalesce(func.max(memories.c.id), 0))
IDS_AFTER = select(memories.c.id).where(memories.c.id > bindparam("after")).order_by(memories.c.id)


def apply_plan(
    conn: Connection, plan: ImportPlan, *, prune: bool, base_version: int | None = None
) -> set[int]:
    """Write ``plan`` inside the caller's write transaction; the locations whose memories
    it changed. Every row it changes, deletes or adds is stamped with one new version of
    the change counter, and the state it replaced is kept (memstore.versions).

    Order: the names the file changes, kept (``record_renames``); locations (name from the
    merged file, visits = max(file, database), episodes = union);
    field and status updates of memories becoming SUPERSEDED; with ``prune``, the deletion
    of the memories missing from the file - never a location; the other updates (so that a
    title is free before another memory takes it); the inserts, in file order; then the
    supersession links of every added or status-changed SUPERSEDED memory, and of every
    memory whose successor the prune deleted and whose status the file keeps, re-created
    from the successor's exact title at the same location (the memory with that title
    that ``memstore.import_links`` ranks first and that does not close a cycle; when each one
    does, through a memory linked to this one by its title, that memory's link moves to
    a twin of this one that closes none: the same title). When no memory has that title
    the link keeps its turn and episode but no successor.
    """
    touched = {c.location_id for c in plan.memories if c.kind is not ChangeKind.UNCHANGED}
    if prune:
        touched.update(c.location_id for c in plan.missing)
    renamed = [(c.location_id, c.name) for c in plan.locations if c.old and c.old.name != c.name]
    version = next_version(conn) if touched or renamed else 0
    if renamed:  # the names they replace are kept, as a memory's earlier state is
        record_renames(conn, renamed, version, imported=True)
    _write_locations(conn, plan)
    if not touched:
        return touched
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
    # Memories leaving the live set first, and the prune's deletions, before any memory
    # takes a title they free: the partial unique index allows one live title.
    updates.sort(key=lambda c: c.memory.status is not Status.SUPERSEDED)
    relink: list[tuple[int, int, MemoryLike]] = []  # (row id, location id, memory)
    relinked: set[int] = set()  # memories whose successor the prune deletes (below)
    update_ids = [row_id(change) for change in updates]
    if updates:
        record_history(conn, update_ids, version)
    leaving = sum(1 for c in updates if c.memory.status is Status.SUPERSEDED)

    def update(pairs: Iterable[tuple[int, MemoryChange]]) -> None:
        for memory_id, change in pairs:
            new = change.new
            assert new is not None
            run(
                conn,
                UPDATE_MEMORY,
                {
                    "memory_id": memory_id,
                    "new_category": new.category.value,
                    "new_text": new.text,
                    "new_score_change": new.score_change,
                    "new_persistence": new.persistence.value,
                    "new_status": new.status.value,
                    "version": version,
                },
            )
            if change.status_changed:
                run(conn, DELETE_LINK, {"memory_id": memory_id})
                relink.append((memory_id, change.location_id, new))

    paired = list(zip(update_ids, updates, strict=True))
    update(paired[:leaving])
    if prune and plan.missing:
        doomed = [row_id(change) for change in plan.missing]
        record_history(conn, doomed, version, deleted=True)
        # a memory whose successor goes loses its link (ON DELETE SET NULL): a change like
        # any other, so its state before it is kept too (unless this import already did)
        gone, kept = set(doomed), set(update_ids)
        orphaned = sorted(
            memory_id
            for memory_id, successor in run(conn, SUCCESSOR_LINKS, {})
            if successor in gone and memory_id not in gone
        )
        record_history(conn, [m for m in orphaned if m not in kept], version)
        run_many(conn, DELETE_MEMORY, [{"memory_id": memory_id} for memory_id in doomed])
        # ... and is linked again, below, as the file says: to the memory with its
        # successor's title after the import (a successor whose turns the file fixed is
        # deleted here and added again, with the same title)
        orphans = _orphans_in_file(plan, orphaned, row_id, touched)
        if orphans:
            run_many(conn, DELETE_LINK, [{"memory_id": entry[0]} for entry in orphans])
            relink.extend(orphans)
            relinked = {entry[0] for entry in orphans}
    update(paired[leaving:])

    added = [c for c in plan.memories if c.kind is ChangeKind.ADDED]
    if added:
        before = run(conn, LAST_ID, {}).fetchone()[0]
        stamp = now()
        run_rows(conn, INSERT_MEMORY, NEW_MEMORY_COLUMNS, [_row(c, stamp, version) for c in added])
        last = run(conn, LAST_ID, {}).fetchone()[0]
        if last == before + len(added):  # each new id above the last: these, in order
            new_ids = list(range(before + 1, last + 1))
        else:  # (ids a sequence gave with gaps: read back)
            new_ids = [memory_id for (memory_id,) in run(conn, IDS_AFTER, {"after": before})]
        if len(new_ids) != len(added):  # pragma: no cover - we hold the write lock
            raise ImportConflict("the database changed while the import was writing")
        relink.extend(
            (memory_id, change.location_id, change.new)  # type: ignore[misc]
            for memory_id, change in zip(new_ids, added, strict=True)
        )
    superseded = [entry for entry in relink if entry[2].status is Status.SUPERSEDED]
    write_links(conn, superseded, relinked, base_version, version)
    return touched


#: the kinds of change whose memory keeps the link it has (its status is the same)
_LINK_KEPT = (ChangeKind.UNCHANGED, ChangeKind.CHANGED)


def _orphans_in_file(
    plan: ImportPlan,
    orphaned: list[int],
    row_id: Callable[[MemoryChange], int],
    touched: set[int],
) -> list[tuple[int, int, MemoryLike]]:
    """The memories ``orphaned`` (their successor is being deleted) that the file holds
    with their status unchanged (their text may be changed) and names a successor for, as
    (row id, location id, the file's memory): their link is made again (``write_links``)
    as the file writes it. (A status change's link is made again anyway.) A successor is
    at its predecessor's location, which the prune ``touched``: memories elsewhere are
    not asked for their row."""
    if not orphaned:
        return []
    wanted = set(orphaned)
    found = []
    for change in plan.memories:
        new = change.new
        if (
            change.location_id in touched
            and change.kind in _LINK_KEPT
            and new is not None
            and new.superseded_by
            and not change.status_changed
        ):
            memory_id = row_id(change)
            if memory_id in wanted:
                found.append((memory_id, change.location_id, new))
    return found


def _write_locations(conn: Connection, plan: ImportPlan) -> None:
    if not plan.locations:
        return
    run_many(
        conn,
        resolve(conn, UPSERT_LOCATION),
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
    run_many(conn, resolve(conn, ADD_EPISODE), episodes)


def _ids_by_key(conn: Connection, location_ids: Iterable[int]) -> dict[MemoryKey, list[int]]:
    wanted = set(location_ids)
    found: dict[MemoryKey, list[int]] = {}
    for memory_id, location_id, title, episode, start, end, _status in run(conn, MEMORY_KEYS, {}):
        if location_id in wanted:
            turns = str(start) if end is None else f"{start}-{end}"
            found.setdefault(MemoryKey(location_id, title, episode, turns), []).append(memory_id)
    return found


#: the stored text of each enum member (a lookup: cheaper than ``.value``)
_VALUES: dict[Any, str] = {
    member: member.value for enum in (Category, Persistence, Status) for member in enum
}


#: the columns of a new memory's row, in ``_row``'s order (the table's, so the driver
#: takes the rows as they are: executor.run_rows)
NEW_MEMORY_COLUMNS = (
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
    "created_version",
    "changed_version",
)


def _row(change: MemoryChange, stamp: str, version: int) -> tuple[Any, ...]:
    """The values of a new memory's row (``NEW_MEMORY_COLUMNS``)."""
    memory = change.new
    assert memory is not None
    turns = memory.turns
    start, end = (int(turns), None) if turns.isdigit() else parse_turns(turns)
    values = _VALUES
    return (
        change.location_id,
        values[memory.category],
        memory.title,
        memory.text,
        memory.episode,
        start,
        end,
        memory.score_change,
        values[memory.persistence],
        values[memory.status],
        stamp,
        version,
        version,
    )
