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

from memstore.dialect import resolve

__all__ = ["run", "run_many"]

_Compiled = tuple[str, tuple[str, ...] | None, dict[str, Any]]
_COMPILED: dict[tuple[int, str, tuple[str, ...]], _Compiled] = {}


def _compiled(conn: Connection, statement: Any, keys: tuple[str, ...]) -> _Compiled:
    """(SQL, positional parameter order or None for named parameters, default values) of a
    statement, compiled once per dialect and key set. The schema translation the engine
    applies to Core statements (the ephemeral tier's schema on PostgreSQL) is applied here
    too."""
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
        entry = (sql, order, dict(compiled.params))
        _COMPILED[(id(statement), dialect, keys)] = entry
    return entry


def _parameters(
    params: dict[str, Any], order: tuple[str, ...] | None, defaults: dict[str, Any]
) -> Any:
    if order is None:  # named (PostgreSQL's psycopg)
        return {n: params[n] if n in params else defaults[n] for n in defaults}
    return [params[n] if n in params else defaults[n] for n in order]


def run(conn: Connection, statement: Any, params: dict[str, Any]) -> Any:
    """Run a prebuilt Core ``statement`` (or a dialect.OnConflict) with ``params`` (by name);
    returns the DBAPI cursor.

    ``statement`` must live as long as the process (a module-level constant): compiled
    forms are cached by its id.
    """
    sql, order, defaults = _compiled(conn, statement, tuple(params))
    driver = conn.connection.driver_connection
    return driver.execute(sql, _parameters(params, order, defaults))  # type: ignore[union-attr]


def run_many(conn: Connection, statement: Any, rows: list[dict[str, Any]]) -> None:
    """``run`` for many rows with the same keys (one executemany)."""
    if rows:
        sql, order, defaults = _compiled(conn, statement, tuple(rows[0]))
        driver = conn.connection.driver_connection
        cursor = driver.cursor()  # type: ignore[union-attr]
        cursor.executemany(sql, [_parameters(row, order, defaults) for row in rows])
