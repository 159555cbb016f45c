"""What ``SimpleMemoryManager`` answers without recording a turn (it inherits them): what
the agent reads at a location (``get_location_memory``, with the room's exits line), the
map it records into, and the status for monitoring (``get_status``, the LLM's failures,
tokens and cost). A read the database refused, or one that found no server, is counted and
logged, never raised (memstore.manager says how).
"""

from __future__ import annotations

import time
from collections import Counter
from functools import cached_property
from typing import Any

from memstore.config import MemstoreConfig
from memstore.errors import DatabaseUnavailable, StoreBusy
from memstore.flagged import FlaggedMemories
from memstore.manager_api import SpecMemoryApi
from memstore.map_graph import MapEvent, with_exits_line
from memstore.map_store import MapStore, MapView
from memstore.tokens import count_tokens
from memstore.turn_log import PendingWrites

__all__ = ["MAP_RECHECK_S", "ManagerReads"]

#: the agent's exits line may miss another process's map writes for this long (seconds);
#: this manager's own turns show at once
MAP_RECHECK_S = 0.05


#: ``get_status()["state"]``'s keys (spec 004's lifecycle: what the manager is at); the
#: others but "type" are its ``"metrics"``
STATUS_STATE_KEYS = ("mode", "model", "episode", "turn")
_NOT_METRICS = frozenset({"type", *STATUS_STATE_KEYS})


class ManagerReads(SpecMemoryApi):
    """The manager's reads and status (see the module's docstring)."""

    config: MemstoreConfig
    mode: str
    model: str
    _episode: int | None
    _pending: PendingWrites
    last_context_tokens: int
    _context_seconds: float

    # --- the LLM's figures -------------------------------------------------------------------

    @property
    def failures(self) -> Counter[str]:
        """Failed synthesis calls, by kind."""
        return self._synthesis.failures

    @property
    def last_failure(self) -> str | None:
        """The last failed synthesis, "kind: message" (None before any)."""
        return self._synthesis.last_failure

    @property
    def tokens(self) -> dict[str, int]:
        """The LLM's prompt and completion tokens, summed over the calls."""
        return self._synthesis.tokens

    @property
    def cost_usd(self) -> float:
        return self._synthesis.cost_usd

    # --- what the agent reads: the location's memories, the map ---------------------------

    @cached_property
    def map(self) -> MapStore:
        """The map this manager records every turn into (memstore.map_store), over the
        same store; its queries take ``pending=manager.pending_map_events``."""
        return MapStore(self.store, self.config)

    @property
    def pending_map_events(self) -> list[MapEvent]:
        """Map events recorded but not written yet (they go with the next bookkeeping)."""
        return self._pending.map_events

    @cached_property
    def _map_view(self) -> MapView:
        """The map as this agent sees it: stored, plus its buffered events (kept up to
        date event by event; another process's writes show within MAP_RECHECK_S)."""
        return MapView(self.map, MAP_RECHECK_S)

    def _with_exits_line(self, text: str, location_id: int) -> str:
        """``text`` and the room's exits line, the fullest one that keeps the whole within
        the token budget (the memories are never cut for it); ``text`` alone if none fits
        or the room is not on the map."""
        view = self._map_view
        room = view.exits(location_id, self._pending.map_events)
        done = view.memo.get(location_id)
        if done is not None and done[0] is room and done[1] == text:
            return done[2]  # nothing changed since the last turn here
        combined = with_exits_line(text, room, self.config.token_budget)
        view.memo[location_id] = (room, text, combined)
        return combined

    def get_location_memory(self, location_id: int | None) -> str:
        """What the agent should read at this location (see MemoryStore.get_location_memory),
        "" for a ``location_id`` of None (no location object: spec 004's orchestrator),
        and, when ``map_exits_line`` is on, one line of the room's known exits and untried
        directions (memstore.map_graph.exits_line) within the same token budget.

        Its size in tokens is kept as ``last_context_tokens`` and goes into the next turn
        record, for the tokens-per-turn metric; the time it took goes into that record's
        overhead. A read the database refused (StoreBusy: a lock past the busy timeout;
        StorageFull: an I/O error), or one that found no server (DatabaseUnavailable: a
        lost connection), is counted and logged, never raised: "" this turn. In an outage
        the server is not asked again before the backoff's clock says so (a connect attempt
        may cost the connect timeout): "" at once (memstore.busy_buffer).
        """
        started = time.perf_counter()
        buffer = self._synthesis.buffer
        text = ""  # no location object this turn (spec 004's orchestrator), the server
        # gone (not asked before the backoff is over), or a lock held in a busy stretch
        # that blocks reads (memstore.busy_buffer.may_read), or a read refused
        if location_id is not None:
            try:
                if buffer.may_read():
                    text = self.store.get_location_memory(location_id)
                    if self.config.map_exits_line:
                        text = self._with_exits_line(text, location_id)
                    if buffer.unavailable is not None:
                        buffer.answered()
            except (StoreBusy, DatabaseUnavailable) as exc:  # a read refused: nothing to show
                self._refused(exc, f"get_location_memory({location_id})")
                text = ""
        self.last_context_tokens = count_tokens(text) if text else 0
        self._context_seconds += time.perf_counter() - started
        return text

    # --- monitoring --------------------------------------------------------------------------

    def get_status(self) -> dict[str, Any]:
        """Manager status for monitoring (spec 004 "Status"). In an outage (a lost
        connection: ``store_unavailable``) the database's own counts (``memories_by_tier``,
        ``flagged_memories``) are None: the server is asked as the turns ask it (the
        backoff's clock), and one that does not answer is counted and logged, never
        raised."""
        episode = self._episode
        database = self._database_status()
        status = {
            "type": "SimpleMemoryManager",
            "mode": self.mode,
            "model": self.model,
            # None between episodes (numbered when played) and while it cannot be numbered
            "episode": None if self._episode in self._synthesis.buffer.unnumbered else episode,
            "turn": self.turn,
            "turns_seen": self.counters["turns"],
            "triggers_fired": self.counters["triggers_fired"],
            "llm_calls": self.counters["llm_calls"],
            "failures": dict(self.failures),
            "hallucinated_references": self.counters["hallucinated_references"],
            "core_downgrades": self.counters["core_downgrades"],
            "forbidden_transitions": self.counters["forbidden_transitions"],
            "duplicates_dropped": self.counters["duplicates_dropped"],
            "memories_written": self.counters["memories_written"],
            "supersessions": self.counters["supersessions"],
            "invalidations": self.counters["invalidations"],
            # a memory the answer retired by its handle was retired by another agent while
            # the model answered: skipped (memstore.store.apply_synthesis's ``stale``)
            "stale_references": self.counters["stale_references"],
            # usage numbers (tokens, cost) no database holds: dropped (memstore.llm)
            "usage_refused": self.counters["usage_refused"],
            # the database stayed locked by another process past the busy timeout
            "store_busy": self.counters["store_busy"],
            # keys of a plain z_machine_context dict that memstore does not read
            "context_keys_ignored": self.counters["context_keys_ignored"],
            # record_action_outcome calls with no location (location_id None)
            "turns_without_location": self.counters["turns_without_location"],
            **self._synthesis.buffer.status(self._pending),
            "tokens": dict(self.tokens),
            "cost_usd": self.cost_usd,
            **database,
        }
        # spec 004's lifecycle shape, beside the flat keys: what the manager is at, and
        # what it counted
        state = {key: status[key] for key in STATUS_STATE_KEYS}
        metrics = {key: value for key, value in status.items() if key not in _NOT_METRICS}
        return {**status, "state": state, "metrics": metrics}

    def _database_status(self) -> dict[str, Any]:
        """``get_status``'s entries from the database (None in an outage)."""
        buffer = self._synthesis.buffer
        try:
            readable = buffer.may_read()
        except DatabaseUnavailable as exc:  # (the read probe found the session gone)
            self._refused(exc, "get_status")
            readable = False
        if readable:
            try:
                store_status = self.store.get_status()
                flagged = FlaggedMemories(self.store).stats()
            except (DatabaseUnavailable, StoreBusy) as exc:
                self._refused(exc, "get_status")
            else:
                buffer.answered()
                return {
                    "memories_by_tier": store_status["memories_by_tier"],
                    "flagged_memories": flagged,
                    "database": store_status["database"],
                }
        return {
            "memories_by_tier": None,
            "flagged_memories": None,
            "database": self.store.target.display,
        }
