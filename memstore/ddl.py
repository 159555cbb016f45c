"""The CREATE statements of memstore's tables, compiled once a process per dialect: a new
database runs the persistent ones (``MemoryStore.open``), every new connection the
ephemeral tier's (memstore.connection).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from memstore.schema import (
    EPHEMERAL_SCHEMA,
    EPHEMERAL_SCHEMA_POSTGRESQL,
    ephemeral_metadata,
    metadata,
)

__all__ = ["ephemeral_ddl", "persistent_ddl"]


def persistent_ddl(dialect: Dialect) -> tuple[str, ...]:
    """The CREATE statements of the persistent tables and their indexes, in the order
    ``metadata.create_all`` runs them (tables in dependency order, each with its indexes),
    compiled once per dialect name and server version: a new database's schema costs its
    statements, not SQLAlchemy compiling them again (about half of a new database's open)."""
    return _compiled_once(_persistent_ddl, dialect)


def _compiled_once(
    compile_for: Callable[[Dialect], tuple[str, ...]], dialect: Dialect
) -> tuple[str, ...]:
    """``compile_for(dialect)``, cached by what the DDL depends on. Each engine has its own
    dialect object, so the object itself is no key: cached by it, nothing was ever reused."""
    key = (compile_for.__name__, dialect.name, dialect.server_version_info)
    statements = _COMPILED.get(key)
    if statements is None:
        statements = _COMPILED[key] = compile_for(dialect)
    return statements


#: compiled DDL by (what, dialect name, server version); a handful of entries a process
_COMPILED: dict[tuple[object, ...], tuple[str, ...]] = {}


def _persistent_ddl(dialect: Dialect) -> tuple[str, ...]:
    statements: list[str] = []
    for table in metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        statements.extend(
            str(CreateIndex(index).compile(dialect=dialect)).strip()
            for index in sorted(table.indexes, key=lambda index: str(index.name))
        )
    return tuple(statements)


def ephemeral_ddl(dialect: Dialect | None = None) -> list[str]:
    """CREATE statements for the ephemeral tier, run on every new connection: in SQLite's
    attached in-memory database, or in PostgreSQL's per-connection temporary schema
    (compiled once per dialect name)."""
    dialect = dialect or sqlite.dialect()
    return list(_compiled_once(_ephemeral_ddl, dialect))


def _ephemeral_ddl(dialect: Dialect) -> tuple[str, ...]:
    schema = EPHEMERAL_SCHEMA_POSTGRESQL if dialect.name == "postgresql" else EPHEMERAL_SCHEMA
    translate = {EPHEMERAL_SCHEMA: schema}
    statements = [
        str(CreateTable(table).compile(dialect=dialect, schema_translate_map=translate))
        for table in ephemeral_metadata.sorted_tables
    ]
    for table in ephemeral_metadata.sorted_tables:
        statements.extend(
            str(CreateIndex(index).compile(dialect=dialect, schema_translate_map=translate))
            for index in table.indexes
        )
    placeholder = f"__[SCHEMA_{EPHEMERAL_SCHEMA}]"
    return tuple(statement.replace(placeholder, schema) for statement in statements)
