"""The agent's exits line: one line of a room's known exits and untried directions, and
the fullest one that fits beside the memories within the token budget.

The work for one view is bounded whatever the map holds: each destination's name is cut
once (``shown_text`` of its first few hundred characters, the same cut as of the whole
name), the line describes at most EXITS_LISTED exits (the rest are counted: ``(+N more)``),
and the fullest variant that fits is found in a few token counts (a binary search over
how many exits are listed), not one count a variant."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from memstore.map_events import SHOWN_MAX, shown_text

if TYPE_CHECKING:
    from memstore.map_graph import Exit, RoomExits

#: the most exits an exits line in the agent's context describes (the others are counted,
#: ``(+N more)``): a line of more never fits a token budget beside the memories, and a
#: room with hundreds of actions is worked out in milliseconds all the same
EXITS_LISTED = 40
#: the characters of a long name looked at first: ``shown_text`` of them is the name's own
#: cut unless runs of whitespace shrink them to SHOWN_MAX characters or fewer
_HEAD = 4 * SHOWN_MAX


#: ``shown_text`` of the names short enough to keep (a room's exits line is worked out again
#: whenever its counts change: a name is shown the same way every time)
_short_name = lru_cache(maxsize=1024)(shown_text)


@lru_cache(maxsize=64)
def _long_name(name: str) -> str:
    """``shown_text(name)`` for a name longer than SHOWN_MAX, from its beginning only:
    joining runs of whitespace and making characters visible keeps a prefix a prefix, and
    the cut needs only the first SHOWN_MAX + 1 characters shown. So a 3 MB name costs
    what its first few hundred characters do (more only while they are mostly whitespace)."""
    head = _HEAD
    while head < len(name) and len(" ".join(name[:head].split())) <= SHOWN_MAX:
        head *= 4
    return shown_text(name[:head])


def _shown_name(name: str) -> str:
    return _short_name(name) if len(name) <= SHOWN_MAX else _long_name(name)


def describe_exit(exit_: Exit) -> str:
    """``east → Behind House (85, 2/3 verified)``: the destination's name as the map shows
    it everywhere (``shown_text``: one line, cut at SHOWN_MAX characters), so that a long
    name never pushes the whole exits line out of the token budget."""
    detail = str(exit_.to_id)
    if exit_.failures:
        detail += f", {exit_.verifications}/{exit_.verifications + exit_.failures} verified"
    return f"{exit_.command} → {_shown_name(exit_.to_name) or 'room'} ({detail})"


def _line(room: RoomExits, described: Sequence[str], untried: bool) -> str:
    """The exits line listing ``described`` (the first of the room's exits, described)."""
    parts = ", ".join(described) or "none known"
    if len(described) < len(room.exits):
        parts += f" (+{len(room.exits) - len(described)} more)"
    line = f"Exits: {parts}"
    if untried and room.untried:
        line += f"; untried: {', '.join(room.untried)}"
    return line


def exits_line(room: RoomExits, *, untried: bool = True, limit: int | None = None) -> str:
    """``Exits: north → North of House (137), east → Behind House (85, 2/3 verified);
    untried: west, up``; "" for a room not on the map. ``limit`` keeps the first exits
    and says how many more there are; ``untried=False`` leaves the untried list out."""
    if room.name is None:
        return ""
    shown = room.exits if limit is None else room.exits[:limit]
    return _line(room, [describe_exit(e) for e in shown], untried)


def exits_line_variants(room: RoomExits) -> Iterator[str]:
    """The exits line from the fullest (at most EXITS_LISTED exits, and the untried
    directions) to the shortest (the first exit), for fitting a token budget."""
    if room.name is None:
        return
    described = [describe_exit(e) for e in room.exits[:EXITS_LISTED]]
    yield _line(room, described, True)
    for limit in range(len(described), 0, -1):
        yield _line(room, described[:limit], False)


def with_exits_line(text: str, room: RoomExits, budget: int) -> str:
    """``text`` and the room's exits line, the fullest variant (exits_line_variants) that
    keeps the whole within ``budget`` tokens (the memories are never cut for it); ``text``
    alone if none fits or the room is not on the map. The one rule for the manager and
    ``memstore show``. A variant listing more exits is longer, so the fullest that fits is
    found by a binary search over how many are listed: a few token counts per view."""
    from memstore.tokens import count_tokens

    if room.name is None:
        return text
    described = [describe_exit(e) for e in room.exits[:EXITS_LISTED]]  # each name cut once
    alone = count_tokens(text) if text else 0

    def fitting(line: str) -> str | None:
        # the line is counted alone first (short, and cached): joining the two saves at
        # most a token where they meet, so most lines are ruled out cheaply
        if alone + count_tokens(line) > budget + 1:
            return None
        candidate = f"{text}\n{line}" if text else line
        return candidate if count_tokens(candidate) <= budget else None

    found = fitting(_line(room, described, True))
    if found is not None:
        return found
    low, high = 1, len(described)
    while low <= high:  # the most exits listed (without the untried ones) that fit
        middle = (low + high) // 2
        candidate = fitting(_line(room, described[:middle], False))
        if candidate is None:
            high = middle - 1
        else:
            found, low = candidate, middle + 1
    return text if found is None else found
