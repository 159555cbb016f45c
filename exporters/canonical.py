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

from pydantic import ValidationError

from exporters.escaping import unescape
from exporters.memory_block import (
    FAST_HEADER,
    REFERENCE,
    REFERENCE_STARTS,
    Skipped,
    build_memory,
    header_fields,
)
from memstore.models import LocationInfo, LocationMemories, Memory, Status
from memstore.prevalidated import location_from_fields, typed_location_memories, typed_memory

__all__ = ["read_canonical"]

_TITLE = "# Location Memories"
_MEMORIES = "### Memories"
_SEPARATOR = "---"
_LOCATION = re.compile(
    r"## Location ([0-9]{1,100}): (.*)\n"
    r"\*\*Visits:\*\* ([0-9]{1,100}) \| \*\*Episodes:\*\* (none|[0-9]{1,100}(?:, [0-9]{1,100})*)"
)
#: The start of a line that is, or could be read as, structure (the title is line 1).
_LINE_START = re.compile(r"\n(?:[#*\[ \t]|---)")
_ACTIVE = Status.ACTIVE
_SUPERSEDED = Status.SUPERSEDED


def _location(block: str) -> LocationInfo | None:
    match = _LOCATION.fullmatch(block)
    if match is None:
        return None
    raw_id, raw_name, visits, episodes = match.groups()
    try:
        return location_from_fields(
            int(raw_id),
            unescape(raw_name),
            int(visits),
            () if episodes == "none" else tuple(map(int, episodes.split(", "))),
        )
    except ValidationError:
        return None


def _lines_are_plain(text: str, locations: int, memories: int, references: int) -> bool:
    """Whether every line that may look like structure is one of the blocks that were read.

    Each location wrote a ``## Location`` line, a visits line, a ``### Memories`` line and
    a ``---``; each memory a header and maybe a reference line. A text line starting with
    ``#``, ``*``, ``[``, ``---``, a space or a tab (which the line parser could read as
    structure, or as a blank line) makes one more, and the renderer escapes them all.
    One regex pass over the file counts them: much faster than a search per memory.
    """
    return len(_LINE_START.findall(text)) == 4 * locations + memories + references


def read_canonical(text: str) -> list[LocationMemories] | None:
    """The locations of a file in the renderer's exact layout (sorted by id), else None.

    ``text`` has ``\\n`` line endings and no byte-order mark. Promises: never raises;
    when the result is not None, ``parse_memories_md(text)`` reads the same locations
    with no problem.
    """
    if not text.endswith("\n"):
        return None
    blocks = text[:-1].split("\n\n")
    if blocks[0] != _TITLE:
        return None
    header_match = FAST_HEADER.fullmatch
    count = len(blocks)
    index = 1
    seen: set[int] = set()
    locations: list[LocationMemories] = []
    memory_count = reference_count = 0
    while index < count:
        info = _location(blocks[index])
        if info is None or info.id in seen or index + 1 >= count or blocks[index + 1] != _MEMORIES:
            return None
        seen.add(info.id)
        index += 2
        memories: list[Memory] = []
        while True:
            if index >= count:
                return None
            block = blocks[index]
            index += 1
            if block == _SEPARATOR:
                break
            header, _, body = block.partition("\n")
            match = header_match(header)
            if match is None:
                return None
            fields = header_fields(match)
            category, persistence, status, title, episode, turns, score = fields
            if status is _ACTIVE and not body.startswith("["):
                # The common case: an ACTIVE memory with no reference line.
                memory = typed_memory(
                    category, title, unescape(body), episode, turns, score, persistence, status
                )
                if memory is None:
                    return None
            else:
                reference = None
                if body.startswith(REFERENCE_STARTS):
                    line, _, body = body.partition("\n")
                    reference = REFERENCE.fullmatch(line)
                    if reference is None:
                        return None
                    reference_count += 1
                built = build_memory(*fields, reference, body)
                if isinstance(built, Skipped):
                    return None
                memory = built
            memories.append(memory)
        memory_count += len(memories)
        # Every memory here came from a builder that checked it: no need to check again.
        locations.append(typed_location_memories(info, tuple(memories)))
    if not _lines_are_plain(text, len(locations), memory_count, reference_count):
        return None
    locations.sort(key=lambda entry: entry.location.id)
    return locations
