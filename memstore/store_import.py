"""Applying an import plan to the database: the SQL half of ``memstore import --apply``.

Part of the store layer (it writes the store's tables inside ``MemoryStore.transaction()``);
``memstore.importing`` makes the plan without touching the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from exporters.base_line import ExportBase
from memstore.errors import ImportConflict, ImportRefused, MemstoreError  # noqa: F401 - importable from here too
from memstore.importing import (
    ChangeKind,
    ImportPlan,
    LineFinder,
    MemoryChange,
    MemoryKey,
    plan_import,
)
from memstore.invariants import check_invariants
from memstore.merge import Resolution, StoredMemory, merge_import
from memstore.models import LocationInfo, LocationMemories, Memory, Status, parse_turns
from memstore.rows import now
from memstore.schema import location_episodes, locations, memories, memory_links
from memstore.versions import next_version, record_history

__all__ = [
    "ImportConflict",
    "ImportOutcome",
    "ImportRefused",
    "apply_import",
    "apply_plan",
    "import_memories",
]




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
    with store.transaction() as conn:
        apply_plan(conn, plan, prune=prune and plan.ok)


def apply_plan(conn: Connection, plan: ImportPlan, *, prune: bool) -> set[int]:
    """Write ``plan`` inside the caller's write transaction; the locations whose memories
    it changed. Every row it changes, deletes or adds is stamped with one new version of
    the change counter, and the state it replaced is kept (memstore.versions)."""
    _write_locations(conn, plan)
    touched = {c.location_id for c in plan.memories if c.kind is not ChangeKind.UNCHANGED}
    if prune:
        touched.update(c.location_id for c in plan.missing)
    if not touched:
        return touched
    version = next_version(conn)
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
    record_history(conn, [row_id(change) for change in updates], version)
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
                changed_version=version,
            )
        )
        if change.status_changed:
            conn.execute(delete(memory_links).where(memory_links.c.memory_id == memory_id))
            relink.append((memory_id, change.location_id, new))

    if prune and plan.missing:
        doomed = [row_id(change) for change in plan.missing]
        record_history(conn, doomed, version, deleted=True)
        conn.execute(delete(memories).where(memories.c.id.in_(doomed)))

    added = [c for c in plan.memories if c.kind is ChangeKind.ADDED]
    if added:
        before = conn.execute(select(func.coalesce(func.max(memories.c.id), 0))).scalar_one()
        stamp = now()
        # plain executemany: SQLAlchemy's per-row parameter processing would double the time
        conn.exec_driver_sql(
            _INSERT_MEMORY, [_row(c.location_id, c.new, stamp, version) for c in added]
        )
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
    return touched


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
    "created_version",
    "changed_version",
)
_INSERT_MEMORY = (
    f"INSERT INTO {memories.name} ({', '.join(_MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_MEMORY_COLUMNS))})"
)


def _row(location_id: int, memory: Memory | None, now: str, version: int) -> tuple[Any, ...]:
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
        version,
        version,
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
                "created_at": stamp,
            }
        )
    conn.execute(insert(memory_links), links)


# --- the whole import in one transaction --------------------------------------------------

#: ``--prune`` refuses, without ``--force``, to delete more than this share of the
#: persistent memories
PRUNE_LIMIT = 0.10


@dataclass(frozen=True)
class ImportOutcome:
    """What an import planned, whether it wrote it, and why not if it did not."""

    plan: ImportPlan
    applied: bool
    #: why nothing was written (problems, conflicts, a prune guard); None when applied or
    #: when a dry run would apply
    refused: str | None
    base: ExportBase | None


def import_memories(
    store: Any,
    text: str,
    *,
    apply: bool,
    prune: bool = False,
    resolution: Resolution | None = None,
    skip_invalid: bool = False,
    force: bool = False,
    parsed: Any = None,
) -> ImportOutcome:
    """Import the text of a Memories.md into ``store``: parse, merge, plan and (``apply``)
    write, all inside ONE transaction, so what the plan saw is what it changes.

    The file's export base (``exporters.base_line``) makes it a 3-way merge
    (``memstore.merge``); conflicts are resolved by ``resolution`` (ours, theirs, skip),
    and without one nothing is applied. ``skip_invalid`` applies the rest of a file with
    problems (and skips conflicting memories). ``prune`` deletes the memories the reviewer
    removed, but refuses without ``force`` a file with no location sections or a deletion
    of more than 10% of the persistent memories. The result is checked against the
    database's rules (``memstore.invariants``) before the commit: a breach rolls it all
    back (ImportRefused). A dry run computes the same plan, read-only.
    """
    from exporters import parse_memories_md

    if parsed is None:  # the caller may hand in the parse of ``text`` it already has
        parsed = parse_memories_md(text)
    if skip_invalid and resolution is None:
        resolution = Resolution.SKIP
    lines = LineFinder(text)
    with store.transaction(write=apply) as conn:
        current = store.stored_memories(conn)
        current_locations = {info.id: info for info in store.locations_in(conn)}
        here = store.database_identity(conn)
        base, warnings = _usable_base(parsed.base, here, store.target.display)
        base_state = store.memories_at(conn, base.version, current) if base else None
        merged = merge_import(
            parsed.locations,
            current,
            current_locations,
            base_state,
            resolution=resolution,
            prune=prune,
            lines=lines,
            warnings=warnings,
        )
        plan = plan_import(
            _grouped(current, current_locations),
            merged.locations,
            parsed.problems,
            source=text,
            prune=prune,
            conflicts=merged.conflicts,
            warnings=merged.warnings,
        )
        refused = _refusal(plan, parsed, current, prune, resolution, skip_invalid, force)
        pending = plan.has_changes or (prune and plan.ok and bool(plan.missing))
        if not apply or refused is not None or not pending:
            return ImportOutcome(plan, False, refused, base)
        apply_plan(conn, plan, prune=prune and plan.ok)
        broken = check_invariants(conn)
        if broken:
            raise ImportRefused(
                f"the import would break the database's rules ({broken[0]}"
                f"{f'; and {len(broken) - 1} more' if len(broken) > 1 else ''}); "
                f"nothing was written"
            )
    return ImportOutcome(plan, True, None, base)


def _usable_base(
    base: ExportBase | None, here: ExportBase, where: str
) -> tuple[ExportBase | None, tuple[str, ...]]:
    if base is None:
        return None, (
            "the file has no export base (hand-written, or exported by an older memstore): "
            "changes made in the database since it was written cannot be told apart from "
            "edits in the file; a status is never moved back from SUPERSEDED without --theirs",
        )
    if base.database_id != here.database_id and here.version == 0:
        return None, (
            f"the file was exported from another database ({base.database_id}); this one "
            f"is new (nothing written to it yet): compared 2-way, as a file with no base",
        )
    if base.database_id != here.database_id:
        return None, (
            f"the file was exported from another database ({base.database_id}), not "
            f"{where} ({here.database_id}): compared 2-way, as a file with no base",
        )
    if base.version > here.version:
        return None, (
            f"the file says it was exported at change {base.version}, but the database is "
            f"only at {here.version} (restored from a backup?): compared 2-way",
        )
    return base, ()


def _grouped(
    current: list[StoredMemory], locations: dict[int, LocationInfo]
) -> list[LocationMemories]:
    by_location: dict[int, list[Memory]] = {}
    for stored in current:
        by_location.setdefault(stored.location_id, []).append(stored.memory)
    return [
        LocationMemories(location=info, memories=tuple(by_location.get(location_id, ())))
        for location_id, info in sorted(locations.items())
    ]


def _refusal(
    plan: ImportPlan,
    parsed: Any,
    current: list[StoredMemory],
    prune: bool,
    resolution: Resolution | None,
    skip_invalid: bool,
    force: bool,
) -> str | None:
    if plan.problems and not skip_invalid:
        return (
            f"the file has {len(plan.problems)} problem(s); nothing was applied "
            f"(fix them, or use --skip-invalid to apply the valid parts)"
        )
    if plan.conflicts and resolution is None:
        return (
            f"{len(plan.conflicts)} conflict(s) between the file and changes made in the "
            f"database since the export; nothing was applied (choose per run: --ours keeps "
            f"the database's side, --theirs takes the file's, --skip-invalid applies the rest)"
        )
    if not prune or force or not plan.missing:
        return None
    persistent = len(current)
    if not parsed.locations:
        return (
            f"the file has no location sections: --prune would delete every memory "
            f"({len(plan.missing)} of {persistent}); refused without --force"
        )
    if len(plan.missing) > PRUNE_LIMIT * persistent:
        return (
            f"--prune would delete {len(plan.missing)} of {persistent} persistent memories "
            f"(more than {PRUNE_LIMIT:.0%}); refused without --force"
        )
    return None
