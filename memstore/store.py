"""MemoryStore: the only place that speaks SQL.

CORE and PERMANENT memories live in tables on disk; EPHEMERAL ones in the same tables of an
in-memory database ATTACHed as ``ephemeral`` to the store's single connection (see
memstore.connection). Every public write is one ``BEGIN IMMEDIATE`` transaction, committed
with ``synchronous=FULL`` before the call returns.

Statements are SQLAlchemy Core. The per-turn read (``get_location_memory``) is compiled
from Core once and run on the DBAPI cursor, as one statement over both tiers: SQLAlchemy's
per-execute overhead would otherwise be most of its time budget.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    Connection,
    delete,
    select,
)

from memstore.executor import insert_id
from memstore.executor import run as _run
from memstore.executor import run_many as _run_many
from memstore.live_titles import (
    find_live,
    find_named,
    live_title_exists,
    live_titled,
    to_supersede,
)
from memstore.map_store import write_map_events
from memstore.models import (
    MAX_EPISODE,
    Memory,
    Persistence,
    Status,
    Tier,
    check_int,
    check_location_id,
    check_location_name,
    plain_str,
)
from memstore.queries import (
    ENSURE_LOCATION,
    INSERT_DECISION,
    INSERT_LINK,
    INSERT_MEMORY,
    INSERT_TURNS,
    LOCATION_NAME,
    MARK_SUPERSEDED,
    TIER_NUMBER,
    VISIT_EPISODE,
    VISIT_KNOWN,
    VISIT_LOCATION,
)
from memstore.receipts import write_receipt
from memstore.retrieval import ContextRow, view_row
from memstore.rows import (
    AppliedSynthesis,
    Bookkeeping,
    SupersedeOutcome,
    check_clock,
    check_memory,
    check_reason,
    decision_row,
    link_turn,
    memory_row,
    titles_of,
)
from memstore.schema import (
    ephemeral_memories,
    ephemeral_memory_links,
)
from memstore.store_reads import StoreReads
from memstore.versions import (
    WriteVersion,
    allocate_episode,
    next_version,
    record_history,
    record_renames,
)


class MemoryStore(StoreReads):
    """Location memories in SQLite, with the spec's API (spec 002 "Public API", 004)."""

    # --- locations -------------------------------------------------------------------------

    @staticmethod
    def _ensure_location(conn: Connection, location_id: int, name: str) -> None:
        _run(conn, ENSURE_LOCATION, {"id": location_id, "name": name})

    def record_visit(self, location_id: int, location_name: str, episode: int) -> None:
        """Count a visit to a location in an episode (creates the location if new)."""
        self.write_bookkeeping(Bookkeeping(visits=[(location_id, location_name, episode)]))

    def write_bookkeeping(self, bookkeeping: Bookkeeping) -> None:
        """Write buffered visits, decision-log rows, turn records and map events in one
        transaction."""
        bookkeeping.check()
        if bookkeeping.empty:
            return
        with self._write(forget=None) as conn:
            self._bookkeeping(conn, bookkeeping)

    @staticmethod
    def _bookkeeping(conn: Connection, bookkeeping: Bookkeeping) -> None:
        write_receipt(
            conn,
            bookkeeping.receipt,
            bookkeeping.forget_receipts,
            prune=bookkeeping.prune_receipts,  # once a manager: crashed writers' receipts
        )
        for location_id, name, episode in bookkeeping.visits:
            visit = {"visit_id": location_id, "visit_name": name}
            if _run(conn, VISIT_KNOWN, visit).rowcount != 1:  # new, or renamed
                if _run(conn, LOCATION_NAME, {"id": location_id}).fetchone() is not None:
                    # a rename is a change like a memory's: an import tells by its version
                    # whether the database or the file renamed it since an export
                    record_renames(conn, [(location_id, name)], next_version(conn), imported=False)
                _run(conn, VISIT_LOCATION, {"id": location_id, "name": name})
            _run(conn, VISIT_EPISODE, {"location_id": location_id, "episode": episode})
        _run_many(conn, INSERT_DECISION, bookkeeping.decisions)
        _run_many(conn, INSERT_TURNS, bookkeeping.turns)
        if bookkeeping.map_events:
            write_map_events(conn, bookkeeping.map_events)

    def allocate_episode(self) -> int:
        """A new episode number, never handed out before by this database: one write
        transaction, so agents in several processes sharing the file never play the same
        episode. It also becomes ``current_episode``."""
        with self._write(forget=None) as conn:
            episode = allocate_episode(conn)
        self.current_episode = episode
        return episode

    def _insert(
        self,
        conn: Connection,
        location_id: int,
        name: str,
        memory: Memory,
        version: WriteVersion,
        location_known: bool = False,
    ) -> tuple[str, int]:
        """Insert a memory; ``location_known``: a persistent memory there proves the
        location row exists already."""
        row = memory_row(location_id, memory, version.stamp)
        tier = Tier.of(memory.persistence)
        if tier == "persistent":
            if not location_known:
                self._ensure_location(conn, location_id, name)
            row["created_version"] = row["changed_version"] = version.get()
        return tier, insert_id(conn, INSERT_MEMORY[tier], row)

    def add_memory(self, location_id: int, location_name: str, memory: Memory) -> bool:
        """Store a memory, routed by its persistence: CORE/PERMANENT on disk, EPHEMERAL in memory.

        Returns False, storing nothing, when a non-superseded memory with exactly the same
        title is already at this location in either tier (the spec's backup de-duplication).
        A memory cannot be added already SUPERSEDED (ValueError). ``location_name`` is
        checked as every write's (memstore.models.check_location_name: TypeError,
        ValueError), before any SQL.
        """
        check_location_id(location_id)
        location_name = check_location_name(location_name)
        memory = check_memory(memory)
        if memory.status is Status.SUPERSEDED:
            raise ValueError("a new memory cannot be SUPERSEDED; use supersede_memory")
        session = memory.persistence is Persistence.EPHEMERAL
        with (self._session_write if session else self._write)(forget=None) as conn:
            if live_title_exists(conn, location_id, memory.title):
                return False
            added = self._insert(conn, location_id, location_name, memory, WriteVersion(conn))
        self._changed(location_id, (), [(added, memory)])
        return True

    def supersede_memory(
        self, location_id: int, location_name: str, old_memory_title: str, new_memory: Memory
    ) -> SupersedeOutcome:
        """Replace the live memory titled ``old_memory_title`` (exact match) with ``new_memory``.

        Allowed: ephemeral→ephemeral, ephemeral→core/permanent (the upgrade: the new memory
        goes to disk), permanent→permanent, core→core, core→permanent. The new memory and
        the supersession are one transaction. Returns a SupersedeOutcome, true when it
        superseded; false, with nothing changed, when a core/permanent memory would be
        superseded by an ephemeral one (FORBIDDEN_TRANSITION), the old title is not live
        here (NOT_FOUND), or the new title is already another live memory's here
        (DUPLICATE_TITLE). ``location_name`` is checked as ``add_memory``'s.
        """
        check_location_id(location_id)
        location_name = check_location_name(location_name)
        old_memory_title = plain_str("old_memory_title", old_memory_title)
        new_memory = check_memory(new_memory)
        if new_memory.status is Status.SUPERSEDED:
            raise ValueError("the new memory cannot itself be SUPERSEDED")
        # an ephemeral memory can only supersede an ephemeral one: the file is not touched
        session = new_memory.persistence is Persistence.EPHEMERAL
        with (self._session_write if session else self._write)(forget=None) as conn:
            # the old memory and any other holder of the new title, in one statement
            old, taken = None, False  # the old memory; another holds the new title
            for found in live_titled(conn, location_id, old_memory_title, new_memory.title):
                if old is None and found.title == old_memory_title:
                    old = found
                elif found.title == new_memory.title:
                    taken = True
            if old is None:
                return SupersedeOutcome.NOT_FOUND
            tier = old.tier
            if not Persistence(old.persistence).may_be_superseded_by(new_memory.persistence):
                # would lose a game mechanic or spawn state after reset
                return SupersedeOutcome.FORBIDDEN_TRANSITION
            if taken:
                return SupersedeOutcome.DUPLICATE_TITLE
            version = WriteVersion(conn)
            self._mark_superseded(conn, tier, old.id, version)
            new_tier, new_id = self._insert(
                conn, location_id, location_name, new_memory, version, tier == "persistent"
            )
            self._link(
                conn,
                version,
                tier,
                old.id,
                new_memory.episode,
                link_turn(new_memory),
                successor=(new_tier, new_id),
            )
        self._changed(location_id, [(tier, old.id)], [((new_tier, new_id), new_memory)])
        return SupersedeOutcome.SUPERSEDED

    @staticmethod
    def _mark_superseded(
        conn: Connection, tier: str, memory_id: int, version: WriteVersion
    ) -> None:
        if tier == "persistent":
            at = version.get()
            record_history(conn, (memory_id,), at, live=True)
            _run(conn, MARK_SUPERSEDED[tier], {"memory_id": memory_id, "version": at})
        else:
            _run(conn, MARK_SUPERSEDED[tier], {"memory_id": memory_id})

    @staticmethod
    def _link(
        conn: Connection,
        version: WriteVersion,
        tier: str,
        memory_id: int,
        episode: int,
        turn: int,
        *,
        successor: tuple[str, int] | None = None,
        reason: str | None = None,
    ) -> None:
        row: dict[str, Any] = {
            "memory_id": memory_id,
            "episode": episode,
            "turn": turn,
            "reason": reason,
            "created_at": version.stamp,
        }
        row["superseded_by_id"] = None
        if tier == "ephemeral":
            row["superseded_by_persistent_id"] = None
            if successor is not None and successor[0] == "persistent":
                row["superseded_by_persistent_id"] = successor[1]
            elif successor is not None:
                row["superseded_by_id"] = successor[1]
        elif successor is not None:
            row["superseded_by_id"] = successor[1]
        _run(conn, INSERT_LINK[tier], row)

    def invalidate_memory(
        self,
        location_id: int,
        memory_title: str,
        reason: str,
        turn: int | None = None,
        *,
        episode: int | None = None,
    ) -> bool:
        """Mark the live memory titled ``memory_title`` SUPERSEDED with no replacement.

        ``reason`` must not be empty. ``turn`` defaults to ``current_turn`` and ``episode``
        to ``current_episode`` (callers that know them, like the manager, pass both); the
        link's episode is never before the memory's own. False if no live memory has exactly
        that title here.
        """
        title = plain_str("memory_title", memory_title)  # the answer's key (titles_of)
        return self.invalidate_memories(location_id, [title], reason, turn, episode=episode)[title]

    def invalidate_memories(
        self,
        location_id: int,
        memory_titles: Iterable[str],
        reason: str,
        turn: int | None = None,
        *,
        episode: int | None = None,
    ) -> dict[str, bool]:
        """Invalidate several memories with one shared reason, in one transaction."""
        check_location_id(location_id)
        reason = check_reason(reason)
        titles = titles_of(memory_titles)
        at_turn = self.current_turn if turn is None else turn
        check_int("turn", at_turn, 0)
        at_episode = self.current_episode if episode is None else episode
        check_int("episode", at_episode, 0, maximum=MAX_EPISODE)
        results: dict[str, bool] = {}
        removed: list[tuple[str, int]] = []
        with self._write(forget=None) as conn:
            version = WriteVersion(conn)
            for title in titles:
                old = find_live(conn, location_id, title)
                if old is None:  # (a title listed twice: invalidated the first time)
                    results.setdefault(title, False)
                    continue
                tier = old.tier
                self._mark_superseded(conn, tier, old.id, version)
                # the clock's episode, never one before the memory's own
                self._link(
                    conn,
                    version,
                    tier,
                    old.id,
                    max(at_episode, old.episode),
                    at_turn,
                    reason=reason,
                )
                removed.append((tier, old.id))
                results[title] = True
        self._changed(location_id, removed, ())
        return results

    def apply_synthesis(
        self,
        location_id: int,
        location_name: str,
        *,
        new_memory: Memory | None,
        supersede_titles: Iterable[str] = (),
        invalidate_titles: Iterable[str] = (),
        invalidation_reason: str | None = None,
        episode: int,
        turn: int,
        log: dict[str, Any] | None = None,
        bookkeeping: Bookkeeping | None = None,
    ) -> AppliedSynthesis:
        """Apply one synthesis decision, and its decision-log row, as ONE transaction.

        The new memory supersedes every live memory in ``supersede_titles`` (a core/permanent
        one is skipped when the new memory is ephemeral); the memories in
        ``invalidate_titles`` are invalidated with ``invalidation_reason``. A title is
        matched exactly; a ``ShownTitle`` (a prompt's handle, from ``resolve_decision``)
        names the very memory the prompt showed, and when that one is no longer live here
        (another agent retired it meanwhile) nothing is retired in its place: it is
        ``stale``. Titles that are not live here are skipped. A new memory whose title is
        already live here (and not being superseded) is not stored. Returns what was
        actually applied; the log row, if given, records that too (column ``applied``).
        """
        check_location_id(location_id)
        location_name = check_clock(location_name, episode, turn)
        if new_memory is not None:
            new_memory = check_memory(new_memory)
            if new_memory.status is Status.SUPERSEDED:
                raise ValueError("a new memory cannot be SUPERSEDED already")
        invalidate = list(invalidate_titles)
        if invalidate:
            check_reason(invalidation_reason)
        if bookkeeping is not None:
            bookkeeping.check()
        # The live memories here before the write, to update rather than reload (below).
        live_before = self._live_cache.get(location_id)
        removed: list[tuple[str, int]] = []
        new_row: list[tuple[tuple[str, int], Memory]] = []
        stale: list[str] = []
        with self._write(forget=None) as conn:
            version = WriteVersion(conn)
            superseded = (
                to_supersede(conn, location_id, supersede_titles, new_memory, stale)
                if new_memory is not None
                else []
            )
            added = False
            if new_memory is not None and not live_title_exists(
                conn,
                location_id,
                new_memory.title,
                [(tier, old_id) for tier, old_id, _title in superseded],
            ):
                for tier, old_id, _title in superseded:
                    self._mark_superseded(conn, tier, old_id, version)
                successor = self._insert(conn, location_id, location_name, new_memory, version)
                for tier, old_id, _title in superseded:
                    self._link(conn, version, tier, old_id, episode, turn, successor=successor)
                    removed.append((tier, old_id))
                new_row.append((successor, new_memory))
                added = True
            else:
                superseded = []
            invalidated: list[str] = []
            for title in invalidate:
                old = find_named(conn, location_id, title, stale, removed)
                if old is None:
                    continue
                self._mark_superseded(conn, old.tier, old.id, version)
                self._link(
                    conn, version, old.tier, old.id, episode, turn, reason=invalidation_reason
                )
                removed.append((old.tier, old.id))
                invalidated.append(str(title))
            applied = AppliedSynthesis(
                location_id=location_id,
                location_name=location_name,
                new_memory=new_memory if added else None,
                superseded=tuple(title for _tier, _id, title in superseded),
                invalidated=tuple(invalidated),
                invalidation_reason=invalidation_reason if invalidated else None,
                stale=tuple(stale),
                episode=episode,
                turn=turn,
            )
            if log is not None:
                _run(
                    conn,
                    INSERT_DECISION,
                    decision_row(
                        log,
                        episode=episode,
                        turn=turn,
                        location_id=location_id,
                        location_name=location_name,
                        applied=applied.model_dump_json(),
                    ),
                )
            if bookkeeping is not None:
                self._bookkeeping(conn, bookkeeping)
        self._changed(location_id, removed, new_row)
        after = live_before.after(removed, new_row) if live_before is not None else None
        if after is not None:  # else it is read again when asked for
            self._live_cache[location_id] = after
        return applied

    def reset_episode(self) -> int:
        """Drop every ephemeral memory (and its links); returns how many were dropped."""
        with self._session_write(forget=None) as conn:
            touched = conn.execute(select(ephemeral_memories.c.location_id)).scalars().all()
            conn.execute(delete(ephemeral_memory_links))
            conn.execute(delete(ephemeral_memories))
        for location_id in set(touched):  # only these locations' views changed
            self._forget(location_id)
        return len(touched)

    def _changed(
        self,
        location_id: int,
        removed: Iterable[tuple[str, int]],
        added: Iterable[tuple[tuple[str, int], Memory]],
    ) -> None:
        """After a committed write here: the view gains and loses rows, the live list goes.
        With no view kept here, nothing is built (a row's line and tokens cost more than
        the rest of this)."""
        self._live_cache.pop(location_id, None)
        if not self._views.holds(location_id):
            return
        markers = self.config.show_persistence_markers
        gone = [(TIER_NUMBER[tier], memory_id) for tier, memory_id in removed]
        rows = [
            view_row(
                TIER_NUMBER[tier],
                memory_id,
                ContextRow(
                    memory.category.value,
                    memory.title,
                    memory.text,
                    memory.persistence.value,
                    memory.status.value,
                ),
                markers,
            )
            for (tier, memory_id), memory in added
            if (TIER_NUMBER[tier], memory_id) not in gone
        ]
        self._views.changed(location_id, gone, rows)
