"""The store's reads: locations, memories and their histories, the export, counts, logs.

A part of ``MemoryStore`` (a base class it inherits), kept in its own file: every method
runs its statements in the store's own read transactions (``self._read()``) and returns
plain values or the public models.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select, text, union_all

from exporters.base_line import ExportBase
from memstore.dialect import json_text
from memstore.executor import run as _run
from memstore.history import oldest_first
from memstore.merge import StoredMemory
from memstore.models import (
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    check_int,
    check_location_id,
)
from memstore.queries import (
    EPHEMERAL_LIVE,
    LIVE,
    RECEIPT_FOUND,
    TIER_NUMBER,
    VIEW_QUERY,
    load_query,
    row_type,
    upgraded_successor,
)
from memstore.retrieval import ContextRow, ViewRow, view_row
from memstore.rows import stored_location, to_memory
from memstore.schema import (
    HEAD_REVISION,
    ephemeral_memories,
    ephemeral_memory_links,
    location_episodes,
    locations,
    memories,
    memory_links,
    synthesis_decisions,
    turn_records,
)
from memstore.shown_memories import ShownMemories
from memstore.store_core import StoreCore
from memstore.versions import identity, rows_fingerprint, state_at


class StoreReads(StoreCore):
    """What ``MemoryStore`` reads, each in one read transaction of the store's own (see
    memstore.store_core for the transactions and caches)."""

    def get_location_memory(self, location_id: int) -> str:
        """What the agent sees here: live memories within the token budget, or "" if none.

        Served from the location's view, which writes through this store keep up to date;
        read again (only the first VIEW_LIMIT rows by priority, and a count) when another
        connection has committed or a write left the view incomplete.
        """
        check_location_id(location_id)
        with self._lock:
            self._check_cache()
            text = self._views.text(location_id)
            if text is None:
                try:
                    with self._read():  # (one snapshot, and the whole busy timeout)
                        text = self._load_view(location_id)
                except Exception as exc:
                    refused = self.refusal(exc)
                    if refused is None:
                        raise
                    raise refused from exc
        return text

    def _load_view(self, location_id: int) -> str:
        markers = self.config.show_persistence_markers
        rows: list[ViewRow] = []
        total = 0
        params = {"location_id": location_id}
        for tier_name in self.tiers:
            tier = TIER_NUMBER[tier_name]
            found = _run(self._conn, VIEW_QUERY[tier_name], params).fetchall()
            if found:
                total += found[0][-1]  # the tier's live memories here (a window count)
            rows.extend(
                view_row(tier, memory_id, ContextRow(*fields), markers)
                for memory_id, *fields, _count in found
            )
        rows.sort(key=lambda row: row.priority)
        return self._views.load(location_id, rows, total)

    def stored_memories(self, conn: Connection) -> list[StoredMemory]:
        """Every persistent memory (all statuses) with its row id, in stored order."""
        cursor = _run(conn, load_query("persistent", False, True), {})
        make_row = row_type(tuple(column[0] for column in cursor.description))
        stored = []
        for values in cursor:
            row = make_row(*values)
            stored.append(
                StoredMemory(row.id, row.location_id, row.created_version, to_memory(row))
            )
        return stored

    def memories_at(
        self, conn: Connection, version: int, current: list[StoredMemory]
    ) -> dict[int, StoredMemory]:
        """The persistent memories as they were at change ``version`` (``current``: now)."""
        return state_at(conn, version, current, to_memory)

    def database_identity(self, conn: Connection) -> ExportBase:
        """The database's identity and change counter (inside ``transaction()``)."""
        return identity(conn)

    def location(self, location_id: int) -> LocationInfo | None:
        """A location's name and visit record, or None if it was never stored."""
        check_location_id(location_id)
        with self._read() as conn:
            row = conn.execute(select(locations).where(locations.c.id == location_id)).first()
            if row is None:
                return None
            episodes = (
                conn.execute(
                    select(location_episodes.c.episode).where(
                        location_episodes.c.location_id == location_id
                    )
                )
                .scalars()
                .all()
            )
        return stored_location(row.id, row.name, row.visit_count, tuple(episodes))

    def locations(self) -> list[LocationInfo]:
        """Every stored location, by id."""
        with self._read() as conn:
            return self.locations_in(conn)

    @staticmethod
    def locations_in(conn: Connection) -> list[LocationInfo]:
        """Every stored location, by id (inside ``transaction()``)."""
        rows = conn.execute(select(locations).order_by(locations.c.id)).all()
        episodes: dict[int, list[int]] = {}
        for location_id, episode in conn.execute(select(location_episodes)):
            episodes.setdefault(location_id, []).append(episode)
        return [
            stored_location(r.id, r.name, r.visit_count, tuple(episodes.get(r.id, ())))
            for r in rows
        ]

    # --- adding, superseding, invalidating ------------------------------------------------

    def decision_log(self) -> list[dict[str, Any]]:
        """Every synthesis decision recorded, oldest first."""
        with self._read() as conn:
            rows = conn.execute(select(synthesis_decisions).order_by(synthesis_decisions.c.id))
            return [dict(row._mapping) for row in rows]

    def turn_records(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Per-turn records, optionally of one run, in order."""
        query = select(turn_records).order_by(turn_records.c.id)
        if run_id is not None:
            query = query.where(turn_records.c.run_id == run_id)
        with self._read() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def locations_with_memory(self, episode: int) -> set[int]:
        """The locations that had a memory at the end of ``episode``.

        A persistent memory counts when it was learned by then and not superseded or
        invalidated by then; an ephemeral one when the decision log says it was stored in
        that episode (ephemeral memories themselves are gone after ``reset_episode``). So
        the answer stays the same whatever later episodes add.
        """
        check_int("episode", episode)
        learned = memories.c.episode <= episode
        ended = memory_links.c.episode <= episode
        persistent = (
            select(memories.c.location_id)
            .outerjoin(memory_links, memory_links.c.memory_id == memories.c.id)
            .where(learned, (memory_links.c.memory_id.is_(None)) | ~ended)
        )
        ephemeral = select(synthesis_decisions.c.location_id).where(
            synthesis_decisions.c.episode == episode,
            json_text(synthesis_decisions.c.applied, "new_memory", "persistence")
            == Persistence.EPHEMERAL.value,
        )
        with self._read() as conn:
            return set(conn.execute(union_all(persistent, ephemeral)).scalars())

    def _count(self, table: Any, location_id: int | None) -> int:
        query = (
            select(func.count()).select_from(table).where(table.c.status != Status.SUPERSEDED.value)
        )
        if location_id is not None:
            check_location_id(location_id)
            query = query.where(table.c.location_id == location_id)
        with self._read() as conn:
            return int(conn.execute(query).scalar_one())

    def get_ephemeral_count(self, location_id: int | None = None) -> int:
        """Non-superseded ephemeral memories at a location, or everywhere."""
        if "ephemeral" not in self.tiers:
            if location_id is not None:
                check_location_id(location_id)
            return 0
        return self._count(ephemeral_memories, location_id)

    def get_persistent_count(self, location_id: int | None = None) -> int:
        """Non-superseded CORE + PERMANENT memories at a location, or everywhere."""
        return self._count(memories, location_id)

    def get_memory_breakdown(self, location_id: int) -> dict[str, int]:
        """Non-superseded memories here by persistence: {"core", "permanent", "ephemeral"}."""
        check_location_id(location_id)
        breakdown = {p.value: 0 for p in Persistence}
        with self._read() as conn:
            for table in (memories, ephemeral_memories)[: len(self.tiers)]:
                rows = conn.execute(
                    select(table.c.persistence, func.count())
                    .where(table.c.location_id == location_id, table.c.status != "SUPERSEDED")
                    .group_by(table.c.persistence)
                )
                for persistence, count in rows:
                    breakdown[persistence] = count
        return breakdown

    def memories(self, location_id: int, include_superseded: bool = False) -> ShownMemories:
        """Memories here, persistent then ephemeral, each in the order stored: a list that
        also knows the row each memory was read from (``ShownMemories``), so a prompt's
        handle retires exactly the memory it showed."""
        check_location_id(location_id)
        with self._lock:
            if not include_superseded:
                self._check_cache()
                cached = self._live_cache.get(location_id)
                if cached is not None:
                    return cached.copy()
            with self._read() as conn:
                found = ShownMemories.read(
                    self._load(conn, location_id=location_id, include_superseded=include_superseded)
                )
            if not include_superseded:
                self._live_cache[location_id] = found.copy()
            return found

    def history(self, location_id: int, title: str) -> list[Memory]:
        """The supersession chain through every memory titled ``title`` here, oldest first.

        Walks links both ways (what this memory replaced, and what replaced it), across
        tiers, so nothing is lost on supersession. Empty if no memory has that title.
        """
        check_location_id(location_id)
        with self._read() as conn:
            loaded = self._load(conn, location_id=location_id, include_superseded=True)
            edges = self._edges(conn, location_id, ephemeral="ephemeral" in self.tiers)
        by_key = {(tier, mid): memory for tier, mid, memory in loaded}
        order = {(tier, mid): i for i, (tier, mid, _m) in enumerate(loaded)}
        neighbours: dict[tuple[str, int], set[tuple[str, int]]] = {}
        for old, new in edges:
            neighbours.setdefault(old, set()).add(new)
            neighbours.setdefault(new, set()).add(old)
        start = [key for key, memory in by_key.items() if memory.title == title]
        seen = set(start)
        stack = list(start)
        while stack:
            for other in neighbours.get(stack.pop(), ()):
                if other not in seen and other in by_key:
                    seen.add(other)
                    stack.append(other)
        return [by_key[key] for key in oldest_first(seen, edges, order)]

    @staticmethod
    def _edges(
        conn: Connection, location_id: int, *, ephemeral: bool
    ) -> list[tuple[tuple[str, int], tuple[str, int]]]:
        edges: list[tuple[tuple[str, int], tuple[str, int]]] = []
        rows = conn.execute(
            select(memory_links.c.memory_id, memory_links.c.superseded_by_id)
            .join(memories, memories.c.id == memory_links.c.memory_id)
            .where(
                memories.c.location_id == location_id, memory_links.c.superseded_by_id.is_not(None)
            )
        )
        edges.extend((("persistent", old), ("persistent", new)) for old, new in rows)
        if not ephemeral:
            return edges
        upgraded = memories.alias("upgraded")
        ephemeral_rows = conn.execute(
            select(
                ephemeral_memory_links.c.memory_id,
                ephemeral_memory_links.c.superseded_by_id,
                upgraded.c.id,  # None when the successor is gone (queries.upgraded_successor)
            )
            .join(ephemeral_memories, ephemeral_memories.c.id == ephemeral_memory_links.c.memory_id)
            .outerjoin(upgraded, upgraded_successor(upgraded, ephemeral_memory_links))
            .where(ephemeral_memories.c.location_id == location_id)
        )
        for old, new_ephemeral, new_persistent in ephemeral_rows:
            if new_ephemeral is not None:
                edges.append((("ephemeral", old), ("ephemeral", new_ephemeral)))
            if new_persistent is not None:
                edges.append((("ephemeral", old), ("persistent", new_persistent)))
        return edges

    def _load(
        self,
        conn: Connection,
        *,
        location_id: int | None,
        include_superseded: bool,
        tiers: tuple[str, ...] | None = None,
    ) -> list[tuple[str, int, Memory]]:
        """Memories with their supersession details, as (tier, id, Memory), of ``tiers``
        (default: every tier the store has)."""
        out: list[tuple[str, int, Memory]] = []
        tiers = self.tiers if tiers is None else tiers
        params = {"location_id": location_id} if location_id is not None else {}
        for tier in tiers:
            query = load_query(tier, location_id is not None, include_superseded)
            cursor = _run(conn, query, params)
            make_row = row_type(tuple(column[0] for column in cursor.description))
            for values in cursor:
                row = make_row(*values)
                out.append((tier, row.id, to_memory(row)))
        return out

    def export_locations(self) -> list[LocationMemories]:
        """Every location with its persistent memories (all statuses), for the exporter."""
        return self.export_snapshot()[0]

    def export_snapshot(self) -> tuple[list[LocationMemories], ExportBase]:
        """``export_locations()`` and the database's identity and change counter, read in
        one transaction: the base a Memories.md records for the 3-way import."""
        with self._read() as conn:
            base = identity(conn)
            stored = self.stored_memories(conn)  # each with its location: one statement
            base = replace(base, rows=rows_fingerprint(stored))
            location_rows = conn.execute(select(locations).order_by(locations.c.id)).all()
            episodes: dict[int, list[int]] = {}
            for location_id, episode in conn.execute(select(location_episodes)):
                episodes.setdefault(location_id, []).append(episode)
        grouped: dict[int, list[Memory]] = {}
        for row in stored:
            grouped.setdefault(row.location_id, []).append(row.memory)
        return [
            LocationMemories(
                location=stored_location(
                    r.id, r.name, r.visit_count, tuple(episodes.get(r.id, ()))
                ),
                memories=tuple(grouped.get(r.id, ())),
            )
            for r in location_rows
        ], base

    def get_status(self) -> dict[str, Any]:
        """Counts for monitoring: locations, memories by tier, status and category, file size."""
        with self._read() as conn:
            by_status = dict(
                conn.execute(
                    select(memories.c.status, func.count()).group_by(memories.c.status)
                ).all()
            )
            by_category = dict(
                conn.execute(
                    select(memories.c.category, func.count())
                    .where(LIVE)
                    .group_by(memories.c.category)
                ).all()
            )
            by_persistence = dict(
                conn.execute(
                    select(memories.c.persistence, func.count())
                    .where(LIVE)
                    .group_by(memories.c.persistence)
                ).all()
            )
            location_count = conn.execute(select(func.count()).select_from(locations)).scalar_one()
            ephemeral = (
                conn.execute(
                    select(func.count()).select_from(ephemeral_memories).where(EPHEMERAL_LIVE)
                ).scalar_one()
                if "ephemeral" in self.tiers
                else 0
            )
            size = 0
            if self.target.is_server:  # the schema's tables with their indexes and TOAST
                size = int(
                    conn.execute(
                        text(
                            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) "
                            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                            "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                        )
                    ).scalar_one()
                )
        if self.target.path is not None:
            size = sum(
                p.stat().st_size
                for p in (self.target.path, Path(f"{self.target.path}-wal"))
                if p.exists()
            )
        return {
            "database": self.target.display,
            "schema_revision": HEAD_REVISION,
            "locations": int(location_count),
            "memories_by_tier": {
                "core": by_persistence.get("core", 0),
                "permanent": by_persistence.get("permanent", 0),
                "ephemeral": int(ephemeral),
            },
            "memories_by_status": {s.value: by_status.get(s.value, 0) for s in Status},
            "memories_by_category": dict(sorted(by_category.items())),
            "database_bytes": size,
            "current_episode": self.current_episode,
        }

    def has_receipt(self, receipt: str) -> bool:
        """Whether a write transaction that inserted ``receipt`` (``Bookkeeping.receipt``)
        was committed: the answer to a COMMIT a lost connection swallowed. A receipt seen
        is a committed one. One not seen is looked for again under the writers' lock,
        which that transaction holds until it has ended: a server process stalled in its
        COMMIT cannot commit it after the answer "no" (StoreBusy while it holds the lock
        past the busy timeout). Nothing is written either way."""
        with self._read() as conn:
            if _run(conn, RECEIPT_FOUND, {"receipt": receipt}).fetchone() is not None:
                return True
        with self._write(forget=None, writes=False) as conn:
            return _run(conn, RECEIPT_FOUND, {"receipt": receipt}).fetchone() is not None
