"""The agent's exits line: one line of a room's known exits and untried directions, and
the fullest one that fits beside the memories within the token budget."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from memstore.map_events import SHOWN_MAX, shown_text

if TYPE_CHECKING:
    from memstore.map_graph import Exit, RoomExits


#: ``shown_text`` of the names short enough to keep (a room's exits line is worked out again
#: whenever its counts change: a name is shown the same way every time)
_short_name = lru_cache(maxsize=1024)(shown_text)


def _shown_name(name: str) -> str:
    return _short_name(name) if len(name) <= SHOWN_MAX else shown_text(name)


def describe_exit(exit_: Exit) -> str:
    """``east → Behind House (85, 2/3 verified)``: the destination's name as the map shows
    it everywhere (``shown_text``: one line, cut at SHOWN_MAX characters), so that a long
    name never pushes the whole exits line out of the token budget."""
    detail = str(exit_.to_id)
    if exit_.failures:
        detail += f", {exit_.verifications}/{exit_.verifications + exit_.failures} verified"
    return f"{exit_.command} → {_shown_name(exit_.to_name) or 'room'} ({detail})"


def exits_line(room: RoomExits, *, untried: bool = True, limit: int | None = None) -> str:
    """``Exits: north → North of House (137), east → Behind House (85, 2/3 verified);
    untried: west, up``; "" for a room not on the map. ``limit`` keeps the first exits
    and says how many more there are; ``untried=False`` leaves the untried list out."""
    if room.name is None:
        return ""
    shown = room.exits if limit is None else room.exits[:limit]
    parts = ", ".join(describe_exit(e) for e in shown) or "none known"
    if len(shown) < len(room.exits):
        parts += f" (+{len(room.exits) - len(shown)} more)"
    line = f"Exits: {parts}"
    if untried and room.untried:
        line += f"; untried: {', '.join(room.untried)}"
    return line


def exits_line_variants(room: RoomExits) -> Iterator[str]:
    """The exits line from the fullest to the shortest, for fitting a token budget."""
    if room.name is None:
        return
    yield exits_line(room)
    for limit in range(len(room.exits), 0, -1):
        yield exits_line(room, untried=False, limit=limit)


def with_exits_line(text: str, room: RoomExits, budget: int) -> str:
    """``text`` and the room's exits line, the fullest variant that keeps the whole within
    ``budget`` tokens (the memories are never cut for it); ``text`` alone if none fits or
    the room is not on the map. The one rule for the manager and ``memstore show``."""
    from memstore.tokens import count_tokens

    for shorter, line in enumerate(exits_line_variants(room)):
        # a shorter line is counted alone first (short, and cached): joining the two saves
        # at most a token where they meet, so most lines are ruled out cheaply
        if shorter and count_tokens(text) + count_tokens(line) > budget + 1:
            continue
        candidate = f"{text}\n{line}" if text else line
        if count_tokens(candidate) <= budget:
            return candidate
    return text
