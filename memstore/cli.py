"""The ``memstore`` command line: thin commands over the library.

Commands are registered with the :func:`command` decorator into :data:`COMMANDS`; each has a
``configure(parser)`` that adds its arguments and a ``run(args, ctx) -> exit code``. Another
module adds a subcommand without touching this one: create ``memstore/cli_<name>.py`` (it is
imported when the first parser is built: the package's folders are listed once per value of
``memstore.__path__``) containing, for example::

    from memstore.cli import command

    def _configure(parser):
        parser.add_argument("--episodes", type=int, default=1)

    @command("demo", help="play a short demo", configure=_configure)
    def demo(args, ctx):
        with ctx.open_store(create=True) as store:
            ...
        return 0

Heavy modules (SQLAlchemy, the store, the exporters) are imported inside the commands, and
litellm never: ``memstore`` starts fast. ``main`` builds its parser once and parses with it
again while ``COMMANDS`` is unchanged (argparse looks up a translation of every help string
as it builds: ~10 ms): as with any argparse parser parsed twice, an option's default object
is the same in every call, so a command must not change a mutable default in place, and
``configure`` runs once (what it reads then, it keeps).

The built-in commands live in ``cli_transfer`` (export, import) and ``cli_inspect`` (show,
history, stats, check, rom); the argument types in ``cli_args``; how an error becomes one
line in ``cli_errors``.

The error contract: a usage error (a bad option or value, checked by the ``type=`` functions
of ``cli_args``) is argparse's usage and one error line, exit code 2. memstore's own errors
(:class:`~memstore.errors.MemstoreError`, :class:`CliError`), OS errors and SQLite's
reports about the file or the machine (a full disk, an I/O error, a corrupt file), or a
database server's about the connection, are one line, ``memstore: error: ...``, exit
code 1. Anything else is a bug: one line ``memstore: internal error: ...``, exit code 1,
and its traceback with ``--debug`` (or ``MEMSTORE_DEBUG=1``). No message ever shows an
SQL statement or its parameters.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# the argument helpers (memstore.cli_args), importable from here too as before the split
from memstore.cli_args import (  # noqa: F401
    busy_timeout,
    database,
    location_id,
    plural,
    positive_int,
    read_text,
)
from memstore.cli_errors import debugging, error_line
from memstore.errors import CliError, MemstoreError

__all__ = ["COMMANDS", "CliError", "Command", "Context", "build_parser", "command", "main"]

PROG = "memstore"
#: modules named like this, inside the memstore package, may register more commands
PLUGIN_PREFIX = "cli_"
#: the package folders whose cli_*.py modules have been imported
_plugins_listed: tuple[str, ...] | None = None


RunFunction = Callable[[argparse.Namespace, "Context"], int]
ConfigureFunction = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: RunFunction
    configure: ConfigureFunction | None = None
    #: --db's metavar and help when it means something else here (eval: a folder)
    db: tuple[str, str] | None = None


#: every subcommand, by name, in registration order (the order of ``memstore --help``)
COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    *,
    help: str,
    configure: ConfigureFunction | None = None,
    db: tuple[str, str] | None = None,
) -> Callable[[RunFunction], RunFunction]:
    """Register ``run(args, ctx) -> int`` as the subcommand ``name``; ``db`` is --db's
    metavar and help there when it is not the database (``DB_OPTION``)."""

    def register(run: RunFunction) -> RunFunction:
        if name in COMMANDS and COMMANDS[name].run is not run:
            raise ValueError(f"memstore command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, run, configure, db)
        return run

    return register


def real_path(path: str | Path) -> Path:
    """``path`` made absolute with every symbolic link followed (``Path.resolve``); a loop
    of symbolic links is a CliError naming it, not pathlib's RuntimeError."""
    try:
        return Path(path).resolve()
    except RuntimeError as error:  # Python < 3.13: "Symlink loop from ..."
        raise CliError(f"{path} is a loop of symbolic links: give another file") from error


class Context:
    """What a command gets besides its arguments: the database, and where to print."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self._db: str | None = None

    @property
    def db(self) -> str:
        """The database path or URL: --db, else MEMSTORE_DB, [tool.memstore], the default."""
        if self._db is None:
            self._db = load_settings(db=self.args.db).db
        return self._db

    @property
    def db_display(self) -> str:
        from memstore.connection import resolve_target

        return resolve_target(self.db).display

    def db_exists(self) -> bool:
        from memstore.connection import resolve_target

        path = resolve_target(self.db).path
        return path is None or path.exists()

    def in_memory(self) -> bool:
        """Whether the database is SQLite's in-memory one (``sqlite:///``, ``sqlite:///:memory:``)."""
        from memstore.connection import resolve_target

        target = resolve_target(self.db)
        return target.path is None and not target.is_server

    def print(self, *parts: object) -> None:
        print(*parts, file=self.out)

    def refuse_database_file(self, path: str) -> None:
        """Refuse to write ``path`` when it is the database (or its -wal, -shm or -journal
        file): an export there would replace every memory with text."""
        from memstore.connection import SQLITE_SIDE_FILES, resolve_target

        db = resolve_target(self.db).path
        if db is None:
            return
        target = real_path(path)
        for suffix in ("", *SQLITE_SIDE_FILES):
            if target == real_path(str(db) + suffix):
                raise CliError(f"{path} is the database's own file: give another file to write")

    @staticmethod
    def refuse_same_file(first: tuple[str, str], second: tuple[str, str]) -> None:
        """Refuse two outputs, each ``(what, path)``, that name one file (through ``..``, a
        symbolic link or a hard link): the second write would replace the first."""
        (first_what, first_path), (second_what, second_path) = first, second
        a, b = Path(first_path), Path(second_path)
        same = real_path(a) == real_path(b)
        if not same and a.exists() and b.exists():
            same = os.path.samefile(a, b)
        if same:
            raise CliError(
                f"{first_what} {first_path} and {second_what} {second_path} are the same "
                f"file: the second would replace the first; give each its own file"
            )

    def open_store(self, *, create: bool = False, read_only: bool = False) -> Any:
        """Open the database (printing which one); without ``create`` it must exist.

        Commands that only read open it ``read_only``: they work on a database in a
        read-only folder or file system, and never write to it.
        """
        from memstore.config import load_config
        from memstore.store import MemoryStore

        if not create and not self.db_exists():
            raise CliError(f"no database at {self.db_display} (give --db PATH or set MEMSTORE_DB)")
        if read_only and not create and self.in_memory():
            raise CliError(
                f"{self.db} is an in-memory database: it starts empty and holds nothing to "
                f"read (give --db PATH or set MEMSTORE_DB to a database file)"
            )
        store = MemoryStore.open(
            self.db,
            config=load_config(db=self.db),
            busy_timeout_s=self.args.busy_timeout,
            read_only=read_only and not create,
        )
        self.print(f"database: {store.target.display}")
        return store


def load_settings(**overrides: Any) -> Any:
    """``memstore.config.load_config``, with a bad setting as a one-line :class:`CliError`.

    The library raises ValueError (pydantic's ValidationError for a bad value) for an
    unreadable ``[tool.memstore]`` or a setting out of range: the user's doing, not a bug.
    """
    from pydantic import ValidationError

    from memstore.config import load_config

    try:
        return load_config(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'settings'}: {error['msg']}"
            for error in exc.errors()
        )
        raise CliError(
            f"invalid memstore settings ([tool.memstore] in pyproject.toml, or MEMSTORE_*): "
            f"{problems}"
        ) from None
    except ValueError as exc:
        raise CliError(str(exc)) from exc


# --- the parser and main -----------------------------------------------------------------------


def _load_plugins() -> None:
    """Import ``memstore/cli_*.py`` so their ``@command`` registrations run (once for each
    value of the package's ``__path__``: listing its folders costs a good part of a start)."""
    global _plugins_listed
    package = sys.modules["memstore"]
    folders = tuple(package.__path__)
    if _plugins_listed == folders:
        return
    for info in pkgutil.iter_modules(folders):
        if info.name.startswith(PLUGIN_PREFIX):
            importlib.import_module(f"memstore.{info.name}")
    _plugins_listed = folders


def _version() -> str:
    """The installed distribution's version, else the package's ``__version__``."""
    import importlib.metadata

    try:
        return importlib.metadata.version(PROG)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(sys.modules["memstore"], "__version__", "unknown"))


class _VersionAction(argparse.Action):
    """--version, looked up only when asked for (reading package metadata costs a start)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        # runs inside parse_args, before main's handlers: it says what they would say
        if sys.stdout is None:  # `memstore --version >&-`
            parser.exit(_stdout_closed())
        try:
            sys.stdout.write(f"{PROG} {_version()}\n")
            sys.stdout.flush()  # a closed pipe or a full device shows here
        except BrokenPipeError:
            parser.exit(_reader_gone())
        except OSError as exc:
            print(f"{PROG}: {error_line(exc)}", file=sys.stderr)
            parser.exit(1)
        parser.exit()


def _stdout_closed() -> int:
    """Started with standard output closed: one line, exit code 1."""
    print(f"{PROG}: error: standard output is closed; nothing was done", file=sys.stderr)
    return 1


def _reader_gone() -> int:
    """The reader of standard output went away (`memstore stats | head -2`): nothing to
    say, and nowhere to say it; what Python would still flush at exit goes to /dev/null."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1


#: --db's meaning for every command but those that give their own (``Command.db``)
DB_OPTION = (
    "PATH_OR_URL",
    "database path or URL: a SQLite file or sqlite:// URL; the store says which other URLs "
    "it accepts (default: $MEMSTORE_DB, [tool.memstore] db, or game_files/memories.db)",
)


def add_global_options(
    parser: argparse.ArgumentParser, *, copy: bool, db: tuple[str, str] = DB_OPTION
) -> None:
    """--db, --busy-timeout and --debug, accepted before the subcommand and after it.

    The subcommand's ``copy`` has no defaults (``SUPPRESS``): the namespace keeps what was
    given before the subcommand unless the option is given again after it. ``db`` is
    --db's metavar and help (a command such as eval, whose --db is a folder, says so).
    """
    group = parser.add_argument_group("global options (before or after the command)")

    def default(value: object) -> object:
        return argparse.SUPPRESS if copy else value

    group.add_argument("--db", type=database, default=default(None), metavar=db[0], help=db[1])
    group.add_argument(
        "--busy-timeout",
        type=busy_timeout,
        default=default(30.0),
        metavar="SECONDS",
        help="how long to wait for another process's lock (default: 30)",
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=default(False),
        help="show the traceback of an error (or set MEMSTORE_DEBUG=1)",
    )


class _Parser(argparse.ArgumentParser):
    """An argparse parser that takes options only as spelled out: ``--allow`` is not
    ``--allow-data-loss``, nor ``--f`` ``--force`` (review S6 C F4: a confirmation given
    without typing the word the refusal names). Its subcommands' parsers are of this class
    too (argparse makes them with the parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    _load_plugins()
    parser = _Parser(prog=PROG, description="Spatial memory for LLM agents playing Zork I.")
    parser.add_argument("--version", action=_VersionAction)
    add_global_options(parser, copy=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in COMMANDS.values():
        child = sub.add_parser(entry.name, help=entry.help, description=entry.help)
        if entry.configure is not None:
            entry.configure(child)
        add_global_options(child, copy=True, db=entry.db or DB_OPTION)
        child.set_defaults(_run=entry.run)
    return parser


#: main's parser and the registry it was built from: argparse looks up the translation of
#: every help string as it builds (about 10 ms a parser), and a parser can parse many times
_main_parser: tuple[tuple[object, ...], argparse.ArgumentParser] | None = None


def _parser() -> argparse.ArgumentParser:
    """``build_parser()``, built again only when ``COMMANDS`` changed since the last call."""
    global _main_parser
    _load_plugins()
    key = (id(COMMANDS), *COMMANDS.values())
    if _main_parser is None or _main_parser[0] != key:
        _main_parser = (key, build_parser())
    return _main_parser[1]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``memstore`` with ``argv`` (default: the process arguments); returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if sys.stdout is None:  # started with its standard output closed (`memstore ... >&-`)
        return _stdout_closed()
    ctx = Context(args, sys.stdout, sys.stderr)
    try:
        with _plain_warnings(ctx.err):
            code = int(args._run(args, ctx))
        ctx.out.flush()  # a closed pipe shows here, not in Python's exit handler
        return code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        if _interrupted(exc) and not isinstance(exc, MemstoreError | CliError):
            # a library's error in the clean-up after Ctrl-C (a rollback refused); one of
            # memstore's own (what waits is lost, the disk is full) is said as it is
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        if debugging(args):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(f"{PROG}: {error_line(exc)}", file=sys.stderr)
        return 1


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a KeyboardInterrupt (its context or cause,
    however deep: alembic's clean-up after Ctrl-C raises SQLAlchemy's own error)."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, KeyboardInterrupt):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


@contextlib.contextmanager
def _plain_warnings(err: TextIO) -> Iterator[None]:
    """memstore's advice about a setting (memstore.config.ConfigWarning) as one line,
    ``memstore: warning: ...``, once per command, instead of Python's warning with a
    library's file and source line; any other warning as Python shows it."""
    shown: set[str] = set()
    python_shows = warnings.showwarning

    def show(message: Any, category: type[Warning], *rest: Any, **kwargs: Any) -> None:
        from memstore.config import ConfigWarning

        if not issubclass(category, ConfigWarning):
            python_shows(message, category, *rest, **kwargs)
        elif str(message) not in shown:
            shown.add(str(message))
            print(f"{PROG}: warning: {message}", file=err)

    # only how a warning is shown changes (not the filters: a module imported meanwhile
    # may add its own, which must stay)
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = python_shows


#: the modules of the built-in commands, imported (so registered) in this order: the order of
#: ``memstore --help``. Run as ``python -m memstore.cli``, the importable memstore.cli that
#: ``main`` comes from below imports them instead.
BUILTIN_COMMANDS = ("memstore.cli_transfer", "memstore.cli_inspect")
if __name__ != "__main__":
    for _module in BUILTIN_COMMANDS:
        importlib.import_module(_module)

if __name__ == "__main__":  # python -m memstore.cli: use the importable module's registry
    from memstore.cli import main as _main

    sys.exit(_main())
