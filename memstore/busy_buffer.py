"""What waits while another process keeps the database locked past the busy timeout
(StoreBusy), for memstore.synthesis_runner: the syntheses the database refused, the bound
on everything that waits, when to try the database again, and the episodes it could not
number yet. None of it costs a turn anything while the database takes every write.

* **Bounded.** The waiting syntheses, with the manager's buffered bookkeeping (no-op
  decision rows, turn records, visits, map events), are held within MAX_WAITING_SYNTHESES
  syntheses and MAX_WAITING_BYTES (estimated: ``waiting_bytes``). Past it the least
  valuable rows are dropped, the oldest first within a class: (0) decision-log rows of
  calls that changed nothing, and syntheses left with nothing but their decision-log row;
  (1) syntheses of a session (ephemeral) memory that retire nothing, and turn records; (2)
  the rest: persistent memories, retirements, visits, map events. A waiting memory a later
  synthesis at its location was shown, and found nothing new beside (it wrote no memory:
  the re-sighting of a known fact), is as old as that turn (``seen``): what the agent keeps
  seeing is not the first dropped. Texts count as Python holds them (``sys.getsizeof``:
  1, 2 or 4 bytes a character). None of these was ever
  acknowledged as stored; each drop is counted (``syntheses_dropped``,
  ``waiting_rows_dropped``) and the first of a busy stretch logged.
* **Backoff.** After a refusal the store is not asked to write again until its write lock
  is seen free (memstore.lock_probe: a SQLite file's lock tried without waiting from a
  second connection; on PostgreSQL, memstore's writers' lock and its tables'), so a turn
  in a busy stretch waits for nothing and its rows join the waiting ones (counted:
  ``writes_deferred``); the first turn after the lock is free writes them all (a turn
  that decides nothing to write too, while rows wait). A store the probe cannot read
  waits BACKOFF_FIRST_S after the first refusal, twice as long after each further one, at
  most BACKOFF_MAX_S; so does one whose write was refused right after the probe saw its
  lock free (a lock the probe does not see): for the rest of the stretch the probe and
  the clock must both agree. ``flush()`` and ``close()`` still wait for the lock (bounded by the
  busy timeout): the caller asked for the rows to be written.
* **No room.** A write the database refused for want of room or for an I/O error
  (StorageFull: SQLITE_FULL or SQLITE_IOERR, PostgreSQL's disk_full or io_error) is a
  StoreBusy, and waits the same way, within the same bound; counted apart too
  (``store_full``). The probe sees the lock free, so the write refused after it makes
  the clock decide: the doubling backoff, until the database has room again. So does a
  write refused because a table or column it names is gone (SchemaChanged: a downgrade
  under the open store), counted apart too (``store_schema_changed``), until ``memstore
  db upgrade`` brings it back.
* **No server.** A lost connection (DatabaseUnavailable: a PostgreSQL server stopped,
  restarted or out of reach) on the turn's way, a read's or a write's, waits the same way,
  within the same bound; counted apart (``store_unavailable``, not in ``store_busy``).
  Until the backoff's clock says so the store is not asked at all, neither to write nor
  to read (``may_read``), and the lock probe is not asked either: each try may cost a
  connect attempt, up to the connect timeout (memstore.pg_connection.connect_timeout_s),
  so no turn waits for one more than once a backoff period. A read the server answers
  again ends that (``answered``): the probe decides again. A synthesis in the outage sees
  the location's memories as this manager last read them (``last_read``: kept up to date
  with what it wrote since; none where it never read them; on a server, its session
  memories dropped, as they went with the connection) plus what waits.
* **Unnumbered episodes.** An episode that starts while the database is busy cannot be
  numbered (``allocate_episode`` writes). It is played under a provisional number
  (PROVISIONAL_EPISODES and up), never stored: before any write its rows are renumbered
  with the number the database then hands out, oldest episode first.
* **Corrections.** A later turn's synthesis sees the waiting memories as written
  (``live_view``), so it can supersede or invalidate one, or not repeat it; the waiting
  syntheses are applied in order, so the result is the one the database would hold had it
  never been busy. The agent's own reading (``get_location_memory``) shows them once
  written. (A memory dropped past the bound cannot be corrected: a later answer naming it
  retires nothing, as for any title no longer live.)
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from memstore.busy_episodes import EpisodeNumbering
from memstore.busy_rows import (
    applied,
    clock,
    decision_bytes,
    event_bytes,
    named,
    synthesis_bytes,
    synthesis_value,
    turn_bytes,
    visit_bytes,
)
from memstore.errors import DatabaseUnavailable, SchemaChanged, StorageFull
from memstore.lock_probe import LockProbe
from memstore.models import MAX_EPISODE, Memory, Persistence
from memstore.moved_names import forwarding
from memstore.shown_memories import ShownMemories
from memstore.store import MemoryStore
from memstore.turn_log import PendingWrites

__all__ = [
    "BACKOFF_FIRST_S",
    "BACKOFF_MAX_S",
    "MAX_WAITING_BYTES",
    "MAX_WAITING_SYNTHESES",
    "PROVISIONAL_EPISODES",
    "BusyBuffer",
    "LockProbe",
]

log = logging.getLogger("memstore.manager")

#: at most this many refused syntheses wait
MAX_WAITING_SYNTHESES = 256
#: at most this much waits, syntheses and buffered bookkeeping, as ``waiting_bytes``
#: estimates it (the Python objects' size, within about 20%: tests/test_busy_gaps.py,
#: tests/test_busy_review2.py)
MAX_WAITING_BYTES = 1 << 20
#: a store the lock probe cannot read: the first wait before trying again, and the longest
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
#: an episode the database could not number is played as PROVISIONAL_EPISODES + k (k = 1,
#: 2, ... for each such episode of one manager) until it is: a valid episode that no
#: database hands out in practice, never written
PROVISIONAL_EPISODES = MAX_EPISODE - (1 << 32)


class BusyBuffer(EpisodeNumbering):
    """The syntheses the database refused (``syntheses``, oldest first, each as the
    arguments of ``store.apply_synthesis``), the backoff, the bound and the episodes to
    number (see the module docstring). Counters are the manager's."""

    def __init__(self, store: MemoryStore, counters: Counter[str]) -> None:
        self.store = store
        self.counters = counters
        self.syntheses: list[dict[str, Any]] = []
        #: a write was refused and not everything was written since
        self.busy = False
        #: the last refusal, when it was for want of room (StorageFull), until a write
        #: succeeds
        self.no_room: StorageFull | None = None
        #: the last refusal, when a table or column was gone (SchemaChanged), until a
        #: write succeeds
        self.schema_changed: SchemaChanged | None = None
        #: the last refusal, when it was a lost connection (DatabaseUnavailable), until
        #: the server answers again (a read or a write)
        self.unavailable: DatabaseUnavailable | None = None
        #: each location's live memories as this manager last read them (the synthesis's
        #: ``store.memories``), with its own writes since applied: what a synthesis sees
        #: while the server cannot be reached
        self.last_read: dict[int, ShownMemories] = {}
        #: provisional numbers of the episodes the database has not numbered, oldest first
        self.unnumbered: list[int] = []
        #: the number each provisional episode got once the database numbered it
        self.numbered_as: dict[int, int] = {}
        self._provisional = 0
        self._delay = 0.0
        self._retry_at = 0.0
        self._bound_logged = False
        #: id of each list that waits -> (rows measured, their bytes): ``waiting_bytes``
        self._sizes: dict[int, tuple[int, int]] = {}
        #: id of a waiting synthesis seen again -> (it, the (episode, turn) it was seen at)
        self._seen: dict[int, tuple[dict[str, Any], tuple[int, int]]] = {}
        self.probe = LockProbe(store)
        #: the probe said "free" and the write it let through was refused: a lock it does
        #: not see; until the stretch ends, the clock must agree too
        self._probed_free = False
        self._distrust = False

    # --- backoff -------------------------------------------------------------------------

    def may_write(self) -> bool:
        """Whether to ask the store to write now: always when it is not busy; in a busy
        stretch, when its lock is free (or, when that cannot be told, the backoff is
        over). A write not tried is counted (``writes_deferred``)."""
        if not self.busy:
            return True
        if self.unavailable is not None:  # no probe: it would connect (the connect timeout)
            due = time.monotonic() >= self._retry_at
            if not due:
                self.counters["writes_deferred"] += 1
            return due
        try:
            free = self.probe.free()
        except DatabaseUnavailable as exc:  # the probe found the session gone: an outage
            self.lost(exc)
            return False
        self._probed_free = bool(free)
        if free is None or (free and self._distrust):
            free = time.monotonic() >= self._retry_at
        if not free:
            self.counters["writes_deferred"] += 1
        return free

    def lost(self, exc: DatabaseUnavailable) -> None:
        """A probe found the session gone (its own transaction met the lost connection):
        counted and said as a refused call's (``refused``), with the session's memories
        that went with it (review S6 L F1: swallowed, they vanished without a word)."""
        self.refused(exc)
        self.counters["writes_deferred"] += 1
        log.warning("the lock probe found the connection lost: %s%s", exc, self.retry_note())

    def may_read(self) -> bool:
        """Whether to ask the store for a read on the turn's way: always but in an outage
        (``unavailable``), where only once the backoff is over, and in a busy stretch on a
        server while the probe sees a lock that blocks reads (an ACCESS EXCLUSIVE lock of
        a table: review S6 D F1, each read waited the busy timeout), counted
        (``reads_deferred``). The probe's DatabaseUnavailable (the session gone) is raised
        for the caller to count as its read's."""
        if self.unavailable is not None:
            return time.monotonic() >= self._retry_at
        if self.busy and self.probe.readable() is False:
            self.counters["reads_deferred"] += 1
            return False
        return True

    def retry_note(self) -> str:
        """For a log line: when the server is tried again, in an outage ("" otherwise)."""
        if self.unavailable is None:
            return ""
        return (
            f"; what the turns write waits for it, tried again in {self._delay:g} s (until "
            f"then no turn asks the database; the turn that tries waits at most the connect "
            f"or answer timeout)"
        )

    def answered(self) -> None:
        """The server answered a read in an outage: the lock probe decides again."""
        if self.unavailable is not None:
            self.unavailable = None
            self._retry_at = 0.0

    def refused(self, exc: BaseException | None = None) -> None:
        """A write was refused (StoreBusy), or a read or write found no server
        (DatabaseUnavailable): back off. ``exc`` is the refusal (by default the exception
        being handled: this is called from its ``except`` block); one that says the
        database had no room (StorageFull, a StoreBusy) is counted too (``store_full``), so
        is one that found the schema changed (SchemaChanged, a StoreBusy:
        ``store_schema_changed``), a lost connection apart (``store_unavailable``)."""
        refusal = exc if exc is not None else sys.exception()
        self.no_room = refusal if isinstance(refusal, StorageFull) else None
        if self.no_room is not None:
            self.counters["store_full"] += 1
        self.schema_changed = refusal if isinstance(refusal, SchemaChanged) else None
        if self.schema_changed is not None:
            self.counters["store_schema_changed"] += 1
        self.unavailable = refusal if isinstance(refusal, DatabaseUnavailable) else None
        if self.unavailable is not None:
            self.counters["store_unavailable"] += 1
            if self.store.target.is_server:  # the session memories went with the connection
                self.drop_session_memories()
        if self.busy and self._probed_free:  # the probe said free: it does not see this lock
            self._distrust = True
        self._probed_free = False
        self._delay = min(self._delay * 2, BACKOFF_MAX_S) if self.busy else BACKOFF_FIRST_S
        self._retry_at = time.monotonic() + self._delay
        self.busy = True

    def written(self) -> None:
        """Everything that waited was written: the busy stretch is over."""
        self.no_room = self.schema_changed = self.unavailable = None
        if self.busy:
            self.busy = False
            self._bound_logged = False
            self._distrust = self._probed_free = False
            self._sizes.clear()
            self._seen.clear()
            self.probe.close()

    def first_written(self) -> None:
        """The oldest waiting synthesis was written (or failed for good): it waits no more."""
        self._seen.pop(id(self.syntheses.pop(0)), None)

    def seen(
        self,
        location_id: int,
        shown: ShownMemories,
        retired: Iterable[str],
        when: tuple[int, int],
    ) -> None:
        """A synthesis at ``location_id`` at ``when`` (episode, turn) was ``shown`` these
        memories and wrote no new one, retiring only ``retired``: the waiting memories it
        kept count as of ``when`` in the drop order."""
        ids = {id(memory) for memory in shown}
        names = list(retired)
        for synthesis in self.syntheses:
            memory = synthesis["new_memory"]
            if (
                synthesis["location_id"] == location_id
                and id(memory) in ids
                and not named(names, memory, shown)
            ):
                self._seen[id(synthesis)] = (synthesis, when)

    def status(self, pending: PendingWrites) -> dict[str, int]:
        """The manager's status entries of what waits (``get_status``)."""
        return {
            "syntheses_waiting": len(self.syntheses),
            # estimated (``waiting_bytes``); 0 when nothing waits
            "waiting_bytes": self.waiting_bytes(pending) if self.busy or self.syntheses else 0,
            # writes not tried in a busy stretch, the lock not free yet: a turn's (what it
            # decided, or, after a turn that decided nothing, what waits), an episode's end
            "writes_deferred": self.counters["writes_deferred"],
            # reads not tried in a busy stretch on a server: a lock blocked them (may_read)
            "reads_deferred": self.counters["reads_deferred"],
            # dropped past the bound: never written (MAX_WAITING_SYNTHESES, _BYTES)
            "syntheses_dropped": self.counters["syntheses_dropped"],
            "waiting_rows_dropped": self.counters["waiting_rows_dropped"],
            # episodes played while the database could not number them, still unnumbered
            "episodes_unnumbered": len(self.unnumbered),
            # writes the database refused for want of room (StorageFull: a full disk, an
            # I/O error), counted in store_busy too: what they wrote waits the same way
            "store_full": self.counters["store_full"],
            # calls refused because a table or column was gone (SchemaChanged: the schema
            # changed under the open store), counted in store_busy too: what they wrote
            # waits the same way, for ``memstore db upgrade``
            "store_schema_changed": self.counters["store_schema_changed"],
            # reads and writes that found no server (DatabaseUnavailable: a lost
            # connection), not counted in store_busy: what the turns wrote waits the same way
            "store_unavailable": self.counters["store_unavailable"],
            # writes whose COMMIT's answer was lost, found committed by their receipt
            # (memstore.commit_doubt): what they wrote is not counted in memories_written
            "commits_in_doubt_found": self.counters["commits_in_doubt_found"],
        }

    # --- the bound ------------------------------------------------------------------------

    def waiting_bytes(self, pending: PendingWrites) -> int:
        """What waits, estimated in bytes (the bound's measure). Each row is measured once:
        the lists only grow at their end while rows wait, and lose rows only here or all
        at once when written (``written``; ``resized`` after any other change)."""
        total = 0
        for lane in self._lanes(pending):
            rows, size = lane[1], lane[2]
            counted, measured = self._sizes.get(id(rows), (0, 0))
            if counted > len(rows):  # emptied elsewhere: measured again
                counted, measured = 0, 0
            if counted < len(rows):
                measured += sum(size(row) for row in rows[counted:])
                self._sizes[id(rows)] = (len(rows), measured)
            total += measured
        return total

    def resized(self) -> None:
        """Rows that wait changed size (``waiting_bytes`` measures them again)."""
        self._sizes.clear()

    def bound(self, pending: PendingWrites) -> None:
        """Drop the least valuable of what waits until it is within the bound."""
        total = self.waiting_bytes(pending)
        while len(self.syntheses) > MAX_WAITING_SYNTHESES or total > MAX_WAITING_BYTES:
            dropped = self._drop_one(pending, syntheses_only=total <= MAX_WAITING_BYTES)
            if not dropped:
                return
            total -= dropped

    def _lanes(self, pending: PendingWrites) -> list[tuple[Any, list[Any], Any, Any]]:
        """Each list that waits: (its rows' value class, or what tells it, the list, size,
        age)."""
        return [
            (synthesis_value, self.syntheses, synthesis_bytes, self._synthesis_age),
            (0, pending.decisions, decision_bytes, clock),
            (1, pending.turns, turn_bytes, clock),
            (2, pending.visits, visit_bytes, lambda visit: (visit[2], 0)),
            (2, pending.map_events, event_bytes, clock),
        ]

    def _drop_one(self, pending: PendingWrites, *, syntheses_only: bool) -> int:
        """Drop the least valuable row that waits, the oldest of its class; its size."""
        lanes = self._lanes(pending)[:1] if syntheses_only else self._lanes(pending)
        for value in (0, 1, 2):
            found: tuple[Any, int, list[Any], Any] | None = None
            for number, (value_of, rows, size, age) in enumerate(lanes):
                if isinstance(value_of, int):  # one class for the whole list
                    index = 0 if rows and value_of == value else None
                else:  # the oldest of the class (a synthesis seen again is as old as then)
                    ages = [(age(row), i) for i, row in enumerate(rows) if value_of(row) == value]
                    index = min(ages)[1] if ages else None
                if index is not None and (found is None or age(rows[index]) < found[0]):
                    found = (age(rows[index]), index, rows, (number, size))
            if found is None:
                continue
            _age, index, rows, (number, size) = found
            row = rows.pop(index)
            if number == 0:
                self._seen.pop(id(row), None)
            dropped = max(1, int(size(row)))
            counted, measured = self._sizes.get(id(rows), (0, 0))
            if index < counted:
                self._sizes[id(rows)] = (counted - 1, measured - dropped)
            self.counters["syntheses_dropped" if number == 0 else "waiting_rows_dropped"] += 1
            if not self._bound_logged:
                self._bound_logged = True
                log.warning(
                    "what waits for the database (busy, full or out of reach) passed its "
                    "bound (%d syntheses, %d bytes): the least valuable rows are dropped, "
                    "the oldest first (counted: syntheses_dropped, waiting_rows_dropped)",
                    MAX_WAITING_SYNTHESES,
                    MAX_WAITING_BYTES,
                )
            return dropped
        return 0

    def _synthesis_age(self, synthesis: dict[str, Any]) -> tuple[int, int]:
        """When it was produced, or last seen again (``seen``)."""
        entry = self._seen.get(id(synthesis))
        if entry is not None and entry[0] is synthesis:
            return entry[1]
        return synthesis["episode"], synthesis["turn"]

    # --- episodes the database could not number (numbering: memstore.busy_episodes) -----

    def provisional_episode(self) -> int:
        """A provisional number for an episode the database could not number now."""
        self._provisional += 1
        episode = PROVISIONAL_EPISODES + self._provisional
        self.unnumbered.append(episode)
        return episode

    # --- corrections ------------------------------------------------------------------------

    def live_view(self, location_id: int, stored: Sequence[Memory]) -> ShownMemories:
        """The live memories at ``location_id`` as they will be once the waiting syntheses
        are written, in order (``store.apply_synthesis``'s rules): ``stored`` (as
        ``store.memories`` lists them, rows kept) less what they retire, plus what they
        add (no row: a later answer names it by its title)."""
        rows = stored.rows if isinstance(stored, ShownMemories) else None
        shown = ShownMemories(stored, rows)
        for synthesis in self.syntheses:
            if synthesis["location_id"] == location_id:
                shown = applied(shown, synthesis)
        return shown

    # --- what a synthesis sees while the server cannot be reached ---------------------------

    def wrote(self, synthesis: dict[str, Any]) -> None:
        """``synthesis`` was written: the location's ``last_read`` shows it."""
        location_id = synthesis["location_id"]
        seen = self.last_read.get(location_id)
        if seen is not None:
            self.last_read[location_id] = applied(seen, synthesis)

    def unread(self, location_id: int) -> ShownMemories:
        """The memories at ``location_id`` as last read (none if never), for a synthesis
        the server cannot answer (``live_view`` adds what waits)."""
        seen = self.last_read.get(location_id)
        return ShownMemories() if seen is None else ShownMemories(seen, seen.rows)

    def drop_session_memories(self) -> None:
        """The session (ephemeral) memories are gone (``reset_episode``, or a server's
        lost connection): ``last_read`` no longer shows them."""
        for location_id, seen in self.last_read.items():
            if any(memory.persistence is Persistence.EPHEMERAL for memory in seen):
                kept = ShownMemories(rows=seen.rows)
                kept.extend(m for m in seen if m.persistence is not Persistence.EPHEMERAL)
                self.last_read[location_id] = kept


#: names that moved when this module was split (issue 15), found here as before
__getattr__ = forwarding(
    __name__,
    {
        name: "memstore.busy_rows"
        for name in ("MEMORY_OVERHEAD_BYTES", "ROW_OVERHEAD_BYTES", "SYNTHESIS_OVERHEAD_BYTES")
    },
)
