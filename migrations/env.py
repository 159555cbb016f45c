"""alembic environment: the same database and metadata as the library.

The URL comes, in order, from `-x db=PATH_OR_URL`, from `sqlalchemy.url` set on the alembic
Config by a caller (tests do this), or from memstore.config.load_config() (MEMSTORE_DB,
[tool.memstore] db, default game_files/memories.db), exactly as MemoryStore.open resolves it.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from memstore.config import load_config
from memstore.connection import resolve_target
from memstore.schema import metadata

config = context.config
target_metadata = metadata


def database_url() -> str:
    x_args = context.get_x_argument(as_dictionary=True)
    chosen = x_args.get("db") or config.get_main_option("sqlalchemy.url") or load_config().db
    return resolve_target(chosen).url.render_as_string(hide_password=False)


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(database_url())
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA foreign_keys = OFF")  # batch table rebuilds
        connection.commit()  # end SQLAlchemy's autobegun transaction: alembic opens its own
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
