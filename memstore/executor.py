"""Running prebuilt SQLAlchemy Core statements on a connection's DBAPI cursor.

Building and compiling a Core statement costs more than running it on SQLite, and
SQLAlchemy's per-execute overhead would be most of a durable write's time budget. So the
statements used on every write are built once at import time, compiled once per set of
parameter names (for the connection's dialect), and run here with positional parameters,
inside the caller's transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection

from memstore.connection import driver_of
from memstore.dialect import resolve

__all__ = ["compiled_for", "insert_id", "run", "run_many", "run_rows"]

#: a compiled statement: its SQL, and the function that turns a row of parameters (by
#: name) into what the driver takes (a tuple in SQLite's order, or a dict for psycopg)
_Compiled = tuple[str, Callable[[dict[str, Any]], Any]]
_COMPILED: dict[tuple[int, str, tuple[str, ...]], _Compiled] = {}
#: the compiled statements whose positional parameters are their keys, in that order
#: (``run_rows`` hands such rows to the driver as they are)
_IN_KEY_ORDER: set[tuple[int, str, tuple[str, ...]]] = set()
#: who is told each statement run on a driver connection, by the connection's id
#: (MemoryStore.trace_sql on a server; SQLite's driver has a trace callback of its own)
TRACERS: dict[int, Callable[[str], object]] = {}


def compiled_for(conn: Connection) -> str:
    """What a statement is compiled for on ``conn`` (the compiled cache's key): its dialect,
    and on a server the schema its persistent tables are named in (each store's own: the
    engine's schema translation, memstore.pg_connection). Every SQLite store names them
    ``main``."""
    name = conn.dialect.name
    if name == "sqlite":
        return name
    translate = conn.get_execution_options().get("schema_translate_map") or {}
    return f"{name}:{translate.get(None, '')}"


def _compiled(conn: Connection, statement: Any, keys: tuple[str, ...]) -> _Compiled:
    """A statement compiled once per dialect (and schema) and key set."""
    entry = _COMPILED.get((id(statement), compiled_for(conn), keys))
    return entry if entry is not None else _compile(conn, statement, keys)


def _compile(conn: Connection, statement: Any, keys: tuple[str, ...]) -> _Compiled:
    """Compile ``statement`` for ``conn``'s dialect and keep it. The schema translation
    the engine applies to Core statements (every persistent table named in its schema;
    the ephemeral tier's schema on PostgreSQL) is applied here too."""
    target = compiled_for(conn)
    translate = conn.get_execution_options().get("schema_translate_map") or {}
    compiled = resolve(conn, statement).compile(
        dialect=conn.dialect, column_keys=list(keys), schema_translate_map=translate or None
    )
    sql = str(compiled)
    if translate:
        quote = conn.dialect.identifier_preparer.quote_schema
        sql = _PLACEHOLDER.sub(lambda found: quote(_schema_of(found[1], translate)), sql)
    order = tuple(compiled.positiontup) if compiled.positiontup is not None else None
    entry = (sql, _arranger(order, dict(compiled.params), keys))
    _COMPILED[(id(statement), target, keys)] = entry
    if order == keys:  # a tuple of the keys' values is the driver's parameters already
        _IN_KEY_ORDER.add((id(statement), target, keys))
    return entry


#: how SQLAlchemy writes a table's schema in a statement compiled with a translate map
#: (``__[SCHEMA_name]``; a table with no schema: ``__[SCHEMA__none]``)
_PLACEHOLDER = re.compile(r"__\[SCHEMA_([^\]]+)\]")


def _schema_of(name: str, translate: dict[str | None, str]) -> str:
    """The schema a placeholder stands for: the translate map's, else its own name."""
    key = None if name == "_none" else name
    return translate[key] if key in translate else name


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
    keys = tuple(params)
    entry = _COMPILED.get((id(statement), compiled_for(conn), keys))
    sql, arrange = entry if entry is not None else _compile(conn, statement, keys)
    driver = driver_of(conn)
    if TRACERS and id(driver) in TRACERS:
        TRACERS[id(driver)](sql)
    return driver.execute(sql, arrange(params))  # type: ignore[union-attr]


#: each INSERT run by ``insert_id`` on a server, with its RETURNING clause, by the INSERT's id
_RETURNING_ID: dict[int, Any] = {}


def insert_id(conn: Connection, statement: Any, params: dict[str, Any]) -> int:
    """``run`` an INSERT of one row into a table keyed by ``id``; the new row's id.

    SQLite's driver has it (``lastrowid``): a RETURNING clause there would make SQLite
    gather the row in a temporary b-tree, about 2 µs a write. PostgreSQL returns it.
    """
    if conn.dialect.name == "sqlite":
        return int(run(conn, statement, params).lastrowid)
    returning = _RETURNING_ID.get(id(statement))
    if returning is None:
        returning = _RETURNING_ID[id(statement)] = statement.returning(statement.table.c.id)
    return int(run(conn, returning, params).fetchone()[0])


def run_many(conn: Connection, statement: Any, rows: list[dict[str, Any]]) -> None:
    """``run`` for many rows with the same keys (one executemany)."""
    if rows:
        sql, arrange = _compiled(conn, statement, tuple(rows[0]))
        _executemany(conn, sql, [arrange(row) for row in rows])


def run_rows(
    conn: Connection, statement: Any, keys: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    """``run_many`` for rows given as tuples of the values of ``keys``, in that order: a
    bulk write (an import) builds no dict per row, and SQLite's driver takes the tuples as
    they are when the statement's parameters come in that order."""
    if not rows:
        return
    sql, arrange = _compiled(conn, statement, keys)
    if (id(statement), compiled_for(conn), keys) in _IN_KEY_ORDER:
        _executemany(conn, sql, rows)
    else:
        _executemany(conn, sql, [arrange(dict(zip(keys, row, strict=True))) for row in rows])


def _executemany(conn: Connection, sql: str, parameters: list[Any]) -> None:
    driver = driver_of(conn)
    if TRACERS and id(driver) in TRACERS:
        TRACERS[id(driver)](sql)
    driver.cursor().executemany(sql, parameters)  # type: ignore[union-attr]
