"""`memstore db upgrade|downgrade|current|history`: alembic's migrations from an installed
memstore.

They run the migrations shipped with the package (``memstore.migrations_dir``) on the
database the other commands use (``--db``, ``MEMSTORE_DB``, ``[tool.memstore]``), from any
working directory. The guards of ``migrations/env.py`` apply: a file that is not a memstore
database is refused and left untouched; a downgrade step that would delete stored data
needs ``--allow-data-loss`` (memstore.downgrade_guard).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from memstore.cli import CliError, Context, add_global_options, command


def _configure_db(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="db_command", metavar="{upgrade,downgrade,current,history}")
    sub.required = True
    upgrade = sub.add_parser("upgrade", help="bring the database's schema to REV (default head)")
    upgrade.add_argument("revision", nargs="?", default="head", help="target revision (head)")
    downgrade = sub.add_parser(
        "downgrade",
        help="take the database's schema back to REV (a step that deletes stored data, and "
        "always the one to base, needs --allow-data-loss)",
    )
    downgrade.add_argument("revision", help="target revision (base: no schema at all)")
    downgrade.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="run it even though it deletes stored data (the tables or columns it drops)",
    )
    sub.add_parser("current", help="the database's schema revision")
    sub.add_parser("history", help="every revision this memstore knows, newest first")
    for child in sub.choices.values():  # --db and friends after the subcommand's own too
        add_global_options(child, copy=True)


class _Output:
    """The stream alembic prints to: alembic's writer swallows a failed write (a full disk,
    a closed pipe), so the first one is kept here and raised once alembic returns."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.encoding = getattr(out, "encoding", None) or "utf-8"
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        if self.failed is not None:
            raise self.failed
        try:
            return int(self.out.write(text))
        except OSError as exc:
            self.failed = exc
            raise

    def flush(self) -> None:
        self.out.flush()

    def raise_failure(self) -> None:
        """Raise the write that failed, if one did (after flushing what is buffered)."""
        if self.failed is None:
            self.flush()
        if self.failed is not None:
            raise self.failed


def alembic_config(db: str, out: Any, busy_timeout_s: float | None = None) -> Any:
    """An alembic Config for ``db`` over the migrations shipped with memstore; a migration
    waits ``busy_timeout_s`` for another process's lock (migrations/env.py)."""
    from alembic.config import Config

    from memstore.connection import resolve_target
    from memstore.migrations_dir import migrations_path

    config = Config(stdout=out)
    config.set_main_option("script_location", str(migrations_path()))
    # the resolved target, not its URL's text: a path that is not UTF-8 has none
    config.attributes["memstore_target"] = resolve_target(db)
    if busy_timeout_s is not None:
        config.attributes["busy_timeout_s"] = busy_timeout_s
    return config


def _current(ctx: Context) -> int:
    """The database's revision, read without writing: ``current`` never creates a file
    (alembic would create an empty one) and reads a database in a read-only folder."""
    import sqlite3

    from memstore.connection import HEAD_REVISION, check_existing, read_only_uri, resolve_target
    from memstore.errors import SchemaOutOfDate, SchemaTooNew

    target = resolve_target(ctx.db)
    ctx.print(f"database: {target.display}")
    path = target.path
    if path is None and target.url.get_backend_name() == "sqlite":
        # an in-memory database is new every time: no schema yet
        ctx.print("revision: base (run `memstore db upgrade`)")
        return 0
    if path is None:  # a database server's URL: read its alembic_version table
        _print_revision(ctx, _server_revision(target.url), HEAD_REVISION)
        return 0
    if not path.exists():
        raise CliError(f"no database at {target.display} (give --db PATH or set MEMSTORE_DB)")
    try:
        # refuses a file that is not a memstore database
        empty = check_existing(target, busy_timeout_s=ctx.args.busy_timeout)
    except (SchemaOutOfDate, SchemaTooNew):
        empty = False
    revision = None
    if not empty:
        probe = sqlite3.connect(read_only_uri(path), uri=True, timeout=ctx.args.busy_timeout)
        try:
            row = probe.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            probe.close()
        revision = row[0] if row else None
    _print_revision(ctx, revision, HEAD_REVISION)
    return 0


def _print_revision(ctx: Context, revision: str | None, head: str) -> None:
    from memstore.migrations_dir import known_revisions, newer_revision

    if revision == head:
        ctx.print(f"{revision} (head)")
    elif revision is None:
        ctx.print("base: no schema yet (run `memstore db upgrade`)")
    elif revision in known_revisions():
        ctx.print(f"{revision} (head is {head}: run `memstore db upgrade`)")
    elif not newer_revision(revision):
        ctx.print(f"{revision!r:.60} (no revision of memstore's: the database is damaged)")
    else:
        ctx.print(
            f"{revision} (newer than this memstore knows: it knows up to {head}; use a newer "
            f"memstore)"
        )


def _server_revision(url: Any) -> str | None:
    """The revision in a database server's ``alembic_version`` table (None without one),
    read without writing; a server that does not answer within the connect timeout is a
    one-line error (DatabaseUnavailable)."""
    from memstore.connection import answer_limit, resolve_target
    from memstore.pg_connection import server_tables
    from memstore.schema import HEAD_REVISION
    from memstore.sqlite_probe import judge_schema

    location = (
        url.render_as_string(hide_password=False) if hasattr(url, "render_as_string") else url
    )
    target = resolve_target(str(location))
    tables, version, columns = server_tables(target, answer_limit())
    if version == HEAD_REVISION or (version is None and "memories" in tables):
        # damaged (at head, or its revision emptied): one line, as SQLite's probe says it
        judge_schema(target.display, tables, version, kind="PostgreSQL", columns=columns)
    return version


@command(
    "db", help="schema migrations: upgrade, downgrade, current, history", configure=_configure_db
)
def cmd_db(args: argparse.Namespace, ctx: Context) -> int:
    from alembic import command as alembic
    from alembic.util import CommandError

    if args.db_command == "current":
        return _current(ctx)
    output = _Output(ctx.out)
    config = alembic_config(ctx.db, output, ctx.args.busy_timeout)
    try:
        if args.db_command == "upgrade":
            alembic.upgrade(config, args.revision)
        elif args.db_command == "downgrade":
            config.attributes["allow_data_loss"] = args.allow_data_loss
            config.attributes["confirm_with"] = (
                f"memstore db downgrade {args.revision} --allow-data-loss"
            )
            alembic.downgrade(config, args.revision)
        else:
            alembic.history(config)
    except CommandError as exc:
        raise CliError(plain_alembic(str(exc).strip().splitlines()[0])) from exc
    except Exception as exc:
        refused = _refusal(ctx, exc)
        if refused is None:
            raise
        raise refused from exc
    output.raise_failure()
    return 0


#: alembic's words for a revision it cannot go to, and memstore's
_ALEMBIC_WORDS = (
    (
        re.compile(r"Relative revision ([+-])(\d+) didn't produce \d+ migrations"),
        lambda m: (
            f"there are not {m[2]} revision(s) {'above' if m[1] == '+' else 'below'} the "
            f"database's (`memstore db current` and `memstore db history` list them); "
            f"nothing was done"
        ),
    ),
    (
        re.compile(r"Range revision not allowed"),
        lambda _m: "give one revision (a number like 0005, head, base, +1 or -1), not a range",
    ),
    (
        re.compile(r"Can't locate revision identified by '(.*)'"),
        lambda m: f"unknown revision '{m[1]}' (`memstore db history` lists them)",
    ),
    (
        re.compile(r"Destination (\S+) is not a valid downgrade target from current head"),
        lambda m: (
            f"revision {m[1]} is not below the database's: downgrade only goes back; "
            f"nothing was done"
        ),
    ),
)


def plain_alembic(message: str) -> str:
    """alembic's message about a revision, in memstore's words where it has them."""
    for pattern, plain in _ALEMBIC_WORDS:
        found = pattern.match(message)
        if found is not None:
            return plain(found)
    return message


def _refusal(ctx: Context, exc: Exception) -> Exception | None:
    """What a migration the database refused becomes, naming the database: another
    process's lock held past the busy timeout (the migration is one transaction,
    migrations/env.py, rolled back), a read-only database, a file SQLite cannot open or
    write; None for anything else (raised as it is)."""
    from memstore.cli_errors import sqlite_environment
    from memstore.connection import resolve_target
    from memstore.refusals import failure_kind, one_line, store_busy

    kind = failure_kind(exc)
    where = resolve_target(ctx.db).display
    if kind in ("busy", "conflict"):
        return store_busy(where, kind, one_line(exc))
    if kind == "read-only":
        return CliError(f"read-only database: {where} ({one_line(exc)}); nothing was written")
    environment = sqlite_environment(exc)
    if environment is not None:
        return CliError(f"{where}: {environment}")
    return None
