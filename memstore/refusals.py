"""What a database refused, in memstore's terms: SQLite's and PostgreSQL's errors alike.

Part of the connection layer (memstore.connection opens databases and runs transactions):
``failure_kind`` names a refusal (a lock held too long, a conflict, a read-only database, a
lost server, a number or a text the database cannot hold), ``store_busy`` says it in
memstore's one line, ``one_line`` gives a driver error's own message on one line.
"""

from __future__ import annotations

import sqlite3

from memstore.errors import StoreBusy
from memstore.schema import EPHEMERAL_SCHEMA

__all__ = ["failure_kind", "first_line", "one_line", "store_busy"]


def failure_kind(exc: BaseException) -> str | None:
    """What a database refused, in memstore's terms (SQLite's and PostgreSQL's errors alike):

    "busy" a lock not granted within the busy timeout; "conflict" a transaction the server
    cancelled for a conflict (a serialization failure or deadlock; on a hot standby, a
    conflict with recovery): nothing happened, try again; "read-only" a write the database
    or the role may not make; "gone" the server connection was lost (the server stopped,
    restarted, or dropped us; a connection attempt timed out); "overflow" a number past 64
    bits; "nul" text PostgreSQL cannot hold (a NUL character); "too-long" text too long for
    one of PostgreSQL's index entries; "schema" a table or column the statement names is
    not there (the schema changed under the store); "tier-gone" a table of the
    connection's own ephemeral tier is not there; None for anything else (a bug: raised
    as it is).
    """
    if getattr(exc, "connection_invalidated", False):
        return "gone"
    orig = getattr(exc, "orig", None) or exc
    kind = type(orig).__name__
    if kind == "DataError" and "NUL" in str(orig):  # psycopg, before sending
        return "nul"
    code = getattr(orig, "sqlstate", None)
    if code is not None:  # PostgreSQL
        if code.startswith("08") or code in ("57P01", "57P02", "57P03", "57P05", "26000", "25P03"):
            # (25P03, 57P05: the session ended for sitting idle, in a transaction or not;
            # 26000, invalid_sql_statement_name: the session's prepared statements are
            # gone, a pooler's DISCARD ALL or a transaction pooler's other session: a new
            # connection prepares them again)
            return "gone"
        # (a missing table of the ephemeral tier is "schema" here too: the store asks the
        # server's catalog, as the message is in the server's language)
        return {
            "55P03": "busy",  # lock_not_available (lock_timeout)
            "40001": "conflict",  # serialization_failure (a standby: conflict with recovery)
            "40P01": "conflict",  # deadlock_detected
            "25006": "read-only",  # read_only_sql_transaction
            "42501": "read-only",  # insufficient_privilege
            "22003": "overflow",  # numeric_value_out_of_range
            "54000": "too-long",  # program_limit_exceeded: an index entry past a page
            "42P01": "schema",  # undefined_table
            "42703": "schema",  # undefined_column
        }.get(code)
    if type(orig).__module__.startswith("psycopg") and any(
        base.__name__ in ("OperationalError", "InterfaceError") for base in type(orig).__mro__
    ):
        # the connection is closed, the server went away without a code, or a connection
        # attempt timed out (ConnectionTimeout)
        return "gone"
    if not isinstance(orig, sqlite3.OperationalError):
        return None
    message = str(orig)
    if "readonly" in message or "read-only" in message:
        return "read-only"
    if "locked" in message or "busy" in message:
        return "busy"
    if message.startswith(_SCHEMA_GONE) or " has no column named " in message:
        return "tier-gone" if message.startswith(_TIER_TABLE) else "schema"
    return None


#: SQLite's words for a table or column a statement names that is not there
_SCHEMA_GONE = ("no such table:", "no such column:")
#: how SQLite names a table of the ephemeral tier it cannot find (the tier is the
#: connection's own: "tier-gone")
_TIER_TABLE = f"no such table: {EPHEMERAL_SCHEMA}."


def store_busy(where: str, kind: str = "busy", why: str = "") -> StoreBusy:
    """memstore's one line for a lock another process held past the busy timeout
    (``failure_kind`` "busy"), or a transaction a server cancelled for a conflict
    ("conflict"): nothing was written."""
    if kind == "conflict":
        return StoreBusy(
            f"{where} cancelled this call for a conflict with another transaction ({why}); "
            f"nothing was written; try again"
        )
    return StoreBusy(
        f"{where} stayed locked by another process for longer than the busy timeout; "
        f"nothing was written"
    )


def first_line(exc: BaseException) -> str:
    """A driver error's own message, its first line only (a server's later lines quote
    the statement: ``LINE 2: FROM ... ^``)."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(orig).__name__


def one_line(exc: BaseException) -> str:
    """A driver error's own message, on one line (SQLAlchemy's wrapper and SQL left out)."""
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()) or type(orig).__name__


#: SQLite's result codes (and their extended forms) for a write with no room or an I/O
#: failure (memstore.cli_errors names the same codes about the file or the machine)
_FULL_SQLITE = ("SQLITE_FULL", "SQLITE_IOERR")
#: PostgreSQL's: disk_full, io_error
_FULL_SQLSTATES = ("53100", "58030")


def storage_full(exc: BaseException) -> str | None:
    """``message (CODE)`` when ``exc`` (or the driver error a SQLAlchemy error wraps) says
    the database had no room for a write or could not do its I/O (SQLite's SQLITE_FULL and
    SQLITE_IOERR, PostgreSQL's disk_full and io_error), as the command line prints them;
    else None. Only the message's first line is kept (a server's later lines may quote
    the statement)."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorname", None)
    if isinstance(code, str) and code.startswith(_FULL_SQLITE):
        shown = code
    else:
        code = getattr(orig, "sqlstate", None)
        if code not in _FULL_SQLSTATES:
            return None
        shown = f"SQLSTATE {code}"
    return f"{first_line(orig)} ({shown})"
