"""alembic environment: the same database and metadata as the library, and its guards.

The URL comes, in order, from `-x db=PATH_OR_URL`, from `sqlalchemy.url` set on the alembic
Config by a caller (tests do this), or from memstore.config.load_config() (MEMSTORE_DB,
[tool.memstore] db, default game_files/memories.db), exactly as MemoryStore.open resolves it.

Guards, checked before anything is written:
- a file MemoryStore.open refuses (not SQLite; a SQLite database that is not memstore's;
  a revision newer than this memstore knows) is refused the same way and left untouched
  (memstore.connection.check_existing); a new file, an older revision and a database at
  base (downgraded below the first revision) are memstore's;
- a downgrade below the first revision (to `base`: it drops every table, every memory with
  them) is refused unless confirmed with `-x allow_data_loss=true`.
Each run prints the database it works on and its revision before and after.
"""

from __future__ import annotations

import math

from alembic import context
from alembic.runtime.migration import MigrationContext, RevisionStep
from alembic.util import CommandError
from sqlalchemy import Engine, create_engine, event

from memstore.config import load_config
from memstore.connection import (
    BEGIN_KEY,
    DEFAULT_BUSY_TIMEOUT_S,
    PAGE_SIZE,
    Target,
    check_existing,
    resolve_target,
)
from memstore.errors import NotAMemstoreDatabase, SchemaOutOfDate, SchemaTooNew
from memstore.schema import metadata

config = context.config
target_metadata = metadata
x_args = context.get_x_argument(as_dictionary=True)


def database_target() -> Target:
    chosen = x_args.get("db") or config.get_main_option("sqlalchemy.url") or load_config().db
    return resolve_target(chosen)


def refuse_foreign(target: Target, busy_s: float) -> None:
    """Refuse, as MemoryStore.open does, a file that is not a memstore database (waiting
    ``busy_s`` for another process's lock, as the migration itself would)."""
    try:
        check_existing(target, busy_timeout_s=busy_s)
    except SchemaOutOfDate:
        pass  # an older revision, or at base: what alembic is for
    except (NotAMemstoreDatabase, SchemaTooNew) as exc:
        raise CommandError(f"{exc}; alembic did nothing") from exc


def refuse_data_loss(migration_context: MigrationContext, target: Target) -> None:
    """Refuse to run the first revision's downgrade unless `-x allow_data_loss=true`."""
    if x_args.get("allow_data_loss", "").strip().lower() == "true":
        return
    # the steps alembic is about to run, from the command's own planning function (only
    # upgrade's and downgrade's: other commands' functions print or generate as they plan)
    plan = migration_context.opts.get("fn")
    if getattr(plan, "__name__", None) not in ("upgrade", "downgrade"):
        return
    steps = plan(migration_context.get_current_heads(), migration_context)
    for step in steps:
        if isinstance(step, RevisionStep) and step.is_downgrade and not step.to_revisions:
            raise CommandError(
                f"refusing to downgrade {target.display} below revision "
                f"{step.revision.revision}: that drops every memstore table and deletes every "
                f"memory. To do it anyway: alembic -x allow_data_loss=true downgrade base"
            )


def busy_timeout_s() -> float:
    """How long a migration waits for another process's lock: ``memstore --busy-timeout``
    (``memstore db upgrade`` passes it as the config attribute ``busy_timeout_s``), alembic's
    ``-x busy_timeout=SECONDS``, or memstore's default (30 s)."""
    given = config.attributes.get("busy_timeout_s", x_args.get("busy_timeout"))
    if given is None:
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise CommandError(f"busy_timeout must be a number of seconds from 0, got {given!r}")
    return seconds


def one_sqlite_transaction(engine: Engine, busy_s: float) -> None:
    """Run a SQLite migration as ONE transaction that holds the write lock from its start.

    Python's sqlite3 driver, left to itself, begins a transaction only at the first INSERT
    or UPDATE: the CREATE of a batch rebuild's temporary table ran before it, on its own, so
    a rebuild that failed afterwards (a row the new table refuses, a lock not granted) left
    ``_alembic_tmp_<table>`` behind and every later upgrade failed on it. Here the driver
    issues no BEGIN of its own and every transaction is ``BEGIN IMMEDIATE``, as memstore's
    writers' are: the migration waits for another process's write (up to ``busy_s``)
    instead of failing halfway, and a failure rolls all of it back. alembic is told the
    DDL is transactional (``transactional_ddl``), so an upgrade over several revisions is
    that one transaction too, not one per revision: another upgrade run at the same time
    waits, then finds the database at head.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")
        # a new file gets memstore's page size, as MemoryStore.open gives it (a no-op on
        # an existing one)
        dbapi_connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        # batch mode rebuilds tables: dropping one must not cascade to the rows of another
        # (a no-op inside a transaction, so it is set here, before any)
        dbapi_connection.execute("PRAGMA foreign_keys = OFF")

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        connection.exec_driver_sql(connection.info.get(BEGIN_KEY, "BEGIN IMMEDIATE"))


def revision_label(migration_context: MigrationContext) -> str:
    heads = migration_context.get_current_heads()
    return ", ".join(heads) if heads else "base"


def run_migrations_offline() -> None:
    target = database_target()
    context.configure(
        url=target.url.render_as_string(hide_password=False),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    refuse_data_loss(context.get_context(), target)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    target = database_target()
    busy_s = busy_timeout_s()
    refuse_foreign(target, busy_s)
    engine = create_engine(target.url.render_as_string(hide_password=False))
    if engine.dialect.name == "sqlite":
        one_sqlite_transaction(engine, busy_s)
    with engine.connect() as connection:
        connection.commit()  # end SQLAlchemy's autobegun transaction: alembic opens its own
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            transactional_ddl=True,  # SQLite's here (one_sqlite_transaction); PostgreSQL's
        )
        migration_context = context.get_context()
        if getattr(migration_context.opts.get("fn"), "__name__", None) == "display_version":
            connection.info[BEGIN_KEY] = "BEGIN"  # `current` only reads: no write lock
        refuse_data_loss(migration_context, target)
        config.print_stdout(f"database: {target.display}")
        config.print_stdout(f"revision before: {revision_label(migration_context)}")
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # one migration at a time per memstore database, as memstore's writers:
                # a fleet running `memstore db upgrade` at once upgrades it once
                from memstore.pg_connection import write_lock_key

                schema = connection.exec_driver_sql("SELECT current_schema()").scalar()
                # lock waits bounded as the store's writers' are (the busy timeout)
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, int(busy_s * 1000))}")
                connection.exec_driver_sql(
                    f"SELECT pg_advisory_xact_lock({write_lock_key(str(schema))})"
                )
            context.run_migrations()
        connection.commit()
        config.print_stdout(f"revision after: {revision_label(migration_context)}")
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
