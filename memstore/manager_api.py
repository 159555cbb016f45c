"""Spec 004's memory operations on the manager (``SimpleMemoryManager`` inherits them).

Spec 004 calls them on the manager: ``invalidate_memory(s)``, ``add_memory``,
``supersede_memory`` and the counts. Each is the store's, with two differences a game loop
needs:

* the manager's clock: ``turn`` defaults to the turn the manager is at (the last action
  it recorded) and the episode is the manager's, so an invalidation is dated when the
  agent learned it (the store's own default, ``current_turn``, is the store's clock, which
  the manager never sets);
* another process keeping the database locked past the busy timeout (StoreBusy), or a
  database with no room for the write (StorageFull, a StoreBusy: a full disk, an I/O
  error), or a server that cannot be reached (DatabaseUnavailable: a lost connection),
  does not reach the agent loop: it is counted (``get_status()["store_busy"]``, and
  ``["store_full"]``; a lost connection in ``["store_unavailable"]`` alone), logged, and
  answered as "not done" (False, ``{title: False}``, ``SupersedeOutcome.STORE_BUSY``);
* they keep to the busy stretch the turns are in (memstore.busy_buffer): while rows wait
  for the database, what waits is written first (in order, without waiting for the lock),
  and while its lock is not free (the probe's answer; in an outage, the backoff's clock)
  they are not even tried: "not done" at once, counted (``writes_deferred``). An episode
  the database has not numbered yet writes nothing under its provisional number: "not
  done" until it is numbered.

A caller's mistake (a blank reason, a wrong type, a location name ``record_action_outcome``
would refuse: memstore.models.check_location_name) is still a ValueError or TypeError, busy
or not. Every text is used as a plain str (memstore.models.plain_str).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from memstore.errors import DatabaseUnavailable, StoreBusy, refusal_counter
from memstore.models import (
    Memory,
    Persistence,
    check_location_id,
    check_location_name,
    plain_str,
)
from memstore.rows import SupersedeOutcome, check_memory, check_reason, titles_of

if TYPE_CHECKING:
    from memstore.store import MemoryStore
    from memstore.synthesis_runner import SynthesisRunner

__all__ = ["SpecMemoryApi"]

T = TypeVar("T")

log = logging.getLogger("memstore.manager")


#: what a refusal's log line says, by its counter (memstore.errors.refusal_counter)
_WHY = {
    "store_unavailable": "the database is unreachable",
    "store_full": "the database has no room",
    "store_schema_changed": "the database's schema changed",
    "store_busy": "the database is busy",
}


class SpecMemoryApi:
    """The memory operations spec 004 calls on the manager (see the module's docstring)."""

    store: MemoryStore
    counters: Counter[str]
    turn: int
    _synthesis: SynthesisRunner

    @property
    def episode(self) -> int:  # pragma: no cover - the manager's own property
        raise NotImplementedError

    def _flush(self, *, wait: bool) -> bool:  # pragma: no cover - the manager's own
        raise NotImplementedError

    def _refused(self, exc: StoreBusy | DatabaseUnavailable, what: str) -> None:
        """Count and log (one line) a call the database refused for now: busy, or with no
        room (StorageFull, a StoreBusy: counted in ``store_full`` too), or with its schema
        changed under the store (SchemaChanged, a StoreBusy: ``store_schema_changed`` too),
        or a server that cannot be reached (DatabaseUnavailable: counted in
        ``store_unavailable`` alone)."""
        buffer = self._synthesis.buffer
        buffer.refused(exc)  # a busy stretch: the turns wait for nothing now
        if isinstance(exc, StoreBusy):
            self.counters["store_busy"] += 1
        why = _WHY[refusal_counter(exc)]
        log.warning("%s: not done (%s): %s%s", what, why, exc, buffer.retry_note())

    def _ready(self) -> bool:
        """Whether to write now: outside a busy stretch, yes; in one, once what waits is
        written (without waiting for the lock: not tried while it is held, counted) and
        every episode played unnumbered is numbered."""
        runner = self._synthesis
        buffer = runner.buffer
        if buffer.busy and not buffer.may_write():  # the lock is held: counted
            return False
        if (buffer.busy or runner.waiting) and not self._flush(wait=True):  # seen free
            return False
        if buffer.unnumbered:
            runner.number_episodes()
        return not buffer.unnumbered

    def _session_only(self, memory: Memory) -> bool:
        """Whether to write ``memory`` at once in a busy stretch, the writers' lock held: an
        ephemeral memory (spec 002: "never touch disk"; review S6 A F7) when nothing waits
        that it could come before (a waiting synthesis: F F4, a supersession of a waiting
        memory was "not found"), of an episode already numbered (F F5), and, on a server,
        with its tables readable now (F F2: a lock that blocks reads held it the busy
        timeout)."""
        buffer = self._synthesis.buffer
        if not (memory.persistence is Persistence.EPHEMERAL and buffer.busy):
            return False
        if buffer.syntheses or memory.episode in buffer.unnumbered:
            return False
        try:
            return buffer.probe.readable() is not False
        except DatabaseUnavailable as exc:  # the session is gone: said, "not done" now
            self._refused(exc, f"an ephemeral write of {memory.title!r}")
            return False

    def _written(self, memory: Memory | None, write: Callable[[], T], what: str) -> T:
        """``write()`` (of ``memory``; None: of memories in either tier): with a receipt on a
        server when it may go to disk (a COMMIT whose answer was lost is settled by it:
        memstore.commit_doubt). A lost connection settled as committed is done, and still
        said: the session's ephemeral memories went with it (counted in
        ``store_unavailable``, logged; review S6 H F2)."""
        if memory is not None and memory.persistence is Persistence.EPHEMERAL:
            return write()  # (the session's: lost with it)
        doubt = self._synthesis.doubt
        answer = doubt.receipted(write)
        if doubt.lost is not None:
            self.counters["store_unavailable"] += 1
            if self.store.target.is_server:
                self._synthesis.buffer.drop_session_memories()
            log.warning(
                "%s: done (its receipt shows the COMMIT whose answer was lost landed), but "
                "the connection was lost, and this agent's ephemeral memories went with it: "
                "%s",
                what,
                doubt.lost,
            )
        return answer

    def _stored_episode_of(self, memory: Memory) -> Memory:
        """``memory`` with the number its episode is stored under: a caller that read
        ``episode`` during a busy stretch holds a provisional number, never stored."""
        episode = self._synthesis.buffer.stored_episode(memory.episode)
        return (
            memory if episode == memory.episode else memory.model_copy(update={"episode": episode})
        )

    def add_memory(self, location_id: int, location_name: str, memory: Memory) -> bool:
        """``MemoryStore.add_memory``; False, storing nothing, also when the database is
        busy (counted)."""
        check_location_id(location_id)  # a caller's mistake raises, busy or not
        location_name = check_location_name(location_name)
        check_memory(memory)
        if not self._session_only(memory) and not self._ready():
            return False
        try:
            added = self._written(
                memory,
                lambda: self.store.add_memory(
                    location_id, location_name, self._stored_episode_of(memory)
                ),
                f"add_memory {memory.title!r} at {location_id}",
            )
        except (StoreBusy, DatabaseUnavailable) as exc:
            self._refused(exc, f"add_memory {memory.title!r} at {location_id}")
            return False
        self.counters["memories_written"] += int(added)  # (as a synthesis's: S6 J F1)
        return added

    def supersede_memory(
        self, location_id: int, location_name: str, old_memory_title: str, new_memory: Memory
    ) -> SupersedeOutcome:
        """``MemoryStore.supersede_memory``; ``SupersedeOutcome.STORE_BUSY`` (false) when the
        database is busy (counted)."""
        check_location_id(location_id)
        location_name = check_location_name(location_name)
        old_memory_title = plain_str("old_memory_title", old_memory_title)
        check_memory(new_memory)
        if not self._session_only(new_memory) and not self._ready():
            return SupersedeOutcome.STORE_BUSY
        try:
            outcome = self._written(
                new_memory,
                lambda: self.store.supersede_memory(
                    location_id,
                    location_name,
                    old_memory_title,
                    self._stored_episode_of(new_memory),
                ),
                f"supersede_memory {old_memory_title!r} at {location_id}",
            )
        except (StoreBusy, DatabaseUnavailable) as exc:
            self._refused(exc, f"supersede_memory {old_memory_title!r} at {location_id}")
            return SupersedeOutcome.STORE_BUSY
        if outcome is SupersedeOutcome.SUPERSEDED:  # (counted as a synthesis's: S6 J F1)
            self.counters["memories_written"] += 1
            self.counters["supersessions"] += 1
        elif outcome is SupersedeOutcome.FORBIDDEN_TRANSITION:  # (spec 004: a warning, J F2)
            self.counters["forbidden_transitions"] += 1
            log.warning(
                "supersede_memory %r at %d: not done: %s (the new memory is %s)",
                old_memory_title,
                location_id,
                outcome.value,
                new_memory.persistence.value,
            )
        return outcome

    def invalidate_memory(
        self, location_id: int, memory_title: str, reason: str, turn: int | None = None
    ) -> bool:
        """``MemoryStore.invalidate_memory`` at ``turn`` (default: the manager's turn) of
        the manager's episode; False also when the database is busy (counted)."""
        title = plain_str("memory_title", memory_title)  # the answer's key (titles_of)
        return self.invalidate_memories(location_id, [title], reason, turn)[title]

    def invalidate_memories(
        self,
        location_id: int,
        memory_titles: Iterable[str],
        reason: str,
        turn: int | None = None,
    ) -> dict[str, bool]:
        """``MemoryStore.invalidate_memories`` at ``turn`` (default: the manager's turn) of
        the manager's episode: each title with whether it was invalidated (all False when
        the database is busy, counted)."""
        check_location_id(location_id)
        reason = check_reason(reason)
        titles = titles_of(memory_titles)
        if not self._ready():
            return dict.fromkeys(titles, False)
        episode = self.episode
        if self._synthesis.buffer.unnumbered:  # it could not be numbered (StoreBusy, counted)
            return dict.fromkeys(titles, False)
        at_turn = self.turn if turn is None else turn
        try:
            results = self._written(
                None,
                lambda: self.store.invalidate_memories(
                    location_id, titles, reason, at_turn, episode=episode
                ),
                f"invalidate_memories {len(titles)} at {location_id}",
            )
        except (StoreBusy, DatabaseUnavailable) as exc:
            self._refused(exc, f"invalidate_memories {len(titles)} at {location_id}")
            return dict.fromkeys(titles, False)
        self.counters["invalidations"] += sum(results.values())  # (S6 J F1)
        return results

    def get_ephemeral_count(self, location_id: int | None = None) -> int:
        """``MemoryStore.get_ephemeral_count``: live ephemeral memories (here, or all).
        Like the other counts, a question for monitoring, not a turn's: a refusal is
        raised in memstore's one line (StoreBusy, SchemaChanged, DatabaseUnavailable)."""
        return self.store.get_ephemeral_count(location_id)

    def get_persistent_count(self, location_id: int | None = None) -> int:
        """``MemoryStore.get_persistent_count``: live core and permanent memories."""
        return self.store.get_persistent_count(location_id)

    def get_memory_breakdown(self, location_id: int) -> dict[str, int]:
        """``MemoryStore.get_memory_breakdown``: live memories here by persistence."""
        return self.store.get_memory_breakdown(location_id)
