"""Applying an import plan to the database: the SQL half of ``memstore import --apply``.

Part of the store layer: ``apply_plan`` writes inside the caller's write transaction
(``MemoryStore.transaction()``), with statements built once here and run through
``memstore.executor`` (one ``executemany`` per kind of write), in SQL that SQLite and
PostgreSQL both speak (``memstore.dialect``). ``memstore.importing`` makes the plan without
touching the database.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from memstore.dialect import OnConflict, greatest, resolve
from memstore.errors import ImportConflict
from memstore.executor import run, run_many, run_rows
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
INSERT_LINK = insert(memory_links)
LAST_ID = select(func.coalesce(func.max(memories.c.id), 0))
IDS_AFTER = select(memories.c.id).where(memories.c.id > bindparam("after")).order_by(memories.c.id)
#: what identifies each persistent memory and ranks it as a successor, in stored order
MEMORY_KEYS = select(
    memories.c.id,
    memories.c.location_id,
    memories.c.title,
    memories.c.episode,
    memories.c.turn_start,
    memories.c.turn_end,
    memories.c.status,
).order_by(memories.c.id)
#: titles asked for in one statement (SQLite allows 32,766 parameters)
TITLES_AT_ONCE = 500
#: the same, of the memories titled as one of ``t0`` .. ``t{n-1}``, for a few sizes ``n``:
#: fixed lists, so that the executor compiles each once (the unused places are NULL, which
#: no title equals), and a few titles bind a few parameters, not 500
TITLED_KEYS = {
    size: MEMORY_KEYS.where(memories.c.title.in_([bindparam(f"t{n}") for n in range(size)]))
    for size in (4, 32, TITLES_AT_ONCE)
}
_TITLE_KEYS = tuple(f"t{n}" for n in range(TITLES_AT_ONCE))
SUCCESSOR_LINKS = select(memory_links.c.memory_id, memory_links.c.superseded_by_id).where(
    memory_links.c.superseded_by_id.is_not(None)
)
MOVE_LINK = (
    update(memory_links)
    .where(memory_links.c.memory_id == bindparam("pointer_id"))
    .values(superseded_by_id=bindparam("successor_id"))
)


def apply_plan(conn: Connection, plan: ImportPlan, *, prune: bool) -> set[int]:
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
    that ``_successor_order`` ranks first and that does not close a cycle; when each one
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
    _write_links(
        conn, [entry for entry in relink if entry[2].status is Status.SUPERSEDED], relinked
    )
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
    (row id, location id, the file's memory): their link is made again (``_write_links``)
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


#: the columns of a new link's row, in ``_write_links``' order (the table's)
NEW_LINK_COLUMNS = ("memory_id", "superseded_by_id", "episode", "turn", "reason", "created_at")


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


def _has_link(memory: MemoryLike) -> bool:
    return (
        memory.superseded_by is not None
        or memory.invalidation_reason is not None
        or memory.superseded_at_turn is not None
        or memory.superseded_at_episode is not None
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


def _titled_keys(conn: Connection, titles: list[str]) -> Any:
    """The rows of MEMORY_KEYS titled as one of ``titles`` (at most TITLES_AT_ONCE), from
    the smallest of TITLED_KEYS that takes them."""
    size = next(size for size in TITLED_KEYS if size >= len(titles))
    padded = [*titles, *[None] * (size - len(titles))]
    return run(conn, TITLED_KEYS[size], dict(zip(_TITLE_KEYS, padded, strict=False)))


def _write_links(
    conn: Connection,
    entries: list[tuple[int, int, MemoryLike]],
    relinked: Collection[int] = (),
) -> None:
    """Link each of ``entries`` (row id, location id, memory) to its successor by title
    (``_successor_order``). A memory ``relinked`` lost its successor to this import's
    prune: the successor is the memory with that title added again (its turns fixed), so
    it is ranked without the link's turn, which was the old successor's."""
    entries = [entry for entry in entries if _has_link(entry[2])]
    if not entries:
        return
    # every memory that has a successor's title where it is named, in stored order
    by_title: dict[tuple[int, str], list[_Candidate]] = {
        (location_id, memory.superseded_by): []
        for _id, location_id, memory in entries
        if memory.superseded_by is not None
    }
    superseded = Status.SUPERSEDED.value
    titles = sorted({title for _location_id, title in by_title})
    rows = (
        row
        for at in range(0, len(titles), TITLES_AT_ONCE)
        for row in _titled_keys(conn, titles[at : at + TITLES_AT_ONCE])
    )
    for memory_id, location_id, title, episode, start, end, status in rows:
        found = by_title.get((location_id, title))
        if found is not None:
            found.append(
                _Candidate(
                    memory_id,
                    status != superseded,
                    episode,
                    start,
                    end if end is not None else start,
                )
            )
    # the links already there (memory -> successor), so a new link never closes a cycle
    next_of: dict[int, int] = dict(run(conn, SUCCESSOR_LINKS, {}).fetchall())

    def leads_back(start: int, memory_id: int) -> bool:
        seen = set()
        current: int | None = start
        while current is not None and current not in seen:
            if current == memory_id:
                return True
            seen.add(current)
            current = next_of.get(current)
        return False

    links: list[tuple[Any, ...]] = []
    made: dict[int, int] = {}  # memory id -> its place in links

    def untwist(memory_id: int, location_id: int, title: str, first: _Candidate) -> bool:
        """Every memory with the title the file names as the successor of ``memory_id``
        leads back to it (``first`` the most likely), through a memory ``pointer`` linked
        to ``memory_id`` by its title: a circle between rows that the check of titles
        (``memory.import_checks``) cannot see, as a twin of ``memory_id`` with that title
        is where the circle may end. ``pointer`` is linked to such a twin instead (the same
        title: nothing it says changes), when one does not lead back; then the link of
        ``memory_id`` to ``first`` is made (True)."""
        pointer = first.id
        while next_of[pointer] != memory_id:
            pointer = next_of[pointer]
        next_of[memory_id] = first.id
        twins = [
            _Candidate(twin_id, status != superseded, episode, start, start if end is None else end)
            for twin_id, at, _title, episode, start, end, status in _titled_keys(conn, [title])
            if at == location_id and twin_id not in (memory_id, pointer)
        ]
        for twin in _successor_order(twins, pointer, None):
            if not leads_back(twin.id, pointer):
                next_of[pointer] = twin.id
                if pointer in made:  # linked by this import, above: not written yet
                    at = made[pointer]
                    links[at] = (links[at][0], twin.id, *links[at][2:])
                else:
                    run(conn, MOVE_LINK, {"pointer_id": pointer, "successor_id": twin.id})
                return True
        del next_of[memory_id]
        return False

    stamp = now()
    for memory_id, location_id, memory in entries:
        episode = memory.superseded_at_episode or memory.episode
        successor: _Candidate | None = None
        if memory.superseded_by is not None:
            candidates = [
                c
                for c in by_title.get((location_id, memory.superseded_by), [])
                if c.id != memory_id
            ]
            at = (
                None
                if memory.superseded_at_turn is None or memory_id in relinked
                else (episode, memory.superseded_at_turn)
            )
            ordered = (
                candidates if len(candidates) < 2 else _successor_order(candidates, memory_id, at)
            )
            successor = next((c for c in ordered if not leads_back(c.id, memory_id)), None)
            if successor is not None:
                next_of[memory_id] = successor.id
            elif ordered and untwist(memory_id, location_id, memory.title, ordered[0]):
                successor = ordered[0]
        turn = memory.superseded_at_turn
        if turn is None:
            turn = (
                successor.last
                if successor is not None
                else (memory.turn_end if memory.turn_end is not None else memory.turn_start)
            )
        if successor is not None:
            made[memory_id] = len(links)
        links.append(
            (
                memory_id,
                successor.id if successor is not None else None,
                episode,
                turn,
                memory.invalidation_reason,
                stamp,
            )
        )
    run_rows(conn, INSERT_LINK, NEW_LINK_COLUMNS, links)
