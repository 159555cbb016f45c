"""Whether a database's tables match its alembic revision, as a migration finds out.

``memstore db upgrade`` trusts the revision a database records: its migrations create and
alter the tables that revision lacks. A database whose tables were changed around memstore
(stamped back by hand, a table dropped) does not match it, and the migration either fails
on the first table it finds there already (or missing), or runs to a head revision the
tables still do not match (review S6 C F2: "internal error: table ... already exists", or
an upgrade reported done into a database every command then refused as damaged). Both
are said here as the probe says damage (memstore.sqlite_probe), and the
migration's transaction is rolled back: nothing is changed.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, inspect

from memstore.schema import HEAD_REVISION, metadata
from memstore.sqlite_probe import missing_at_head

__all__ = ["damaged_after_migrating", "schema_mismatch"]

#: PostgreSQL: duplicate_table, undefined_table, undefined_column, duplicate_column,
#: duplicate_object (an index or constraint of that name)
_MISMATCH_STATES = frozenset({"42P07", "42P01", "42703", "42701", "42710"})
#: SQLite's words for the same
_MISMATCH_WORDS = re.compile(
    r"already exists|no such table|no such column|duplicate column|no such index"
)


def schema_mismatch(exc: BaseException, display: str, revision: str) -> str | None:
    """The one-line refusal for a migration's database error that says the tables do not
    match ``revision``, or None for any other error."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None)
    said = " ".join(str(orig).split("\n")[0].split())
    if state not in _MISMATCH_STATES and (state is not None or not _MISMATCH_WORDS.search(said)):
        return None
    return (
        f"{display} is damaged, not a sound memstore database: its tables do not match its "
        f"revision {revision} ({said[:200]}); left untouched"
    )


def damaged_after_migrating(connection: Connection, display: str) -> str | None:
    """After a migration to the head revision, inside its transaction: the one-line refusal
    if memstore's tables or columns are not all there (``missing_at_head``), else None."""
    inspector = inspect(connection)
    tables = set(inspector.get_table_names())
    columns = {
        table: {column["name"] for column in inspector.get_columns(table)}
        for table in sorted(tables.intersection(metadata.tables))
    }
    missing = missing_at_head(tables, columns)
    if not missing:
        return None
    return (
        f"{display} is damaged, not a sound memstore database: upgraded to {HEAD_REVISION}, "
        f"it would still have no {missing} (a table or column its revision has); left "
        f"untouched"
    )
