"""How ``memstore`` reports an error in one line (see the error contract in memstore.cli).

memstore's own errors (MemstoreError, CliError) and the operating system's are the user's
doing; SQLite's reports about the file or the machine are the environment's; anything else
is a bug. No line ever shows an SQL statement or its parameters.
"""

from __future__ import annotations

import argparse
import os
import sys

from memstore.errors import CliError

#: where SQLAlchemy's messages start to quote the statement, its parameters and a docs link
_SQL_MARKERS = ("[SQL:", "[parameters:", "(Background on this error")
#: an internal error's message is cut to this many characters
MAX_INTERNAL_MESSAGE = 200


def without_sql(message: str) -> str:
    """``message`` up to the first SQL statement, parameters or docs link SQLAlchemy adds."""
    cuts = [index for index in map(message.find, _SQL_MARKERS) if index != -1]
    return message[: min(cuts)] if cuts else message


def one_line(exc: BaseException) -> str:
    """The message of an expected error on one line (an OS error as ``file: reason``)."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror}"
    else:
        message = without_sql(str(exc))
    return " ".join(message.split()) or type(exc).__name__


def internal_line(exc: BaseException) -> str:
    """``ExcType: short message`` for an error memstore did not expect."""
    message = " ".join(without_sql(str(exc)).split())
    if len(message) > MAX_INTERNAL_MESSAGE:
        message = message[: MAX_INTERNAL_MESSAGE - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


#: SQLite result codes (and their extended forms) about the file or the machine, not a bug
_SQLITE_ENVIRONMENT = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_CANTOPEN",
    "SQLITE_CORRUPT",
    "SQLITE_NOTADB",
    "SQLITE_READONLY",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_PERM",
    "SQLITE_NOLFS",
)


def sqlite_environment(exc: BaseException) -> str | None:
    """``message (SQLITE_CODE)`` when ``exc`` (or the sqlite3 error a SQLAlchemy error wraps)
    is a full disk, an I/O error, a corrupt or unopenable file ...; else None. SQLite's own
    message never quotes the statement."""
    sqlite3 = sys.modules.get("sqlite3")
    orig = getattr(exc, "orig", exc)
    if sqlite3 is None or not isinstance(orig, sqlite3.Error):
        return None
    name = getattr(orig, "sqlite_errorname", None) or ""
    if not name.startswith(_SQLITE_ENVIRONMENT):
        return None
    return f"{' '.join(str(orig).split())} ({name})"


#: SQLSTATE classes (PostgreSQL's and the SQL standard's) about the server, the connection
#: or the machine, not a bug: connection, resources, operator intervention, system errors,
#: authorization, an unknown database
_SQLSTATE_ENVIRONMENT = ("08", "53", "57", "58", "28", "3D")


def server_environment(exc: BaseException) -> str | None:
    """``message (SQLSTATE code)`` when ``exc`` (or the driver error a SQLAlchemy error wraps)
    comes from a database server that cannot be reached or cannot serve (a DBAPI error with
    a ``sqlstate``, as psycopg's, in one of the classes above, or a driver's
    OperationalError with no SQLSTATE: the connection failed before the server answered);
    else None. Only the message's first line is kept: a driver's later lines may quote
    the statement."""
    sqlite3 = sys.modules.get("sqlite3")
    orig = getattr(exc, "orig", exc)
    if sqlite3 is not None and isinstance(orig, sqlite3.Error):
        return None  # SQLite's: see sqlite_environment
    if not hasattr(orig, "sqlstate"):
        return None
    code = getattr(orig, "sqlstate", None)
    if code is None and type(orig).__name__ != "OperationalError":
        return None
    if code is not None and not str(code).upper().startswith(_SQLSTATE_ENVIRONMENT):
        return None
    lines = str(orig).strip().splitlines()
    message = " ".join(lines[0].split()) if lines else type(orig).__name__
    return f"{message} (SQLSTATE {code})" if code else message


def is_expected(exc: Exception) -> bool:
    """A user error: memstore's own (MemstoreError, CliError) or the operating system's."""
    from memstore.errors import MemstoreError

    return isinstance(exc, MemstoreError | CliError | OSError)


def debugging(args: argparse.Namespace) -> bool:
    """Show tracebacks: --debug, or MEMSTORE_DEBUG set to anything but 0/false/no/off."""
    flag = os.environ.get("MEMSTORE_DEBUG", "").strip().lower()
    return bool(getattr(args, "debug", False)) or flag not in ("", "0", "false", "no", "off")


def error_line(exc: Exception) -> str:
    """What ``memstore`` prints for an exception a command raised, without the program's
    name: ``error: ...`` for the user's or the environment's doing, ``internal error:
    ...`` (and how to see the traceback) for a bug."""
    if is_expected(exc):
        return f"error: {one_line(exc)}"
    environment = sqlite_environment(exc) or server_environment(exc)
    if environment is not None:
        return f"error: {environment}"
    return f"internal error: {internal_line(exc)} (run with --debug for the traceback)"
