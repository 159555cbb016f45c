"""The few SQL constructs that SQLite and PostgreSQL spell differently, in one place.

Both databases accept ``INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE SET ...
excluded.col``, but SQLAlchemy builds that from a dialect's own ``insert``: a statement
built with SQLite's cannot be compiled for PostgreSQL. ``OnConflict`` holds one built
statement per dialect, made on first use and kept for the life of the process (the
executor caches compiled forms by the statement object). ``greatest(a, b)`` is SQLite's
two-argument ``max`` and PostgreSQL's ``GREATEST``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Boolean, Connection, String, Table, case, cast, literal_column
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement, GenericFunction

__all__ = ["OnConflict", "greatest", "holds_integer", "json_text", "one_more", "resolve"]

_INSERTS = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


class OnConflict:
    """``INSERT INTO table ... ON CONFLICT (index_elements) DO NOTHING`` (``update`` is None)
    or ``DO UPDATE SET update(excluded) [WHERE where(excluded)]``, with ``RETURNING``
    columns if given, built for whichever dialect runs it."""

    def __init__(
        self,
        table: Table,
        index_elements: Sequence[str] | None = None,
        *,
        values: dict[str, Any] | None = None,
        update: Callable[[Any], dict[str, Any]] | None = None,
        where: Callable[[Any], Any] | None = None,
        returning: Sequence[Any] = (),
    ) -> None:
        self._table = table
        self._index_elements = list(index_elements) if index_elements is not None else None
        self._values = values
        self._update = update
        self._where = where
        self._returning = tuple(returning)
        self._built: dict[str, Any] = {}

    def for_dialect(self, name: str) -> Any:
        statement: Any = self._built.get(name)
        if statement is None:
            statement = _INSERTS[name](self._table)
            if self._values is not None:
                statement = statement.values(**self._values)
            if self._update is None:
                statement = statement.on_conflict_do_nothing(index_elements=self._index_elements)
            else:
                excluded = statement.excluded
                statement = statement.on_conflict_do_update(
                    index_elements=self._index_elements,
                    set_=self._update(excluded),
                    where=self._where(excluded) if self._where is not None else None,
                )
            if self._returning:
                statement = statement.returning(*self._returning)
            self._built[name] = statement
        return statement


def resolve(conn: Connection, statement: Any) -> Any:
    """The statement to run on ``conn``: an ``OnConflict`` built for its dialect, else itself."""
    if isinstance(statement, OnConflict):
        return statement.for_dialect(conn.dialect.name)
    return statement


class greatest(GenericFunction[Any]):  # noqa: N801 - reads like the SQL function it is
    """The larger of its arguments (SQLite: scalar ``max``; PostgreSQL: ``GREATEST``)."""

    inherit_cache = True
    name = "greatest"


@compiles(greatest, "sqlite")
def _greatest_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return f"max({compiler.process(element.clauses, **kw)})"


class json_text(FunctionElement[str]):  # noqa: N801 - reads like an SQL function
    """The text at ``path`` (keys) inside a JSON document held in a text column: SQLite's
    ``json_extract(col, '$.a.b')``, PostgreSQL's ``CAST(col AS json) #>> '{a,b}'``."""

    type = String()
    inherit_cache = False

    def __init__(self, column: Any, *path: str) -> None:
        self.path = path
        super().__init__(column)


@compiles(json_text, "sqlite")
def _json_text_sqlite(element: json_text, compiler: Any, **kw: Any) -> str:
    document = compiler.process(element.clauses, **kw)
    return f"json_extract({document}, '$.{'.'.join(element.path)}')"


@compiles(json_text, "postgresql")
def _json_text_postgresql(element: json_text, compiler: Any, **kw: Any) -> str:
    document = compiler.process(element.clauses, **kw)
    return f"(CAST({document} AS json) #>> '{{{','.join(element.path)}}}')"


class holds_integer(FunctionElement[bool]):  # noqa: N801 - reads like an SQL function
    """True where an INTEGER column really holds an integer: SQLite stores any type in any
    column (``typeof(col) = 'integer'``); PostgreSQL's typed columns always do."""

    type = Boolean()
    inherit_cache = True


@compiles(holds_integer, "sqlite")
def _holds_integer_sqlite(element: holds_integer, compiler: Any, **kw: Any) -> str:
    return f"typeof({compiler.process(element.clauses, **kw)}) = 'integer'"


@compiles(holds_integer, "postgresql")
def _holds_integer_postgresql(element: holds_integer, compiler: Any, **kw: Any) -> str:
    return f"({compiler.process(element.clauses, **kw)} IS NOT NULL)"


def one_more(column: Any, most: int) -> Any:
    """``column + 1``, up to ``most``: a count that stops at its bound, for either database
    (SQLite turns an integer past 2**63-1 into a float, which no reader takes back;
    PostgreSQL refuses it). The count is read as an integer first: a value of another kind
    that SQLite kept (a hand edit's 'two', 2.5) counts from what it casts to (0, 2), so
    the write mends it rather than return it to a caller that compares it with a number
    (review S5 D F6), and one past ``most`` (1e300) is written back as ``most`` (S5 E F7);
    on PostgreSQL the column is one already."""
    count = cast(column, BigInteger)
    bound: Any = literal_column(str(most))  # (and a count past it, 1e300 cast: back to it)
    return case((count < bound, count + literal_column("1")), else_=bound)
