"""``memstore show``, ``history``, ``stats``, ``check`` and ``rom``: reading a database (and
finding the story file), never writing to it."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memstore.cli import CliError, Context, command
from memstore.cli_args import location_id, plural, positive_int


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
    parser.set_defaults(_show_parser=parser)  # cmd_show's usage error names this parser


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
    if args.location is None:  # a usage error: the usage line and exit code 2
        args._show_parser.error("give a location number, or --flagged")
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
    fetch.add_argument(
        "--dest",
        default=None,
        help="where to write it (default: roms/zork1.z3); an existing file there must be a "
        "story file (or empty), and never the database's own",
    )
    fetch.add_argument("--url", default=None, help="where to download it from")
    fetch.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --dest that is not a story file (never the database)",
    )
    check = sub.add_parser("check", help="find the story file and check its sha256")
    check.add_argument("--path", default=None, help="check this file instead of searching")


@command(
    "check",
    help="verify the database's rules (links, cycles, versions, rows export can read) and "
    "SQLite's integrity",
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
    ctx.print("ok: every row is readable; every supersession link, successor and version is sound")
    return 0


@command("rom", help="fetch or check the Zork I story file", configure=_configure_rom)
def cmd_rom(args: argparse.Namespace, ctx: Context) -> int:
    from memstore import rom

    if args.rom_command == "fetch":
        dest = Path(args.dest) if args.dest else rom.ROM_RELATIVE_PATH
        ctx.refuse_database_file(str(dest))  # even with --force: it holds every memory
        written = rom.fetch_rom(dest, args.url or rom.UPSTREAM_URL, force=args.force)
        ctx.print(f"fetched Zork I release 119 to {written} (sha256 {rom.ZORK1_SHA256})")
        return 0
    found = rom.find_rom(args.path)
    ctx.print(f"{found} (Zork I release 119, sha256 ok)")
    return 0
