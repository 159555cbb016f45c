"""What the memory tools say and read (memstore.memory_tools): their OpenAI-style schemas,
the query and summary prompts, the messages they answer with, the layout of their answers,
and the parsing of the query model's answer. Pure functions and constants, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from memstore.flagged import FlaggedMemory
from memstore.map_graph import Room
from memstore.models import INT64_MAX, plain_str

MAX_TOP_LIMIT = 20
DEFAULT_TOP_LIMIT = 10
#: the longest tool result handed to the agent's model; a longer one is cut (and says so)
MAX_TOOL_RESULT_CHARS = 8_000
#: a memory's text is shown cut to this many characters, in tool results and in the query
#: and summary prompts, so one long memory cannot crowd out the others
MAX_SHOWN_MEMORY_CHARS = 1_000
#: the query or summary model's answer is shown cut to this many characters
MAX_SHOWN_ANSWER_CHARS = 2_000
#: the question is echoed cut to this many characters
MAX_SHOWN_QUESTION_CHARS = 300
#: at most this many dropped citations are listed (the rest are counted)
MAX_SHOWN_CITATIONS = 20
#: at most this many memories (the most important) are shown to the query LLM
DEFAULT_MAX_QUERY_MEMORIES = 200
#: the longest tool-call arguments read (characters of JSON), and the longest text
#: argument, whatever form the arguments came in
MAX_ARGUMENT_CHARS = 100_000
#: the longest question ``query_memories`` sends the query model
MAX_QUESTION_CHARS = 2_000
#: SQLite's largest integer: no location number is larger
MAX_LOCATION_ID = INT64_MAX
#: a cited memory number longer than this is no memory's (and int() would refuse a long one)
MAX_CITED_DIGITS = len(str(INT64_MAX))

NO_MEMORIES = (
    "No memories recorded yet. As you play, important discoveries will be remembered here."
)
NO_MEMORIES_TO_SEARCH = "No memories to search. Nothing important has been flagged yet."
EMPTY_QUESTION = "Error: Please provide a specific question."
EMPTY_LOCATION = "Error: Please provide a location name."
NO_QUERY_MODEL = (
    "Error: query_memories needs a language model, and none is configured "
    "(set MemstoreConfig.query_model or model). Use get_top_memories or "
    "get_location_memories instead; they work without one."
)
NO_RELEVANT = "No relevant memories found."
NO_MAP = "No map yet: no exit has been taken. Routes are known once you have moved between rooms."

QUERY_SYSTEM_PROMPT = """You are helping someone play Zork by searching their memory notes.

You will be given:
1. A list of memories (things they flagged as important)
2. A question they're asking

Your job:
- Find the most relevant memories that answer the question
- Return ONLY the relevant memory numbers and a brief answer
- If no memories are relevant, say "No relevant memories found."

Format:
Relevant memories: #3, #7, #12
Answer: [1-2 sentence answer based on those memories]"""

QUERY_USER_PROMPT = """Memories:
{memories}

Question: {query}

Which memories are relevant and what's the answer?"""

SUMMARY_SYSTEM_PROMPT = (
    "You are summarizing memories about a specific location in Zork. Be concise."
)

SUMMARY_USER_PROMPT = """Location: {location}

Memories from this location:
{memories}

Provide a 2-3 sentence summary of what we learned here."""

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_top_memories",
            "description": (
                "Get the most important memories flagged so far in the game, most important "
                "first. Use this to recall critical discoveries."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "limit": {
                        "type": "integer",
                        "description": "How many memories to return (default 10, 1 to 20).",
                        "minimum": 1,
                        "maximum": MAX_TOP_LIMIT,
                        "default": DEFAULT_TOP_LIMIT,
                    }
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "query_memories",
            "description": (
                "Search your memories for information relevant to a specific question, e.g. "
                "'Where did I see a rusty key?' or 'Which doors are still locked?'. Returns "
                "the relevant memories and a short answer."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": "A natural-language question about what you remember.",
                        "maxLength": MAX_QUESTION_CHARS,
                    }
                },
                "required": ["question"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_location_memories",
            "description": (
                "Get what you remembered at a specific location, by its name (e.g. 'West of "
                "House', case-insensitive) or its location number (e.g. '180'). Several rooms "
                "can share a name; the answer then shows each of them with its number."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The location name, or its location number.",
                    }
                },
                "required": ["location"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_route",
            "description": (
                "Get the shortest known route between two rooms, as the moves to type in "
                "order (e.g. north, east, enter window). Rooms by name (e.g. 'Kitchen', "
                "case-insensitive) or location number (e.g. '27'); a name several rooms "
                "share needs the number. Only exits that moved you before are used."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "from": {
                        "type": "string",
                        "description": "Where the route starts: a room name or its number.",
                    },
                    "to": {
                        "type": "string",
                        "description": "Where the route ends: a room name or its number.",
                    },
                },
                "required": ["from", "to"],
                "additionalProperties": False,
            },
        },
    },
]

TOOL_NAMES = tuple(schema["function"]["name"] for schema in TOOL_SCHEMAS)

#: (Markdown's emphasis may close before the colon: "**Relevant memories**: 1, 3")
RELEVANT_LINE = re.compile(r"^\W*relevant\s+memor(?:y|ies)[\s*_]*:(.*)$", re.IGNORECASE)
ANSWER_MARKER = re.compile(r"^\W*answer[\s*_]*:[\s*_]*", re.IGNORECASE)
#: a number cited on the "Relevant memories:" line: a whole number on its own, "#" (and
#: at most 3 spaces) before it or not; not a part of a word, a decimal, an exponent, a
#: negative number or a value ("2nd", "1.5", "2e1", "-1", "importance=500" cite nothing;
#: "1,3" cites both)
CITATION = re.compile(r"(?<![\w.\-=:])(?:#[ ]{0,3})?(\d+)(?!\w|\.\d)")
#: what the line says in brackets is no citation ("2 (turn 1)", "#2 (1 of 5)": review S5
#: E F3), so it is left out first
_ASIDE = re.compile(r"\([^()]*\)")
NO_CITATION = re.compile(r"^[\W_]*(?:none|no\b(?![.\s#]*\d)|nothing|n/a)", re.IGNORECASE)
LOCATION_NUMBER = re.compile(r"^#?\s*(\d+)$")


def one_line(text: str) -> str:
    """Content on one line, so a memory cannot break the numbered layout of a tool answer."""
    return " ".join(text.split())


def shown(text: str, limit: int = MAX_SHOWN_MEMORY_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (the cut marked with "…")."""
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def cut_tool_result(text: str, limit: int = MAX_TOOL_RESULT_CHARS) -> str:
    """A tool's result cut to ``limit`` characters, ending with a note that says it was."""
    if len(text) <= limit:
        return text
    note = f"\n[cut: the result was {len(text):,} characters; at most {limit:,} are shown]"
    return text[: limit - len(note)] + note


def memory_place(memory: FlaggedMemory) -> str:
    """Where a flagged memory was made, on one line."""
    return one_line(memory.location_label) or "unknown location"


def format_top_memories(memories: Sequence[FlaggedMemory]) -> str:
    """The spec's ``get_top_insights`` layout."""
    if not memories:
        return NO_MEMORIES
    lines = [f"Top {len(memories)} Most Important Memories:", ""]
    for number, memory in enumerate(memories, start=1):
        where = memory_place(memory)
        lines.append(f"{number}. [Turn {memory.turn} @ {where}] {shown(memory.content)}")
        lines.append(f"   Importance: {memory.importance}/1000")
        lines.append("")
    return "\n".join(lines).strip()


def build_query_messages(question: str, memories: Sequence[FlaggedMemory]) -> list[dict[str, str]]:
    """The spec's query prompt: memories numbered from 1, in the order given."""
    listing = "\n".join(
        f"{number}. [Turn {m.turn} @ {memory_place(m)}, importance={m.importance}] "
        f"{shown(m.content)}"
        for number, m in enumerate(memories, start=1)
    )
    return [
        {"role": "system", "content": QUERY_SYSTEM_PROMPT},
        {"role": "user", "content": QUERY_USER_PROMPT.format(memories=listing, query=question)},
    ]


def build_summary_messages(
    location: str, memories: Sequence[FlaggedMemory]
) -> list[dict[str, str]]:
    """The spec's location summary prompt."""
    listing = "\n".join(
        f"- Turn {m.turn}: {shown(m.content)} (importance: {m.importance})" for m in memories
    )
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": SUMMARY_USER_PROMPT.format(location=location, memories=listing),
        },
    ]


def _read_query_answer(raw: str) -> tuple[list[str], str]:
    """(the cited numbers as digits without leading zeros, in order, without repeats; the
    answer text): see ``parse_query_answer``. Linear in the answer's length."""
    cited: dict[str, None] = {}  # an ordered set
    answer_lines: list[str] = []
    in_answer = False
    for line in raw.strip().splitlines():
        relevant = RELEVANT_LINE.match(line)
        if relevant and not in_answer:
            listed = relevant.group(1)
            listed = _ASIDE.sub(" ", listed)
            for match in () if NO_CITATION.match(listed) else CITATION.finditer(listed):
                cited.setdefault(match.group(1).lstrip("0") or "0")
            continue
        marker = ANSWER_MARKER.match(line)
        if marker and not in_answer:
            in_answer = True
            answer_lines = [line[marker.end() :]]
            continue
        answer_lines.append(line)
    return list(cited), "\n".join(answer_lines).strip()


def _handle(digits: str) -> int | None:
    """The number ``digits`` cite, or None when it is too long to be any memory's."""
    return int(digits) if len(digits) <= MAX_CITED_DIGITS else None


def parse_query_answer(raw: str) -> tuple[list[int], str]:
    """Split the model's answer into (cited numbers in order, without repeats; answer text).

    Numbers come from the "Relevant memories:" line only; the answer is what follows
    "Answer:" (or, without that marker, every other line). A number of more than
    MAX_CITED_DIGITS digits (no memory has one) is left out.
    """
    cited, answer = _read_query_answer(raw)
    return [n for n in map(_handle, cited) if n is not None], answer


def _dropped_note(dropped: Sequence[str]) -> str:
    """The citations of memories that do not exist: the first MAX_SHOWN_CITATIONS (a long
    number cut), then how many more."""
    listed = ", ".join(f"#{shown(digits, 20)}" for digits in dropped[:MAX_SHOWN_CITATIONS])
    more = len(dropped) - MAX_SHOWN_CITATIONS
    if more > 0:
        listed += f" and {more:,} more ({len(dropped):,} in all)"
    return f"Dropped citations of memories that do not exist: {listed}."


def format_query_answer(question: str, raw: str, memories: Sequence[FlaggedMemory]) -> str:
    """The query tool's answer: the model's answer and the memories it cited that exist
    (citations of numbers that do not are dropped, and said so)."""
    cited, answer = _read_query_answer(raw)
    if len(answer) > MAX_SHOWN_ANSWER_CHARS:
        answer = answer[: MAX_SHOWN_ANSWER_CHARS - 1] + "…"
    question = shown(question, MAX_SHOWN_QUESTION_CHARS)
    valid: list[int] = []
    dropped: list[str] = []
    for digits in cited:
        number = _handle(digits)
        if number is not None and 1 <= number <= len(memories):
            valid.append(number)
        else:
            dropped.append(digits)
    dropped_note = _dropped_note(dropped)
    if not valid:
        lines = [f"{NO_RELEVANT} (question: {question})"]
        if dropped:
            lines.append(f"{dropped_note} The model's answer was discarded.")
        return "\n".join(lines)
    lines = [
        f"Question: {question}",
        f"Answer: {answer or '(no answer given)'}",
        "",
        "Relevant memories:",
    ]
    for number in valid:
        memory = memories[number - 1]
        lines.append(
            f"#{number} [Turn {memory.turn} @ {memory_place(memory)}] "
            f"{shown(memory.content)} (importance: {memory.importance}/1000)"
        )
    if dropped:
        lines += ["", dropped_note]
    return "\n".join(lines)


def room_name(room: Room) -> str:
    """``West of House (#64)``: a room as the other tools name locations."""
    return f"{one_line(room.name) or 'room'} (#{room.id})"


def unknown_location(asked: str) -> str:
    """The answer for a location no flagged memory names (a long name echoed cut)."""
    if len(asked) > 100:  # a name no room has: echo only its start
        asked = asked[:100] + "..."
    return (
        f"No memories recorded for '{asked}'. Either you haven't been there or nothing "
        "important was noted."
    )


def read_arguments(name: str, arguments: object) -> dict[str, Any] | str:
    """The arguments a model gave tool ``name`` (one of TOOL_NAMES): a dict, or its JSON
    string, each key a plain str (memstore.models.plain_str), checked against the tool's
    schema (no unknown, none missing) and bounded (MAX_ARGUMENT_CHARS, for the JSON string
    and for each text, whatever form they came in); or the error string to answer."""
    if isinstance(arguments, str):
        arguments = plain_str("", arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENT_CHARS:
            return (
                f"Error: the arguments for {name} are {len(arguments):,} characters, "
                f"more than the {MAX_ARGUMENT_CHARS:,} allowed."
            )
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return f"Error: the arguments for {name} are not valid JSON ({exc.msg})."
        except RecursionError:
            return f"Error: the arguments for {name} are nested too deeply."
        except ValueError as exc:  # an integer longer than int's digit limit
            return f"Error: the arguments for {name} hold a bad value ({exc})."
    if not isinstance(arguments, dict):
        return f"Error: the arguments for {name} must be a JSON object."
    arguments = {plain_str("", k) if isinstance(k, str) else k: v for k, v in arguments.items()}
    schema = TOOL_SCHEMAS[TOOL_NAMES.index(name)]["function"]["parameters"]
    unknown = sorted(
        repr(key)[:100] if not isinstance(key, str) else key[:100]
        for key in set(arguments) - set(schema["properties"])
    )
    if unknown:
        return f"Error: {name} has no argument(s) {', '.join(unknown)}."
    missing = [key for key in schema["required"] if key not in arguments]
    if missing:
        return f"Error: {name} needs the argument(s) {', '.join(missing)}."
    long = [k for k, v in arguments.items() if isinstance(v, str) and len(v) > MAX_ARGUMENT_CHARS]
    if long:  # (arguments given as a dict: the JSON string's bound, per text)
        return (
            f"Error: the argument {long[0]} for {name} is more than the "
            f"{MAX_ARGUMENT_CHARS:,} characters allowed."
        )
    return arguments
