"""The synthesis prompt (spec 000 "Memory Creation Mechanism", spec 002 "Synthesis Prompt
Logic", spec 003 "Multi-Step Memory Synthesis", spec 004 "LLM-Driven Invalidation").

Deterministic: the same inputs give the same messages, character for character.

Bounded: whatever the caller, the agent or the store hands in, the messages of one call
hold at most MAX_PROMPT_CHARS characters (``test_review_h`` builds the worst case):

- the existing memories listed (``listed_memories``): their lines at most MAX_LISTED_CHARS
  in all, each memory's text cut to MAX_SHOWN_MEMORY_CHARS (as the memory tools show it),
  chosen in the synthesis order (``_synthesis_rank``: DANGER, then TENTATIVE, then CORE,
  PERMANENT, EPHEMERAL, newest first within a group; SUPERSEDED last; a TENTATIVE memory
  is what synthesis confirms or refutes, so it is never left out before a settled one) and
  taken while they fit: the first that does not fit ends the list, and a closing line
  says how many were left out. Characters alone bound the list, not a count of memories.
  They keep their handles, and ``resolve_decision`` is given the handles listed
  (``listed_handles``): a reference to a memory left out is ignored as "not shown", and a
  new memory titled like a live one left out supersedes it where the persistence rule
  allows, or is dropped with that reason logged (memstore.synthesis);
- the action as the map keeps it (ACTION_KEY_MAX characters), the game's response
  MAX_RESPONSE_CHARS, a location name LOCATION_NAME_MAX, an item's name
  MAX_ITEM_NAME_CHARS, at most MAX_LISTED_ITEMS items gained and lost;
- the history window: at most MAX_HISTORY_TURNS turns, each response and reasoning in it
  cut to MAX_OBSERVATION_CHARS (what the LLM agent sees of a response), the newest turns
  kept while their lines fit MAX_HISTORY_CHARS, and a line saying how many were left out.

A cut text ends with CUT_MARK ("…"), cut between grapheme clusters
(``memstore.tokens.grapheme_end``). Input within the bounds is shown as it always was.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstore.busy_buffer import PROVISIONAL_EPISODES
from memstore.config import MAX_HISTORY_WINDOW
from memstore.llm_agent import MAX_OBSERVATION_CHARS
from memstore.map_events import ACTION_KEY_MAX
from memstore.models import (
    LOCATION_NAME_MAX,
    Category,
    Memory,
    Persistence,
    Status,
    on_one_line,
)
from memstore.retrieval import CUT_MARK, left_out_line
from memstore.synthesis import MAX_INVALIDATES, MAX_SUPERSEDES
from memstore.tokens import grapheme_end
from memstore.tool_text import MAX_SHOWN_MEMORY_CHARS
from memstore.triggers import LONG_RESPONSE_CHARS, Trigger, ZMachineContext

#: the characters of the lines of the existing memories one prompt lists, in all (no count:
#: a prompt lists every memory that fits)
MAX_LISTED_CHARS = 24_000
#: the game's response to the action being synthesised (the history's are cut to
#: MAX_OBSERVATION_CHARS)
MAX_RESPONSE_CHARS = 2_000
#: a Z-machine object's short name is a few words; at most this many items gained (lost)
MAX_ITEM_NAME_CHARS = 100
MAX_LISTED_ITEMS = 20
#: the history window's turns shown (the largest ``history_window``), and their lines' size
MAX_HISTORY_TURNS = MAX_HISTORY_WINDOW
MAX_HISTORY_CHARS = 16_000
#: the most characters of one call's messages (system and user), whatever the input
MAX_PROMPT_CHARS = 64_000

RULE = "═" * 63

FAILURE_PHRASES = ("you can't", "that doesn't", "impossible")
PLACEMENT_VERBS = ("drop", "put", "place", "insert", "leave")

SYSTEM_PROMPT = (
    "You are the memory synthesizer of an agent playing Zork I. After a significant turn "
    "you decide whether the outcome is worth remembering at the location where the action "
    "was taken, write the memory as a short synthesized lesson (not a raw log), classify "
    "its category and persistence, and retire existing memories that the new evidence "
    "contradicts. Existing memories are referred to by their handles, such as [1]. "
    "You answer with a single JSON object and nothing else."
)


def context_hints(action: str, response: str, ctx: ZMachineContext, first_visit: bool) -> list[str]:
    """The spec 002 context signals for the persistence choice, in a fixed order."""
    hints: list[str] = []
    response_length = ctx.response_length or len(response)
    if first_visit and response_length > LONG_RESPONSE_CHARS:
        hints.append("• Long response on first visit suggests room description (likely CORE)")
    if ctx.inventory_changed and not ctx.location_changed:
        hints.append(
            "• Inventory changed without movement suggests item manipulation (likely EPHEMERAL)"
        )
    if ctx.score_delta > 0:
        hints.append("• Score increase suggests game mechanic discovered (likely PERMANENT)")
    if any(phrase in response.lower() for phrase in FAILURE_PHRASES):
        hints.append("• Failed action suggests game constraint learned (likely PERMANENT)")
    if any(verb in action.lower() for verb in PLACEMENT_VERBS):
        hints.append("• Placement action detected (likely EPHEMERAL)")
    return hints


def _tier(persistence: Persistence) -> str:
    return "persistent tier" if persistence.on_disk else "session tier"


def _played(memory: Memory, episode: int | None) -> str:
    """The episode a memory was learnt in, as the prompt says it: a provisional number (an
    episode the busy database has not numbered yet: memstore.busy_buffer) is no number."""
    if memory.episode < PROVISIONAL_EPISODES:
        return f"episode {memory.episode}"
    return "this episode" if memory.episode == episode else "an earlier episode"


def cut(text: str, limit: int) -> str:
    """``text`` as it is when at most ``limit`` characters, else its start ending with
    CUT_MARK, ``limit`` characters in all, cut between grapheme clusters."""
    if len(text) <= limit:
        return text
    return text[: grapheme_end(text, limit - len(CUT_MARK))].rstrip() + CUT_MARK


def _memory_lines(handle: int, memory: Memory, episode: int | None) -> list[str]:
    lines = [
        f"[{handle}] [{memory.category.value}] {on_one_line(memory.title)} "
        f"({memory.status.value}, {memory.persistence.value}, {_tier(memory.persistence)}, "
        f"{_played(memory, episode)}, turn {memory.turns})"
    ]
    if memory.text:
        lines.append(f"    {cut(on_one_line(memory.text), MAX_SHOWN_MEMORY_CHARS)}")
    if memory.status is Status.SUPERSEDED:
        lines.append("    (already SUPERSEDED: do not supersede or invalidate it again)")
    return lines


def _synthesis_rank(pair: tuple[int, Memory]) -> tuple[int, int]:
    """The order memories are chosen for the synthesis prompt: DANGER 0, TENTATIVE 1 (what
    synthesis must confirm or refute), CORE 2, PERMANENT 3, EPHEMERAL 4, SUPERSEDED 5;
    newest (highest handle) first within each. The agent's view ranks TENTATIVE last
    (``memstore.retrieval.group``); the prompt must not hide the memories it exists to
    settle."""
    handle, memory = pair
    if memory.status is Status.SUPERSEDED:
        return 5, -handle
    if memory.status is Status.TENTATIVE:
        return 1, -handle
    if memory.category is Category.DANGER:
        return 0, -handle
    return {Persistence.CORE: 2, Persistence.PERMANENT: 3}.get(memory.persistence, 4), -handle


def listed_memories(
    existing: Sequence[tuple[int, Memory]], episode: int | None = None
) -> tuple[list[tuple[int, Memory]], int]:
    """The existing memories a prompt lists, in handle order, and how many it leaves out:
    in the synthesis order (``_synthesis_rank``), taken while their lines fit
    MAX_LISTED_CHARS (the first that does not fit ends the list); no count bounds them.
    The same ``existing`` and ``episode`` always give the same answer: ``listed_handles``
    tells ``resolve_decision`` which handles the model was shown."""
    chosen: list[tuple[int, Memory]] = []
    size = 0
    for handle, memory in sorted(existing, key=_synthesis_rank):
        cost = sum(len(line) + 1 for line in _memory_lines(handle, memory, episode))
        if size + cost > MAX_LISTED_CHARS:
            break
        chosen.append((handle, memory))
        size += cost
    chosen.sort(key=lambda pair: pair[0])
    return chosen, len(existing) - len(chosen)


def listed_handles(
    existing: Sequence[tuple[int, Memory]], episode: int | None = None
) -> frozenset[int]:
    """The handles of the memories ``build_synthesis_messages`` lists for these arguments."""
    return frozenset(handle for handle, _ in listed_memories(existing, episode)[0])


def _existing_section(existing: Sequence[tuple[int, Memory]], episode: int | None) -> str:
    lines = ["EXISTING MEMORIES AT THIS LOCATION:"]
    if not existing:
        lines.append("(none yet)")
        return "\n".join(lines)
    lines.append(
        "Both tiers are listed: persistent (core/permanent, kept across episodes) and session "
        "(ephemeral, cleared when the episode ends). Refer to a memory by its handle number."
    )
    listed, left_out = listed_memories(existing, episode)
    for handle, memory in listed:
        lines += _memory_lines(handle, memory, episode)
    if left_out:
        lines.append(
            f"{left_out_line(left_out)} (past the prompt's bound: they cannot be referenced)"
        )
    return "\n".join(lines)


DEDUPLICATION_SECTION = """DE-DUPLICATION:
- If an existing memory already says what this turn shows, answer should_remember=false.
- Only remember something new: a new fact, a refinement, or a contradiction.
- Do not repeat what the agent already knows (for example "I died" after a death memory).
- Never reuse the exact title of an existing memory unless you supersede that memory."""

CONTRADICTION_SECTION = f"""CONTRADICTIONS, SUPERSESSION AND INVALIDATION:
- SUPERSEDE (field "supersedes": list of handles) when the new memory replaces an existing one:
  a refinement or correction of the same situation, or a TENTATIVE memory now confirmed or
  disproven. Supersession needs a new memory (should_remember=true). At most {MAX_SUPERSEDES}.
- INVALIDATE (field "invalidates": list of handles, with "invalidation_reason") when an
  existing memory is proven false and there is no specific replacement, for example a death
  that disproves a speculative memory. Works with or without a new memory. At most
  {MAX_INVALIDATES}, one shared reason.
- A memory is either superseded or invalidated, never both.
- A core or permanent memory may not be superseded by an ephemeral one (it would be lost at
  the end of the episode); an ephemeral memory may be upgraded by a permanent one.
- Only use handles listed above. If nothing is contradicted, leave both lists empty."""


def _persistence_section(hints: list[str], first_visit: bool) -> str:
    context_section = "\n".join(hints) if hints else "• No strong signals from context"
    visit = "FIRST VISIT" if first_visit else "RETURN VISIT"
    return f"""MEMORY PERSISTENCE CLASSIFICATION:
{RULE}
Choose based on WHAT HAPPENED (action type), not WHEN (visit timing).

**CORE** - Spawn state from room description (FIRST VISIT ONLY):
  Definition: Items/objects/fixtures in room description on first visit
  When to use:
    ✓ ONLY on first visit to location (first_visit=true)
    ✓ ONLY for passive observations from room text
    ✓ NOT for agent actions or discoveries
  Examples:
    ✓ "Sword here" (from "Living Room. There is a sword here.") → CORE
    ✓ "Mailbox visible" (from "West of House" description) → CORE
    ✗ "Dropped sword here" (agent action, not room text) → NOT CORE
    ✗ "Sword was here" (return visit) → NOT CORE

**PERMANENT** - Game mechanics and reusable knowledge:
  Definition: How the game works; knowledge true across episodes
  When to use:
    ✓ ANY visit (first or return)
    ✓ Learning rules, mechanics, dangers, constraints
    ✓ Knowledge that stays true after episode reset
  Examples:
    ✓ "Troll attacks on sight" (danger behavior) → PERMANENT
    ✓ "Taking egg grants 5 points" (scoring rule) → PERMANENT
    ✓ "Cannot climb tree from here" (constraint) → PERMANENT

**EPHEMERAL** - Agent-caused state changes:
  Definition: What agent DID that changes state temporarily
  When to use:
    ✓ ANY visit (first or return)
    ✓ Agent performed action: drop, place, open, take, move
    ✓ State change that resets on episode boundary
  Examples:
    ✓ "Dropped sword here" (agent action) → EPHEMERAL
    ✓ "Placed nest in sack" (agent organization) → EPHEMERAL
    ✓ "Opened window from outside" (agent state change) → EPHEMERAL

CONTEXT SIGNALS FOR THIS ACTION:
{context_section}

DECISION CRITERIA:
1. CORE: Room description observation on FIRST VISIT only
2. EPHEMERAL: Agent action that changes state (ANY VISIT)
3. PERMANENT: Game mechanic/rule learned (ANY VISIT)

If agent DOES something → likely EPHEMERAL
If agent LEARNS something → likely PERMANENT
If agent SEES something in room description (first visit) → likely CORE

Current visit status: {visit}
⚠️  CORE only allowed on first visit (enforced by validation)

Response field: "persistence": "core" | "permanent" | "ephemeral"
{RULE}"""


def _history_section(
    recent_actions: Sequence[tuple[int, str, str]],
    recent_reasoning: Sequence[tuple[int, str, str]],
) -> str:
    if not recent_actions and not recent_reasoning:
        return ""
    responses = {turn: response for turn, _, response in recent_actions}
    # each entry's lines, of the newest MAX_HISTORY_TURNS entries of each kind
    actions = [
        (
            turn,
            [
                f"Turn {turn}: {cut(action, ACTION_KEY_MAX)}",
                f"Response: {cut(response.strip(), MAX_OBSERVATION_CHARS)}",
                "",
            ],
        )
        for turn, action, response in recent_actions[-MAX_HISTORY_TURNS:]
    ]
    reasoning = [
        (
            turn,
            [
                f"Turn {turn}:",
                f"Reasoning: {cut(why.strip(), MAX_OBSERVATION_CHARS)}",
                f"Action: {cut(action, ACTION_KEY_MAX)}",
                *(
                    [f"Response: {cut(responses[turn].strip(), MAX_OBSERVATION_CHARS)}"]
                    if turn in responses
                    else []
                ),
                "",
            ],
        )
        for turn, why, action in recent_reasoning[-MAX_HISTORY_TURNS:]
    ]
    # whole turns, the newest first, while their lines fit MAX_HISTORY_CHARS
    sizes: dict[int, int] = {}
    for turn, entry in [*actions, *reasoning]:
        sizes[turn] = sizes.get(turn, 0) + sum(len(line) + 1 for line in entry)
    kept: set[int] = set()
    size = 0
    for turn in sorted(sizes, reverse=True):
        if size + sizes[turn] > MAX_HISTORY_CHARS:
            break
        kept.add(turn)
        size += sizes[turn]
    given = {turn for turn, _, _ in recent_actions} | {turn for turn, _, _ in recent_reasoning}
    left_out = len(given - kept)
    lines = ["RECENT ACTION SEQUENCE:", RULE, ""]
    if left_out:
        lines += [f"({left_out} earlier {'turn' if left_out == 1 else 'turns'} not shown)", ""]
    shown = [line for turn, entry in actions if turn in kept for line in entry]
    lines += shown or ["(no recent actions)", ""]
    if reasoning:
        lines.append("AGENT'S REASONING:")
        lines += [line for turn, entry in reasoning if turn in kept for line in entry]
    lines.append(RULE)
    return "\n".join(lines)


MULTI_STEP_SECTION = """MULTI-STEP PROCEDURE DETECTION:
Review the RECENT ACTION SEQUENCE above. Does the current outcome depend on previous actions?

**Look for these patterns:**

1. **Prerequisites** (action B requires action A first):
   Example: "open window" (turn N) → "enter window" (turn N+1) → success
   Memory: "To enter kitchen: (1) open window, (2) enter window"

2. **Delayed Consequences** (action seemed successful but had delayed effect):
   Example: "give lunch to troll" (turn N, seemed ok) → troll attacks (turn N+1)
   Memory: "Troll attacks after accepting gift - gift strategy fails"
   Action: supersede the earlier TENTATIVE memory

3. **Progressive Discovery** (understanding deepens over multiple turns):
   Example: rusty key fails, brass key unlocks the door, then the door opens
   Memory: "Stone door requires brass key (not rusty key), then open door"

Use status TENTATIVE when the outcome is still unclear, ACTIVE when it is confirmed."""


def _item_list(items: frozenset[int], names: dict[int, str]) -> str:
    ordered = sorted(items)
    shown = [
        f"{cut(names[item], MAX_ITEM_NAME_CHARS)} (object {item})"
        if item in names
        else f"object {item}"
        for item in ordered[:MAX_LISTED_ITEMS]
    ]
    if len(ordered) > MAX_LISTED_ITEMS:
        shown.append(f"and {len(ordered) - MAX_LISTED_ITEMS} more")
    return ", ".join(shown)


def _action_section(
    location_id: int,
    location_name: str,
    action: str,
    response: str,
    ctx: ZMachineContext,
    first_visit: bool,
    turn: int | None,
) -> str:
    lines = ["CURRENT ACTION:"]
    if turn is not None:
        lines.append(f"Turn: {turn}")
    lines += [
        f"Action: {cut(action, ACTION_KEY_MAX)}",
        "Response:",
        cut(response.strip(), MAX_RESPONSE_CHARS),
        "",
        "Z-MACHINE GROUND TRUTH:",
    ]
    delta = ctx.score_delta
    if Trigger.SCORE_CHANGED in ctx.reported:  # the caller gave the change only
        lines.append(f"- Score delta: {delta:+d} (the score itself was not given)")
    elif delta:
        lines.append(f"- Score delta: {delta:+d} ({ctx.score_before} → {ctx.score_after})")
    else:
        lines.append(f"- Score delta: 0 (score {ctx.score_after})")
    if ctx.location_changed and ctx.location_after is None:  # reported, with no values
        lines.append("- Moved (the caller reported a move; the destination was not given)")
    elif ctx.location_changed:
        before = (
            f"{location_name} ({ctx.location_before})"
            if ctx.location_before == location_id
            else f"location {ctx.location_before}"
        )
        after = (
            f"{cut(ctx.location_after_name, LOCATION_NAME_MAX)} ({ctx.location_after})"
            if ctx.location_after_name
            else f"location {ctx.location_after}"
        )
        lines.append(f"- Moved from {before} to {after}")
    else:
        lines.append("- Location unchanged")
    gained, lost = ctx.items_gained, ctx.items_lost
    if ctx.inventory_changed and not (gained or lost):  # reported, with no values
        lines.append("- Inventory changed (the caller reported it; the items were not given)")
    else:
        lines.append(
            f"- Items gained: {_item_list(gained, ctx.item_names)}"
            if gained
            else "- Items gained: none"
        )
        lines.append(
            f"- Items lost: {_item_list(lost, ctx.item_names)}" if lost else "- Items lost: none"
        )
    lines.append(f"- Death: {'YES, the player died' if ctx.died else 'no'}")
    lines.append(
        f"- First visit to {location_name} ({location_id}): {'yes' if first_visit else 'no'}"
    )
    return "\n".join(lines)


def _output_section() -> str:
    categories = " | ".join(c.value for c in Category)
    return f"""OUTPUT FORMAT:
Answer with one JSON object only: no prose, no markdown fences.
{{
  "should_remember": true | false,
  "category": "{categories}" (required when should_remember is true),
  "memory_title": "short title, under 10 words" (required when should_remember is true),
  "memory_text": "1-2 sentences: the lesson, not a log" (required when should_remember is true),
  "status": "ACTIVE" | "TENTATIVE",
  "persistence": "core" | "permanent" | "ephemeral" (required when should_remember is true),
  "supersedes": [handles of memories this new memory replaces, e.g. 2],
  "invalidates": [handles of memories proven false],
  "invalidation_reason": "why they are false" (required when invalidates is not empty),
  "reasoning": "one sentence explaining the decision"
}}
To retire memories without a new one: should_remember false, invalidates and its reason."""


def build_synthesis_messages(
    *,
    location_id: int,
    location_name: str,
    action: str,
    response: str,
    ctx: ZMachineContext,
    existing: Sequence[tuple[int, Memory]] = (),
    recent_actions: Sequence[tuple[int, str, str]] = (),
    recent_reasoning: Sequence[tuple[int, str, str]] = (),
    first_visit: bool | None = None,
    turn: int | None = None,
    episode: int | None = None,
) -> list[dict[str, str]]:
    """The chat messages (system, user) for one synthesis call.

    ``location_id``/``location_name`` are the SOURCE location (where the action was taken).
    ``existing`` comes from ``synthesis.number_memories``; ``recent_actions`` holds
    (turn, action, response) and ``recent_reasoning`` (turn, reasoning, action), oldest first,
    already cut to the history window. ``first_visit`` defaults to ``ctx.first_visit``.
    ``episode`` is the one being played (a memory of it under a provisional number shows
    as "this episode"). Every part is bounded (the module's docstring): the messages hold
    at most MAX_PROMPT_CHARS characters, and the memories listed are
    ``listed_memories(existing, episode)``.
    """
    visit = bool(ctx.first_visit if first_visit is None else first_visit)
    location_name = cut(location_name, LOCATION_NAME_MAX)
    sections = [
        f"Location: {location_name} (ID: {location_id})",
        _existing_section(existing, episode),
        DEDUPLICATION_SECTION,
        CONTRADICTION_SECTION,
        _persistence_section(context_hints(action, response, ctx, visit), visit),
        _history_section(recent_actions, recent_reasoning),
        MULTI_STEP_SECTION if recent_actions or recent_reasoning else "",
        _action_section(location_id, location_name, action, response, ctx, visit, turn),
        _output_section(),
    ]
    user = "\n\n".join(section for section in sections if section)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]
