"""The map's events: direction names, what one turn means for the map, and the confidence
rule (pure, no I/O; memstore.map_graph applies events to a graph).

**What a turn records** (``event_for_turn``), from the Z-machine's ground truth only:

* a **move** is ``location_before != location_after`` (never the text). The action that
  moved the player becomes a connection from the room before to the room after: a
  direction command under its canonical direction (``n``, ``go north`` -> ``north``), any
  other action (``enter window``, ``climb tree``, ``pray``) under its own label;
* a **death** records nothing (the death flag): being carried to the Forest after a grue
  is not an exit, and the turn is not a failure either;
* a direction command that did **not** move counts a failure for that exit; after
  ``prune_after`` failures (default 3) an exit that never succeeded (no connection) is
  **pruned**; a later success un-prunes it;
* another action that did not move counts a failure for that action's connection from
  that room, if there is one (``enter window`` while the window is shut).

A teleport is told from an exit by what happens next: a non-direction move is kept as an
action-labelled connection, but if taking the same action in the same room later does
not move the player (a failure) or lands somewhere else, the connection loses
confidence. A connection that leads somewhere new keeps the new destination, with its
verifications restarted at 1 and one more failure, so an exit whose destination changes
(the vampire bat's drop) is not routed through until it proves itself again.

**Confidence** of a connection with ``v`` verifications (times it moved the player
there) and ``f`` failures (times it did not)::

    confidence = (v + 1) / (v + f + 2)

Laplace's rule of succession: a prior of one success and one failure, so one traversal
gives 2/3, never 1. ``route`` uses connections whose confidence is above a threshold
(default 0.5: more verifications than failures) and never a pruned exit.

**Text the map keeps and shows.** An action's key, and the action as typed that the map
keeps (``stored_action``), are at most ACTION_KEY_MAX characters, cut so that the kept
action has the same key. What the map shows a person (Map.md, its Mermaid graph, `memstore
map` output) goes through ``shown_text``: one line, control characters made visible, at
most SHOWN_MAX characters with an ellipsis.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from memstore.outcome import RefusalKind, classify_refusal

if TYPE_CHECKING:
    from memstore.triggers import ZMachineContext

#: the canonical directions, in the order exits and untried directions are listed
DIRECTIONS = (
    "north",
    "south",
    "east",
    "west",
    "northeast",
    "northwest",
    "southeast",
    "southwest",
    "up",
    "down",
    "in",
    "out",
)
#: each direction's place in DIRECTIONS (exits are listed in this order)
DIRECTION_ORDER = {direction: index for index, direction in enumerate(DIRECTIONS)}
_ALIASES = {
    **{direction: direction for direction in DIRECTIONS},
    "n": "north",
    "s": "south",
    "e": "east",
    "w": "west",
    "ne": "northeast",
    "nw": "northwest",
    "se": "southeast",
    "sw": "southwest",
    "u": "up",
    "d": "down",
    "inside": "in",
    "outside": "out",
    # Zork's parser walks in / out for a bare ENTER / EXIT
    "enter": "in",
    "exit": "out",
}
#: "go north", "walk north", ...: a verb of motion and a direction is that direction
_MOTION_VERBS = frozenset({"go", "walk", "run", "head"})

#: failures after which an exit that never succeeded is pruned (MemstoreConfig.map_prune_after)
DEFAULT_PRUNE_AFTER = 3
#: route over connections whose confidence is above this (MemstoreConfig.map_route_confidence)
DEFAULT_ROUTE_CONFIDENCE = 0.5

#: MapEvent kinds
MOVED = "moved"  # the action moved the player: a verification of its connection
BLOCKED = "blocked"  # a direction command that did not move: a failure of that exit
STAYED = "stayed"  # another action that did not move: a failure of its connection, if any


#: what a key cut to ACTION_KEY_MAX never ends in (spaces and stops), so it is its own key
_ACTION_END = " .!"


def normalise_action(action: str) -> str:
    """An action as a key: lower case, runs of whitespace one space, no trailing stop (the
    rule every stored key was made by: changing it would split stored connections)."""
    return " ".join(action.lower().split()).rstrip(".!").rstrip()


def _direction_of(normalised: str) -> str | None:
    words = normalised.split(" ")
    if len(words) == 2 and words[0] in _MOTION_VERBS:
        words = words[1:]
    return _ALIASES.get(words[0]) if len(words) == 1 else None


def canonical_direction(action: str) -> str | None:
    """The canonical direction an action walks (``n``, ``go north``, ``NORTH.`` ->
    ``north``; a bare ``enter``/``exit`` -> ``in``/``out``), or None for any other action."""
    return _direction_of(normalise_action(action))


#: an action's key, and the action as typed that the map keeps, are at most this long (an
#: index entry must fit a database page, and Map.md a line: a runaway command thousands of
#: characters long is one connection by its beginning)
ACTION_KEY_MAX = 200
#: the largest verification or failure count: one more stops there (``dialect.one_more``),
#: so that export-json writes only counts import-json takes back
COUNT_MAX = 2**31 - 1


def action_key(action: str) -> str:
    """What makes two actions the same connection: the canonical direction, else the
    normalised action (``Enter  Window`` and ``enter window`` are one), at most
    ACTION_KEY_MAX characters. The key of an action longer than that (runs of whitespace
    one space) ends in no space or stop, so it is its own key, the key of the action as the
    map keeps it (``stored_action``), and reads back as itself from map_state.json."""
    if len(action) <= _CACHED_ACTION_MAX:
        return _cached_action_key(action)
    return _action_key(action)


#: actions up to this long are cached (agents type the same few commands turn after
#: turn); a longer one, a runaway command, is worked out each time, so the cache holds at
#: most 4096 short strings, never 4096 runaway ones
_CACHED_ACTION_MAX = 2 * ACTION_KEY_MAX


def _action_key(action: str) -> str:
    key = normalise_action(action)
    if len(key) > ACTION_KEY_MAX or len(" ".join(action.split())) > ACTION_KEY_MAX:
        key = key[:ACTION_KEY_MAX].rstrip(_ACTION_END)
    return _direction_of(key) or key


_cached_action_key = lru_cache(maxsize=4096)(_action_key)


def written_exit(key: str) -> str:
    """A key as map_state.json spells its exit: the key, or, for a key that is not its own
    key (an action with two runs of trailing stops, ``wait. .``, has the key ``wait.``),
    the key and `` .``, whose key it is, so the file reads back as the map it was."""
    return key if action_key(key) == key else f"{key} ."


def stored_action(action: str) -> str:
    """The action as typed, as the map keeps it: whole when it is at most ACTION_KEY_MAX
    characters, else its beginning (runs of whitespace one space) cut to that length. The
    kept action always has the action's key (``action_key(stored_action(a)) ==
    action_key(a)``): when a cut could not keep it, the key itself is kept."""
    if len(action) <= ACTION_KEY_MAX:
        return action
    key = action_key(action)
    kept = " ".join(action.split())[:ACTION_KEY_MAX].rstrip()
    return kept if action_key(kept) == key else key


#: a name or an action is shown (Map.md, its Mermaid graph, `memstore map`) at most this long
SHOWN_MAX = 100
#: what ends a text that was cut for showing
ELLIPSIS = "…"
#: C0 control characters as their Control Pictures (NUL ␀, ESC ␛), DEL as ␡, and the C1
#: ones (a terminal reads U+009B as an escape sequence's start) as the replacement character
_VISIBLE = str.maketrans(
    {
        **{chr(code): chr(0x2400 + code) for code in range(0x20)},
        "\x7f": "\u2421",
        **{chr(code): "\ufffd" for code in range(0x80, 0xA0)},
    }
)


#: joiners kept as they are: they only join the characters around them (emoji sequences)
_ZWJ, _ZWNJ = "\u200d", "\u200c"


def visible(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1) replaced by a visible stand-in,
    and every format character (Unicode category Cf: the bidi controls U+202E ..., a zero
    width space) but the two joiners by the replacement character: nothing in it can move
    a terminal's cursor or reorder what follows, and a file holding it stays text to git."""
    shown = text.translate(_VISIBLE)
    if shown.isascii():
        return shown
    return "".join(
        "\ufffd" if c not in (_ZWJ, _ZWNJ) and unicodedata.category(c) == "Cf" else c for c in shown
    )


def _extends(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a combining mark, a joiner, a
    variation selector, an emoji skin tone): a cut never falls just before it."""
    return (
        char in (_ZWJ, _ZWNJ)
        or unicodedata.category(char) in ("Mn", "Mc", "Me")
        or "\ufe00" <= char <= "\ufe0f"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


def _cluster_start(line: str, cut: int) -> int:
    """``cut``, moved back to the start of the character cluster it falls in (a base and
    its marks, an emoji joined by U+200D, a flag), so no mark or joiner is left dangling."""
    while 0 < cut < len(line) and (_extends(line[cut]) or line[cut - 1] == _ZWJ):
        cut -= 1
    flags = 0  # regional indicators pair into flags: never keep half of one
    while flags < cut and "\U0001f1e6" <= line[cut - 1 - flags] <= "\U0001f1ff":
        flags += 1
    return cut - flags % 2


def shown_text(text: str, limit: int | None = SHOWN_MAX) -> str:
    """A name or an action as the map shows it to a person: one line (runs of whitespace,
    line breaks among them, one space), control and format characters made ``visible``,
    and at most ``limit`` characters (None: no limit), a longer one cut before the
    character cluster the limit falls in and ended with ELLIPSIS."""
    line = visible(" ".join(text.split()))
    if limit is None or len(line) <= limit:
        return line
    return line[: _cluster_start(line, max(0, limit - len(ELLIPSIS)))].rstrip() + ELLIPSIS


def confidence(verifications: int, failures: int) -> float:
    """(v + 1) / (v + f + 2): the rule of succession (see the module docstring)."""
    return (verifications + 1) / (verifications + failures + 2)


# --- events: what one turn means for the map ---------------------------------------------------


class MapEvent(NamedTuple):
    """One turn's effect on the map, buffered with the manager's bookkeeping."""

    kind: str  # MOVED, BLOCKED or STAYED
    from_id: int
    from_name: str
    action: str  # as typed (stored_action: at most ACTION_KEY_MAX characters)
    action_key: str
    direction: str | None
    to_id: int  # where the player was after the action (from_id unless MOVED)
    to_name: str
    episode: int
    turn: int
    prune_after: int = DEFAULT_PRUNE_AFTER


def event_for_turn(
    ctx: ZMachineContext,
    action: str,
    *,
    location_id: int,
    location_name: str,
    episode: int,
    turn: int,
    prune_after: int = DEFAULT_PRUNE_AFTER,
    response: str | None = None,
) -> MapEvent | None:
    """The map event of one action, from the context's location ids and death flag.

    ``location_id``/``location_name`` are the room the action was taken in (the context's
    ``location_before`` when it has one). None when the turn says nothing about exits: a
    death, an unknown location after the action, an empty action, or a direction that did
    not move and whose ``response`` is the parser's (``I don't know the word "outside"``:
    the game did not read it as a direction, so it says nothing of that exit). Another
    action the parser refused still fails its connection, if it has one (review S5 D F2:
    "y", learned as an exit after a restart, answers "There was no verb in that
    sentence!", and must lose its confidence).
    """
    if ctx.died or ctx.location_after is None:
        return None
    key = action_key(action)
    if not key:
        return None
    before = ctx.location_before if ctx.location_before is not None else location_id
    name = location_name if before == location_id else ""
    direction = key if key in DIRECTION_ORDER else None
    if direction is not None and response is not None and before == ctx.location_after:
        refusal = classify_refusal(response)
        if refusal is not None and refusal.kind is RefusalKind.PARSER:
            return None  # (memstore read a direction where Zork read none)
    after = ctx.location_after
    if before != after:
        kind = MOVED
    elif direction is not None:
        kind = BLOCKED
    else:
        kind = STAYED
    to_name = (ctx.location_after_name or "") if kind == MOVED else name
    return MapEvent(
        kind,
        before,
        name,
        stored_action(action),
        key,
        direction,
        after,
        to_name,
        episode,
        turn,
        prune_after,
    )
