"""Running prebuilt SQLAlchemy Core statements on a connection's DBAPI cursor.

Building and compiling a Core statement costs more than running it on SQLite, and
SQLAlchemy's per-execute overhead would be most of a durable write's time budget. So the
statements used on every write are built once at import time, compiled once per set of
parameter names (for the connection's dialect), and run here with positional parameters,
inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

__all__ = ["run", "run_many"]

_COMPILED: dict[tuple[int, tuple[str, ...]], tuple[str, tuple[str, ...], dict[str, Any]]] = {}


def _compiled(
    conn: Connection, statement: Any, keys: tuple[str, ...]
) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """(SQL, parameter order, default values) of a statement, compiled once per key set."""
    entry = _COMPILED.get((id(statement), keys))
    if entry is None:
        compiled = statement.compile(dialect=conn.dialect, column_keys=list(keys))
        entry = (str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params))
        _COMPILED[(id(statement), keys)] = entry
    return entry


def run(conn: Connection, statement: Any, params: dict[str, Any]) -> Any:
    """Run a prebuilt Core ``statement`` with ``params`` (by name); returns the DBAPI cursor.

    ``statement`` must live as long as the process (a module-level constant): compiled
    forms are cached by its id.
    """
    sql, names, defaults = _compiled(conn, statement, tuple(params))
    driver = conn.connection.driver_connection
    return driver.execute(sql, [params[n] if n in params else defaults[n] for n in names])  # type: ignore[union-attr]


def run_many(conn: Connection, statement: Any, rows: list[dict[str, Any]]) -> None:
    """``run`` for many rows with the same keys (one executemany)."""
    if rows:
        sql, names, _defaults = _compiled(conn, statement, tuple(rows[0]))
        driver = conn.connection.driver_connection
        driver.executemany(sql, [[row[n] for n in names] for row in rows])  # type: ignore[union-attr]
