"""What `memstore export --check` says when a file is stale: a unified diff and the fix.

Pure text in, text out (plus reading the file being checked); no command is registered here.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_DIFF_LINES", "check_report", "fix_command"]

#: at most this many lines of the diff are shown; the rest are counted
MAX_DIFF_LINES = 50
#: the diff's name for the text the database would write
DATABASE_SIDE = "what the database would export"


def fix_command(
    export_args: Sequence[str | Path],
    db_arg: str | None,
    command: Sequence[str] = ("export",),
    refused: str | None = None,
) -> str:
    """``memstore COMMAND [--db DB_ARG] EXPORT_ARGS...``, each word shell-quoted; COMMAND is
    ``command``'s words (``export``; ``map export`` for Map.md)."""
    words = ["memstore", *command]
    if db_arg is not None:
        words += ["--db", db_arg]
    words += [str(arg) for arg in export_args]
    return shlex.join(words)


def check_report(
    path: str | Path,
    expected_text: str,
    db_arg: str | None,
    *,
    export_args: Sequence[str | Path] | None = None,
    command: Sequence[str] = ("export",),
    refused: str | None = None,
) -> str:
    """Why ``path`` is not what the database would export, and the command that fixes it.

    The first line names the file; then the unified diff from the file to ``expected_text``
    (at most :data:`MAX_DIFF_LINES` lines, and how many more there are); the last line is
    the exact command to run, including ``--db DB_ARG`` when ``db_arg`` is not None.
    ``export_args`` are that command's other options (default ``--out PATH``; for the notes,
    ``--out OUT --notes PATH``, which writes what ``--check`` compared) and ``command`` its
    words (default ``export``; ``("map", "export")`` for Map.md). A file that is not
    UTF-8 is shown with replacement characters; a missing one gets no diff. ``refused``
    is why that command would refuse the file (edits not imported): the last line then
    says so, and what to do, instead of a refresh that would be refused.
    """
    file = Path(path)
    fix = fix_command(export_args or ("--out", path), db_arg, command)
    try:
        current = file.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return f"{path} does not exist\nrun `{fix}` to write it"
    diff = list(
        difflib.unified_diff(
            current.splitlines(),
            expected_text.splitlines(),
            fromfile=str(path),
            tofile=DATABASE_SIDE,
            lineterm="",
        )
    )
    lines = [f"{path} differs from what the database would export:"]
    lines += diff[:MAX_DIFF_LINES]
    if len(diff) > MAX_DIFF_LINES:
        lines.append(f"... ({len(diff) - MAX_DIFF_LINES} more diff lines)")
    if not diff:  # only line endings differ (splitlines hides them)
        lines.append("(the lines are the same; their endings or the last newline differ)")
    from exporters.written_mark import edited_since_written

    if refused is not None:
        lines.append(f"`{fix}` would refuse it: {refused}")
    elif edited_since_written(current):  # the export refuses such a file without --force
        lines.append(
            f"it was edited by hand since memstore wrote it: keep the edit elsewhere, then "
            f"run `{fix} --force` to refresh it"
        )
    else:
        lines.append(f"run `{fix}` to refresh it")
    return "\n".join(lines)
