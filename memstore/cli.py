"""The ``memstore`` command line: thin commands over the library.

Commands are registered with the :func:`command` decorator into :data:`COMMANDS`; each has a
``configure(parser)`` that adds its arguments and a ``run(args, ctx) -> exit code``. Another
module adds a subcommand without touching this one: create ``memstore/cli_<name>.py`` (it is
imported when the parser is built) containing, for example::

    from memstore.cli import command

    def _configure(parser):
        parser.add_argument("--episodes", type=int, default=1)

    @command("demo", help="play a short demo", configure=_configure)
    def demo(args, ctx):
        with ctx.open_store(create=True) as store:
            ...
        return 0

Heavy modules (SQLAlchemy, the store, the exporters) are imported inside the commands, and
litellm never: ``memstore`` starts fast.

The error contract: a usage error (a bad option or value, checked by the ``type=`` functions
below) is argparse's usage and one error line, exit code 2. memstore's own errors
(:class:`~memstore.errors.MemstoreError`, :class:`CliError`), OS errors and SQLite's
reports about the file or the machine (a full disk, an I/O error, a corrupt file) are one
line, ``memstore: error: ...``, exit code 1. Anything else is a bug: one line
``memstore: internal error: ...``, exit code 1, and its traceback with ``--debug`` (or
``MEMSTORE_DEBUG=1``). No message ever shows an SQL statement or its parameters.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from memstore.errors import CliError  # noqa: F401 - importable from here too

__all__ = ["COMMANDS", "CliError", "Command", "Context", "build_parser", "command", "main"]

PROG = "memstore"
DEFAULT_EXPORT = Path("game_files") / "Memories.md"
DEFAULT_NOTES = Path("game_files") / "Notes.md"
#: modules named like this, inside the memstore package, may register more commands
PLUGIN_PREFIX = "cli_"


RunFunction = Callable[[argparse.Namespace, "Context"], int]
ConfigureFunction = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: RunFunction
    configure: ConfigureFunction | None = None


#: every subcommand, by name, in registration order (the order of ``memstore --help``)
COMMANDS: dict[str, Command] = {}


def command(
    name: str, *, help: str, configure: ConfigureFunction | None = None
) -> Callable[[RunFunction], RunFunction]:
    """Register ``run(args, ctx) -> int`` as the subcommand ``name``."""

    def register(run: RunFunction) -> RunFunction:
        if name in COMMANDS and COMMANDS[name].run is not run:
            raise ValueError(f"memstore command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, run, configure)
        return run

    return register


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

    def print(self, *parts: object) -> None:
        print(*parts, file=self.out)

    def refuse_database_file(self, path: str) -> None:
        """Refuse to write ``path`` when it is the database (or its -wal, -shm or -journal
        file): an export there would replace every memory with text."""
        from memstore.connection import resolve_target

        db = resolve_target(self.db).path
        if db is None:
            return
        target = Path(path).resolve()
        for suffix in ("", "-wal", "-shm", "-journal"):
            if target == Path(str(db) + suffix).resolve():
                raise CliError(f"{path} is the database's own file: give another file to write")

    def open_store(self, *, create: bool = False, read_only: bool = False) -> Any:
        """Open the database (printing which one); without ``create`` it must exist.

        Commands that only read open it ``read_only``: they work on a database in a
        read-only folder or file system, and never write to it.
        """
        from memstore.config import load_config
        from memstore.store import MemoryStore

        if not create and not self.db_exists():
            raise CliError(f"no database at {self.db_display} (give --db PATH or set MEMSTORE_DB)")
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


# --- argument helpers --------------------------------------------------------------------------


def _database(value: str) -> str:
    """``type=`` for --db: a path or sqlite URL, never empty."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a database path or sqlite URL, not an empty one")
    return value


#: the largest location number SQLite can store (a signed 64-bit integer)
MAX_LOCATION_ID = 2**63 - 1
#: --busy-timeout's ceiling: a day (SQLite takes milliseconds in an int)
MAX_BUSY_TIMEOUT_S = 86_400.0


def location_id(value: str) -> int:
    """``type=`` for a location number: a usage error (exit 2) unless 0 to 2**63 - 1."""
    try:
        number = int(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"location must be an integer (the Z-machine location number), got {value!r}"
        ) from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"location must not be negative, got {number}")
    if number > MAX_LOCATION_ID:
        raise argparse.ArgumentTypeError(
            f"location must be at most {MAX_LOCATION_ID} (SQLite's largest integer), got {number}"
        )
    return number


def positive_int(value: str) -> int:
    """``type=`` for a count that must be 1 or more (0 is refused, not read as "default")."""
    try:
        number = int(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    if number > MAX_LOCATION_ID:  # SQLite takes no larger integer (a LIMIT, a count)
        raise argparse.ArgumentTypeError(f"must be at most {MAX_LOCATION_ID}, got {number}")
    return number


def _output_path(value: str) -> str:
    """``type=`` for --out and --notes: a path, or - for standard output; never empty."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a file path, or - for standard output")
    return value


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 memory``, ``2 memories``, ``0 locations``."""
    if count == 1:
        return f"{count} {singular}"
    return f"{count} {plural_form or singular + 's'}"


def read_text(path: str, what: str = "Memories.md") -> str:
    """The UTF-8 text of the file ``path`` (a ``what`` file), or one CliError line."""
    file = Path(path)
    if file.is_dir():
        raise CliError(f"{file} is a folder, not a {what} file")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:  # some name no file (ENOENT, EACCES); a read error (EIO) does not
        raise CliError(f"cannot read {file}: {exc.strerror or exc}") from exc


# --- export ------------------------------------------------------------------------------------


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=_output_path,
        default=str(DEFAULT_EXPORT),
        help=f"the file to write, or - for standard output (default: {DEFAULT_EXPORT}); "
        "a symbolic link is written through, a device, FIFO or folder refused",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the file differs from the database",
    )
    parser.add_argument(
        "--notes",
        nargs="?",
        const=str(DEFAULT_NOTES),
        type=_output_path,
        default=None,
        metavar="PATH",
        help="also write the agent-flagged memories to PATH, or - for standard output "
        f"(default when given without PATH: {DEFAULT_NOTES})",
    )


@command(
    "export",
    help="write the database's memories to Memories.md (atomically)",
    configure=_configure_export,
)
def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    from exporters import render_memories_md
    from memstore.export_file import check_target, export_check, write_atomically

    stdout = "-"
    if stdout in (args.out, args.notes):
        if args.check:
            raise CliError("--check compares files: it cannot be used with - (standard output)")
        if args.out == args.notes:
            raise CliError("--out - and --notes - would mix two files on standard output")
        # the export goes to standard output: what is said about it, to standard error
        info = Context(args, ctx.err, ctx.err)
    else:
        info = ctx
    for path in (args.out, args.notes):  # refuse a device, FIFO or folder before any write
        if path is not None and path != stdout:
            ctx.refuse_database_file(path)
            check_target(path)
    with info.open_store(read_only=True) as store:
        entries, base = store.export_snapshot()
        notes = _notes_text(store) if args.notes else None
    text = render_memories_md(entries, base)
    count = sum(len(entry.memories) for entry in entries)
    summary = f"{plural(len(entries), 'location')}, {plural(count, 'memory', 'memories')}"
    outputs = [(args.out, text, summary)]
    if notes is not None:
        outputs.append((args.notes, notes, "agent-flagged memories"))
    if args.check:
        from memstore.cli_diff import check_report

        stale = [
            (path, content) for path, content, _what in outputs if not export_check(path, content)
        ]
        if not stale:
            ctx.print(f"{args.out} is up to date ({summary})")
            return 0
        export_args = ["--out", args.out] + (["--notes", args.notes] if notes else [])
        for path, content in stale:
            report = check_report(path, content, args.db, export_args=export_args)
            print(f"{PROG}: {report}", file=ctx.err)
        return 1

    def warn(message: str) -> None:
        print(f"{PROG}: warning: {message}", file=ctx.err)

    for path, content, what in outputs:
        if path == stdout:
            ctx.out.write(content)
        else:
            write_atomically(path, content, warn=warn)
            info.print(f"wrote {path}: {what}")
    return 0


def _notes_text(store: Any) -> str:
    from exporters import render_notes_md
    from memstore.flagged import FlaggedMemories

    return render_notes_md(FlaggedMemories(store).all())


# --- import ------------------------------------------------------------------------------------


def _configure_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the Memories.md file to read")
    parser.add_argument(
        "--apply", action="store_true", help="write the changes (without it: only print the plan)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="delete database memories that were removed from the file",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="let --prune delete more than 10%% of the memories, or every one (empty file)",
    )
    side = parser.add_mutually_exclusive_group()
    side.add_argument(
        "--ours",
        action="store_true",
        help="resolve conflicts by keeping what the database has now",
    )
    side.add_argument(
        "--theirs",
        action="store_true",
        help="resolve conflicts by taking what the file says",
    )
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="apply the valid parts of a file that has problems or conflicts",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every memory and location that would change",
    )


def import_file(store: Any, text: str, *, prune: bool = False) -> tuple[Any, Any]:
    """Parse ``text`` and plan its import into ``store``, 2-way: (ParseResult, ImportPlan).

    For tools and benchmarks that look at a plan; ``memstore import`` itself plans and
    writes in one transaction (``memstore.store_import.import_memories``).
    """
    from exporters import parse_memories_md
    from memstore.importing import plan_import

    parsed = parse_memories_md(text)
    current = store.export_locations() if store is not None else []
    plan = plan_import(current, parsed.locations, parsed.problems, source=text, prune=prune)
    return parsed, plan


@command(
    "import",
    help="merge a reviewed Memories.md into the database; --apply writes the changes",
    configure=_configure_import,
)
def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.merge import Resolution
    from memstore.store import MemoryStore
    from memstore.store_import import import_memories

    text = read_text(args.file)
    options = {
        "prune": args.prune,
        "resolution": Resolution.OURS if args.ours else Resolution.THEIRS if args.theirs else None,
        "skip_invalid": args.skip_invalid,
        "force": args.force,
    }
    if ctx.db_exists():
        with ctx.open_store(read_only=not args.apply) as store:
            outcome = import_memories(store, text, apply=args.apply, **options)
        return _report_import(args, ctx, outcome)
    # No database yet: plan against an empty one, and create it only when there is work.
    ctx.print(f"database: {ctx.db_display} (does not exist yet)")
    from exporters import parse_memories_md

    parsed = parse_memories_md(text)
    with MemoryStore.open("sqlite://") as empty:
        outcome = import_memories(empty, text, apply=False, parsed=parsed, **options)
    if args.apply and outcome.refused is None and outcome.plan.has_changes:
        with ctx.open_store(create=True) as store:
            outcome = import_memories(store, text, apply=True, parsed=parsed, **options)
    return _report_import(args, ctx, outcome)


def _report_import(args: argparse.Namespace, ctx: Context, outcome: Any) -> int:
    plan = outcome.plan
    ctx.print(f"import {args.file}:")
    ctx.print(plan.summary(prune=args.prune))
    if args.verbose and plan.has_changes:
        ctx.print(plan.details())
    if outcome.refused is not None:
        raise CliError(f"{args.file}: {outcome.refused}")
    if outcome.applied:
        skipped = ""
        if plan.problems or plan.conflicts:
            skipped = " (the problems listed were skipped)"
            if plan.conflicts and not args.skip_invalid:
                side = "the database's side" if args.ours else "the file's side"
                skipped = f" (conflicts resolved by taking {side})"
        ctx.print(f"applied{skipped}")
    elif args.apply:
        ctx.print("nothing to apply: the database already matches the file")
    else:
        ctx.print("dry run: nothing written (use --apply to write)")
    return 0


# --- show, history, stats ----------------------------------------------------------------------


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "location",
        nargs="?",
        type=location_id,
        help="the location's number (Z-machine object id)",
    )
    parser.add_argument(
        "--flagged",
        type=positive_int,
        nargs="?",
        const=20,
        default=None,
        metavar="N",
        help="list the N most important agent-flagged memories (default 20)",
    )


@command(
    "show",
    help="print what the agent sees at a location, or the agent's flagged notes",
    configure=_configure_show,
)
def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    if args.flagged is not None:
        from memstore.flagged import FlaggedMemories
        from memstore.memory_tools import format_top_memories

        with ctx.open_store(read_only=True) as store:
            top = FlaggedMemories(store).top(args.flagged)
        ctx.print(format_top_memories(top) if top else "no agent-flagged memories")
        if args.location is None:
            return 0
    if args.location is None:
        raise CliError("give a location number, or --flagged")
    from memstore.cli_map import exits_for_show

    location = args.location
    with ctx.open_store(read_only=True) as store:
        info = store.location(location)
        text = store.get_location_memory(location)
        exits = exits_for_show(store, location, text)  # the map's exits line, as the agent's
    name = info.name if info is not None else exits.name or "(not in the database)"
    ctx.print(f"Location {location}: {name}")
    ctx.print(text if text else f"no memories at location {location}")
    if exits.line:
        ctx.print(exits.line)
    return 0


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("location", type=location_id, help="the location's number")
    parser.add_argument("title", help="the memory's exact title")


def _describe(memory: Any) -> str:
    where = f"Ep{memory.episode}, T{memory.turns}"
    line = f"[{memory.status.value}] {memory.title} ({memory.category.value}, "
    line += f"{memory.persistence.value}, {where})"
    at_parts = []
    if memory.superseded_at_episode is not None:
        at_parts.append(f"Ep{memory.superseded_at_episode}")
    if memory.superseded_at_turn is not None:
        at_parts.append(f"T{memory.superseded_at_turn}")
    at = f" at {', '.join(at_parts)}" if at_parts else ""
    if memory.invalidation_reason is not None:
        line += f" -> invalidated{at}: {memory.invalidation_reason}"
    elif memory.superseded_by is not None:
        line += f" -> superseded{at} by {memory.superseded_by!r}"
    elif memory.status.value == "SUPERSEDED":
        line += f" -> superseded{at}"
    return line


def closest_titles(title: str, titles: Sequence[str], limit: int = 3) -> list[str]:
    """The titles most like ``title`` (ignoring case), best first: a hint to show, never a
    match to use (history, like every title lookup, takes the exact title)."""
    by_folded: dict[str, str] = {}
    for known in titles:
        by_folded.setdefault(known.casefold(), known)
    close = difflib.get_close_matches(title.casefold(), list(by_folded), n=limit, cutoff=0.6)
    return [by_folded[folded] for folded in close]


@command("history", help="the supersession chain of a memory", configure=_configure_history)
def cmd_history(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.errors import MemoryNotFound, MemstoreError

    location = args.location
    with ctx.open_store(read_only=True) as store:
        chain = store.history(location, args.title)
        titles = [] if chain else [memory.title for memory in store.memories(location, True)]
    if not chain and args.title in titles:  # there, but its links cannot be put in order
        raise MemstoreError(
            f"memory {args.title!r} at location {location} is in a supersession chain whose "
            f"links go round in a circle: run `memstore check`"
        )
    if not chain:
        close = closest_titles(args.title, titles)
        hint = f"; closest titles there: {', '.join(map(repr, close))}" if close else ""
        raise MemoryNotFound(f"no memory titled {args.title!r} at location {location}{hint}")
    count = plural(len(chain), "memory", "memories")
    ctx.print(f"history of {args.title!r} at location {location} ({count}, oldest first):")
    for number, memory in enumerate(chain, 1):
        ctx.print(f"{number}. {_describe(memory)}")
    return 0


@command("stats", help="counts of locations and memories, and the database size")
def cmd_stats(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.open_store(read_only=True) as store:
        status = store.get_status()

    def joined(counts: dict[str, int]) -> str:
        return ", ".join(f"{key} {value}" for key, value in counts.items()) or "none"

    ctx.print(f"schema revision: {status['schema_revision']}")
    ctx.print(f"locations: {status['locations']}")
    ctx.print(f"live memories by tier: {joined(status['memories_by_tier'])}")
    ctx.print(f"memories by status: {joined(status['memories_by_status'])}")
    ctx.print(f"live memories by category: {joined(status['memories_by_category'])}")
    ctx.print(f"database size: {status['database_bytes']:,} bytes")
    return 0


# --- rom ---------------------------------------------------------------------------------------


def _configure_rom(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rom_command", metavar="{fetch,check}", required=True)
    fetch = sub.add_parser("fetch", help="download the Zork I story file and check it")
    fetch.add_argument("--dest", default=None, help="where to write it (default: roms/zork1.z3)")
    fetch.add_argument("--url", default=None, help="where to download it from")
    check = sub.add_parser("check", help="find the story file and check its sha256")
    check.add_argument("--path", default=None, help="check this file instead of searching")


@command(
    "check",
    help="verify the database's rules (links, cycles, versions) and SQLite's integrity",
)
def cmd_check(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.invariants import check_invariants

    with ctx.open_store(read_only=True) as store:
        with store.transaction(write=False) as conn:
            problems = check_invariants(conn, sqlite_checks=True)
    for problem in problems:
        ctx.print(f"  {problem}")
    if problems:
        raise CliError(f"{ctx.db_display}: {len(problems)} problem(s) found")
    ctx.print("ok: every supersession link, successor and version is sound")
    return 0


@command("rom", help="fetch or check the Zork I story file", configure=_configure_rom)
def cmd_rom(args: argparse.Namespace, ctx: Context) -> int:
    from memstore import rom

    if args.rom_command == "fetch":
        dest = Path(args.dest) if args.dest else rom.ROM_RELATIVE_PATH
        written = rom.fetch_rom(dest, args.url or rom.UPSTREAM_URL)
        ctx.print(f"fetched Zork I release 119 to {written} (sha256 {rom.ZORK1_SHA256})")
        return 0
    found = rom.find_rom(args.path)
    ctx.print(f"{found} (Zork I release 119, sha256 ok)")
    return 0


# --- the parser and main -----------------------------------------------------------------------


def _load_plugins() -> None:
    """Import ``memstore/cli_*.py`` so their ``@command`` registrations run."""
    package = sys.modules["memstore"]
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith(PLUGIN_PREFIX):
            importlib.import_module(f"memstore.{info.name}")


def _busy_timeout(value: str) -> float:
    """``type=`` for --busy-timeout: a finite number of seconds, 0 to a day."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 <= seconds <= MAX_BUSY_TIMEOUT_S:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT_S:.0f}, got {value!r}"
        )
    return seconds


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
        print(f"{PROG} {_version()}", file=sys.stdout)
        parser.exit()


def add_global_options(parser: argparse.ArgumentParser, *, copy: bool) -> None:
    """--db, --busy-timeout and --debug, accepted before the subcommand and after it.

    The subcommand's ``copy`` has no defaults (``SUPPRESS``): the namespace keeps what was
    given before the subcommand unless the option is given again after it.
    """
    group = parser.add_argument_group("global options (before or after the command)")

    def default(value: object) -> object:
        return argparse.SUPPRESS if copy else value

    group.add_argument(
        "--db",
        type=_database,
        default=default(None),
        help="database path or sqlite URL (default: $MEMSTORE_DB, [tool.memstore] db, "
        "or game_files/memories.db)",
    )
    group.add_argument(
        "--busy-timeout",
        type=_busy_timeout,
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


def build_parser() -> argparse.ArgumentParser:
    _load_plugins()
    parser = argparse.ArgumentParser(
        prog=PROG, description="Spatial memory for LLM agents playing Zork I."
    )
    parser.add_argument("--version", action=_VersionAction)
    add_global_options(parser, copy=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in COMMANDS.values():
        child = sub.add_parser(entry.name, help=entry.help, description=entry.help)
        if entry.configure is not None:
            entry.configure(child)
        add_global_options(child, copy=True)
        child.set_defaults(_run=entry.run)
    return parser


#: where SQLAlchemy's messages start to quote the statement, its parameters and a docs link
_SQL_MARKERS = ("[SQL:", "[parameters:", "(Background on this error")
#: an internal error's message is cut to this many characters
MAX_INTERNAL_MESSAGE = 200


def _without_sql(message: str) -> str:
    """``message`` up to the first SQL statement, parameters or docs link SQLAlchemy adds."""
    cuts = [index for index in map(message.find, _SQL_MARKERS) if index != -1]
    return message[: min(cuts)] if cuts else message


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror}"
    else:
        message = _without_sql(str(exc))
    return " ".join(message.split()) or type(exc).__name__


def _internal_line(exc: BaseException) -> str:
    """``ExcType: short message`` for an error memstore did not expect."""
    message = " ".join(_without_sql(str(exc)).split())
    if len(message) > MAX_INTERNAL_MESSAGE:
        message = message[: MAX_INTERNAL_MESSAGE - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


#: SQLite result codes (and their extended forms) about the file or the machine, not a bug
_SQLITE_ENVIRONMENT = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_CANTOPEN",
    "SQLITE_CORRUPT",
    "SQLITE_NOTADB",
    "SQLITE_READONLY",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_PERM",
    "SQLITE_NOLFS",
)


def _sqlite_environment(exc: BaseException) -> str | None:
    """``message (SQLITE_CODE)`` when ``exc`` (or the sqlite3 error a SQLAlchemy error wraps)
    is a full disk, an I/O error, a corrupt or unopenable file ...; else None. SQLite's own
    message never quotes the statement."""
    sqlite3 = sys.modules.get("sqlite3")
    orig = getattr(exc, "orig", exc)
    if sqlite3 is None or not isinstance(orig, sqlite3.Error):
        return None
    name = getattr(orig, "sqlite_errorname", None) or ""
    if not name.startswith(_SQLITE_ENVIRONMENT):
        return None
    return f"{' '.join(str(orig).split())} ({name})"


def _expected(exc: Exception) -> bool:
    """A user error: memstore's own (MemstoreError, CliError) or the operating system's."""
    from memstore.errors import MemstoreError

    return isinstance(exc, MemstoreError | CliError | OSError)


def _debugging(args: argparse.Namespace) -> bool:
    flag = os.environ.get("MEMSTORE_DEBUG", "").strip().lower()
    return bool(getattr(args, "debug", False)) or flag not in ("", "0", "false", "no", "off")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``memstore`` with ``argv`` (default: the process arguments); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    ctx = Context(args, sys.stdout, sys.stderr)
    try:
        code = int(args._run(args, ctx))
        ctx.out.flush()  # a closed pipe shows here, not in Python's exit handler
        return code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`memstore stats | head -2`): nothing to say, and nowhere to
        # say it; send what Python would still flush at exit to /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if _debugging(args):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        environment = _sqlite_environment(exc)
        if _expected(exc):
            print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        elif environment is not None:
            print(f"{PROG}: error: {environment}", file=sys.stderr)
        else:
            print(
                f"{PROG}: internal error: {_internal_line(exc)} "
                "(run with --debug for the traceback)",
                file=sys.stderr,
            )
        return 1


if __name__ == "__main__":  # python -m memstore.cli: use the importable module's registry
    from memstore.cli import main as _main

    sys.exit(_main())
