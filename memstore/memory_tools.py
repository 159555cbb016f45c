"""The three memory query tools of spec 001 and the map's ``get_route`` (issue 16), for an
agent's tool-calling loop.

``MemoryToolkit`` binds the tools to a store: ``get_top_memories``, ``query_memories``,
``get_location_memories`` and ``get_route`` are its methods (plain callables with
docstrings, returning text), ``TOOL_SCHEMAS`` are their descriptions in the OpenAI /
litellm tool-calling format, and ``call_tool`` dispatches a model's tool call by name. A
tool never raises: every problem (bad arguments, a failed LLM call, a busy database) comes
back as a string starting with ``"Error:"``, so the agent loop can hand it to the model as
the tool's result.

The query LLM is cheap and optional: an injected ``LLMCallable``, or ``LiteLLMCompletion``
built from ``config.query_model`` (or ``config.model``). Without one, ``query_memories``
says it needs a model and ``get_location_memories`` lists the memories verbatim.
``get_route`` needs no model: it answers from the map (memstore.map_store) with the
shortest route over exits that moved the player before.

A schema's argument named like a Python keyword (``get_route``'s ``from``) is passed to
its method with a trailing underscore (``from_``), as PEP 8 names such parameters.
"""

from __future__ import annotations

import functools
import json
import keyword
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memstore.config import MemstoreConfig
from memstore.flagged import FlaggedMemories, FlaggedMemory
from memstore.map_graph import MapEvent, Room
from memstore.map_lookup import find_room
from memstore.map_store import MapStore
from memstore.synthesis import LLMCallable, classify_llm_exception

MAX_TOP_LIMIT = 20
DEFAULT_TOP_LIMIT = 10
#: at most this many memories (the most important) are shown to the query LLM
DEFAULT_MAX_QUERY_MEMORIES = 200
#: the longest tool-call arguments read (characters of JSON)
MAX_ARGUMENT_CHARS = 100_000
#: SQLite's largest integer: no location number is larger
MAX_LOCATION_ID = 2**63 - 1

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

_RELEVANT_LINE = re.compile(r"^\W*relevant\s+memor(?:y|ies)\s*:(.*)$", re.IGNORECASE)
_ANSWER = re.compile(r"^\W*answer\s*:[\s*_]*", re.IGNORECASE)
_NUMBER = re.compile(r"#?\s*(\d+)")
_LOCATION_NUMBER = re.compile(r"^#?\s*(\d+)$")


def _one_line(text: str) -> str:
    """Content on one line, so a memory cannot break the numbered layout of a tool answer."""
    return " ".join(text.split())


def _where(memory: FlaggedMemory) -> str:
    return _one_line(memory.location_label) or "unknown location"


def format_top_memories(memories: Sequence[FlaggedMemory]) -> str:
    """The spec's ``get_top_insights`` layout."""
    if not memories:
        return NO_MEMORIES
    lines = [f"Top {len(memories)} Most Important Memories:", ""]
    for number, memory in enumerate(memories, start=1):
        where = _where(memory)
        lines.append(f"{number}. [Turn {memory.turn} @ {where}] {_one_line(memory.content)}")
        lines.append(f"   Importance: {memory.importance}/1000")
        lines.append("")
    return "\n".join(lines).strip()


def build_query_messages(question: str, memories: Sequence[FlaggedMemory]) -> list[dict[str, str]]:
    """The spec's query prompt: memories numbered from 1, in the order given."""
    listing = "\n".join(
        f"{number}. [Turn {m.turn} @ {_where(m)}, importance={m.importance}] {_one_line(m.content)}"
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
        f"- Turn {m.turn}: {_one_line(m.content)} (importance: {m.importance})" for m in memories
    )
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": SUMMARY_USER_PROMPT.format(location=location, memories=listing),
        },
    ]


def parse_query_answer(raw: str) -> tuple[list[int], str]:
    """Split the model's answer into (cited numbers in order, without repeats; answer text).

    Numbers come from the "Relevant memories:" line only; the answer is what follows
    "Answer:" (or, without that marker, every other line).
    """
    cited: list[int] = []
    answer_lines: list[str] = []
    in_answer = False
    for line in raw.strip().splitlines():
        relevant = _RELEVANT_LINE.match(line)
        if relevant and not in_answer:
            for match in _NUMBER.finditer(relevant.group(1)):
                number = int(match.group(1))
                if number not in cited:
                    cited.append(number)
            continue
        marker = _ANSWER.match(line)
        if marker and not in_answer:
            in_answer = True
            answer_lines = [line[marker.end() :]]
            continue
        answer_lines.append(line)
    return cited, "\n".join(answer_lines).strip()


def _llm_error(tool: str, exc: BaseException) -> str:
    kind = classify_llm_exception(exc).value
    detail = _one_line(str(exc))[:200]
    return (
        f"Error: {tool} could not get an answer from the memory model ({kind}: "
        f"{type(exc).__name__}: {detail}). Try again later, or use get_top_memories."
    )


def _never_raises(tool: Callable[..., str]) -> Callable[..., str]:
    """A tool returns its problems as text: the agent loop must never see an exception."""

    @functools.wraps(tool)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return tool(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            return f"Error: {tool.__name__} failed ({type(exc).__name__}: {exc})."

    return wrapper


def default_query_llm(config: MemstoreConfig | None) -> LLMCallable | None:
    """``LiteLLMCompletion`` on ``config.query_model`` (or ``model``); None if neither is set."""
    if config is None:
        return None
    model = config.query_model or config.model
    if not model:
        return None
    from memstore.llm import LiteLLMCompletion

    return LiteLLMCompletion(config.model_copy(update={"model": model}), use_response_format=False)


class MemoryToolkit:
    """The spec's facade: flagged memories of one store, and the tools to query them.

    ``llm`` is the cheap query model (any ``LLMCallable``); without one, it is built from
    ``config`` (default: the store's config) when that names a ``query_model`` or ``model``.
    ``session_id`` is recorded on memories added through ``add_memory``.
    ``pending_map_events`` (e.g. ``lambda: manager.pending_map_events``) gives the map
    events a manager has buffered and not written yet, so ``get_route`` sees the last turns.
    """

    def __init__(
        self,
        store: Any,
        llm: LLMCallable | None = None,
        config: MemstoreConfig | None = None,
        session_id: str | None = None,
        *,
        max_query_memories: int = DEFAULT_MAX_QUERY_MEMORIES,
        pending_map_events: Callable[[], Iterable[MapEvent]] | None = None,
    ) -> None:
        self.store = store
        self.memories = FlaggedMemories(store, session_id=session_id)
        self.config = config if config is not None else getattr(store, "config", None)
        self.llm: LLMCallable | None = llm if llm is not None else default_query_llm(self.config)
        self.max_query_memories = max_query_memories
        self.pending_map_events = pending_map_events

    @property
    def session_id(self) -> str:
        return self.memories.session_id

    # --- capture and status -------------------------------------------------------------

    def add_memory(
        self,
        content: str,
        importance: int,
        turn: int,
        location_id: int | None,
        location_name: str,
        score: int | None = None,
        moves: int | None = None,
        episode: int = 1,
    ) -> bool:
        """Store what the agent flagged this turn (``FlaggedMemories.add_flagged_memory``):
        True if stored, False if empty or a near-duplicate. Raises on invalid arguments."""
        return self.memories.add_flagged_memory(
            content,
            importance,
            turn,
            location_id,
            location_name,
            score=score,
            moves=moves,
            episode=episode,
        )

    def get_memory_count(self) -> int:
        return self.memories.count()

    def get_summary_stats(self) -> dict[str, Any]:
        """``total_memories``, ``avg_importance``, ``locations_covered``, ``top_location``."""
        return self.memories.stats()

    # --- the tools ------------------------------------------------------------------------

    @_never_raises
    def get_top_memories(self, limit: int = DEFAULT_TOP_LIMIT) -> str:
        """Get the most important memories, most important first (default 10, at most 20).

        Use this to recall critical information flagged during the game.

        Args:
            limit: how many memories to return; clamped to 1..20.
        """
        if isinstance(limit, bool):
            return "Error: limit must be a whole number from 1 to 20."
        try:
            count = int(limit)
        except (TypeError, ValueError):
            return "Error: limit must be a whole number from 1 to 20."
        count = max(1, min(count, MAX_TOP_LIMIT))
        return format_top_memories(self.memories.top(count))

    @_never_raises
    def query_memories(self, question: str) -> str:
        """Search memories for information relevant to a specific question.

        A cheap model reads the memories and answers with the relevant ones; memories it
        cites that do not exist are dropped.

        Args:
            question: e.g. "Where is the brass lantern?" or "Which doors are still locked?"
        """
        if not isinstance(question, str) or not question.strip():
            return EMPTY_QUESTION
        question = question.strip()
        memories = self.memories.top(self.max_query_memories)
        if not memories:
            return NO_MEMORIES_TO_SEARCH
        if self.llm is None:
            return NO_QUERY_MODEL
        try:
            raw = self.llm(build_query_messages(question, memories))
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            return _llm_error("query_memories", exc)
        if not isinstance(raw, str) or not raw.strip():
            return "Error: query_memories got an empty answer from the memory model."
        return self._format_query_answer(question, raw, memories)

    @staticmethod
    def _format_query_answer(question: str, raw: str, memories: Sequence[FlaggedMemory]) -> str:
        cited, answer = parse_query_answer(raw)
        valid = [n for n in cited if 1 <= n <= len(memories)]
        dropped = [n for n in cited if n not in valid]
        dropped_note = (
            "Dropped citations of memories that do not exist: "
            + ", ".join(f"#{n}" for n in dropped)
            + "."
        )
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
                f"#{number} [Turn {memory.turn} @ {_where(memory)}] "
                f"{_one_line(memory.content)} (importance: {memory.importance}/1000)"
            )
        if dropped:
            lines += ["", dropped_note]
        return "\n".join(lines)

    @_never_raises
    def get_location_memories(self, location: str | int) -> str:
        """Get all memories from one location: by name (case-insensitive) or location number.

        Summarised by the memory model when one is configured, listed verbatim otherwise.
        A name shared by several rooms (e.g. "Forest Path") shows each room separately.

        Args:
            location: a location name like "West of House", or its number like "180".
        """
        if isinstance(location, bool):
            return EMPTY_LOCATION
        if isinstance(location, int):
            return self._location_by_id(location, str(location))
        if not isinstance(location, str) or not location.strip():
            return EMPTY_LOCATION
        asked = location.strip()
        groups = self.memories.by_location_name(asked)
        number = _LOCATION_NUMBER.match(asked)
        if not groups and number and len(number.group(1)) <= len(str(MAX_LOCATION_ID)):
            return self._location_by_id(int(number.group(1)), asked)
        if not groups:
            return _unknown_location(asked)
        if len(groups) == 1:
            return self._describe_group(next(iter(groups.values())))
        listing = ", ".join(
            f"#{location_id} {group[0].location_name}"
            if location_id is not None
            else f"{group[0].location_name} (no number)"
            for location_id, group in groups.items()
        )
        parts = [
            f"'{asked}' matches {len(groups)} different locations: {listing}. "
            "Each is shown separately; use the number to ask about one."
        ]
        parts += [self._describe_group(group) for group in groups.values()]
        return "\n\n".join(parts)

    def _location_by_id(self, location_id: int, asked: str) -> str:
        if not 0 <= location_id <= MAX_LOCATION_ID:
            return _unknown_location(asked)
        memories = self.memories.by_location_id(location_id)
        if not memories:
            return _unknown_location(asked)
        return self._describe_group(memories)

    def _describe_group(self, memories: Sequence[FlaggedMemory]) -> str:
        label = _where(memories[0])
        count = len(memories)
        header = f"Memories from {label} ({count} {'memory' if count == 1 else 'memories'}):"
        listing = "\n".join(
            f"- Turn {m.turn}: {_one_line(m.content)} (importance: {m.importance}/1000)"
            for m in memories
        )
        if self.llm is None:
            return f"{header}\n{listing}"
        try:
            summary = self.llm(build_summary_messages(label, memories))
        except Exception as exc:  # noqa: BLE001 - the memories are still shown
            return f"{header}\n{listing}\n({_llm_error('get_location_memories', exc)})"
        if not isinstance(summary, str) or not summary.strip():
            return (
                f"{header}\n{listing}\n(Error: get_location_memories got an empty summary "
                "from the memory model; the memories are listed verbatim.)"
            )
        return f"{header}\n{summary.strip()}"

    @_never_raises
    def get_route(self, from_: str | int, to: str | int) -> str:
        """Get the shortest known route between two rooms, as the moves to type in order.

        Only exits that moved the player before are used (confidence above the map's
        threshold, never a pruned one). A name several rooms share is not guessed: the
        answer lists their numbers.

        Args:
            from_: where the route starts: a room name like "West of House", or its number.
            to: where it ends: a room name like "Kitchen", or its number.
        """
        the_map = MapStore(self.store, self.config)
        pending = self.pending_map_events() if self.pending_map_events is not None else ()
        graph = the_map.graph(pending=pending)
        rooms = graph.room_list()
        if not rooms:
            return NO_MAP
        ends: list[Room] = []
        for side, asked in (("from", from_), ("to", to)):
            if (
                isinstance(asked, bool)
                or not isinstance(asked, str | int)
                or not str(asked).strip()
            ):
                return f"Error: Please provide where the route goes {side}: a room name or number."
            found = find_room(rooms, asked)
            if found.room is None:
                return f"Error: {_one_line(found.problem or 'no such room')}."
            ends.append(found.room)
        start, goal = ends
        route = graph.route(start.id, goal.id, the_map.threshold)
        where = f"from {_room(start)} to {_room(goal)}"
        if route.actions is None:
            return f"No known route {where}: {_one_line(route.reason or 'none found')}."
        if not route.actions:
            return f"You are already at {_room(goal)}: no moves needed."
        moves = len(route.actions)
        lines = [
            f"Route {where}, {moves} {'move' if moves == 1 else 'moves'}: "
            + ", ".join(_one_line(action) for action in route.actions)
        ]
        for number, step in enumerate(route.steps, start=1):
            to_room = _room(Room(step.to_id, step.to_name))
            lines.append(f"{number}. {_one_line(step.command)} → {to_room}")
        return "\n".join(lines)

    # --- for an agent loop ----------------------------------------------------------------

    def tools(self) -> list[Callable[..., str]]:
        """The four tools, as callables named like their schemas."""
        return [
            self.get_top_memories,
            self.query_memories,
            self.get_location_memories,
            self.get_route,
        ]

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI / litellm format: pass as ``tools=`` to ``litellm.completion``."""
        return json.loads(json.dumps(TOOL_SCHEMAS))  # a copy the caller may change

    def call_tool(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """Run the tool a model asked for; ``arguments`` is a dict or the model's JSON
        string. Every problem (unknown tool, bad JSON, wrong arguments, arguments nested too
        deeply or longer than MAX_ARGUMENT_CHARS) is an error string; it never raises."""
        try:
            return self._call_tool(name, arguments)
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            detail = _one_line(str(exc))[:200]
            return f"Error: call_tool failed ({type(exc).__name__}: {detail})."

    def _call_tool(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        if not isinstance(name, str) or name not in TOOL_NAMES:
            shown = repr(name)[:100]
            return f"Error: unknown tool {shown}. Available tools: {', '.join(TOOL_NAMES)}."
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
        tool: Callable[..., str] = getattr(self, name)
        # an argument named like a Python keyword ("from") is the method's "from_"
        return tool(**{f"{k}_" if keyword.iskeyword(k) else k: v for k, v in arguments.items()})


def _room(room: Room) -> str:
    """``West of House (#64)``: a room as the other tools name locations."""
    return f"{_one_line(room.name) or 'room'} (#{room.id})"


def _unknown_location(asked: str) -> str:
    if len(asked) > 100:  # a name no room has: echo only its start
        asked = asked[:100] + "..."
    return (
        f"No memories recorded for '{asked}'. Either you haven't been there or nothing "
        "important was noted."
    )
