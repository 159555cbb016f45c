"""`memstore map ...`: the map (issue 16) on the command line, thin over the library.

    memstore map export [--out game_files/Map.md] [--check]   # exporters.map_md
    memstore map export-json FILE                              # memstore.map_json
    memstore map import-json FILE [--replace]
    memstore map route FROM TO                                 # ids or room names
    memstore map rooms

Each subcommand also takes the global options after it (``memstore map route 64 27 --db
x.db``). ``show`` (memstore.cli) ends with the room's exits line through
:func:`exits_for_show`, the fullest line that fits the token budget, as the agent sees it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

from memstore.cli import CliError, Context, add_global_options, command
from memstore.cli_args import plural, read_text

__all__ = ["DEFAULT_MAP_MD", "ShownExits", "cmd_map", "exits_for_show"]

DEFAULT_MAP_MD = Path("game_files") / "Map.md"
STDOUT = "-"


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
    export_json = sub.add_parser("export-json", help="write the map as ZorkGPT's map_state.json")
    export_json.add_argument("file", type=_output_path, help="the file, or - for standard output")
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


def _export(args: argparse.Namespace, ctx: Context) -> int:
    from exporters.map_md import render_map_md
    from memstore.export_file import check_target, export_check, write_atomically

    if args.out == STDOUT and args.check:
        raise CliError("--check compares files: it cannot be used with - (standard output)")
    if args.out != STDOUT:
        ctx.refuse_database_file(args.out)
        check_target(args.out)  # refuse a device, FIFO or folder before reading anything
    info = _to_stderr(args, ctx, args.out)
    graph, threshold = _read_map(info)
    text = render_map_md(graph, threshold=threshold)
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
    write_atomically(args.out, text, warn=_warner(ctx))
    info.print(f"wrote {args.out}: {_summary(graph)}")
    return 0


def _warner(ctx: Context) -> Any:
    from memstore.cli import PROG

    def warn(message: str) -> None:
        print(f"{PROG}: warning: {message}", file=ctx.err)

    return warn


def _export_json(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.export_file import check_target, write_atomically
    from memstore.map_json import dump_map_state

    if args.file != STDOUT:
        ctx.refuse_database_file(args.file)
        check_target(args.file)
    info = _to_stderr(args, ctx, args.file)
    graph, _threshold = _read_map(info)
    text = dump_map_state(graph)
    if args.file == STDOUT:
        ctx.out.write(text)
        return 0
    write_atomically(args.file, text, warn=_warner(ctx))
    info.print(f"wrote {args.file}: {_summary(graph)}")
    return 0


def _import_json(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.cli import PROG
    from memstore.errors import MapStateError
    from memstore.map_json import import_map_state, parse_map_state
    from memstore.map_store import MapStore

    text = read_text(args.file, "map_state.json")
    try:
        parsed = parse_map_state(text)
    except MapStateError as exc:
        raise CliError(f"{args.file}: {exc}") from exc
    for note in parsed.notes:
        print(f"{PROG}: warning: {args.file}: {note}", file=ctx.err)
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
                raise CliError(_one_line(found.problem or f"no room {asked!r} on the map"))
            ends.append(found.room)
        start, goal = ends
        route = the_map.route(start.id, goal.id)
    if route.actions is None:
        raise CliError(_one_line(route.reason or "no route"))
    where = f"from {_one_line(room_label(start))} to {_one_line(room_label(goal))}"
    if not route.actions:
        ctx.print(f"route {where}: already there, no action needed")
        return 0
    ctx.print(f"route {where}: {plural(len(route.actions), 'action')}")
    for number, step in enumerate(route.steps, 1):
        to = _one_line(step.to_name) or "room"
        ctx.print(f"{number}. {_one_line(step.command)} → {to} ({step.to_id})")
    ctx.print("actions: " + ", ".join(_one_line(action) for action in route.actions))
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
        name = _one_line(room.name) or "(no name yet)"
        ctx.print(f"{room.id:>{width}}  {name}: {'; '.join(parts)}")
    return 0


# --- show's exits line ---------------------------------------------------------------------------


class ShownExits(NamedTuple):
    """For ``memstore show``: the room's name on the map (None off the map) and the exits
    line the agent gets after ``text`` ("" when there is none or none fits)."""

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
    if not config.map_exits_line:
        return ShownExits(room.name, "")
    combined = with_exits_line(text, room, config.token_budget)
    return ShownExits(room.name, combined[len(text) :].lstrip("\n"))
