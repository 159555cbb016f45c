"""The fast path of the Memories.md reader: one memory block laid out exactly as the
renderer writes it, read in one match, or declined.

The renderer separates every piece of the file by one blank line, so splitting the text on
blank lines gives whole memories, whose text needs no line-by-line work: a memory's text
is the rest of its block. The reader (``exporters.line_parser``) hands each block that
starts like a memory to ``read_memory_block`` when its state allows one (inside a location,
no memory pending); a block that is declined - an older layout, a hand edit, anything to
report with its line number - is read line by line by the same reader, so what a file
reads as never depends on the fast path. Memories are built through
``exporters.memory_block`` either way; a property test checks that the reader with and
without this path agree on any text (tests/test_memories_md_canonical.py).
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
from memstore.md_rows import MemoryRow, memory_row_problem
from memstore.models import Status

__all__ = ["LOCATION_BLOCK_START", "MEMORY_BLOCK_START", "read_location_block", "read_memory_block"]

#: How every memory block starts.
MEMORY_BLOCK_START = "**["
#: How every location block (header and visits line) starts.
LOCATION_BLOCK_START = "## Location "
_LOCATION_BLOCK = re.compile(
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


_make_row = MemoryRow._make


def read_memory_block(block: str) -> MemoryRow | None:
    """The memory of a block in the renderer's exact layout (header line, optional
    reference line, text lines; no blank line), or None: then the block is read line by
    line, and what this returns is what that reading gives, with no problem.

    Never raises.
    """
    if block.endswith("\n"):  # a last line left empty: the line reader ends the memory there
        return None
    match = _MEMORY_BLOCK.fullmatch(block)
    if match is None:
        return None
    kind_text, title, raw_episode, turns, raw_score, body = match.groups()
    title = title[:-1]
    kind = _KINDS.get(kind_text)
    if kind is None:
        return None
    category, persistence, status = kind
    episode = _EPISODES.get(raw_episode)
    if episode is None or raw_score not in _SCORES:  # numbers beyond the lookup tables
        episode, score = int(raw_episode), (int(raw_score[2:]) if raw_score else None)
        if memory_numbers_problem(episode, turns, score) is not None:
            return None
    else:
        score = _SCORES[raw_score]
        if len(turns) > SHORT_DIGITS and memory_numbers_problem(1, turns, None) is not None:
            return None
    if "\\" in title:
        title = unescape(title)
    if status is not _SUPERSEDED:
        # The common case: no reference line, no strike-through.
        if body.startswith(_STRUCTURE_STARTS) or (
            "\n" in body and _STRUCTURE_AFTER_BREAK.search(body) is not None
        ):
            return None
        memory = _make_row(
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
        return memory if memory_row_problem(memory) is None else None
    reference = None
    if body.startswith(REFERENCE_STARTS):
        line, _, body = body.partition("\n")
        reference = REFERENCE.fullmatch(line)
        if reference is None:
            return None
    if body.startswith(_STRUCTURE_STARTS) or (
        "\n" in body and _STRUCTURE_AFTER_BREAK.search(body) is not None
    ):
        return None
    built = build_memory(
        category, persistence, status, title, episode, turns, score, reference, body
    )
    return None if isinstance(built, Skipped) else built


def read_location_block(block: str) -> tuple[int, str, int, tuple[int, ...]] | None:
    """The id, name, visit count and episodes (as listed) of a location's header and visits
    line in the renderer's exact layout, or None: then the block is read line by line.
    Numbers out of range are declined too (the line reader says what is wrong)."""
    match = _LOCATION_BLOCK.fullmatch(block)
    if match is None:
        return None
    raw_id, raw_name, raw_visits, raw_episodes = match.groups()
    location_id, visits = int(raw_id), int(raw_visits)
    episodes = () if raw_episodes == "none" else tuple(map(int, raw_episodes.split(", ")))
    if location_numbers_problem(location_id, visits, episodes) is not None:
        return None
    return location_id, unescape(raw_name), visits, episodes
