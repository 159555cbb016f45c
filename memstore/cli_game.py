"""`memstore demo` and `memstore metrics`: the command-line face of memstore.demo/metrics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memstore.cli import CliError, Context, command
from memstore.cli_args import at_most, positive_int

if TYPE_CHECKING:
    from memstore.export_file import FileState

#: the walkthrough's length (``len(memstore.game.zork1_walkthrough())``, checked by a test):
#: --moves is checked against it without importing jericho
WALKTHROUGH_MOVES = 396
#: the most episodes one demo plays (as ``memstore eval`` plays per arm and seed): a count
#: nobody could wait for is refused up front
DEMO_EPISODES_MAX = 10_000


def _moves(value: str) -> int:
    """``type=`` for --moves: 1 to the walkthrough's length (a usage error otherwise)."""
    moves = positive_int(value)
    if moves > WALKTHROUGH_MOVES:
        raise argparse.ArgumentTypeError(
            f"the walkthrough has {WALKTHROUGH_MOVES} actions, got {moves}"
        )
    return moves


def _run_id(value: str) -> str:
    """``type=`` for --run: a run's id, never empty (leave --run out for the latest)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a run id, or leave --run out for the latest run")
    return value


def _file_path(value: str) -> str:
    """``type=`` for --out: a file path, never empty (an empty one is no default), never
    ``-``: the demo writes Map.md beside it, and for export ``-`` is standard output."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a file path")
    if value == "-":
        raise argparse.ArgumentTypeError(
            "the demo writes Memories.md and Map.md beside it to files, not to standard "
            "output: give a file path (`memstore export --out -` prints Memories.md)"
        )
    return value


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    # defaults are memstore.demo's, resolved when the command runs (importing the demo
    # module here would slow every other command's start); 0 is refused, never a default
    parser.add_argument(
        "--episodes",
        type=at_most(DEMO_EPISODES_MAX),
        default=None,
        help=f"episodes to play, 1 to {DEMO_EPISODES_MAX:,} (default 2)",
    )
    parser.add_argument(
        "--moves",
        type=_moves,
        default=None,
        help=f"walkthrough actions per episode, 1 to {WALKTHROUGH_MOVES} (default 120)",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="litellm model for synthesis (default: $MEMSTORE_MODEL; none: the offline recorder)",
    )
    parser.add_argument(
        "--rom",
        default=None,
        help="the Zork I story file (default: $MEMSTORE_ROM or roms/zork1.z3)",
    )
    parser.add_argument(
        "--out",
        type=_file_path,
        default=None,
        help="where to export Memories.md (default game_files/Memories.md); Map.md is "
        "written beside it",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out even when it holds edits that were not imported, or is read-only",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@command(
    "demo",
    help="play Zork I with the memory in the loop, then export Memories.md and Map.md",
    configure=_configure_demo,
)
def cmd_demo(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.cli_map import refuse_all_but_map_md
    from memstore.cli_transfer import refuse_to_lose_edits
    from memstore.config import load_config
    from memstore.demo import (
        DEFAULT_EPISODES,
        DEFAULT_MEMORIES_MD,
        DEFAULT_MOVES,
        MAP_MD_NAME,
        DemoInterrupted,
        mode_line,
        run_demo,
    )
    from memstore.export_file import check_writable, frozen
    from memstore.rom import find_rom
    from memstore.store import MemoryStore

    out = args.out or DEFAULT_MEMORIES_MD
    ctx.refuse_database_file(out)  # (before Map.md's name is taken from it: not a folder)
    check_writable(out)  # a folder, a device, a folder that cannot be written ...
    map_md = str(Path(out).with_name(MAP_MD_NAME))
    for path in (out, map_md):  # before anything is played, opened or written
        ctx.refuse_database_file(path)
        check_writable(path)
    refused = None if args.force else frozen(out)  # (Map.md's: refuse_all_but_map_md)
    if refused is not None:  # (review S6 E F5: replaced, its mode 444 kept)
        raise CliError(f"{refused}: give another --out, or --force to replace it")
    ctx.refuse_same_file(("--out", out), (f"the {MAP_MD_NAME} written beside it", map_md))
    # the Map.md beside --out: replaced only if memstore wrote it, as by `map export`
    map_checked = None if args.force else refuse_all_but_map_md(map_md)
    config = load_config(db=ctx.db, model=args.model)
    rom = find_rom(args.rom)
    ctx.print(mode_line(config, None))
    ctx.print(f"database: {ctx.db_display}; story file: {rom}")

    def before_export(store: MemoryStore) -> FileState:
        try:
            return refuse_to_lose_edits(store, out, db_arg=args.db)
        except CliError as exc:
            raise CliError(f"the turns played are saved in the database; {exc}") from exc

    with MemoryStore.open(config.db, config=config, busy_timeout_s=ctx.args.busy_timeout) as store:
        if not args.force:  # an edited export of this database: refused before playing
            refuse_to_lose_edits(store, out, final_only=True, db_arg=args.db)
        try:
            report = run_demo(
                store,
                episodes=args.episodes or DEFAULT_EPISODES,
                moves=args.moves or DEFAULT_MOVES,
                rom=rom,
                out=out,
                progress=not args.no_progress and sys.stderr.isatty(),
                stream=sys.stderr,
                before_export=None if args.force else before_export,
                map_unchanged=map_checked,
            )
        except DemoInterrupted as interrupted:  # Ctrl-C: say what was saved, then exit 130
            ctx.print(interrupted.report.render())
            raise
    ctx.print(report.render())
    if report.all_llm_calls_failed:
        raise CliError(
            f"every LLM call failed ({report.failure_kinds()}); the last: {report.last_failure}"
        )
    return 0


def _configure_metrics(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--run", type=_run_id, default=None, help="one run's id (default: the most recent run)"
    )
    which.add_argument("--all-runs", action="store_true", help="every run together")
    which.add_argument(
        "--runs", action="store_true", help="list the runs: id, start, episodes, turns, mode"
    )


@command(
    "metrics",
    help="the spec's success metrics, from the recorded turns of a run",
    configure=_configure_metrics,
)
def cmd_metrics(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.metrics import (
        compute_metrics,
        coverage_from_records,
        format_metrics,
        format_runs,
        summarize_runs,
    )

    with ctx.open_store(read_only=True) as store:
        records = store.turn_records()
        if not records:
            raise CliError("no turns recorded in this database yet (run `memstore demo`)")
        if args.runs:
            ctx.print(format_runs(summarize_runs(records, store.decision_log())))
            return 0
        run = None if args.all_runs else (args.run or records[-1]["run_id"])
        if run is not None:
            records = [r for r in records if r["run_id"] == run]
            if not records:
                raise CliError(f"no turns recorded for run {run!r}")
        covered = {e: store.locations_with_memory(e) for e in {r["episode"] for r in records}}
    metrics = compute_metrics(records, coverage_from_records(records, covered))
    ctx.print(f"run: {run or 'all runs'}")
    ctx.print(format_metrics(metrics))
    return 0
