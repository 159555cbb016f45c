"""``memstore export`` and ``memstore import``: Memories.md (and Notes.md) out of the
database and a reviewed Memories.md back in."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.cli import PROG, CliError, Context, command
from memstore.cli_args import output_path, plural, read_text

if TYPE_CHECKING:
    from memstore.export_file import FileState

DEFAULT_EXPORT = Path("game_files") / "Memories.md"
DEFAULT_NOTES = Path("game_files") / "Notes.md"


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=output_path,
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
        "--force",
        action="store_true",
        help="replace --out even when it holds edits that were not imported, or is read-only",
    )
    parser.add_argument(
        "--notes",
        nargs="?",
        const=str(DEFAULT_NOTES),
        type=output_path,
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
    from memstore.export_file import (
        check_target,
        check_writable,
        export_check,
        frozen,
        write_atomically,
    )
    from memstore.md_store import export_snapshot_rows

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
            # (a check writes nothing; an export of two files writes in both folders first:
            # review S5 B F6, a notes folder it could not write failed after Memories.md)
            (check_target if args.check else check_writable)(path)
            refused = None if args.check or args.force else frozen(path)
            if refused is not None:
                raise CliError(f"{refused}: give another file, or --force to replace it")
    if args.notes is not None and stdout not in (args.out, args.notes):
        ctx.refuse_same_file(("--out", args.out), ("--notes", args.notes))
    checked: FileState | None = None  # the --out the edit guard read (None: no guard)
    notes_checked: FileState | None = None  # the --notes the guard read
    if args.notes not in (None, stdout) and not (args.check or args.force):
        from exporters.notes_md import is_notes_md
        from memstore.cli_map import refuse_all_but

        notes_checked = refuse_all_but(
            args.notes, "Notes.md", is_notes_md, "not the '# Agent Notes' memstore writes"
        )
    with info.open_store(read_only=True) as store:
        if not (args.check or args.force or args.out == stdout):
            checked = refuse_to_lose_edits(store, args.out, db_arg=args.db)
        refused = _refusal(store, args.out, args.db) if args.check else None
        entries, base = export_snapshot_rows(store)  # plain rows: no model per memory
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
            report = check_report(
                path,
                content,
                args.db,
                export_args=export_args,
                refused=refused if path == args.out else None,
            )
            print(f"{PROG}: {report}", file=ctx.err)
        return 1

    def warn(message: str) -> None:
        print(f"{PROG}: warning: {message}", file=ctx.err)

    for path, content, what in outputs:
        if path == stdout:
            ctx.out.write(content)
        else:
            unchanged = checked if path == args.out else notes_checked
            write_atomically(path, content, warn=warn, unchanged=unchanged)
            info.print(f"wrote {path}: {what}")
    return 0


def refuse_to_lose_edits(
    store: Any, path: str, *, final_only: bool = False, db_arg: str | None = None
) -> FileState:
    """Refuse (one CliError line) to replace the Memories.md at ``path`` when it holds
    edits that were not imported (``memstore.export_risk.edits_at_risk``); a missing file
    is fine. With ``final_only`` only an answer that the database's changes cannot alter
    refuses (a caller that will change the database first asks again afterwards).

    Returns the state of the file that was checked, for ``write_atomically(unchanged=)``:
    a save made after the check is not overwritten."""
    from memstore.export_file import file_state
    from memstore.export_risk import edits_at_risk

    state = file_state(path)
    if not os.path.exists(path):  # nothing there (or a link to nothing): nothing to lose
        return state
    force = "pass --force to overwrite it"
    try:
        text = read_text(path)
    except CliError as exc:
        raise CliError(f"{exc}; cannot tell whether it holds edits: {force}") from exc
    risk = edits_at_risk(store, path, text, db_arg)
    if risk is not None and (risk.final or not final_only):
        raise CliError(risk.message)
    return state


def _refusal(store: Any, path: str, db_arg: str | None) -> str | None:
    """Why the export would refuse to replace the Memories.md at ``path`` (its edits that
    were not imported), or None: what ``export --check`` advises instead of a refresh."""
    try:
        refuse_to_lose_edits(store, path, db_arg=db_arg)
    except CliError as exc:
        return str(exc)
    return None


def _notes_text(store: Any) -> str:
    from exporters import render_notes_md
    from exporters.written_mark import marked
    from memstore.flagged import FlaggedMemories

    return marked(render_notes_md(FlaggedMemories(store).all()))


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
    parser.set_defaults(_import_parser=parser)  # cmd_import's usage errors name this parser


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

    if args.force and not args.prune:  # a usage error: the usage line and exit code 2
        args._import_parser.error(
            "--force only lifts --prune's guards: use it with --prune, or leave it out"
        )
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
    from exporters.parse import parse_memories_md_rows

    parsed = parse_memories_md_rows(text)
    with MemoryStore.open("sqlite://") as empty:
        outcome = import_memories(empty, text, apply=False, parsed=parsed, **options)
    if args.apply and outcome.refused is None and outcome.plan.has_changes:
        with ctx.open_store(create=True) as store:
            outcome = import_memories(store, text, apply=True, parsed=parsed, **options)
    return _report_import(args, ctx, outcome)


def _unapplied(args: argparse.Namespace, plan: Any) -> str:
    """Why an ``--apply`` wrote nothing, where the file and the database still differ
    (review S6 I F1: "the database already matches the file" for each of these)."""
    why = []
    if plan.missing and not args.prune:
        why.append(
            f"the file deletes {len(plan.missing)} memory(ies), which only --apply --prune deletes"
        )
    if plan.conflicts:
        why.append(f"the {len(plan.conflicts)} conflict(s) listed were skipped")
    if plan.left_again:
        why.append(
            f"the database keeps its value for {len(plan.left_again)} the file holds that it "
            f"took back since the export (the warnings say which)"
        )
    return "; ".join(why) if why else "the database already matches the file"


def _report_import(args: argparse.Namespace, ctx: Context, outcome: Any) -> int:
    plan = outcome.plan
    ctx.print(f"import {args.file}:")
    ctx.print(plan.summary(prune=args.prune))
    if plan.lowered:  # never applied: said in the dry run and the apply alike
        shown = ", ".join(str(n) for n in plan.lowered[:10])
        more = f" and {len(plan.lowered) - 10} more" if len(plan.lowered) > 10 else ""
        ctx.print(
            f"note: the database has more visits or episodes than the file lists at "
            f"location(s) {shown}{more} (an agent's since the export, or lowered in the "
            f"file): they only grow, so the database's are kept"
        )
    if args.verbose and (plan.has_changes or plan.missing):  # (what --prune would delete)
        ctx.print(plan.details())
    if outcome.refused is not None:
        raise CliError(f"{args.file}: {outcome.refused}")
    if outcome.applied:
        skipped = ""
        if plan.problems or plan.conflicts:
            listed = " and ".join(
                what for what, some in (("conflicts", plan.conflicts), ("problems", plan.problems))
                if some
            )  # fmt: skip
            skipped = f" (the {listed} listed were skipped)"
            if plan.conflicts and not args.skip_invalid:
                side = "the database's side" if args.ours else "the file's side"
                skipped = f" (conflicts resolved by taking {side})"
        ctx.print(f"applied{skipped}")
    elif args.apply and plan.conflicts and args.ours:
        ctx.print(
            f"nothing to apply: the {len(plan.conflicts)} conflict(s) were resolved by "
            f"keeping the database's side (what the file had there was not taken), and "
            f"the database already has the rest of the file"
        )
    elif args.apply and plan.problems:
        ctx.print(
            "nothing to apply: the problems listed were skipped, and the database already "
            "has the rest of the file"
        )
    elif args.apply and plan.lowered:
        ctx.print("nothing to apply: the database already has the rest of the file (see the note)")
    elif args.apply:
        ctx.print(f"nothing to apply: {_unapplied(args, plan)}")
    else:
        ctx.print("dry run: nothing written (use --apply to write)")
    return 0
