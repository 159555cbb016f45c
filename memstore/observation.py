"""What an agent sees before an action, and the actions it could take (memstore.explorer
and memstore.llm_agent play from these).

``observe`` reads the room, the game's answer, what the player carries and what the
Z-machine's object tree puts in the room, each object with the nouns the parser knows it
by; ``candidate_actions`` builds the twelve directions and the verbs below on those
objects, named as the parser names them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from memstore.map_graph import DIRECTIONS

if TYPE_CHECKING:
    from memstore.game import GameSnapshot, ZorkGame

__all__ = [
    "INVENTORY_VERBS",
    "LOOK_VERBS",
    "ROOM_VERBS",
    "Choice",
    "Observation",
    "Thing",
    "candidate_actions",
    "mentioned",
    "observe",
    "parser_noun",
]

#: verbs tried on things in the room, in this order (opening first: a shut container hides
#: what can be taken; moving last: a rug can hide a trap door)
ROOM_VERBS = ("open", "take", "move")
#: verbs tried once an episode on what the player carries
INVENTORY_VERBS = ("turn on", "open")
#: verbs that mostly tell: tried when nothing else is left here
LOOK_VERBS = ("enter", "read", "examine")
DARK = "pitch black"


class Thing(NamedTuple):
    """An object of the game: its number, short name and the nouns the parser knows."""

    number: int
    name: str
    words: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Observation:
    """What the agent sees before an action: the room, the game's last answer, the score,
    what it carries and what the object tree puts in the room."""

    location_id: int
    location_name: str
    response: str
    score: int
    inventory: tuple[Thing, ...] = ()
    objects: tuple[Thing, ...] = ()

    @property
    def dark(self) -> bool:
        return DARK in self.response

    @property
    def held(self) -> list[str]:
        return [thing.name for thing in self.inventory]


@dataclass(frozen=True, slots=True)
class Choice:
    """The action to type, and why (for the synthesis history and for reading a run)."""

    action: str
    reasoning: str


def observe(game: ZorkGame, snapshot: GameSnapshot, response: str) -> Observation:
    """The observation after ``response``: the snapshot, and the room's objects from the
    object tree, each with the nouns the parser knows it by."""
    carried = snapshot.inventory_ids

    def thing(number: int, name: str) -> Thing:
        return Thing(number, name, game.object_words(number))

    return Observation(
        snapshot.location_id,
        snapshot.location_name,
        response,
        snapshot.score,
        tuple(thing(n, name) for n, name in snapshot.inventory),
        tuple(thing(n, name) for n, name in game.room_objects() if n not in carried),
    )


def _word(thing: Thing) -> str:
    """The thing's first noun, whole when the dictionary cut it to six letters ("lanter"
    in "brass lantern" is "lantern"), else its name's last word."""
    if not thing.words:
        return thing.name.split()[-1] if thing.name.split() else thing.name
    first = thing.words[0]
    for word in thing.name.lower().split():
        if len(first) == 6 and word.startswith(first):
            return word
    return first


def parser_noun(thing: Thing, others: Iterable[Thing]) -> str:
    """How to name a thing to the parser: its noun ("small mailbox" -> "mailbox", "carpet"
    -> "rug"), with the word before it in its name when another thing here shares the
    noun ("trap door" beside "wooden door")."""
    word = _word(thing)
    if any(_word(other) == word for other in others if other.number != thing.number):
        words = thing.name.split()
        return " ".join(words[-2:]) if len(words) > 1 else thing.name
    return word


def mentioned(thing: Thing, text: str) -> bool:
    """Whether the game's text names the thing (by any of its nouns or its name's last
    word): the object tree also holds what is out of sight, such as a songbird heard only."""
    words = {*thing.words, *(thing.name.lower().split()[-1:])}
    return any(re.search(_word_pattern(word), text) for word in words if word)


def _word_pattern(word: str) -> str:
    """A whole word (or its plural); a six-letter dictionary word may be cut short, so
    it also matches as the start of a longer one ("lanter" in "lantern")."""
    escaped = re.escape(word.lower())
    return rf"\b{escaped}" if len(word) == 6 else rf"\b{escaped}(?:s|es)?\b"


def candidate_actions(observation: Observation, seen: str | None = None) -> dict[str, list[str]]:
    """The actions the game's objects suggest, by kind: ``room`` (open, take, move on what
    ``seen``, the lower-case text the game showed here, mentions; everything when None),
    ``unseen`` (those verbs on the rest), ``inventory`` (turn on, open), ``look`` (enter,
    read, examine) and ``directions``."""
    everything = observation.objects + observation.inventory
    shown = [t for t in observation.objects if seen is None or mentioned(t, seen)]
    hidden = [t for t in observation.objects if t not in shown]
    room = [parser_noun(t, everything) for t in shown]
    unseen = [parser_noun(t, everything) for t in hidden]
    held = [parser_noun(t, everything) for t in observation.inventory]
    return {
        "room": _unique(f"{verb} {noun}" for verb in ROOM_VERBS for noun in room),
        "unseen": _unique(f"{verb} {noun}" for verb in ROOM_VERBS for noun in unseen),
        "inventory": _unique(f"{verb} {noun}" for verb in INVENTORY_VERBS for noun in held),
        "look": _unique(f"{verb} {noun}" for verb in LOOK_VERBS for noun in room + held),
        "directions": list(DIRECTIONS),
    }


def _unique(actions: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(actions))
