"""Which lines ``ZorkGame.step`` plays: one game command, and never one that reaches
outside the game.

Zork's parser plays every command of a line joined by ".", ",", a double quote, "then"
or "and" ("n. e", "open mailbox and take leaflet" are two moves), and its "save",
"restore" and "script" write or read files in the process's working directory
(``zork1.qzl``, ``script``), so a game saved in one episode or evaluation arm could be
restored in another; "restart" and "quit" end the game behind its caller's back
(``ZorkGame.reset`` starts a new one); "again" repeats the last command under another
name. The game adapter, the LLM agent and the explorer all read this one rule.
"""

from __future__ import annotations

import re

__all__ = [
    "AGAIN",
    "MAX_LINE_BYTES",
    "NOT_PLAYED",
    "NO_MOVE",
    "command_refusal",
    "needs_move_check",
    "one_command_by_its_text",
]

#: the commands the adapter does not play, as Zork's dictionary holds them: its words are
#: their first six letters ("restoring" and "Restoration" are RESTORE, "scripting" is
#: SCRIPT: review S5 D F1), and "q" is QUIT
NOT_PLAYED = frozenset({"save", "restor", "script", "unscri", "restar", "quit", "q"})
#: Zork's AGAIN ("g") and OOPS: the last line once more (OOPS with a word replaced), which
#: the map would keep as an exit of its own (review S5 C F2, S5 D F3)
AGAIN = frozenset({"again", "g", "oops"})
#: the commands that take no move (found by playing every word of Zork I's dictionary
#: alone at West of House): joined to another by "," or "and", the move counter cannot
#: tell them (review S5 E F1: "north, superbrief" left superbrief on for the game)
NO_MOVE = frozenset(
    {"brief", "super", "superb", "verbos", "score", "versio", "find", "see", "seek", "where",
     "ask", "talk", "tell"}
)  # fmt: skip
#: Jericho sends at most 198 bytes of a line: Zork reads what is left ("savex" cut to
#: "save": review S5 E F2), so a longer line is refused whole
MAX_LINE_BYTES = 190
#: what separates words for Zork's parser (a "." "," or '"' is also a word of its own)
_SEPARATORS = re.compile(r'[ .,"]+')
#: what always joins commands: a double quote, "then", or a "." with more after it (a
#: final "." ends the one command: "north." is one move)
_JOINS = re.compile(r'"|\bthen\b|\.[\s.]*[^\s.]')
#: what may join commands or only list objects ("take lamp and sword" is one move, "open
#: mailbox and take leaflet" two): the move counter tells (``ZorkGame.step``)
_MAY_JOIN = re.compile(r",|\band\b")
#: letters, digits, spaces, apostrophes and hyphens: a line Zork reads as one command
_PLAIN = re.compile(r"[a-z0-9 '-]*")


def command_refusal(action: str) -> str | None:
    """Why ``action`` is not a line the game adapter plays (the end of a sentence that
    begins with the command), or None. A line that may join commands (``needs_move_check``)
    is not refused here: ``ZorkGame.step`` undoes it if it played more than one move."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in action):
        return "has a line break or another control character: send one line"
    if len(action.encode("utf-8", "surrogatepass")) > MAX_LINE_BYTES:
        return (
            f"is longer than {MAX_LINE_BYTES} bytes: Jericho cuts a line there, and Zork "
            f"would read what is left"
        )
    lowered = action.lower()
    words = [word for word in _SEPARATORS.split(lowered) if word]
    debugging = next((word for word in words if word[0] in "#$"), None)
    if debugging is not None:
        return f"uses {debugging!r}, one of Zork's debugging commands (they record in files)"
    outside = next((word for word in words if word[:6] in NOT_PLAYED), None)
    if outside is not None:
        return (
            f"uses {outside!r}, which Zork reads as a command that writes or reads a file "
            f"or ends the game: ZorkGame.reset() starts a new game"
        )
    if any(word[:6] in AGAIN for word in words):
        return "repeats the last line (Zork's 'again' or 'oops'): send the command itself"
    if _MAY_JOIN.search(lowered):
        still = next((word for word in words if word[:6] in NO_MOVE), None)
        if still is not None:
            return (
                f"joins {still!r}, a command that takes no move, which the move counter "
                f"cannot tell from one command: one command at a time"
            )
    if _JOINS.search(lowered):
        return (
            "joins several commands (with '.', '\"' or 'then'), each of which Zork would "
            "play: one command at a time"
        )
    return None


def one_command_by_its_text(action: str) -> bool:
    """Whether ``action`` is a line the adapter plays and, by its text alone, one command:
    no "," or "and" either, where only the move counter tells. What an agent whose loop
    cannot take a refused step back keeps to (the LLM agent's answers, the explorer's
    actions from memories and the map)."""
    return command_refusal(action) is None and _MAY_JOIN.search(action.lower()) is None


def needs_move_check(action: str) -> bool:
    """Whether ``ZorkGame.step`` checks the move counter of ``action``: a line with a sign
    Zork's parser could read as joining commands, or "and". A final "." or "," ends the
    one command ("wait." takes Zork's three moves: review S5 E F8)."""
    lowered = action.lower().rstrip(" .,")
    return _PLAIN.fullmatch(lowered) is None or _MAY_JOIN.search(lowered) is not None
