"""Finding a room on the map by number or name, for `memstore map route` and get_route.

Pure (no I/O): the caller passes the map's rooms (``MapStore.rooms()`` or
``MapGraph.room_list()``). A number (``64``, ``"64"``, ``"+64"``, ``"#64"``, in the digits
0-9 only, as map_state.json and the command line's location numbers are read) is a location
id; anything else is a name, matched whole, ignoring case and runs of whitespace, never
by substring. Several rooms share names in Zork ("Forest", "Maze"): a name that matches
more than one room is not a match, and the answer lists their numbers so the caller can
pick one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import NamedTuple

from memstore.map_graph import Room, shown_text
from memstore.models import INT64_MAX

__all__ = ["RoomLookup", "find_room", "room_label"]

#: SQLite's largest integer: no location number is larger
MAX_LOCATION_ID = INT64_MAX
#: a room by its number: "64", "#64", or "room 64" (how Map.md labels a room with no name)
_NUMBER = re.compile(r"(?:room\s+)?#?\s*\+?([0-9]+)", re.IGNORECASE)
#: at most this many characters of what was asked are echoed in a message
_ECHO = 60


class RoomLookup(NamedTuple):
    """What ``find_room`` found: ``room`` when exactly one room matched, else None and
    ``problem`` (one line: no such room, or the rooms a shared name matches)."""

    asked: str
    room: Room | None
    matches: tuple[Room, ...] = ()
    problem: str | None = None


def _fold(name: str) -> str:
    return " ".join(name.split()).casefold()


def room_label(room: Room) -> str:
    """``West of House (64)``, or ``room 64`` for a room the game has not named; the name
    as the map shows it (memstore.map_events.shown_text: one line, cut when long)."""
    name = shown_text(room.name)
    return f"{name} ({room.id})" if name else f"room {room.id}"


def _echo(asked: str) -> str:
    return repr(asked if len(asked) <= _ECHO else asked[:_ECHO] + "...")


def find_room(rooms: Iterable[Room], asked: str | int) -> RoomLookup:
    """The one room ``asked`` names: by number, else by whole name (case and spacing
    ignored). No match, or a name several rooms share, gives ``room`` None and a
    ``problem`` that says so (with the closest names, or every matching number)."""
    known = list(rooms)
    if isinstance(asked, bool) or not isinstance(asked, int | str):
        return RoomLookup(str(asked), None, problem="give a room's name or its number")
    text = str(asked).strip()
    if not text:
        return RoomLookup(text, None, problem="give a room's name or its number")
    number = _NUMBER.fullmatch(text)
    if number is not None and not text[:1].isdigit() and text[:1] != "#":
        named = [room for room in known if _fold(room.name) == _fold(text)]
        if named:  # a room named "Room 5" is that room, not room number 5
            number = None
    if number is not None:
        digits = number.group(1)
        location_id = int(digits) if len(digits) <= len(str(MAX_LOCATION_ID)) else -1
        for room in known:
            if room.id == location_id:
                return RoomLookup(text, room, (room,))
        shown = digits if len(digits) <= _ECHO else digits[:_ECHO] + "..."
        return RoomLookup(
            text,
            None,
            problem=f"room {shown} is not on the map (no exit was taken or tried there yet)",
        )
    wanted = _fold(text)
    matches = tuple(room for room in known if _fold(room.name) == wanted)
    if len(matches) == 1:
        return RoomLookup(text, matches[0], matches)
    if matches:
        numbers = ", ".join(str(room.id) for room in matches)
        return RoomLookup(
            text,
            None,
            matches,
            f"{_echo(text)} matches {len(matches)} rooms on the map: {numbers}; give the "
            "number of the one you mean",
        )
    by_fold: dict[str, Room] = {}
    for room in known:
        by_fold.setdefault(_fold(room.name), room)
    close = difflib.get_close_matches(wanted, [f for f in by_fold if f], n=3, cutoff=0.6)
    hint = "; closest: " + ", ".join(_echo(by_fold[f].name) for f in close) if close else ""
    if text.removeprefix("#").strip().isdecimal():  # digits, but not 0-9 (٦٤)
        hint = "; a room's number is written in the digits 0-9"
    return RoomLookup(text, None, problem=f"no room called {_echo(text)} on the map{hint}")
