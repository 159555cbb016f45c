"""The offline recorder: memory synthesis without a model (``MemstoreConfig.model`` is None).

It stores only what the Z-machine proves (a death, a score change, where an exit led, items
gained or lost), one memory per turn, picked by priority death > score > exit > inventory;
the other facts of the turn are mentioned in the text. Titles are built from the action and
the ground truth only, so replaying a game produces identical memories, and a title that
already exists at the location is not stored again. It never claims to be an LLM: its
reasoning starts with "offline recorder".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memstore.models import Category, Memory, Persistence, Status
from memstore.synthesis import MemorySynthesisResponse
from memstore.triggers import ZMachineContext

REASONING_PREFIX = "offline recorder"
MAX_ACTION_IN_TITLE = 60
MAX_QUOTE = 200

#: verb → past tense for items that left the inventory by the player's own placement
PLACEMENT_VERBS = {
    "drop": "Dropped",
    "put": "Placed",
    "place": "Placed",
    "insert": "Placed",
    "leave": "Left",
    "throw": "Threw",
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BREAKS = re.compile(r"\*{2,}|\n\s*\n")  # "****  You have died  ****", blank lines


@dataclass(frozen=True)
class _Fact:
    category: Category
    persistence: Persistence
    title: str
    sentence: str


def _clean(text: str) -> str:
    return " ".join(text.split())


def death_words(text: str) -> str:
    """What the game said before "****  You have died  ****", at most MAX_QUOTE chars."""
    before = _BREAKS.split(text)[0]
    flat = _clean(before) or first_sentence(text)
    return flat if len(flat) <= MAX_QUOTE else flat[: MAX_QUOTE - 1] + "…"


def first_sentence(text: str) -> str:
    """The first sentence of a game response, whitespace collapsed, at most MAX_QUOTE chars."""
    pieces = (_clean(piece) for piece in _BREAKS.split(text))
    flat = next((piece for piece in pieces if piece), "")
    if not flat:
        return ""
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
    return sentence if len(sentence) <= MAX_QUOTE else sentence[: MAX_QUOTE - 1] + "…"


def _short_action(action: str) -> str:
    action = _clean(action).lower()
    return action if len(action) <= MAX_ACTION_IN_TITLE else action[: MAX_ACTION_IN_TITLE - 1] + "…"


def _items(items: frozenset[int], names: dict[int, str], article: str = "") -> str:
    labels = [
        f"{article}{names[item]}" if names.get(item) else f"object {item}" for item in sorted(items)
    ]
    if len(labels) == 1:
        return labels[0]
    return ", ".join(labels[:-1]) + " and " + labels[-1]


def _placement(action: str) -> str | None:
    words = _clean(action).lower().split()
    return PLACEMENT_VERBS.get(words[0]) if words else None


def _facts(
    location_id: int, location_name: str, action: str, response: str, ctx: ZMachineContext
) -> list[_Fact]:
    """Every provable fact of the turn, highest priority first."""
    quoted = f"'{_short_action(action)}'"
    facts: list[_Fact] = []
    if ctx.died:
        said = death_words(response)
        facts.append(
            _Fact(
                Category.DANGER,
                Persistence.PERMANENT,
                f"{quoted} is deadly",
                f"{quoted} killed the player" + (f': "{said}"' if said else "") + ".",
            )
        )
    delta = ctx.score_delta
    if delta:
        facts.append(
            _Fact(
                Category.SUCCESS if delta > 0 else Category.DANGER,
                Persistence.PERMANENT,
                f"{quoted} scores {delta:+d}",
                f"{quoted} changed the score by {delta:+d} "
                f"({ctx.score_before} → {ctx.score_after}).",
            )
        )
    if ctx.location_changed and ctx.location_after is not None and not ctx.died:
        destination = (
            f"{ctx.location_after_name} ({ctx.location_after})"
            if ctx.location_after_name
            else f"location {ctx.location_after}"
        )
        facts.append(
            _Fact(
                Category.NOTE,
                Persistence.PERMANENT,
                f"{quoted} leads to {destination}",
                f"From {location_name} ({location_id}), {quoted} leads to {destination}.",
            )
        )
    gained, lost = ctx.items_gained, ctx.items_lost
    if gained:
        names = _items(gained, ctx.item_names, article="the ")
        facts.append(
            _Fact(
                Category.SUCCESS,
                Persistence.PERMANENT,
                f"{quoted} gets {names}",
                f"{quoted} puts {names} in the inventory.",
            )
        )
    if lost:
        names = _items(lost, ctx.item_names)
        verb = _placement(action)
        if verb is not None:
            facts.append(
                _Fact(
                    Category.NOTE,
                    Persistence.EPHEMERAL,
                    f"{verb} {names} here",
                    f"{verb} {names} here with {quoted} (this episode only).",
                )
            )
        else:
            facts.append(
                _Fact(
                    Category.NOTE,
                    Persistence.PERMANENT,
                    f"{quoted} loses {names}",
                    f"{quoted} takes {names} out of the inventory.",
                )
            )
    return facts


def _titles(existing: Iterable[Memory | tuple[int, Memory]]) -> set[str]:
    titles: set[str] = set()
    for entry in existing:
        memory = entry[1] if isinstance(entry, tuple) else entry
        titles.add(memory.title)
    return titles


def record_offline(
    *,
    location_id: int,
    location_name: str,
    action: str,
    response: str,
    ctx: ZMachineContext,
    existing: Iterable[Memory | tuple[int, Memory]] = (),
) -> MemorySynthesisResponse:
    """The offline recorder's answer for one turn, in the shape an LLM would give.

    ``existing`` holds the location's memories (plain, or numbered (handle, Memory) pairs).
    Feed the result to ``resolve_decision`` like a model's answer.
    """
    facts = _facts(location_id, location_name, action, response, ctx)
    if not facts:
        return MemorySynthesisResponse(
            should_remember=False,
            reasoning=f"{REASONING_PREFIX}: the Z-machine proves nothing worth storing "
            f"for '{_short_action(action)}' at {location_name}",
        )
    # The most important fact names the memory and the text mentions the others, so a turn
    # whose leading fact is already stored is already remembered: replaying an episode adds
    # nothing new.
    chosen = facts[0]
    if chosen.title in _titles(existing):
        return MemorySynthesisResponse(
            should_remember=False,
            reasoning=f"{REASONING_PREFIX}: already stored: {chosen.title}",
        )
    others = [fact.sentence for fact in facts if fact is not chosen]
    text = chosen.sentence + (" Also: " + " ".join(others) if others else "")
    return MemorySynthesisResponse(
        should_remember=True,
        category=chosen.category,
        memory_title=chosen.title,
        memory_text=text,
        status=Status.ACTIVE,
        persistence=chosen.persistence,
        reasoning=f"{REASONING_PREFIX}: stored a fact proven by the Z-machine "
        f"({chosen.category.value}, {chosen.persistence.value}); no LLM was called",
    )
