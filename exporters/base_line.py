"""The export's base: which database a Memories.md was exported from, and at which change;
and the export's end line.

``memstore export`` writes one HTML comment line under the ``# Location Memories`` heading::

    # Location Memories
    <!-- memstore-base: database=5f0c9a3e-... version=42 rows=9c1d02aa -->

and another as the file's last line, under the last section's ``---``::

    <!-- memstore-end: import --prune reads a file without this line as cut short -->

A file cut short (an editor's crash, a full disk, a copy that stopped) right after a
section's ``---`` reads as a file whose reviewer deleted the sections after it; the end
line tells the two apart (``memstore.store_import``). A reviewer may add sections after it.

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
    """(``text`` with its first end line made an empty line, True) when it has one, else
    (``text``, False). ``text`` has ``\n`` line endings. No other line moves; a memory's
    text never holds such a line (``exporters.escaping`` protects one)."""
    if "<!-- memstore-end" not in text:
        return text, False
    found = _END_LINE.search(text)
    if found is None:
        return text, False
    return text[: found.start()] + text[found.end() :], True
