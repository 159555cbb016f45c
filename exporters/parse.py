"""Parse Memories.md text back into locations and memories, reporting what it cannot read.

Reads what ``render_memories_md`` writes and the files of the older implementation
(spec 000, 002, 003, 004): no persistence marker means PERMANENT, no status means ACTIVE,
``[NOTE - SUPERSEDED]`` (status without persistence), ``Ep`` missing (episode 1),
``Ep01`` and ``Epep_01``, CRLF line endings, extra blank lines, no ``### Memories`` line,
no ``**Visits:**`` line (0 visits, no episodes), a superseded text without ``~~``.

Nothing in the file can make the parser fail: every broken piece (a bad location header,
a duplicate location id, an unknown category, broken metadata, a memory outside any
location, an EPHEMERAL memory, a memory the domain model rejects, ...) is skipped and
reported as a ``Problem`` with its 1-based line number, and the valid locations and
memories around it are still returned. Multi-line memory texts keep their line breaks.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass

from exporters.base_line import (
    BASE_LINE_START,
    ExportBase,
    blank_end_line,
    find_base_line,
    is_base_line,
    looks_like_base_line,
    looks_like_end_line,
)
from exporters.block_reader import read_body
from exporters.line_parser import Problem, read_line_by_line
from memstore.md_rows import LocationRows, locations_of_rows
from memstore.models import LocationMemories

__all__ = [
    "Problem",
    "ParseResult",
    "ParsedRows",
    "parse_memories_md",
    "parse_memories_md_rows",
    "parse_line_by_line",
    "parse_rows_line_by_line",
    "read_canonical",
]


@dataclass(frozen=True, slots=True)
class ParseResult:
    """The locations read from a file (sorted by id) and the problems met on the way."""

    locations: tuple[LocationMemories, ...]
    problems: tuple[Problem, ...]
    #: the database and change counter the file was exported at (None: no base line)
    base: ExportBase | None = None
    #: the file has the export's end line (see ``ParsedRows.ended``)
    ended: bool = False

    @property
    def ok(self) -> bool:
        """True when the whole file was read without a problem."""
        return not self.problems


@dataclass(frozen=True, slots=True)
class ParsedRows:
    """``ParseResult`` with the locations as plain rows (``memstore.models.LocationRows``):
    what the import reads, with no pydantic object built per memory."""

    locations: tuple[LocationRows, ...]
    problems: tuple[Problem, ...]
    base: ExportBase | None = None
    #: a file with an export base (memstore closes each of its sections with a "---" line)
    #: whose last section no "---" line closes: (its header's line, its location id). Cut
    #: short? (``memstore.store_import`` skips it when the database has that location.)
    open_end: tuple[int, int] | None = None
    #: the file has the export's end line (``exporters.base_line.END_LINE``): it was not
    #: cut short after a section's "---" line
    ended: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_models(self) -> ParseResult:
        """The same result with the public models (each row validated by pydantic)."""
        return ParseResult(locations_of_rows(self.locations), self.problems, self.base, self.ended)


def parse_memories_md(text: str) -> ParseResult:
    """Read the text of a Memories.md file.

    Promises: never raises on any string; returns every location and memory that could be
    read (locations sorted by id, memories in file order) and one ``Problem`` (1-based
    line number, message) for each piece that was skipped;
    ``parse_memories_md(render_memories_md(x))`` gives back ``x``.

    Each memory in the renderer's exact layout is read in one match
    (``exporters.fast_blocks``), everything else line by line (``parse_line_by_line``
    reads every line so, and gives the same).
    """
    return _parse(text, fast_blocks=True).as_models()


def parse_memories_md_rows(text: str) -> ParsedRows:
    """``parse_memories_md`` with the memories as plain rows, each checked against the
    model's rules (``memstore.models.memory_row_problem``) but built with no pydantic
    object: the import's reader. The same promises."""
    return _parse(text, fast_blocks=True)


def read_canonical(text: str) -> list[LocationMemories] | None:
    """The locations of a Memories.md body (``\\n`` line endings, no byte-order mark, no
    base line) when the reader took every memory of it in one match and met no problem,
    else None (for tests and tools: a file the renderer wrote is read so)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        locations, problems, all_fast = read_body(text)
    finally:
        if gc_was_enabled:
            gc.enable()
    if problems or not all_fast:
        return None
    return list(locations_of_rows(locations))


def parse_line_by_line(text: str) -> ParseResult:
    """What ``parse_memories_md`` returns, always from the line parser (for tests and tools)."""
    return _parse(text, fast_blocks=False).as_models()


def parse_rows_line_by_line(text: str) -> ParsedRows:
    """What ``parse_memories_md_rows`` returns, always from the line parser, under the same
    conditions (the line parser alone, as bench/markdown_bench.py times it)."""
    return _parse(text, fast_blocks=False)


def _parse(text: str, fast_blocks: bool) -> ParsedRows:
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:  # a memchr scan: much faster than a replace that finds nothing
        text = text.replace("\r\n", "\n")
    text, ended = blank_end_line(text)  # (first: one may stand above the base line)
    base, text, base_line = find_base_line(text)
    result = _parse_body(text, fast_blocks)
    problems = result.problems
    if problems and BASE_LINE_START in text:
        problems = _name_misplaced_base_lines(problems, text, base_line if base else 0)
    if problems and "<!-- memstore-end" in text:
        problems = _name_end_lines(problems, text)
    if base is None:
        return ParsedRows(result.locations, problems, ended=ended)
    # every problem after the base line moves down one line
    problems = tuple(
        Problem(p.line + (p.line >= base_line), p.message, p.skipped) for p in problems
    )
    open_end = None if ended else _open_end(text, base_line)
    return ParsedRows(result.locations, problems, base, open_end, ended)


_LAST_SECTION = re.compile(r"^##[ \t]+Location[ \t]+([0-9]{1,18})[ \t]*:", re.MULTILINE)
_SEPARATOR = re.compile(r"^---[ \t-]*$", re.MULTILINE)


def _open_end(text: str, base_line: int) -> tuple[int, int] | None:
    """The last section of ``text`` (a body, ``\n`` line endings, without the base line
    read at ``base_line``) when no "---" line follows its header: (the header's line in
    the file, its location id)."""
    last = None
    for last in _LAST_SECTION.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    if last is None or _SEPARATOR.search(text, last.end()) is not None:
        return None
    line = text.count("\n", 0, last.start()) + 1
    return line + (line >= base_line), int(last.group(1))


_END_LINE_PROBLEM = (
    "an end line memstore does not write, or not where it writes one (it writes "
    "<!-- memstore-end: ... --> last, under an empty line); it is ignored"
)


def _name_end_lines(problems: tuple[Problem, ...], text: str) -> tuple[Problem, ...]:
    """Say so when the stray text a problem points at was meant as the export's end line
    (misspelled, cut, or right under a line of text)."""
    lines = text.split("\n")
    return tuple(
        Problem(p.line, _END_LINE_PROBLEM, p.skipped)
        if 0 < p.line <= len(lines) and looks_like_end_line(lines[p.line - 1])
        else p
        for p in problems
    )


_MISPLACED_BASE = (
    "an export base line (memstore-base) counts only under the title on the first line; "
    "this one is ignored"
)


_MALFORMED_BASE = (
    "the export base line is not one memstore writes (<!-- memstore-base: database=ID "
    "version=N rows=8 lowercase hex digits -->); it is ignored"
)


def _name_misplaced_base_lines(
    problems: tuple[Problem, ...], text: str, first: int
) -> tuple[Problem, ...]:
    """Say so when the stray text a problem points at is a base line: a second one (after
    the one read, at line ``first`` of the file; 0: none was), out of its place, or in
    its place (under the title) but malformed. ``text`` is the file without the base line
    read."""
    lines = text.split("\n")

    def under_the_title(line: int) -> bool:
        return all(not lines[n].strip() for n in range(1, line - 1))

    def message(line: str, number: int) -> str:
        if first and is_base_line(line):
            return (
                f"a second export base line: only the first one (line {first}) counts; "
                f"this one is ignored"
            )
        return _MALFORMED_BASE if under_the_title(number) else _MISPLACED_BASE

    return tuple(
        Problem(p.line, message(lines[p.line - 1], p.line))
        if 1 < p.line <= len(lines) and looks_like_base_line(lines[p.line - 1])
        else p
        for p in problems
    )


def _parse_body(text: str, fast_blocks: bool) -> ParsedRows:
    # Parsing creates many small objects and no reference cycles: pausing the cyclic
    # garbage collector meanwhile saves about a third of the time on large files.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if fast_blocks:
            locations, problems, _all_fast = read_body(text)
        else:
            locations, problems = read_line_by_line(text)
        return ParsedRows(tuple(locations), tuple(problems))
    finally:
        if gc_was_enabled:
            gc.enable()
