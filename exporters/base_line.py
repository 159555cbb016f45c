"""The export's base: which database a Memories.md was exported from, and at which change.

``memstore export`` writes one HTML comment line under the ``# Location Memories`` heading::

    # Location Memories
    <!-- memstore-base: database=5f0c9a3e-... version=42 -->

A Markdown viewer hides it, and the older implementation's parser skips it (a line that is
not structure). ``memstore import`` reads it to tell the reviewer's edits from what agents
changed in the database since the export (a 3-way merge). A file without it (hand-written,
legacy) still imports, 2-way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ExportBase", "render_base_line", "split_base_line"]

_BASE_LINE = re.compile(
    r"<!-- memstore-base: database=([0-9a-f-]{1,64}) version=([0-9]{1,18}) -->[ \t]*"
)


@dataclass(frozen=True, slots=True)
class ExportBase:
    """The database an export came from (its identity) and its change counter then."""

    database_id: str
    version: int


def render_base_line(base: ExportBase) -> str:
    """The comment line that records ``base``."""
    return f"<!-- memstore-base: database={base.database_id} version={base.version} -->"


def split_base_line(text: str) -> tuple[ExportBase | None, str]:
    """(the base, the text without its line) when line 2 is a base line; else (None, text).

    Only the line right under the first line (the file's title) counts, so a base line
    pasted elsewhere is text like any other.
    """
    first_end = text.find("\n")
    if first_end < 0:
        return None, text
    second_end = text.find("\n", first_end + 1)
    if second_end < 0:
        second_end = len(text)
    match = _BASE_LINE.fullmatch(text, first_end + 1, second_end)
    if match is None:
        return None, text
    base = ExportBase(match.group(1), int(match.group(2)))
    return base, text[: first_end + 1] + text[second_end + 1 :]
