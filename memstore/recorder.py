"""The offline recorder: memory synthesis without a model (``MemstoreConfig.model`` is None).

It stores only what the game proves: a death, a score change, where an exit led, items
gained or lost (the Z-machine's ground truth), and a refusal (the game's own answer,
memstore.outcome). One memory per turn; what it stores must serve the agent that reads it:

* **one tier per memory**: the turn's most important new fact names the memory, and the
  text mentions the turn's other new facts *of the same tier* only, so a PERMANENT memory
  never carries an episode-only fact ("Placed the coffin here ... (this episode only)");
* **each fact once**: a fact already stored at the location, as a memory's title or
  mentioned in a memory's text, is not stored again, so a score memory that says where
  its exit led is never followed by a separate memory of the same exit;
* **refusals become FAILURE memories** so the agent does not try again: PERMANENT when the
  answer proves a rule ("You can't go that way.", "I don't know the word ..."), EPHEMERAL
  when it is the state of this game ("The kitchen window is closed.") or when a memory
  says the action worked there before (Zork answers "You can't go that way." for the
  living room's trap door while it is shut). When the action later works there, the
  failure is invalidated with the reason.

Titles are built from the action and the ground truth only, so replaying a game produces
identical memories, and a replay adds nothing. Every title starts with the action in
single quotes (``'north' is no exit``); ``refused_action`` reads a failure's title back.
It never claims to be an LLM: its reasoning starts with "offline recorder".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from memstore.models import Category, Memory, Persistence, Status
from memstore.outcome import Refusal, RefusalKind, classify_refusal, failed_by_state, first_line
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


#: a refusal's title after the quoted action, by what the refusal proves
REFUSAL_TITLES = {
    RefusalKind.PARSER: "is not understood",
    RefusalKind.NO_EXIT: "is no exit",
    RefusalKind.IMPOSSIBLE: "is impossible",
}
#: the title of a refusal that proves no rule (the state of this game)
REFUSED_FOR_NOW = "is refused for now"
DEADLY = "is deadly"
_REFUSED_TITLE = re.compile(
    r"\A'(?P<action>.*)' (?:"
    + "|".join(re.escape(s) for s in (*REFUSAL_TITLES.values(), REFUSED_FOR_NOW, DEADLY))
    + r")\Z",
    re.DOTALL,
)


@dataclass(frozen=True)
class _Fact:
    category: Category
    persistence: Persistence
    title: str
    sentence: str
    #: how the fact reads wherever it is mentioned (the start of ``sentence``, without
    #: what may differ from one time to the next, such as the score before and after)
    key: str = ""

    @property
    def mention(self) -> str:
        return self.key or self.sentence


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
    location_id: int,
    location_name: str,
    action: str,
    response: str,
    ctx: ZMachineContext,
    worked_before: bool = False,
) -> list[_Fact]:
    """Every provable fact of the turn, highest priority first. ``worked_before``: a
    memory here says the action did something (so a refusal of it proves no rule)."""
    quoted = f"'{_short_action(action)}'"
    facts: list[_Fact] = []
    if ctx.died:
        said = death_words(response)
        facts.append(
            _Fact(
                Category.DANGER,
                Persistence.PERMANENT,
                f"{quoted} {DEADLY}",
                f"{quoted} killed the player" + (f': "{said}"' if said else "") + ".",
                key=f"{quoted} killed the player",
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
                key=f"{quoted} changed the score by {delta:+d}",
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
    if not facts and not ctx.died and failed_by_state(ctx):
        refusal = classify_refusal(response)
        if refusal is not None:
            if worked_before and refusal.rule:
                # "You can't go that way." from an exit that led somewhere before: the
                # living room's trap door is shut, not gone
                refusal = replace(refusal, rule=False)
            facts.append(_refusal_fact(location_id, location_name, quoted, response, refusal))
    return facts


def _refusal_title(quoted: str, refusal: Refusal) -> str:
    suffix = REFUSAL_TITLES.get(refusal.kind) if refusal.rule else None
    return f"{quoted} {suffix or REFUSED_FOR_NOW}"


def _refusal_fact(
    location_id: int, location_name: str, quoted: str, response: str, refusal: Refusal
) -> _Fact:
    """A FAILURE: PERMANENT when the answer proves a rule, EPHEMERAL otherwise."""
    said = first_line(response)
    if len(said) > MAX_QUOTE:
        said = said[: MAX_QUOTE - 1] + "…"
    where = f'At {location_name} ({location_id}), {quoted} is refused: "{said}"'
    if refusal.rule:
        return _Fact(
            Category.FAILURE,
            Persistence.PERMANENT,
            _refusal_title(quoted, refusal),
            f"{where} The game refuses it every time: do not try it again.",
            key=where,
        )
    return _Fact(
        Category.FAILURE,
        Persistence.EPHEMERAL,
        _refusal_title(quoted, refusal),
        f"{where} (this episode only: it may work once something changes).",
        key=where,
    )


def refused_action(title: str) -> str | None:
    """The action a refusal or death memory of this recorder is about (its title's quoted
    start: ``'take window' is impossible`` -> ``take window``), or None for other titles."""
    found = _REFUSED_TITLE.match(title)
    return found.group("action") if found else None


_ACTION_TITLE = re.compile(
    r"\A'(?P<action>.*)' (?:scores [+-]\d+|leads to .+|gets .+|loses .+|"
    + "|".join(re.escape(s) for s in (*REFUSAL_TITLES.values(), REFUSED_FOR_NOW, DEADLY))
    + r")\Z",
    re.DOTALL,
)


def memory_action(title: str) -> str | None:
    """The action any title of this recorder is about (``'take lamp' gets the brass
    lantern`` -> ``take lamp``; lower case, as typed otherwise), or None for a title it
    did not make or one that names no action (``Dropped brass lantern here``)."""
    found = _ACTION_TITLE.match(title)
    return found.group("action") if found else None


def _failure_titles(quoted: str) -> list[str]:
    """Every title a refusal of this action can have (to invalidate when it works)."""
    return [f"{quoted} {suffix}" for suffix in (*REFUSAL_TITLES.values(), REFUSED_FOR_NOW)]


def _memories(existing: Iterable[Memory | tuple[int, Memory]]) -> list[Memory]:
    return [entry[1] if isinstance(entry, tuple) else entry for entry in existing]


def _stored(fact: _Fact, memories: list[Memory]) -> bool:
    """The fact is a memory's title here, or mentioned in a memory's text."""
    mention = fact.mention
    return any(m.title == fact.title or mention in m.text for m in memories)


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

    ``existing`` holds the location's live memories (plain, or numbered (handle, Memory)
    pairs). Feed the result to ``resolve_decision`` like a model's answer.
    """
    memories = _memories(existing)
    short = _short_action(action)
    worked_before = any(
        memory_action(m.title) == short and refused_action(m.title) is None for m in memories
    )
    facts = _facts(location_id, location_name, action, response, ctx, worked_before)
    fresh = [fact for fact in facts if not _stored(fact, memories)]
    chosen = fresh[0] if fresh else None
    quoted = f"'{_short_action(action)}'"
    live = {memory.title for memory in memories}
    failures = [title for title in _failure_titles(quoted) if title in live]
    worked = bool(facts) and facts[0].category is not Category.FAILURE and not ctx.died
    # the action worked here: its failures are proven wrong (invalidated, with the reason);
    # a refusal that proves a rule replaces the "for now" of the same action (supersedes)
    invalidated = failures if worked else []
    reason = f"{quoted} worked here later: {facts[0].sentence}" if invalidated else None
    upgraded = (
        [title for title in failures if title.endswith(REFUSED_FOR_NOW)]
        if chosen is not None
        and chosen.category is Category.FAILURE
        and chosen.persistence is Persistence.PERMANENT
        else []
    )
    if chosen is None:
        if invalidated:
            return MemorySynthesisResponse(
                should_remember=False,
                invalidates=tuple(invalidated),
                invalidation_reason=reason,
                reasoning=f"{REASONING_PREFIX}: {quoted} worked, so its failure is invalid",
            )
        return MemorySynthesisResponse(
            should_remember=False,
            reasoning=f"{REASONING_PREFIX}: "
            + (
                f"already stored: {facts[0].title}"
                if facts
                else "the game proves nothing worth storing "
                f"for '{_short_action(action)}' at {location_name}"
            ),
        )
    # One memory, one tier: the text mentions the other new facts of the chosen one's tier.
    others = [
        fact.sentence
        for fact in fresh
        if fact is not chosen and fact.persistence is chosen.persistence
    ]
    text = chosen.sentence + (" Also: " + " ".join(others) if others else "")
    return MemorySynthesisResponse(
        should_remember=True,
        category=chosen.category,
        memory_title=chosen.title,
        memory_text=text,
        status=Status.ACTIVE,
        persistence=chosen.persistence,
        supersedes=tuple(upgraded),
        invalidates=tuple(invalidated),
        invalidation_reason=reason,
        reasoning=f"{REASONING_PREFIX}: stored a fact the game proves "
        f"({chosen.category.value}, {chosen.persistence.value}); no LLM was called",
    )
