"""alembic environment: the same database and metadata as the library, and its guards.

The database comes, in order, from the ``memstore_target`` attribute `memstore db` sets on
the alembic Config (a resolved memstore.connection.Target: a path that is not UTF-8 has no
URL text), from `-x db=PATH_OR_URL`, from `sqlalchemy.url` set on the Config by a caller
(tests do this), or from memstore.config.load_config() (MEMSTORE_DB, [tool.memstore] db,
default game_files/memories.db), exactly as MemoryStore.open resolves it.

Guards, checked before anything is written:
- a file MemoryStore.open refuses (not SQLite; a SQLite database that is not memstore's;
  a revision newer than this memstore knows) is refused the same way and left untouched
  (memstore.connection.check_existing); a new file, an older revision and a database at
  base (downgraded below the first revision) are memstore's;
- an upgrade or downgrade is planned first by reading the database only: one that has
  nothing to do says so and never asks for the write lock (another process's write does
  not hold it up, and a database in a read-only folder is reported, not refused); an
  upgrade to a revision behind the database's is refused (upgrade only goes forward); a
  revision alembic cannot place (``''``, one past the head) is one line, "unknown revision";
- before writing: a database the process cannot write is ``read-only database: PATH``,
  and a missing folder is created (as MemoryStore.open does);
- a downgrade step that would delete stored data (a table with rows, a column with values,
  and always the step to `base`: memstore.downgrade_guard) is refused unless confirmed with
  `-x allow_data_loss=true` (`memstore db downgrade REV --allow-data-loss`). It is checked
  inside the migration's transaction, so no write can slip in between.
Each run prints the database it works on and its revision before and after.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, RevisionStep
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from memstore.config import load_config
from memstore.connection import (
    BEGIN_KEY,
    DEFAULT_BUSY_TIMEOUT_S,
    PAGE_SIZE,
    Target,
    check_existing,
    check_writable,
    read_only_uri,
    resolve_target,
)
from memstore.downgrade_guard import data_at_risk
from memstore.errors import (
    NotAMemstoreDatabase,
    ReadOnlyDatabase,
    SchemaOutOfDate,
    SchemaTooNew,
)
from memstore.migrations_dir import known_revisions
from memstore.schema import HEAD_REVISION, metadata
from memstore.schema_match import damaged_after_migrating, schema_mismatch

config = context.config
target_metadata = metadata
x_args = context.get_x_argument(as_dictionary=True)

#: the planning functions of alembic's commands that move the schema
MOVES = ("upgrade", "downgrade")


def database_target() -> Target:
    given = config.attributes.get("memstore_target")
    if isinstance(given, Target):
        return given
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


def planning(migration_context: MigrationContext) -> str | None:
    """The name of the command's planning function: ``upgrade``, ``downgrade``,
    ``display_version`` (current) ..."""
    return getattr(migration_context.opts.get("fn"), "__name__", None)


def planned_steps(
    migration_context: MigrationContext, heads: tuple[str, ...]
) -> list[RevisionStep]:
    """The steps an upgrade or downgrade would run from ``heads`` (none for another command:
    their functions print or generate as they plan), from the command's own planning
    function. A revision alembic cannot place is one line (alembic asserts on some)."""
    if planning(migration_context) not in MOVES:
        return []
    destination = migration_context.opts.get("destination_rev")
    unknown = f"unknown revision {destination!r} (`memstore db history` lists them)"
    if not str(destination).strip():
        raise CommandError(unknown)
    try:
        steps = migration_context.opts["fn"](heads, migration_context)
    except AssertionError as exc:  # alembic's resolver on '', one past the head ...
        raise CommandError(unknown) from exc
    return [step for step in steps if isinstance(step, RevisionStep)]


def refuse_going_back(migration_context: MigrationContext, heads: tuple[str, ...]) -> None:
    """An upgrade with nothing to do whose destination is behind the database's revision
    (``upgrade 0001`` at 0008): alembic would do nothing and say nothing; refused in one line.
    Behind: ``base`` while the database has a revision, or a revision that is an ancestor of
    the database's (read through the script directory's public revision map)."""
    destination = str(migration_context.opts.get("destination_rev"))
    if heads and _passed(destination, heads):
        raise CommandError(
            f"revision {destination} is behind the database's revision "
            f"{revision_label(heads)}: upgrade only goes forward; nothing was done"
        )


def _passed(destination: str, heads: tuple[str, ...]) -> bool:
    if destination == "base":
        return True
    script = context.script
    try:  # each walk starts at its upper revision (a relative one like head-1 resolved)
        reached = [r.revision for r in script.iterate_revisions(destination, "base")]
        passed = {r.revision for head in heads for r in script.iterate_revisions(head, "base")}
    except Exception:  # noqa: BLE001 - not a revision alembic places: not behind
        return False
    return bool(reached) and reached[0] not in heads and reached[0] in passed


def data_loss_allowed() -> bool:
    """``-x allow_data_loss=true``, or ``memstore db downgrade --allow-data-loss``."""
    if config.attributes.get("allow_data_loss") is True:
        return True
    return x_args.get("allow_data_loss", "").strip().lower() == "true"


def refuse_data_loss(
    migration_context: MigrationContext,
    target: Target,
    connection: Connection | None,
    heads: tuple[str, ...] | None = None,
) -> None:
    """Refuse the downgrade steps about to run when they would delete stored data
    (memstore.downgrade_guard.data_at_risk; ``connection`` None: the database cannot be
    looked at, so any drop counts), unless confirmed (``data_loss_allowed``)."""
    if data_loss_allowed() or planning(migration_context) != "downgrade":
        return
    if heads is None:
        heads = tuple(migration_context.get_current_heads())
    steps = planned_steps(migration_context, heads)
    revisions = [step.revision.revision for step in steps if step.is_downgrade]
    lost = data_at_risk(connection, revisions)
    if not lost:
        return
    destination = migration_context.opts.get("destination_rev")
    how = config.attributes.get("confirm_with") or (
        f"alembic -x allow_data_loss=true downgrade {destination}"
    )
    if revisions[-1] == known_revisions()[0]:
        raise CommandError(
            f"refusing to downgrade {target.display} below revision {revisions[-1]}: that "
            f"drops every memstore table and deletes every memory. To do it anyway: {how}"
        )
    raise CommandError(
        f"refusing to downgrade {target.display} to {destination}: that deletes "
        f"{', '.join(lost)}. To do it anyway: {how}"
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


def one_sqlite_transaction(engine: Engine, busy_s: float, *, moves: bool) -> None:
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

    A migration (``moves``) puts the file in WAL mode first, as MemoryStore.open does: a
    reader then never holds it up (in rollback-journal mode SQLite asks for the write lock
    again at each cache spill and at the commit, each time for the whole busy timeout:
    review S6 C F3, `--busy-timeout 4` waited 13.5 s), and a migration killed halfway
    leaves a -wal the next open reads past, never a hot journal (C F1). A file another
    process holds open keeps its mode.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")
        # a new file gets memstore's page size, as MemoryStore.open gives it (a no-op on
        # an existing one)
        dbapi_connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        if moves:
            dbapi_connection.execute("PRAGMA journal_mode = WAL")
            dbapi_connection.execute("PRAGMA synchronous = FULL")
        # batch mode rebuilds tables: dropping one must not cascade to the rows of another
        # (a no-op inside a transaction, so it is set here, before any)
        dbapi_connection.execute("PRAGMA foreign_keys = OFF")

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # type: ignore[no-untyped-def]
        connection.exec_driver_sql(connection.info.get(BEGIN_KEY, "BEGIN IMMEDIATE"))


def revision_label(heads: tuple[str, ...] | list[str]) -> str:
    return ", ".join(heads) if heads else "base"


def reading_engine(target: Target, busy_s: float) -> Engine | None:
    """An engine that reads the database without writing to it or taking its write lock
    (a SQLite file opened read-only, as ``memstore db current`` reads it), or None when
    there is no database yet (a new or empty file, an in-memory database)."""
    if target.is_server:
        return create_engine(target.url, poolclass=NullPool)
    path = target.path
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return None
    uri = read_only_uri(path)
    return create_engine(
        "sqlite://",
        poolclass=NullPool,
        creator=lambda: sqlite3.connect(uri, uri=True, timeout=busy_s),
    )


def look_ahead(target: Target, busy_s: float) -> str | None:
    """Plan the command by reading the database only. None when it is an upgrade or a
    downgrade with nothing to do (said, with the revision, and nothing written: no write
    lock asked for); otherwise the command's planning function's name (``planning``).
    Refused here, before any write: an upgrade to a revision behind the database's, an
    unknown revision, a downgrade that would delete data (checked again in the migration's
    transaction)."""
    engine = reading_engine(target, busy_s)
    options: dict[str, Any] = {"target_metadata": target_metadata, "render_as_batch": True}
    if engine is None:
        context.configure(dialect_name=target.url.get_backend_name(), **options)
        return _look(target, context.get_context(), None)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, **options)
            return _look(target, context.get_context(), connection)
    finally:
        engine.dispose()


def _look(
    target: Target, migration_context: MigrationContext, connection: Connection | None
) -> str | None:
    action = planning(migration_context)
    if action not in MOVES:
        return action
    heads = tuple(migration_context.get_current_heads()) if connection is not None else ()
    if planned_steps(migration_context, heads):
        refuse_data_loss(migration_context, target, connection, heads)
        return action
    if action == "upgrade":
        refuse_going_back(migration_context, heads)
    label = revision_label(heads)
    config.print_stdout(f"database: {target.display}")
    config.print_stdout(f"revision before: {label}")
    config.print_stdout(f"nothing to do: the database is at {label} already")
    config.print_stdout(f"revision after: {label}")
    return None


def prepare_to_write(target: Target) -> None:
    """Before a migration writes a SQLite file: refuse one this process cannot write
    (``read-only database: PATH``), and create its folder if it is missing, as
    MemoryStore.open does."""
    if target.path is None:
        return
    try:
        check_writable(target)
    except ReadOnlyDatabase as exc:
        raise CommandError(f"{exc}; alembic did nothing") from exc
    folder = target.path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"cannot create the folder {folder} for the database {target.path}: "
            f"{exc.strerror or exc}; alembic did nothing"
        ) from exc


def run_migrations_offline() -> None:
    target = database_target()
    context.configure(
        url=target.url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    migration_context = context.get_context()
    refuse_data_loss(migration_context, target, None)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    target = database_target()
    busy_s = busy_timeout_s()
    refuse_foreign(target, busy_s)
    action = look_ahead(target, busy_s)
    if action is None:
        return
    if action in MOVES:
        prepare_to_write(target)
    engine = create_engine(target.url)
    if engine.dialect.name == "sqlite":
        one_sqlite_transaction(engine, busy_s, moves=action in MOVES)
    with engine.connect() as connection:
        connection.commit()  # end SQLAlchemy's autobegun transaction: alembic opens its own
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            transactional_ddl=True,  # SQLite's here (one_sqlite_transaction); PostgreSQL's
        )
        migration_context = context.get_context()
        if action == "display_version":
            connection.info[BEGIN_KEY] = "BEGIN"  # `current` only reads: no write lock
        config.print_stdout(f"database: {target.display}")
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
            # read and planned again under the lock: another process may have written
            # meanwhile (a fleet's `memstore db upgrade` run at once: the later ones find
            # it done, and say so)
            heads = tuple(migration_context.get_current_heads())
            config.print_stdout(f"revision before: {revision_label(heads)}")
            if action in MOVES and not planned_steps(migration_context, heads):
                config.print_stdout(
                    f"nothing to do: the database is at {revision_label(heads)} already "
                    f"(another process migrated it meanwhile)"
                )
            refuse_data_loss(migration_context, target, connection)
            try:
                context.run_migrations()
            except DBAPIError as exc:  # the tables do not match the revision they record
                refused = schema_mismatch(exc, target.display, revision_label(heads))
                if refused is None:
                    raise
                raise CommandError(f"{refused}; alembic did nothing") from exc
            if action in MOVES and tuple(migration_context.get_current_heads()) == (HEAD_REVISION,):
                refused = damaged_after_migrating(connection, target.display)
                if refused is not None:  # (rolls the migration back)
                    raise CommandError(f"{refused}; alembic did nothing")
        connection.commit()
        config.print_stdout(
            f"revision after: {revision_label(migration_context.get_current_heads())}"
        )
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
