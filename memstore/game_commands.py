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

__all__ = ["AGAIN", "NOT_PLAYED", "command_refusal", "is_plain_command"]

#: the commands the adapter does not play (Zork's "q" is "quit")
NOT_PLAYED = frozenset({"save", "restore", "script", "unscript", "restart", "quit", "q"})
#: Zork's "again" (and "g"): the last command once more, which the map would keep as an
#: exit of its own (review S5 C F2)
AGAIN = frozenset({"again", "g"})
_WORD = re.compile(r"[a-z0-9]+")
_JOINS = re.compile(r'[.,"]|\b(?:then|and)\b')
#: letters, digits, spaces, apostrophes and hyphens: a line Zork reads as one command
_PLAIN = re.compile(r"[a-z0-9 '-]*")


def command_refusal(action: str) -> str | None:
    """Why ``action`` is not a line the game adapter plays (the end of a sentence that
    begins with the command), or None for one game command."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in action):
        return "has a line break or another control character: send one line"
    lowered = action.lower()
    outside = sorted(NOT_PLAYED.intersection(_WORD.findall(lowered)))
    if outside:
        return (
            f"uses {outside[0]!r}, which writes or reads a file or ends the game: "
            f"ZorkGame.reset() starts a new game"
        )
    if AGAIN.intersection(_WORD.findall(lowered)):
        return "repeats the last command (Zork's 'again'): send that command itself"
    if _JOINS.search(lowered):
        return (
            "joins several commands (with '.', ',', '\"', 'then' or 'and'), each of which "
            "Zork would play: one command at a time"
        )
    return None


def is_plain_command(action: str) -> bool:
    """Only letters, digits, spaces, apostrophes and hyphens: no sign Zork's parser could
    read as joining commands (the adapter checks the move counter of any other line)."""
    return _PLAIN.fullmatch(action.lower()) is not None
