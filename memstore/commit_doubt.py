"""Writes whose COMMIT's answer a lost connection swallowed, for memstore.synthesis_runner.

When the connection to a PostgreSQL server is lost during a COMMIT, the writer cannot tell
whether the transaction was committed: the store's DatabaseUnavailable says "may or may
not have been committed". The manager keeps what it was writing and writes it again once
the server answers; a memory is not stored twice (one live memory per title), but without
a check its turn records, decision-log rows, visits and map events would be.

So on a server each of the runner's write transactions inserts a receipt
(``write_receipts``, ``Bookkeeping.receipt``). After a lost connection, before writing
anything else, the runner asks whether that receipt is there (``CommitDoubt.settle``):

* it is: the transaction was committed. The synthesis it applied waits no more, and the
  buffered rows it carried are taken out of what waits (by identity: rows buffered since
  stay). Counted (``counters["commits_in_doubt_found"]``).
* it is not: nothing was written; everything is written again as it waits.

A receipt is replaced by the writer's next committed transaction (``forget_receipts``);
the last one of a manager stays (a close that wrote to the server once more could wait
for a server that stopped answering), and the first write of every manager deletes the
receipts older than ``RECEIPTS_KEPT``. So the table holds one row per manager run in that
time.
SQLite answers its COMMIT in the same process: no receipt is written there, and nothing
here costs a turn anything.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from memstore.busy_buffer import BusyBuffer
from memstore.errors import DatabaseUnavailable, StoreBusy
from memstore.receipts import write_receipt
from memstore.rows import Bookkeeping
from memstore.store import MemoryStore
from memstore.store_core import IN_DOUBT
from memstore.turn_log import PendingWrites

__all__ = ["CommitDoubt"]

T = TypeVar("T")


@dataclass(frozen=True)
class _Attempt:
    """One write transaction: its receipt, the synthesis it applies (None: the bookkeeping
    alone) and the buffered rows it carries (empty for a waiting synthesis alone)."""

    receipt: str
    synthesis: dict[str, Any] | None
    rows: tuple[tuple[object, ...], ...] = ()


def _not_committed(lost: DatabaseUnavailable) -> DatabaseUnavailable:
    """``lost`` saying that its write was not committed, where it is known (review S6 H
    F3: "may or may not have been committed", where the receipt said it was not)."""
    return DatabaseUnavailable(
        str(lost).replace(IN_DOUBT, "what this call was writing was not committed")
    )


class CommitDoubt:
    """The runner's receipts: ``with_pending`` or ``alone`` before each write, then
    ``committed`` or ``failed``; ``settle`` before any write after a lost connection."""

    def __init__(self, store: MemoryStore, pending: PendingWrites, counters: Counter[str]):
        self.store = store
        self.pending = pending
        self.counters = counters
        #: only a server's COMMIT can be lost on the way back
        self.enabled = store.target.is_server
        self._trying: _Attempt | None = None
        self._doubt: _Attempt | None = None
        #: receipts of committed transactions: the next write deletes them
        self._forget: list[str] = []
        #: the receipts older than RECEIPTS_KEPT were deleted (by this manager's first)
        self._pruned = False
        #: the lost connection of the last ``receipted`` write, settled as committed
        self.lost: DatabaseUnavailable | None = None

    def with_pending(self, synthesis: dict[str, Any] | None) -> Bookkeeping:
        """What the store's write takes with ``synthesis`` (None: the bookkeeping alone):
        the buffered rows, and on a server a new receipt (when there is a write at all)."""
        rows = self.pending.bookkeeping()
        if not self.enabled or (synthesis is None and rows.empty):
            return rows  # (nothing to write: the store writes no transaction)
        return self._receipted(rows, _Attempt("", synthesis, self.pending.snapshot()))

    def alone(self, synthesis: dict[str, Any]) -> Bookkeeping | None:
        """What the store's write of a waiting ``synthesis`` takes: on a server, a receipt."""
        if not self.enabled:
            return None
        return self._receipted(Bookkeeping(), _Attempt("", synthesis))

    def _receipted(self, rows: Bookkeeping, attempt: _Attempt) -> Bookkeeping:
        attempt = replace(attempt, receipt=uuid.uuid4().hex)
        self._trying = attempt
        return replace(
            rows,
            receipt=attempt.receipt,
            forget_receipts=tuple(self._forget),
            prune_receipts=not self._pruned,
        )

    def receipted(self, write: Callable[[], T]) -> T:
        """``write()``, one of the store's writes (the manager's spec-004 writes), on a
        server in one transaction with a receipt: a COMMIT whose answer a lost connection
        swallowed is settled at once by it (review S6 D F4: a committed write answered
        "not done", and its retry "not found"). Committed: the write's own answer, counted
        (``commits_in_doubt_found``); not, or the server cannot say yet: the
        DatabaseUnavailable. The receipt is deleted by the next write, as a turn's is.
        SQLite: ``write()`` as it is."""
        self.lost = None
        if not self.enabled:
            return write()
        receipt = uuid.uuid4().hex
        answer: list[T] = []
        try:
            with self.store.transaction(write=True, changes_memories=False) as conn:
                # (and the receipts this writer no longer needs: review S6 H F1, each such
                # write left its own behind)
                write_receipt(conn, receipt, self._forget, prune=not self._pruned)
                answer.append(write())
        except DatabaseUnavailable as lost:
            if not answer:  # lost before the COMMIT: nothing was committed
                raise _not_committed(lost) from lost
            try:
                landed = self.store.has_receipt(receipt)
            except (StoreBusy, DatabaseUnavailable):
                raise lost from lost.__cause__  # in doubt still: "not done", as it says
            if not landed:
                raise _not_committed(lost) from lost
            self.counters["commits_in_doubt_found"] += 1
            # (the session went, and its ephemeral tier: the caller says so, as committed)
            self.lost = DatabaseUnavailable(
                str(lost).replace(IN_DOUBT, "what this call was writing was committed")
            )
        self._forget, self._pruned = [receipt], True
        return answer[0]

    def committed(self) -> None:
        """The write's COMMIT was answered: its receipt is no longer needed, nor the ones
        it deleted."""
        attempt, self._trying = self._trying, None
        if attempt is not None:
            self._forget = [attempt.receipt]
            self._pruned = True

    def failed(self, *, connection_lost: bool) -> None:
        """The write raised. A lost connection leaves it in doubt (``settle`` asks); any
        other refusal (a lock, a full disk) rolled it back."""
        attempt, self._trying = self._trying, None
        if connection_lost and attempt is not None:
            self._doubt = attempt

    def settle(self, buffer: BusyBuffer) -> None:
        """Before any other write: was the write in doubt committed? (A read: StoreBusy or
        DatabaseUnavailable pass through, and it stays in doubt.) If so, what it wrote
        waits no more."""
        attempt = self._doubt
        if attempt is None:
            return
        landed = self.store.has_receipt(attempt.receipt)
        self._doubt = None
        if not landed:
            return
        self.counters["commits_in_doubt_found"] += 1
        self._forget.append(attempt.receipt)
        waiting = buffer.syntheses
        if attempt.synthesis is not None and waiting and waiting[0] is attempt.synthesis:
            buffer.wrote(attempt.synthesis)
            buffer.first_written()
        if attempt.rows:
            self.pending.drop_written(attempt.rows)
