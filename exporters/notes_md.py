r"""Notes.md: the memories the agent flagged itself (spec 001), rendered for review.

A pure function with no database and no I/O: :func:`render_notes_md` takes flagged
memories (``memstore.flagged.FlaggedMemory`` or anything with the same attributes) and
returns the text. The file is for people to read; nothing parses it back.

Deterministic: the same memories give the same bytes, in any input order. Entries are
sorted by importance (highest first), then turn (earliest first), then id (lowest first;
memories without an id after those with one), then content. Timestamps and session ids are
not rendered.

Layout::

    # Agent Notes

    2 memories flagged by the agent, most important first.

    ## 1. Importance 800/1000 at Living Room (#193)

    - Episode 1, turn 9
    - Score 10, moves 12

    > Brass lantern in the living room

Escaping: every character Markdown gives meaning to anywhere in a line
(``\ ` * _ [ ] < > # | ~ &``) is backslash-escaped in content and location names, and so
is a ``-``, ``+`` or ``=`` that starts a line, and the ``.`` or ``)`` after a line's leading
digits. Leading whitespace of each content line is dropped (it could start a code block),
and each line of content sits in the entry's blockquote, so content can neither end the
entry nor start a heading, list, table, code block, HTML block or separator of its own.
Location names are written on one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

__all__ = ["NOTES_TITLE", "escape_markdown", "is_notes_md", "render_notes_md"]

_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&])")
_LINE_START = re.compile(r"^([-+=])")
_ORDERED_LIST = re.compile(r"^(\d+)([.)])")


class FlaggedMemoryLike(Protocol):
    content: str
    importance: int
    turn: int
    location_id: int | None
    location_name: str
    score: int | None
    moves: int | None
    episode: int


#: the first line of every Notes.md
NOTES_TITLE = "# Agent Notes"


def escape_markdown(line: str) -> str:
    """One line of text, escaped so that it renders as itself and forms no structure."""
    line = _SPECIAL.sub(r"\\\1", line.lstrip())
    line = _LINE_START.sub(r"\\\1", line)
    return _ORDERED_LIST.sub(r"\1\\\2", line)


def _inline(text: str) -> str:
    return escape_markdown(" ".join(text.split()))


def _sort_key(memory: FlaggedMemoryLike) -> tuple[int, int, int, int, str]:
    memory_id = getattr(memory, "id", None)
    return (
        -memory.importance,
        memory.turn,
        memory_id is None,
        memory_id if isinstance(memory_id, int) else 0,
        memory.content,
    )


def _location(memory: FlaggedMemoryLike) -> str:
    name = _inline(memory.location_name or "") or "unknown location"
    return name if memory.location_id is None else f"{name} (#{memory.location_id})"


def _entry(number: int, memory: FlaggedMemoryLike) -> list[str]:
    score = "?" if memory.score is None else str(memory.score)
    moves = "?" if memory.moves is None else str(memory.moves)
    lines = [
        f"## {number}. Importance {memory.importance}/1000 at {_location(memory)}",
        "",
        f"- Episode {memory.episode}, turn {memory.turn}",
        f"- Score {score}, moves {moves}",
        "",
    ]
    content_lines = memory.content.strip().splitlines() or [""]
    lines += [f"> {escape_markdown(line)}".rstrip() for line in content_lines]
    lines.append("")
    return lines


def is_notes_md(text: str) -> bool:
    """Whether ``text`` is a Notes.md as ``render_notes_md`` writes it (its title line)."""
    return text.replace("\r\n", "\n").startswith(f"{NOTES_TITLE}\n")


def render_notes_md(memories: Iterable[FlaggedMemoryLike]) -> str:
    """Notes.md for these flagged memories (see the module docstring for order and escaping)."""
    ordered = sorted(memories, key=_sort_key)
    lines = [NOTES_TITLE, ""]
    if not ordered:
        lines += ["No memories flagged by the agent yet.", ""]
        return "\n".join(lines)
    count = len(ordered)
    lines += [
        f"{count} {'memory' if count == 1 else 'memories'} flagged by the agent, "
        "most important first.",
        "",
    ]
    for number, memory in enumerate(ordered, start=1):
        lines += _entry(number, memory)
    return "\n".join(lines)
