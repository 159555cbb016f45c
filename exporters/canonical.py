"""Read a Memories.md file laid out exactly as the renderer writes it, fast, or decline.

The renderer separates every piece of the file by one blank line: the title, each
location's header and visits line, its ``### Memories`` line, each memory (header,
optional reference line, text lines) and each ``---``. So splitting the text on blank
lines gives whole memories, whose text needs no line-by-line work: a memory's text is
the rest of its block.

``read_canonical`` accepts a file only when every block is exactly what the renderer
would write; then what it returns is what the line parser (``exporters.parse``) would
return, with no problem. On anything else (an older file, a hand edit that breaks the
layout, a problem to report with its line number) it returns ``None`` and the line
parser reads the file. Both build memories through ``exporters.memory_block``; a
property test checks that they agree on any text that this reader accepts.
"""

from __future__ import annotations

import re

from exporters.escaping import unescape
from exporters.memory_block import (
    HEADER_STARTS,
    REFERENCE,
    REFERENCE_STARTS,
    SHORT_DIGITS,
    Skipped,
    build_memory,
    location_numbers_problem,
    memory_numbers_problem,
)
from memstore.models import (
    LocationMemories,
    LocationRow,
    LocationRows,
    MemoryRow,
    Status,
    location_memories_of_rows,
    location_row_problem,
    memory_row_problem,
)

__all__ = ["read_canonical", "read_canonical_rows"]

_TITLE = "# Location Memories"
_MEMORIES = "### Memories"
_SEPARATOR = "---"
_LOCATION = re.compile(
    r"## Location ([0-9]{1,100}): (.*)\n"
    r"\*\*Visits:\*\* ([0-9]{1,100}) \| \*\*Episodes:\*\* (none|[0-9]{1,100}(?:, [0-9]{1,100})*)"
)
#: What each ``CATEGORY - PERSISTENCE( - STATUS)`` the renderer writes stands for (the
#: inside of the brackets of HEADER_STARTS).
_KINDS = {start[3:-2]: kind for kind, start in HEADER_STARTS.items()}
#: A memory's block as the renderer writes it: the header
#: ``**[KIND] Title** *(EpN, Tn(-m)(, +s))*``, then its text lines if any. The title is
#: what lies between ``] `` and the last ``** *(`` of the header line: the greedy
#: ``[^\n]*`` backs off to it. No other split fits, since the end holds no other ``**``;
#: so ``FAST_HEADER`` reads the same fields. The title's group ends with the first ``*``
#: of ``** *(`` (so that sre tries only the places where a ``*`` stands; a group that
#: ended before it would be tried at every place): the reader drops that ``*``. A turn
#: range that matches here but not in ``parse_turns`` (``12-``) is declined by
#: ``memory_row_problem``.
_MEMORY_BLOCK = re.compile(
    r"\*\*\[([^]]+)\] ([^\n]*\*)\* \*\("
    r"Ep([0-9]{1,100}), T([0-9]{1,100}-?[0-9]{0,100})(, [+-][0-9]{1,100}|)\)\*"
    r"(?:\n|\Z)(.*)",
    re.DOTALL,
)
#: The episodes and scores (as the header writes them: ``, +5``, or nothing) a header
#: usually holds, read by one lookup instead of ``int()`` (which reads any other).
_EPISODES = {str(n): n for n in range(1000)}
_SCORES: dict[str, int | None] = {"": None}
_SCORES.update({f", {sign}{n}": int(f"{sign}{n}") for sign in "+-" for n in range(1000)})
#: How a text line that could be read as structure (or as a blank line) starts; the
#: renderer escapes every such start.
_STRUCTURE_STARTS = ("#", "*", "[", " ", "\t", "---")
_STRUCTURE_AFTER_BREAK = re.compile(r"\n(?:[#*\[ \t]|---)")
_SUPERSEDED = Status.SUPERSEDED


def _location(block: str) -> LocationRow | None:
    match = _LOCATION.fullmatch(block)
    if match is None:
        return None
    raw_id, raw_name, raw_visits, raw_episodes = match.groups()
    location_id, visits = int(raw_id), int(raw_visits)
    episodes = () if raw_episodes == "none" else tuple(map(int, raw_episodes.split(", ")))
    if location_numbers_problem(location_id, visits, episodes) is not None:
        return None  # the line parser says what is wrong
    row = LocationRow(location_id, unescape(raw_name), visits, tuple(sorted(set(episodes))))
    return row if location_row_problem(row) is None else None


def _plain_text(body: str) -> bool:
    """Whether no line of a memory's text could be read as structure or as a blank line.

    The line parser would read such a line as a header, a reference line, a ``---``
    separator or a blank line; the renderer escapes every such start, so a line that
    starts so was not written by it.
    """
    return not body.startswith(_STRUCTURE_STARTS) and (
        "\n" not in body or _STRUCTURE_AFTER_BREAK.search(body) is None
    )


def read_canonical(text: str) -> list[LocationMemories] | None:
    """The locations of a file in the renderer's exact layout (sorted by id), else None.

    ``text`` has ``\\n`` line endings and no byte-order mark. Promises: never raises;
    when the result is not None, ``parse_memories_md(text)`` reads the same locations
    with no problem.
    """
    rows = read_canonical_rows(text)
    return None if rows is None else [location_memories_of_rows(entry) for entry in rows]


def read_canonical_rows(text: str) -> list[LocationRows] | None:
    """``read_canonical`` as plain rows (``memstore.models.LocationRows``), checked
    against the model's rules but with no pydantic object built."""
    if not text.endswith("\n"):
        return None
    blocks = iter(text[:-1].split("\n\n"))
    if next(blocks) != _TITLE:
        return None
    block_match = _MEMORY_BLOCK.fullmatch
    kinds, episodes, scores, short = _KINDS, _EPISODES, _SCORES, SHORT_DIGITS
    structure_starts, structure_after_break = _STRUCTURE_STARTS, _STRUCTURE_AFTER_BREAK.search
    make_row, row_problem = MemoryRow._make, memory_row_problem
    seen: set[int] = set()
    locations: list[LocationRows] = []
    for block in blocks:  # a location's header
        info = _location(block)
        if info is None or info.id in seen or next(blocks, None) != _MEMORIES:
            return None
        seen.add(info.id)
        memories: list[MemoryRow] = []
        for block in blocks:  # its memories, up to its separator
            if block == _SEPARATOR:
                break
            match = block_match(block)
            if match is None:
                return None
            kind_text, title, raw_episode, turns, raw_score, body = match.groups()
            title = title[:-1]
            try:
                category, persistence, status = kinds[kind_text]
            except KeyError:
                return None
            try:
                episode, score = episodes[raw_episode], scores[raw_score]
            except KeyError:
                episode, score = int(raw_episode), (int(raw_score[2:]) if raw_score else None)
                if memory_numbers_problem(episode, turns, score) is not None:
                    return None
            else:
                if len(turns) > short and memory_numbers_problem(1, turns, None) is not None:
                    return None
            if "\\" in title:
                title = unescape(title)
            if status is not _SUPERSEDED:
                # The common case: no reference line, no strike-through (and _plain_text
                # written out).
                if body.startswith(structure_starts) or (
                    "\n" in body and structure_after_break(body) is not None
                ):
                    return None
                memory = make_row(
                    (
                        category,
                        title,
                        unescape(body) if "\\" in body else body,
                        episode,
                        turns,
                        score,
                        persistence,
                        status,
                        None,
                        None,
                        None,
                        None,
                    )
                )
                if row_problem(memory) is not None:
                    return None
            else:
                reference = None
                if body.startswith(REFERENCE_STARTS):
                    line, _, body = body.partition("\n")
                    reference = REFERENCE.fullmatch(line)
                    if reference is None:
                        return None
                if not _plain_text(body):
                    return None
                built = build_memory(
                    category,
                    persistence,
                    status,
                    title,
                    episode,
                    turns,
                    score,
                    reference,
                    body,
                )
                if isinstance(built, Skipped):
                    return None
                memory = built
            memories.append(memory)
        else:
            return None  # the file ends inside a location
        locations.append(LocationRows(info, tuple(memories)))
    locations.sort(key=lambda entry: entry.location.id)
    return locations
