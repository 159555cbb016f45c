"""Write receipts (``write_receipts``): how a writer on a server learns whether a COMMIT
whose answer a lost connection swallowed was committed (memstore.commit_doubt). One home
for how a transaction writes its receipt and deletes the ones its writer no longer needs,
for the turns' writes (``MemoryStore.write_bookkeeping``) and the manager's spec-004
writes alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from memstore.executor import run, run_many
from memstore.queries import DELETE_OLD_RECEIPTS, DELETE_RECEIPT, INSERT_RECEIPT, REPLACE_RECEIPT
from memstore.rows import now, receipts_cutoff

__all__ = ["write_receipt"]


def write_receipt(
    conn: Connection, receipt: str | None, forget: Sequence[str], *, prune: bool
) -> None:
    """In the transaction of ``conn``: insert ``receipt`` (None: none), delete the writer's
    earlier ones it no longer needs (``forget``) and, with ``prune``, every receipt older
    than RECEIPTS_KEPT (crashed writers' ones: once a manager)."""
    if receipt is not None and len(forget) == 1:  # the usual: one statement, not two
        values = {"old": forget[0], "receipt": receipt, "created_at": now()}
        if run(conn, REPLACE_RECEIPT, values).rowcount == 1:
            forget, receipt = (), None
    if forget:
        run_many(conn, DELETE_RECEIPT, [{"receipt": old} for old in forget])
    if receipt is not None:
        run(conn, INSERT_RECEIPT, {"receipt": receipt, "created_at": now()})
    if prune:
        run(conn, DELETE_OLD_RECEIPTS, {"cutoff": receipts_cutoff()})
