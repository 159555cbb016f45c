"""`memstore eval`: does memory help? The command-line face of memstore.evaluation.

It runs the same agent, seeds and move budget with memory (one database across episodes)
and without (a fresh database each episode), then prints the table, and writes the JSON
report (--json), a markdown table (--markdown) and the plot (--plot, with the optional
``memstore[plot]`` extra). The databases go to --db FOLDER, or to a temporary folder that
is removed afterwards.

The outputs follow every export's one rule (memstore.export_file.foreign_file): an existing
--json, --markdown or --plot is replaced only when it is empty or of the kind eval writes
there (an eval report JSON, an eval markdown table, a PNG), checked before anything is
played and again just before it is written; anything else is refused unless --force. All
three are written atomically (a hard link keeps the old content, with a warning).

When the LLM agent's model did not play an episode a target reads (it chose at most half
of that episode's commands: its calls failed or gave no command, so the explorer chose the
rest; memstore.eval_results.MODEL_MAJORITY), the table says so, that target is not judged,
the outputs are still written, and the command exits 1 (one error line: which arm, seed
and episodes, and for each of those arms its failed calls by kind and its last failure),
as ``memstore demo`` does when every call failed. Targets left unjudged only because the
run is too short (fewer episodes than they need, or a sample below the minimum:
memstore.eval_results.MIN_ARM_TURNS and the rest) exit 0.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.cli import CliError, Context, command, real_path
from memstore.cli_args import at_most

if TYPE_CHECKING:
    from memstore.export_file import FileState

#: the defaults of the issue's "done when" run
DEFAULT_EPISODES = 5
DEFAULT_MOVES = 200
DEFAULT_SEEDS = 3
#: the most episodes (per arm and seed) and seeds one evaluation plays, and the most
#: episodes per arm in all (seeds x episodes: each is a database of its own without
#: memory; memstore.evaluation.MAX_EPISODES_IN_ALL, the library's bound): a count nobody
#: could play is refused up front
MAX_EPISODES = 10_000
MAX_SEEDS = 10_000
MAX_EPISODES_IN_ALL = 100_000
#: the most actions per episode
MAX_MOVES = 10_000_000
#: the options naming a file the evaluation writes after playing
OUTPUTS = ("json", "markdown", "plot")
PLOT_HINT = "the plot needs matplotlib: pip install 'memstore[plot]' (the table is above)"


def seeds_argument(value: str) -> list[int]:
    """``type=`` for --seeds: a count N (seeds 1 to N) or a comma-separated list."""
    text = value.strip()
    if "," not in text:
        return list(range(1, at_most(MAX_SEEDS)(text) + 1))
    seeds = []
    for part in text.split(","):
        try:
            seed = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {part.strip()!r}") from None
        if seed < 0 or seed > 2**31 - 1:
            raise argparse.ArgumentTypeError(f"a seed must be from 0 to 2**31-1, got {seed}")
        if seed not in seeds:
            seeds.append(seed)
    if len(seeds) > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SEEDS:,} seeds, got {len(seeds)}")
    return seeds


class _EpisodesInAll(argparse.Action):
    """Stores --seeds or --episodes, and refuses (a usage error) seeds x episodes past
    MAX_EPISODES_IN_ALL, whichever of the two is given last."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        seeds = getattr(namespace, "seeds", None) or range(DEFAULT_SEEDS)
        episodes = getattr(namespace, "episodes", DEFAULT_EPISODES)
        if len(seeds) * episodes > MAX_EPISODES_IN_ALL:
            raise argparse.ArgumentError(
                self,
                f"seeds x episodes must be at most {MAX_EPISODES_IN_ALL:,} (each episode "
                f"without memory is a database of its own), got {len(seeds):,} x "
                f"{episodes:,} = {len(seeds) * episodes:,}",
            )


def _output(value: str) -> str:
    """``type=`` for --json, --markdown and --plot: a file path, never empty and never
    ``-`` (which elsewhere is standard output: here it would be a file named ``-``)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a file path")
    if value == "-":
        raise argparse.ArgumentTypeError(
            "give a file path: the table is printed on standard output already, and - "
            "here would be a file named -"
        )
    return value


def _configure_eval(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Play the same agent, seeds and move budget with memory (one database across the "
        "episodes) and without (a fresh database each episode) and compare. Here --db is "
        "a FOLDER for those databases (default: a temporary folder, removed afterwards); "
        "MEMSTORE_DB and [tool.memstore] db are not read."
    )
    parser.add_argument(
        "--agent", choices=("explorer", "llm"), default="explorer", help="the agent (explorer)"
    )
    parser.add_argument(
        "--episodes",
        type=at_most(MAX_EPISODES),
        action=_EpisodesInAll,
        default=DEFAULT_EPISODES,
        help=f"episodes per arm and seed ({DEFAULT_EPISODES}; seeds x episodes at most "
        f"{MAX_EPISODES_IN_ALL:,})",
    )
    parser.add_argument(
        "--moves",
        type=at_most(MAX_MOVES),
        default=DEFAULT_MOVES,
        help=f"at most this many actions per episode ({DEFAULT_MOVES})",
    )
    parser.add_argument(
        "--seeds",
        type=seeds_argument,
        action=_EpisodesInAll,
        default=None,
        help=f"N (seeds 1..N) or a list such as 1,5,9 (default {DEFAULT_SEEDS})",
    )
    parser.add_argument(
        "--model", default=None, help="the LLM agent's litellm model (default: $MEMSTORE_MODEL)"
    )
    parser.add_argument("--tools", action="store_true", help="offer the LLM agent the memory tools")
    parser.add_argument(
        "--synthesis",
        choices=("offline", "model"),
        default="offline",
        help="who writes the memories: the offline recorder (default) or the model",
    )
    parser.add_argument("--rom", default=None, help="the Zork I story file ($MEMSTORE_ROM)")
    parser.add_argument("--json", type=_output, default=None, help="write the JSON report here")
    parser.add_argument(
        "--markdown", type=_output, default=None, help="write the table as markdown here"
    )
    parser.add_argument("--plot", type=_output, default=None, help="write the plot (PNG) here")
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --json, --markdown or --plot that is not eval's own kind",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


class ProgressBar:
    """A one-line bar on a terminal stream, redrawn at most every ``every`` turns."""

    def __init__(self, stream, enabled: bool, every: int = 50) -> None:  # noqa: ANN001
        self.stream, self.enabled, self.every, self.shown = stream, enabled, every, -1

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled or (done - self.shown < self.every and done != total):
            return
        self.shown = done
        width = 30
        filled = width * done // max(total, 1)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:36]:36s}"
        )
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


#: the databases run_eval writes in its folder (memstore.evaluation.database_paths), with
#: SQLite's side files, and the lock it holds there (memstore.evaluation.LOCK_NAME): no
#: output may be one of them
_DATABASE_NAME = re.compile(
    r"\w+-seed\d+-(memory|nomemory-ep\d+)\.db(-wal|-shm|-journal)?|memstore-eval\.lock"
)


#: what each output may replace without --force (besides nothing and an empty file)
_KINDS = {
    "json": "an eval report (the JSON memstore eval writes)",
    "markdown": "an eval table (the markdown memstore eval writes)",
    "plot": "a PNG (a plot)",
}
_FORCE = "give another file, or pass --force to overwrite it"
#: the largest existing output read to tell what it is (a larger file is no report or
#: plot eval wrote in a run anyone would play: refused unless --force)
_MOST_READ = 256 << 20


def refuse_foreign_output(name: str, path: str) -> FileState:
    """The state of the output ``--{name} path`` (for ``write_atomically``'s ``unchanged``)
    if eval may replace it: nothing there, an empty file, or a file of the kind eval writes
    there (memstore.export_file's one rule ``foreign_file``: an eval report JSON, an eval
    markdown table, a PNG); else one CliError line. Reads the file, never writes it."""
    from memstore.eval_report import is_png, is_report_json, is_report_markdown
    from memstore.export_file import file_head, file_state, foreign_file

    option, kind = f"--{name}", _KINDS[name]
    state = file_state(path)
    if not state.present or state.size == 0:
        return state
    if state.size > _MOST_READ:  # no run anyone would play writes this much
        raise CliError(f"{option} {path} is too large to be {kind}: {_FORCE}")
    try:
        data = file_head(path, _MOST_READ)
    except OSError as exc:
        raise CliError(
            f"cannot read {option} {path}: {exc.strerror or exc}; cannot tell whether it is "
            f"{kind}: pass --force to overwrite it"
        ) from exc
    if name == "plot":  # bytes as latin-1 characters, one each, for the rule's "empty"
        foreign = foreign_file(data.decode("latin-1"), lambda body: is_png(body.encode("latin-1")))
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        is_kind = is_report_json if name == "json" else is_report_markdown
        foreign = text is None or foreign_file(text, is_kind)
    if foreign:
        raise CliError(f"{option} {path} is not {kind}: {_FORCE}")
    return state


def check_outputs(args: argparse.Namespace, folder: Path | None) -> None:
    """Refuse, before anything is played, an output the evaluation could not write after
    it (a folder, a device, a folder that cannot be written or created), an output that
    is one of its databases in ``folder`` (--db), two outputs that name one file, and
    (unless --force) an existing output that is not of the kind eval writes there
    (``refuse_foreign_output``); and a --db ``folder`` that cannot be written."""
    from memstore.evaluation import database_paths
    from memstore.export_file import check_writable

    outputs = [(f"--{name}", path) for name in OUTPUTS if (path := getattr(args, name))]
    for option, path in outputs:
        resolved = real_path(path)
        if folder is not None and resolved.parent == real_path(folder):
            if _DATABASE_NAME.fullmatch(resolved.name):
                raise CliError(
                    f"{option} {path} is one of the evaluation's databases in --db {folder}: "
                    "give another file to write"
                )
        check_writable(path)
    for index, first in enumerate(outputs):
        for second in outputs[index + 1 :]:
            Context.refuse_same_file(first, second)
    if not getattr(args, "force", False):
        for name in OUTPUTS:
            if path := getattr(args, name):
                refuse_foreign_output(name, path)
    if folder is not None:
        check_writable(database_paths(folder, args.agent, [1], 1)[0])


#: --db here (the global option's metavar and help, memstore.cli.add_global_options)
DB_FOLDER = (
    "FOLDER",
    "a FOLDER for the evaluation's SQLite databases (one per seed with memory, one per "
    "episode without); it must not hold them already, and one evaluation at a time "
    "uses it (default: a temporary folder, removed afterwards; MEMSTORE_DB and "
    "[tool.memstore] db are not read)",
)


@command(
    "eval",
    help="does memory help? the same agent with memory and without, over seeds",
    configure=_configure_eval,
    db=DB_FOLDER,
)
def cmd_eval(args: argparse.Namespace, ctx: Context) -> int:
    from memstore.cli import load_settings
    from memstore.eval_report import model_failure
    from memstore.evaluation import (
        PlotUnavailable,
        plot_report,
        render_markdown,
        render_table,
        report_json,
        run_eval,
    )
    from memstore.export_file import write_atomically
    from memstore.rom import find_rom

    config = load_settings(model=args.model)
    if args.agent == "llm" and not config.model:
        raise CliError("--agent llm needs a model: give --model or set MEMSTORE_MODEL")
    if args.synthesis == "model" and not config.model:
        raise CliError("--synthesis model needs a model: give --model or set MEMSTORE_MODEL")
    if args.agent == "explorer" and (args.tools or (args.model and args.synthesis != "model")):
        raise CliError(
            "--model and --tools are for --agent llm (--model also for --synthesis model)"
        )
    seeds = args.seeds or list(range(1, DEFAULT_SEEDS + 1))
    if args.db and "://" in str(args.db):
        raise CliError(
            "--db is a URL: here --db is a FOLDER for the evaluation's SQLite databases "
            "(one per arm and seed), never a shared database"
        )
    if args.db and Path(args.db).exists() and not Path(args.db).is_dir():
        raise CliError(f"--db {args.db} is a file: here --db is a FOLDER for the databases")
    check_outputs(args, Path(args.db) if args.db else None)
    rom = find_rom(args.rom)
    bar = ProgressBar(sys.stderr, not args.no_progress and sys.stderr.isatty())
    with tempfile.TemporaryDirectory(prefix="memstore-eval-") as scratch:
        folder = Path(args.db) if args.db else Path(scratch)
        ctx.print(f"databases: {folder}" + ("" if args.db else " (temporary, removed afterwards)"))
        try:
            report = run_eval(
                agent=args.agent,
                episodes=args.episodes,
                moves=args.moves,
                seeds=seeds,
                folder=folder,
                config=config,
                rom=rom,
                tools=args.tools,
                synthesis=args.synthesis,
                progress=bar,
                busy_timeout_s=args.busy_timeout,
            )
        except FileExistsError as exc:
            raise CliError(str(exc)) from exc
    ctx.print(render_table(report))
    warn = _warner(ctx)
    if args.json:
        text = json.dumps(report_json(report), indent=2, sort_keys=False) + "\n"
        written = write_atomically(args.json, text, warn=warn, unchanged=_unchanged(args, "json"))
        ctx.print(f"wrote {written}")
    if args.markdown:
        text = render_markdown(report)
        unchanged = _unchanged(args, "markdown")
        ctx.print(f"wrote {write_atomically(args.markdown, text, warn=warn, unchanged=unchanged)}")
    if args.plot:
        try:
            unchanged = _unchanged(args, "plot")
            ctx.print(f"wrote {plot_report(report, args.plot, warn=warn, unchanged=unchanged)}")
        except PlotUnavailable:
            ctx.print(PLOT_HINT)
    failure = model_failure(report)
    if failure is None and (unwritten := report.synthesis_failed()) is not None:
        failure = f"{unwritten}; no target was judged"
    if failure is not None:  # the report says so too, and is written: exit 1, as demo does
        raise CliError(failure)
    return 0


def _unchanged(args: argparse.Namespace, name: str) -> FileState | None:
    """Just before an output is written, after the play: checked again (someone may have
    saved another file there meanwhile), and its state, so that a file saved while it is
    written is not replaced (FileChanged). None with --force: replaced whatever it is."""
    if args.force:
        return None
    return refuse_foreign_output(name, getattr(args, name))


def _warner(ctx: Context) -> Any:
    from memstore.cli import PROG

    def warn(message: str) -> None:
        print(f"{PROG}: warning: {message}", file=ctx.err)

    return warn
