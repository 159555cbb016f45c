"""`memstore map ...`: the map (issue 16) on the command line, thin over the library.

    memstore map export [--out game_files/Map.md] [--check] [--force]   # exporters.map_md
    memstore map export-json FILE [--force]                              # memstore.map_json
    memstore map import-json FILE [--replace]
    memstore map route FROM TO                                 # ids or room names
    memstore map rooms

Each subcommand also takes the global options after it (``memstore map route 64 27 --db
x.db``). ``show`` (memstore.cli) ends with the room's exits line through
:func:`exits_for_show`, the fullest line that fits the token budget, as the agent sees it.

The exports replace only what they wrote (memstore.export_file.foreign_file): an existing
file that is a SQLite database, not a Map.md memstore wrote (``map export``,
exporters.map_md.is_map_md), or not a map_state.json whose map the database has
(``map export-json``, memstore.map_json.map_state_at_risk; nor one holding what the reader
leaves out: a peer's listed exits, confidences, inferred ways back ...) is refused unless
``--force``; an empty file is replaced. What is shown to a person (Map.md, the text output) shows
names and actions as memstore.map_events.shown_text gives them: one line, control
characters visible, cut at SHOWN_MAX characters with an ellipsis.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from memstore.cli import CliError, Context, add_global_options, command
from memstore.cli_args import plural, read_text
from memstore.map_events import shown_text

if TYPE_CHECKING:
    from memstore.export_file import FileState

__all__ = ["DEFAULT_MAP_MD", "ShownExits", "cmd_map", "exits_for_show"]

DEFAULT_MAP_MD = Path("game_files") / "Map.md"
STDOUT = "-"
#: every SQLite database file begins with these bytes
_SQLITE_HEADER = b"SQLite format 3\x00"
#: how much of an existing file is read to tell whether it is a SQLite database
_HEAD_BYTES = 64
_FORCE = "give another file, or pass --force to overwrite it"


def _output_path(value: str) -> str:
    """``type=`` for an output file: a path, or - for standard output; never empty."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a file path, or - for standard output")
    return value


def _configure_map(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="map_command",
        metavar="{export,export-json,import-json,route,rooms}",
        required=True,
    )
    export = sub.add_parser(
        "export", help="write Map.md: a Mermaid graph of the rooms and a table per room"
    )
    export.add_argument(
        "--out",
        type=_output_path,
        default=str(DEFAULT_MAP_MD),
        help=f"the file to write, or - for standard output (default: {DEFAULT_MAP_MD})",
    )
    export.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 with a diff if the file differs from the database",
    )
    export.add_argument(
        "--force",
        action="store_true",
        help="replace --out even when it is not a Map.md (a SQLite database, another file) "
        "or is read-only",
    )
    export_json = sub.add_parser("export-json", help="write the map as ZorkGPT's map_state.json")
    export_json.add_argument("file", type=_output_path, help="the file, or - for standard output")
    export_json.add_argument(
        "--force",
        action="store_true",
        help="replace FILE even when it is not a map_state.json, holds a map the "
        "database does not have, or is read-only",
    )
    import_json = sub.add_parser(
        "import-json", help="replace the map with a map_state.json's (one transaction)"
    )
    import_json.add_argument("file", help="the map_state.json to read")
    import_json.add_argument(
        "--replace",
        action="store_true",
        help="replace a map the database already has (without it, that is refused)",
    )
    route = sub.add_parser("route", help="the shortest known route between two rooms")
    route.add_argument("start", metavar="FROM", help="a room's number or name")
    route.add_argument("goal", metavar="TO", help="a room's number or name")
    sub.add_parser("rooms", help="every room on the map, by number")
    for child in sub.choices.values():
        add_global_options(child, copy=True)


@command(
    "map",
    help="the map: export Map.md, map_state.json in and out, routes, rooms",
    configure=_configure_map,
)
def cmd_map(args: argparse.Namespace, ctx: Context) -> int:
    run = {
        "export": _export,
        "export-json": _export_json,
        "import-json": _import_json,
        "route": _route,
        "rooms": _rooms,
    }[args.map_command]
    return run(args, ctx)


def _read_map(ctx: Context) -> tuple[Any, float]:
    """The whole map and the route threshold, read from the database (read only)."""
    from memstore.map_store import MapStore

    with ctx.open_store(read_only=True) as store:
        the_map = MapStore(store)
        return the_map.graph(), the_map.threshold


def _summary(graph: Any) -> str:
    return f"{plural(len(graph.rooms), 'room')}, {plural(len(graph.connections), 'connection')}"


def _to_stderr(args: argparse.Namespace, ctx: Context, path: str) -> Context:
    """Where to say what was done: standard error when the file goes to standard output."""
    return Context(args, ctx.err, ctx.err) if path == STDOUT else ctx


def existing_export(path: str, what: str) -> tuple[FileState, str]:
    """The file an export is to replace, read before the database is opened: its state
    (for ``write_atomically``'s ``unchanged``) and its text ("" when there is none or it
    is empty). A SQLite database, or a file that
    cannot be read as text, is refused (one CliError line)."""
    from memstore.export_file import file_head, file_state, frozen

    refused = frozen(path)
    if refused is not None:
        raise CliError(f"{refused}: {_FORCE}")
    state = file_state(path)
    if not state.present or state.size == 0:
        return state, ""
    try:
        head = file_head(path, _HEAD_BYTES)
    except OSError as exc:
        raise CliError(
            f"cannot read {path}: {exc.strerror or exc}; cannot tell whether it is a {what}: "
            "pass --force to overwrite it"
        ) from exc
    if head.startswith(_SQLITE_HEADER):
        raise CliError(
            f"{path} is a SQLite database (another memstore database?), not a {what}: {_FORCE}"
        )
    try:
        return state, read_text(path, what)
    except CliError as exc:
        raise CliError(f"{exc}; so it is not a {what}: {_FORCE}") from exc


def refuse_all_but(path: str, what: str, is_kind: Callable[[str], bool], why: str) -> FileState:
    """The state of ``path`` if an export of a ``what`` may replace it (nothing there, an
    empty file, or a file ``is_kind`` recognises: memstore.export_file's one rule
    ``foreign_file``); else one CliError line saying ``why`` it is refused."""
    from exporters.written_mark import edited_since_written
    from memstore.export_file import foreign_file

    state, text = existing_export(path, what)
    if foreign_file(text, is_kind):
        raise CliError(f"{path} is not a {what} memstore wrote ({why}): {_FORCE}")
    if edited_since_written(text):
        raise CliError(
            f"{path} was edited since memstore wrote it (a {what} is written from the "
            f"database and never read back, so the edit would be lost): keep it elsewhere, "
            f"or pass --force to overwrite it"
        )
    return state


def refuse_all_but_map_md(path: str) -> FileState:
    """The state of ``path`` if the export may replace it (nothing there, an empty file, or
    a Map.md memstore wrote: exporters.map_md.is_map_md, by memstore.export_file's one
    rule ``foreign_file``); else one CliError line."""
    from exporters.map_md import is_map_md

    why = "not the title, summary and graph memstore writes: hand-written notes?"
    return refuse_all_but(path, "Map.md", is_map_md, why)


def _export(args: argparse.Namespace, ctx: Context) -> int:
    from exporters.map_md import render_map_md
    from exporters.written_mark import marked
    from memstore.export_file import check_target, export_check, write_atomically

    if args.out == STDOUT and args.check:
        raise CliError("--check compares files: it cannot be used with - (standard output)")
    checked: FileState | None = None  # the --out the guard read (None: no guard)
    if args.out != STDOUT:
        ctx.refuse_database_file(args.out)
        check_target(args.out)  # refuse a device, FIFO or folder before reading anything
        if not (args.check or args.force):
            checked = refuse_all_but_map_md(args.out)
    info = _to_stderr(args, ctx, args.out)
    graph, threshold = _read_map(info)
    text = marked(render_map_md(graph.shown(), threshold=threshold))
    if args.check:
        if export_check(args.out, text):
            ctx.print(f"{args.out} is up to date ({_summary(graph)})")
            return 0
        from memstore.cli import PROG
        from memstore.cli_diff import check_report

        report = check_report(
            args.out, text, args.db, export_args=["--out", args.out], command=("map", "export")
        )
        print(f"{PROG}: {report}", file=ctx.err)
        return 1
    if args.out == STDOUT:
        ctx.out.write(text)
        return 0
    write_atomically(args.out, text, warn=_warner(ctx), unchanged=checked)
    info.print(f"wrote {args.out}: {_summary(graph)}")
    return 0


def _warner(ctx: Context) -> Any:
    from memstore.cli import PROG

    def warn(message: str) -> None:
        print(f"{PROG}: warning: {message}", file=ctx.err)

    return warn


def _export_json(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.export_file import check_target, write_atomically
    from memstore.map_json import dump_map_state, map_state_at_risk

    checked: FileState | None = None  # the file the guard read (None: no guard)
    held = ""  # its text
    if args.file != STDOUT:
        ctx.refuse_database_file(args.file)
        check_target(args.file)
        if not args.force:
            checked, held = existing_export(args.file, "map_state.json")
    info = _to_stderr(args, ctx, args.file)
    graph, threshold = _read_map(info)
    problem = map_state_at_risk(graph, held, threshold)
    if problem is not None:
        raise CliError(f"{args.file} {shown_text(problem, None)}: {_FORCE}")
    text = dump_map_state(graph)
    if args.file == STDOUT:
        ctx.out.write(text)
        return 0
    write_atomically(args.file, text, warn=_warner(ctx), unchanged=checked)
    info.print(f"wrote {args.file}: {_summary(graph)}")
    return 0


def _import_json(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.cli import PROG, load_settings
    from memstore.errors import MapStateError
    from memstore.map_json import import_map_state, parse_map_state
    from memstore.map_store import MapStore

    text = read_text(args.file, "map_state.json")
    route = load_settings(db=ctx.db).map_route_confidence  # the threshold routes will use
    try:
        parsed = parse_map_state(text, route)
    except MapStateError as exc:
        raise CliError(f"{args.file}: {exc}") from exc
    for note in parsed.notes:
        print(f"{PROG}: warning: {args.file}: {shown_text(note, None)}", file=ctx.err)
    with ctx.open_store(create=True) as store:
        try:
            done = import_map_state(MapStore(store), parsed, replace=args.replace)
        except MapStateError as exc:
            raise CliError(f"{args.file}: {exc}") from exc
    replaced = ""
    if done.replaced_rooms:
        replaced = (
            f" (replaced a map of {plural(done.replaced_rooms, 'room')}, "
            f"{plural(done.replaced_connections, 'connection')})"
        )
    ctx.print(
        f"imported {args.file}: {plural(done.rooms, 'room')}, "
        f"{plural(done.connections, 'connection')}{replaced}"
    )
    return 0


def _route(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.map_lookup import find_room, room_label
    from memstore.map_store import MapStore

    with ctx.open_store(read_only=True) as store:
        the_map = MapStore(store)
        rooms = the_map.rooms()
        ends = []
        for asked in (args.start, args.goal):
            found = find_room(rooms, asked)
            if found.room is None:
                raise CliError(shown_text(found.problem or "no such room on the map", None))
            ends.append(found.room)
        start, goal = ends
        route = the_map.route(start.id, goal.id)
    if route.actions is None:
        raise CliError(shown_text(route.reason or "no route", None))
    where = f"from {room_label(start)} to {room_label(goal)}"
    if not route.actions:
        ctx.print(f"route {where}: already there, no action needed")
        return 0
    ctx.print(f"route {where}: {plural(len(route.actions), 'action')}")
    for number, step in enumerate(route.steps, 1):
        to = shown_text(step.to_name) or "room"
        ctx.print(f"{number}. {shown_text(step.command)} → {to} ({step.to_id})")
    ctx.print("actions: " + ", ".join(shown_text(action) for action in route.actions))
    return 0


def _rooms(args: argparse.Namespace, ctx: Context) -> int:
    graph, threshold = _read_map(ctx)
    rooms = graph.room_list()
    if not rooms:
        ctx.print("no rooms on the map yet (the manager records it as the agent plays)")
        return 0
    ctx.print(f"{_summary(graph)}:")
    width = max(len(str(room.id)) for room in rooms)
    for room in rooms:
        exits = graph.exits(room.id, threshold)
        routed = sum(exit_.routable for exit_ in exits.exits)
        parts = [plural(len(exits.exits), "exit") + f" ({routed} routed)"]
        if exits.pruned:
            parts.append(f"pruned: {', '.join(exits.pruned)}")
        parts.append(f"{len(exits.untried)} untried")
        name = shown_text(room.name) or f"room {room.id} (no name yet)"
        ctx.print(f"{room.id:>{width}}  {name}: {'; '.join(parts)}")
    return 0


# --- show's exits line ---------------------------------------------------------------------------


class ShownExits(NamedTuple):
    """For ``memstore show``: the room's name on the map (None off the map) and the exits
    line the agent gets after ``text`` ("" when there is none or none fits), both as
    ``shown_text`` shows them to a person."""

    name: str | None
    line: str


def exits_for_show(store: Any, location_id: int, text: str) -> ShownExits:
    """The exits line the agent sees after ``text`` at ``location_id``: as the manager
    does it (memstore.manager), the fullest variant that keeps text and line within the
    token budget, or none when ``map_exits_line`` is off."""
    from memstore.map_graph import with_exits_line
    from memstore.map_store import MapStore

    config = store.config
    room = MapStore(store, config).exits(location_id)
    name = None if room.name is None else shown_text(room.name)
    if not config.map_exits_line:
        return ShownExits(name, "")
    combined = with_exits_line(text, room, config.token_budget)
    return ShownExits(name, shown_text(combined[len(text) :].lstrip("\n"), None))
