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

Bounds: every tool result is cut to MAX_TOOL_RESULT_CHARS (saying so), each memory shown
to MAX_SHOWN_MEMORY_CHARS. Each call of a litellm query model has ``config.timeout``
(memstore.llm.call_with_deadline), or less when ``call_tool`` is given an earlier
deadline; an injected callable is called as it is, in the caller's thread, unless the
caller bounded it (memstore.llm.with_deadline), which then gets the earlier deadline
too. ``failures`` counts, by kind, the query model's failures (timeout, rate_limit,
provider_error, malformed: an empty answer), the tool calls refused (refused: unknown
tool, bad arguments), the tools that failed (error), and the ``add_memory`` calls the
database refused for now (store_busy, store_full: answered False, never raised), and
the model's notes refused or kept within bounds (content_refused, importance_refused,
importance_clamped: memstore.flagged_input). Every
text argument is read as a plain str (memstore.models.plain_str).
"""

from __future__ import annotations

import functools
import json
import keyword
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memstore.config import MemstoreConfig
from memstore.errors import (
    DatabaseUnavailable,
    LLMDeadlineExceeded,
    StoreBusy,
    refusal_counter,
)
from memstore.flagged import FlaggedMemories, FlaggedMemory
from memstore.flagged_input import one_argument, read_note
from memstore.llm import DeadlineCallable, LiteLLMCompletion, call_with_deadline
from memstore.lock_probe import WriteGate
from memstore.map_graph import MapEvent, Room
from memstore.map_lookup import find_room
from memstore.map_store import MapStore
from memstore.models import plain_str
from memstore.synthesis import LLMCallable, classify_llm_exception, describe_exception

# what the tools say and read (memstore.tool_text), importable from here too
from memstore.tool_text import (
    DEFAULT_MAX_QUERY_MEMORIES,
    DEFAULT_TOP_LIMIT,
    EMPTY_LOCATION,
    EMPTY_QUESTION,
    LOCATION_NUMBER,
    MAX_LOCATION_ID,
    MAX_QUESTION_CHARS,
    MAX_SHOWN_ANSWER_CHARS,
    MAX_TOP_LIMIT,
    NO_MAP,
    NO_MEMORIES,
    NO_MEMORIES_TO_SEARCH,
    NO_QUERY_MODEL,
    NO_RELEVANT,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    build_query_messages,
    build_summary_messages,
    cut_tool_result,
    format_query_answer,
    format_top_memories,
    memory_place,
    one_line,
    parse_query_answer,
    read_arguments,
    room_name,
    shown,
    unknown_location,
)

__all__ = [
    "EMPTY_LOCATION",
    "EMPTY_QUESTION",
    "NO_MAP",
    "NO_MEMORIES",
    "NO_MEMORIES_TO_SEARCH",
    "NO_QUERY_MODEL",
    "NO_RELEVANT",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "MemoryToolkit",
    "build_query_messages",
    "build_summary_messages",
    "default_query_llm",
    "format_top_memories",
    "parse_query_answer",
]


log = logging.getLogger("memstore.tools")


def _llm_error(tool: str, exc: BaseException) -> str:
    kind = classify_llm_exception(exc).value
    return (
        f"Error: {tool} could not get an answer from the memory model ({kind}: "
        f"{_described(exc)}). Try again later, or use get_top_memories."
    )


def _described(exc: BaseException) -> str:
    """The exception's type and message on one line, whatever its ``__str__`` does."""
    return one_line(describe_exception(exc, 1000))[:250]


def _never_raises(tool: Callable[..., str]) -> Callable[..., str]:
    """A tool returns its problems as text, its result cut to MAX_TOOL_RESULT_CHARS: the
    agent loop must never see an exception. A failure is counted (``error``)."""

    @functools.wraps(tool)
    def wrapper(self: MemoryToolkit, *args: Any, **kwargs: Any) -> str:
        try:
            return cut_tool_result(tool(self, *args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            self.failures["error"] += 1
            return f"Error: {tool.__name__} failed ({_described(exc)})."

    return wrapper


def default_query_llm(config: MemstoreConfig | None) -> LLMCallable | None:
    """``LiteLLMCompletion`` on ``config.query_model`` (or ``model``); None if neither is set."""
    if config is None:
        return None
    model = config.query_model or config.model
    if not model:
        return None
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
        #: each query-model call's deadline (seconds): ``config.timeout``
        self.timeout = (self.config or MemstoreConfig()).timeout
        #: query-model failures, refused tool calls and failed tools, by kind (module doc)
        self.failures: Counter[str] = Counter()
        self._deadline: float | None = None  # time.monotonic(), during call_tool only
        #: after a refused add, the next ones wait for nothing while the lock is held
        self._gate = WriteGate(store)

    @property
    def session_id(self) -> str:
        return self.memories.session_id

    # --- capture and status -------------------------------------------------------------

    def add_memory(
        self,
        content: str,
        importance: int,
        turn: int | None = None,
        location_id: int | None = None,
        location_name: str | None = None,
        score: int | None = None,
        moves: int | None = None,
        episode: int = 1,
        *,
        turn_number: int | None = None,
        location: str | None = None,
    ) -> bool:
        """Store what the agent flagged this turn (``FlaggedMemories.add_flagged_memory``):
        True if stored, False if not. Spec 001's keywords are taken too (``turn_number``,
        and ``location``: a name). The model's ``content`` and ``importance`` are never
        raised for (memstore.flagged_input: counted, False); the caller's arguments are
        (TypeError, ValueError). A write the database refused for now (StoreBusy,
        DatabaseUnavailable) is False, counted (``failures["store_busy"]``, ...) and logged
        in one line; after it, adds are not tried while the lock is held (``WriteGate``)."""
        turn = one_argument("turn", turn, "turn_number", turn_number)
        location_name = one_argument("location_name", location_name, "location", location)
        if content is None:  # nothing flagged this turn
            return False
        note = read_note(content, importance)
        if note.refusal is not None:
            self.failures[note.refusal] += 1
            log.warning("add_memory: not stored (%s): %s", note.refusal, note.reason)
            return False
        if note.clamped:
            self.failures["importance_clamped"] += 1
        if not self._gate.may_write():  # a busy stretch: the lock is still held
            self.failures[self._gate.kind or "store_busy"] += 1
            log.warning("add_memory: not stored (%s): not tried, still refused", self._gate.kind)
            return False
        try:
            added = self.memories.add_flagged_memory(
                note.content, note.importance, turn, location_id, location_name,
                score=score, moves=moves, episode=episode,
            )  # fmt: skip
        except (StoreBusy, DatabaseUnavailable) as exc:
            self._gate.refused(exc)
            self.failures[refusal_counter(exc)] += 1
            log.warning("add_memory: not stored (%s): %s", refusal_counter(exc), exc)
            return False
        self._gate.written()
        return added

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
        except (TypeError, ValueError, OverflowError):  # OverflowError: infinity
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
        if not isinstance(question, str) or not (question := plain_str("", question)).strip():
            return EMPTY_QUESTION
        question = question.strip()
        if len(question) > MAX_QUESTION_CHARS:  # (never sent to a paid model whole)
            self.failures["refused"] += 1
            return (
                f"Error: the question is {len(question):,} characters; at most "
                f"{MAX_QUESTION_CHARS:,}."
            )
        memories = self.memories.top(self.max_query_memories)
        if not memories:
            return NO_MEMORIES_TO_SEARCH
        if self.llm is None:
            return NO_QUERY_MODEL
        try:
            raw = self._ask_model(build_query_messages(question, memories))
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            return _llm_error("query_memories", exc)
        if not isinstance(raw, str) or not raw.strip():
            self.failures["malformed"] += 1
            return "Error: query_memories got an empty answer from the memory model."
        return format_query_answer(question, raw, memories)

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
        if not isinstance(location, str) or not (location := plain_str("", location)).strip():
            return EMPTY_LOCATION
        asked = location.strip()
        groups = self.memories.by_location_name(asked)
        number = LOCATION_NUMBER.match(asked)
        if not groups and number and len(number.group(1)) <= len(str(MAX_LOCATION_ID)):
            return self._location_by_id(int(number.group(1)), asked)
        if not groups:
            return unknown_location(asked)
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
            return unknown_location(asked)
        memories = self.memories.by_location_id(location_id)
        if not memories:
            return unknown_location(asked)
        return self._describe_group(memories)

    def _describe_group(self, memories: Sequence[FlaggedMemory]) -> str:
        label = memory_place(memories[0])
        count = len(memories)
        header = f"Memories from {label} ({count} {'memory' if count == 1 else 'memories'}):"
        listing = "\n".join(
            f"- Turn {m.turn}: {shown(m.content)} (importance: {m.importance}/1000)"
            for m in memories
        )
        if self.llm is None:
            return f"{header}\n{listing}"
        try:
            summary = self._ask_model(build_summary_messages(label, memories))
        except Exception as exc:  # noqa: BLE001 - the memories are still shown
            return f"{header}\n{listing}\n({_llm_error('get_location_memories', exc)})"
        if not isinstance(summary, str) or not summary.strip():
            self.failures["malformed"] += 1
            return (
                f"{header}\n{listing}\n(Error: get_location_memories got an empty summary "
                "from the memory model; the memories are listed verbatim.)"
            )
        summary = summary.strip()
        if len(summary) > MAX_SHOWN_ANSWER_CHARS:
            summary = summary[: MAX_SHOWN_ANSWER_CHARS - 1] + "…"
        return f"{header}\n{summary}"

    def _ask_model(self, messages: list[dict[str, str]]) -> Any:
        """The query model's answer (a str subclass as the plain str it holds: its own
        methods never run), within ``self.timeout`` (or the deadline ``call_tool`` was
        given, if earlier): LLMDeadlineExceeded otherwise. A failure is counted by kind
        (classify_llm_exception) and raised."""
        answer = self._answer_of(messages)
        return plain_str("", answer) if isinstance(answer, str) else answer

    def _answer_of(self, messages: list[dict[str, str]]) -> Any:
        """The query model's answer as it came (``_ask_model``)."""
        assert self.llm is not None
        seconds = self.timeout
        if self._deadline is not None:
            seconds = min(seconds, self._deadline - time.monotonic())
        try:
            if seconds <= 0:
                raise LLMDeadlineExceeded("no time left in this turn for the memory model")
            llm = self.llm
            if isinstance(llm, DeadlineCallable):  # bounded by the caller's wish
                return llm.within(messages, seconds)
            if not isinstance(llm, LiteLLMCompletion):
                return llm(messages)  # the caller's own callable, in the caller's thread
            if seconds >= llm.config.timeout:
                return llm(messages)  # it keeps config.timeout itself
            return call_with_deadline(functools.partial(llm, messages), {}, seconds)
        except Exception as exc:
            self.failures[classify_llm_exception(exc).value] += 1
            raise

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
        for side, given in (("from", from_), ("to", to)):
            asked = plain_str("", given) if isinstance(given, str) else given
            if (
                isinstance(asked, bool)
                or not isinstance(asked, str | int)
                or not str(asked).strip()
            ):
                return f"Error: Please provide where the route goes {side}: a room name or number."
            found = find_room(rooms, asked)
            if found.room is None:
                return f"Error: {one_line(found.problem or 'no such room')}."
            ends.append(found.room)
        start, goal = ends
        route = graph.route(start.id, goal.id, the_map.threshold)
        where = f"from {room_name(start)} to {room_name(goal)}"
        if route.actions is None:
            return f"No known route {where}: {one_line(route.reason or 'none found')}."
        if not route.actions:
            return f"You are already at {room_name(goal)}: no moves needed."
        moves = len(route.actions)
        lines = [
            f"Route {where}, {moves} {'move' if moves == 1 else 'moves'}: "
            + ", ".join(one_line(action) for action in route.actions)
        ]
        for number, step in enumerate(route.steps, start=1):
            to_room = room_name(Room(step.to_id, step.to_name))
            lines.append(f"{number}. {one_line(step.command)} → {to_room}")
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

    get_tools = tools  # spec 001's name

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI / litellm format: pass as ``tools=`` to ``litellm.completion``."""
        return json.loads(json.dumps(TOOL_SCHEMAS))  # a copy the caller may change

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | str | None = None,
        *,
        deadline: float | None = None,
    ) -> str:
        """Run the tool a model asked for; ``arguments`` is a dict or the model's JSON
        string. Every problem (unknown tool, bad JSON, wrong arguments, arguments nested too
        deeply or longer than MAX_ARGUMENT_CHARS) is an error string, counted in
        ``failures`` (``refused``, unless the query model failed: then by its kind); it
        never raises. The result is at most MAX_TOOL_RESULT_CHARS long. ``deadline`` (a
        ``time.monotonic()`` time) ends the query model's call earlier than its timeout."""
        counted = self.failures.total()
        self._deadline = deadline
        try:
            result = self._call_tool(name, arguments)
        except Exception as exc:  # noqa: BLE001 - reported to the model, not raised
            self.failures["error"] += 1
            result = f"Error: call_tool failed ({_described(exc)})."
        finally:
            self._deadline = None
        if result.startswith("Error:") and self.failures.total() == counted:
            self.failures["refused"] += 1
        return cut_tool_result(result)

    def _call_tool(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        # every text from outside is read as a plain str (memstore.models.plain_str)
        if not isinstance(name, str) or (name := plain_str("", name)) not in TOOL_NAMES:
            shown = repr(name)[:100]
            return f"Error: unknown tool {shown}. Available tools: {', '.join(TOOL_NAMES)}."
        arguments = read_arguments(name, arguments)
        if isinstance(arguments, str):
            return arguments
        tool: Callable[..., str] = getattr(self, name)
        # an argument named like a Python keyword ("from") is the method's "from_"
        return tool(**{f"{k}_" if keyword.iskeyword(k) else k: v for k, v in arguments.items()})
