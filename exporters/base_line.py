"""The export's base: which database a Memories.md was exported from, and at which change;
and the export's end line.

``memstore export`` writes one HTML comment line under the ``# Location Memories`` heading::

    # Location Memories
    <!-- memstore-base: database=5f0c9a3e-... version=42 rows=9c1d02aa -->

and another as the file's last line, under the last section's ``---``::

    <!-- memstore-end: import --prune reads a file without this line as cut short -->

A file cut short (an editor's crash, a full disk, a copy that stopped) right after a
section's ``---`` reads as a file whose reviewer deleted the sections after it; the end
line tells the two apart (``memstore.store_import``): a file ends with it, or may have been
cut short. (memstore before it reads the end line as text outside any memory: a problem,
which ``--skip-invalid`` passes over.)

A Markdown viewer hides it, and the older implementation's parser skips it (a line that is
not structure). ``memstore import`` reads it to tell the reviewer's edits from what agents
changed in the database since the export (a 3-way merge). A file without it (hand-written,
legacy) still imports, 2-way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "BASE_LINE_START",
    "END_LINE",
    "blank_end_line",
    "looks_like_end_line",
    "ExportBase",
    "find_base_line",
    "is_base_line",
    "looks_like_base_line",
    "render_base_line",
    "split_base_line",
]

#: how every base line starts
BASE_LINE_START = "<!-- memstore-base:"

_BASE_LINE = re.compile(
    r"<!-- memstore-base: database=([0-9a-f-]{1,64}) version=([0-9]{1,18})"
    r"(?: rows=([0-9a-f]{8}))? -->[ \t]*"
)


#: the export's last line (``render_memories_md`` writes it under a base line)
END_LINE = "<!-- memstore-end: import --prune reads a file without this line as cut short -->"
#: an end line, as a whole line (the words after the colon are for people: any will do)
_END_LINE = re.compile(r"^[ \t]*<!-- memstore-end(?:[ \t]*|:[^\n]*) -->[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ExportBase:
    """The database an export came from (its identity) and its change counter then, and
    (``rows``) a fingerprint of its persistent memories then: a database restored from a
    backup and written since reaches the same counter with other memories
    (``memstore.versions.rows_fingerprint``). None in files of older memstores."""

    database_id: str
    version: int
    rows: str | None = None


def render_base_line(base: ExportBase) -> str:
    """The comment line that records ``base``."""
    rows = f" rows={base.rows}" if base.rows is not None else ""
    return f"<!-- memstore-base: database={base.database_id} version={base.version}{rows} -->"


def split_base_line(text: str) -> tuple[ExportBase | None, str]:
    """(the base, the text without its line) when the file has a base line; else (None, text).

    See ``find_base_line`` for where it may be.
    """
    base, rest, _line = find_base_line(text)
    return base, rest


def find_base_line(text: str) -> tuple[ExportBase | None, str, int]:
    """(the base, the text without its line, its 1-based line number); (None, text, 0)
    when there is none.

    Only the line under the first line (the file's title) counts, or under blank lines
    there (a Markdown formatter puts one under a heading), so a base line pasted elsewhere
    is text like any other.
    """
    first_end = text.find("\n")
    if first_end < 0:
        return None, text, 0
    start, line = first_end + 1, 2
    while True:
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        if text[start:end].strip(" \t"):
            break
        if end == len(text):
            return None, text, 0
        start, line = end + 1, line + 1
    match = _BASE_LINE.fullmatch(text, start, end)
    if match is None:
        return None, text, 0
    base = ExportBase(match.group(1), int(match.group(2)), match.group(3))
    return base, text[:start] + text[end + 1 :], line


def is_base_line(line: str) -> bool:
    """A line that is a whole, valid export base line (wherever it is)."""
    return _BASE_LINE.fullmatch(line.strip(" \t")) is not None


def looks_like_base_line(line: str) -> bool:
    """A line that was meant as an export base line (wherever it is)."""
    return line.lstrip().startswith(BASE_LINE_START)


def blank_end_line(text: str) -> tuple[str, bool]:
    """(``text`` with each end line made an empty line, whether it ends with one: nothing
    but blank space follows the last). ``text`` has ``\\n`` line
    endings; no line moves.

    An end line counts where no memory's text can hold it: under an empty line, a heading,
    a "---" line or the base line, or as the first line. One right under a line of text is
    that text (an older memstore wrote such a line of a memory's text unescaped), and is
    left as it is."""
    if "<!-- memstore-end" not in text:
        return text, False
    pieces: list[str] = []
    kept_from = 0
    ended = False
    for found in _END_LINE.finditer(text):
        start = found.start()
        if start:
            above = text[text.rfind("\n", 0, start - 1) + 1 : start - 1].strip(" \t")
            if above and not above.startswith(("#", "---")) and not is_base_line(above):
                continue  # under a line of text
        pieces.append(text[kept_from:start])
        kept_from = found.end()
        ended = not text[kept_from:].strip(" \t\n")
    if not pieces:
        return text, False
    pieces.append(text[kept_from:])
    return "".join(pieces), ended


def looks_like_end_line(line: str) -> bool:
    """A line that was meant as the export's end line (wherever it is)."""
    return line.lstrip().startswith("<!-- memstore-end")
