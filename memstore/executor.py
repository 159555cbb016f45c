"""Running prebuilt SQLAlchemy Core statements on a connection's DBAPI cursor.

Building and compiling a Core statement costs more than running it on SQLite, and
SQLAlchemy's per-execute overhead would be most of a durable write's time budget. So the
statements used on every write are built once at import time, compiled once per set of
parameter names (for the connection's dialect), and run here with positional parameters,
inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection

from memstore.dialect import resolve

__all__ = ["run", "run_many"]

#: a compiled statement: its SQL, and the function that turns a row of parameters (by
#: name) into what the driver takes (a tuple in SQLite's order, or a dict for psycopg)
_Compiled = tuple[str, Callable[[dict[str, Any]], Any]]
_COMPILED: dict[tuple[int, str, tuple[str, ...]], _Compiled] = {}
#: who is told each statement run on a driver connection, by the connection's id
#: (MemoryStore.trace_sql on a server; SQLite's driver has a trace callback of its own)
TRACERS: dict[int, Callable[[str], object]] = {}


def _compiled(conn: Connection, statement: Any, keys: tuple[str, ...]) -> _Compiled:
    """A statement compiled once per dialect and key set. The schema translation the
    engine applies to Core statements (the ephemeral tier's schema on PostgreSQL) is
    applied here too."""
    dialect = conn.dialect.name
    entry = _COMPILED.get((id(statement), dialect, keys))
    if entry is None:
        translate = conn.get_execution_options().get("schema_translate_map") or {}
        compiled = resolve(conn, statement).compile(
            dialect=conn.dialect, column_keys=list(keys), schema_translate_map=translate or None
        )
        sql = str(compiled)
        for schema, actual in translate.items():
            sql = sql.replace(f"__[SCHEMA_{schema}]", actual)
        order = tuple(compiled.positiontup) if compiled.positiontup is not None else None
        entry = (sql, _arranger(order, dict(compiled.params), keys))
        _COMPILED[(id(statement), dialect, keys)] = entry
    return entry


def _arranger(
    order: tuple[str, ...] | None, defaults: dict[str, Any], keys: tuple[str, ...]
) -> Callable[[dict[str, Any]], Any]:
    """What turns a row of ``keys`` into the driver's parameters: the statement's own
    values (``defaults``) fill the names the row does not give."""
    given = set(keys)
    if order is None:  # named (PostgreSQL's psycopg): a dict with exactly the names
        fill = {n: v for n, v in defaults.items() if n not in given}
        wanted = tuple(n for n in defaults if n in given)
        return lambda row: {**fill, **{n: row[n] for n in wanted}}
    if not given.issuperset(order):
        return lambda row: [row[n] if n in row else defaults[n] for n in order]
    if len(order) == 1:
        (name,) = order
        return lambda row: (row[name],)
    if not order:
        return lambda row: ()
    return itemgetter(*order)


def run(conn: Connection, statement: Any, params: dict[str, Any]) -> Any:
    """Run a prebuilt Core ``statement`` (or a dialect.OnConflict) with ``params`` (by name);
    returns the DBAPI cursor.

    ``statement`` must live as long as the process (a module-level constant): compiled
    forms are cached by its id.
    """
    sql, arrange = _compiled(conn, statement, tuple(params))
    driver = conn.connection.driver_connection
    if TRACERS and id(driver) in TRACERS:
        TRACERS[id(driver)](sql)
    return driver.execute(sql, arrange(params))  # type: ignore[union-attr]


def run_many(conn: Connection, statement: Any, rows: list[dict[str, Any]]) -> None:
    """``run`` for many rows with the same keys (one executemany)."""
    if rows:
        sql, arrange = _compiled(conn, statement, tuple(rows[0]))
        driver = conn.connection.driver_connection
        if TRACERS and id(driver) in TRACERS:
            TRACERS[id(driver)](sql)
        cursor = driver.cursor()  # type: ignore[union-attr]
        cursor.executemany(sql, [arrange(row) for row in rows])
