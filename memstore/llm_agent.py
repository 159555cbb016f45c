"""An LLM agent for ``memstore eval --agent llm`` (issue 17): any litellm model, one action.

Each turn the model gets a compact prompt (``build_agent_messages``): the room, the game's
last answer, what the player carries and sees, the location memory (which ends with the
room's exits line), and the last few actions with what they did. It answers one game
command. With ``tools=True`` it may first call memstore's memory tools
(memstore.memory_tools.MemoryToolkit: the flagged-memory queries and ``get_route``),
up to ``max_tool_rounds`` rounds, through litellm's tool calling.

Every failure of the model is handled as synthesis failures are: counted by kind
(``stats()["failures"]``: timeout, rate_limit, provider_error, malformed, tool_loop),
logged on one line of at most MAX_LOGGED_FAILURE_CHARS, never raised; the turn falls back
to the explorer's choice (memstore.explorer.ExplorerAgent), which follows every turn so its
working memory stays whole. ``config.timeout`` bounds each call, retries included
(memstore.llm).

Tool calls are bounded too, so the model cannot decide how long a turn takes: at most
MAX_TOOL_CALLS_PER_ROUND of one reply and MAX_TOOL_CALLS_PER_TURN of a turn are run, and
all of a turn's tool calls share one deadline, ``config.timeout`` after the first. A call
past a limit gets an ``Error:`` result and is counted (too_many_tool_calls, tool_deadline),
as are the calls the tools refuse or fail (``tool_`` and the toolkit's kind: tool_refused
for bad arguments or an unknown tool, tool_timeout and the query model's other failures).
A turn therefore takes at most ``(max_tool_rounds + 2) * config.timeout``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from memstore.explorer import Choice, ExplorerAgent, Observation
from memstore.game_commands import one_command_by_its_text
from memstore.synthesis import classify_llm_exception, describe_exception, loggable_text

if TYPE_CHECKING:
    from memstore.config import MemstoreConfig
    from memstore.llm import LiteLLMCompletion
    from memstore.manager import SimpleMemoryManager
    from memstore.memory_tools import MemoryToolkit

__all__ = ["LLMAgent", "build_agent_messages", "parse_action"]

log = logging.getLogger("memstore.llm_agent")

#: the longest command accepted from the model (Zork's parser reads a short line)
MAX_ACTION_CHARS = 60
MAX_ACTION_WORDS = 8
#: the game's last answer is cut to this many characters in the prompt
MAX_OBSERVATION_CHARS = 600
DEFAULT_HISTORY = 5
DEFAULT_TOOL_ROUNDS = 3
#: at most this many tool calls of one reply are run, and of one turn (the rest refused)
MAX_TOOL_CALLS_PER_ROUND = 4
MAX_TOOL_CALLS_PER_TURN = 8
#: at most this many of one reply's tool calls go back to the model (with their results);
#: the others are refused without a word
MAX_TOOL_CALLS_SHOWN = 2 * MAX_TOOL_CALLS_PER_ROUND
#: the tool-calling reply goes back to the model with its text, and each call's arguments,
#: cut to this many characters (arguments longer are sent as "{}")
MAX_ECHOED_CHARS = 2_000
#: a tool call's id and name are cut to this many characters (no tool's name is longer)
MAX_CALL_ID_CHARS = 100
#: the longest log line of a failure, and the longest ``last_failure``
MAX_LOGGED_FAILURE_CHARS = 300
MALFORMED, TOOL_LOOP = "malformed", "tool_loop"
TOO_MANY_TOOL_CALLS, TOOL_DEADLINE = "too_many_tool_calls", "tool_deadline"


def is_tool_refusal(kind: str) -> bool:
    """Whether a failure kind of ``stats()["failures"]`` counts refused tool calls (past a
    limit, or refused by the toolkit), not a failed model call: the model's answer was
    still used. ``tool_loop`` is the model's failure (it never answered)."""
    return kind == TOO_MANY_TOOL_CALLS or (kind.startswith("tool_") and kind != TOOL_LOOP)


SYSTEM_PROMPT = (
    "You are playing Zork I, a text adventure. Each turn, answer with exactly one game "
    "command, such as 'north', 'take lamp' or 'open mailbox', and nothing else: no "
    "explanation, no quotes, no second command joined with 'and', 'then', '.' or ','; "
    "never save, restore, restart or quit. Your memory of the room says what worked and "
    "what failed there: never repeat an action it says failed or is deadly. Prefer "
    "places and actions you have not tried."
)
TOOLS_NOTE = (
    " Before answering you may call the memory tools (at most {rounds} rounds); each "
    f"reply's first {MAX_TOOL_CALLS_PER_ROUND} calls are run, and at most "
    f"{MAX_TOOL_CALLS_PER_TURN} in all; then answer with the command."
)

_PREFIX = re.compile(r"^(?:>|command:|action:|answer:)\s*", re.IGNORECASE)
#: a reasoning model's thoughts before its answer (review S5 E F9: the first line read
#: was "<think>...", so such a model "failed" every turn)
_THINKING_END = "</think>"
_ACTION = re.compile(r"^[a-z0-9][a-z0-9 ,.'-]*$")


def parse_action(content: object) -> str | None:
    """The command in the model's answer: its first non-empty line after any
    ``<think>...</think>`` block, without quotes,
    backticks, a leading ``>`` or "Command:"; None when that is not a short game command
    (empty, too long, more than MAX_ACTION_WORDS words, or other characters), or one the
    game adapter does not play (``memstore.game_commands``: several commands joined, or
    "save", "restore", "restart", "quit", "script")."""
    if not isinstance(content, str):
        return None
    end = content.lower().rfind(_THINKING_END)  # (a reasoning model's thoughts come first,
    if end >= 0:  # and its chat template may have sent the "<think>" that opens them)
        content = content[end + len(_THINKING_END) :]
    line = next((ln.strip() for ln in content.strip().splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line.strip("`'\" *")).strip("`'\" *").rstrip(".!").lower()
    line = " ".join(line.split())
    if not line or len(line) > MAX_ACTION_CHARS or len(line.split()) > MAX_ACTION_WORDS:
        return None
    return line if _ACTION.match(line) and one_command_by_its_text(line) else None


def build_agent_messages(
    observation: Observation,
    memory: str,
    history: list[tuple[str, str]],
    *,
    tools_rounds: int = 0,
) -> list[dict[str, Any]]:
    """The compact prompt: system rules, then one user message with the room, the last
    answer, what is carried and seen, the location memory (and its exits line) and the
    recent (action, answer) pairs, oldest first."""
    answer = " ".join(observation.response.split())
    if len(answer) > MAX_OBSERVATION_CHARS:
        answer = answer[: MAX_OBSERVATION_CHARS - 1] + "…"
    carried = ", ".join(t.name for t in observation.inventory) or "nothing"
    seen = ", ".join(t.name for t in observation.objects) or "nothing"
    lines = [
        f"Location: {observation.location_name} ({observation.location_id}); "
        f"score {observation.score}",
        f"The game said: {answer or '(nothing)'}",
        f"You carry: {carried}. Here: {seen}.",
        "Your memory of this place:",
        memory.strip() or "(nothing remembered here yet)",
    ]
    if "Exits:" not in memory:
        lines.append("Exits: none known yet")
    if history:
        lines.append("Your last actions:")
        lines += [f"- {action} -> {result}" for action, result in history]
    lines.append("Your command:")
    system = SYSTEM_PROMPT + (TOOLS_NOTE.format(rounds=tools_rounds) if tools_rounds else "")
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(lines)},
    ]


class LLMAgent:
    """The LLM agent (see the module docstring). ``completion`` is a LiteLLMCompletion
    (default: built from ``config``, which must name a model); ``tools`` offers the memory
    tools through tool calling."""

    name = "llm"

    def __init__(
        self,
        config: MemstoreConfig,
        *,
        seed: int = 0,
        completion: LiteLLMCompletion | None = None,
        tools: bool = False,
        history: int = DEFAULT_HISTORY,
        max_tool_rounds: int = DEFAULT_TOOL_ROUNDS,
    ) -> None:
        if completion is None:
            if not config.model:
                raise ValueError(
                    "--agent llm needs a model: set --model or MEMSTORE_MODEL (any litellm model)"
                )
            from memstore.llm import LiteLLMCompletion

            completion = LiteLLMCompletion(config, use_response_format=False)
        self.config = config
        self.completion = completion
        self.fallback = ExplorerAgent(seed)
        self.tools = tools
        self.max_tool_rounds = max_tool_rounds
        self.manager: SimpleMemoryManager | None = None
        self.toolkit: MemoryToolkit | None = None
        self._history: deque[tuple[str, str]] = deque(maxlen=history)
        self._pending: tuple[str, str] | None = None  # the last action, awaiting its answer
        self.calls = 0
        self.tool_calls = 0
        self.failures: Counter[str] = Counter()
        self.fallbacks = 0
        #: the turns since the model last gave a command (an evaluation stops at
        #: memstore.evaluation.MODEL_FAILURES_IN_A_ROW)
        self.failed_in_a_row = 0
        self.last_failure: str | None = None

    def stats(self) -> dict[str, Any]:
        """Model calls, tool calls, failures by kind, and turns played by the fallback."""
        return {
            "calls": self.calls,
            "tool_calls": self.tool_calls,
            "failures": dict(self.failures),
            "fallbacks": self.fallbacks,
        }

    def start_episode(self, manager: SimpleMemoryManager) -> None:
        self.manager = manager
        self.fallback.start_episode(manager)
        self._history.clear()
        self._pending = None
        if self.tools:
            from memstore.memory_tools import MemoryToolkit

            self.toolkit = MemoryToolkit(
                manager.store,
                config=self.config,
                pending_map_events=lambda: manager.pending_map_events,
            )

    def choose(self, observation: Observation) -> Choice:
        """The model's command, or the explorer's when the model fails (counted)."""
        if self.manager is None:
            raise RuntimeError("call start_episode(manager) before choose()")
        if self._pending is not None:
            answer = " ".join(observation.response.split())
            self._history.append((self._pending[0], loggable_text(answer, 120)))
        self.fallback.note_turn(observation)
        memory = self.manager.get_location_memory(observation.location_id)
        messages = build_agent_messages(
            observation,
            memory,
            list(self._history),
            tools_rounds=self.max_tool_rounds if self.tools else 0,
        )
        action = self._ask(messages)
        self.failed_in_a_row = 0 if action is not None else self.failed_in_a_row + 1
        if action is None:
            self.fallbacks += 1
            choice = self.fallback.decide(observation)
            choice = Choice(choice.action, f"the model failed ({self.last_failure}); "
                            f"the explorer chose: {choice.reasoning}")  # fmt: skip
        else:
            choice = Choice(action, f"the model ({self.config.model}) chose it")
        self.fallback.took(observation, choice.action)
        self._pending = (choice.action, "")
        return choice

    # --- the model ---------------------------------------------------------------------------

    def _fail(self, kind: str, message: str) -> None:
        """Count a failure; log it on one line of at most MAX_LOGGED_FAILURE_CHARS."""
        self.failures[kind] += 1
        message = without_traceback(message)
        suffix = "; the explorer plays this turn"
        line = printable_line(
            f"agent model failed ({kind}): {message}", MAX_LOGGED_FAILURE_CHARS - len(suffix)
        )
        self.last_failure = printable_line(f"{kind}: {message}", MAX_LOGGED_FAILURE_CHARS)
        log.warning("%s%s", line, suffix)

    def _ask(self, messages: list[dict[str, Any]]) -> str | None:
        """The model's command, after any tool rounds; None (a counted failure) if none."""
        extra: dict[str, Any] = {}
        if self.tools and self.toolkit is not None:
            extra["tools"] = self.toolkit.tool_schemas()
        turn = _ToolBudget()
        for round_number in range(self.max_tool_rounds + 1):
            last_round = round_number == self.max_tool_rounds
            self.calls += 1
            try:
                response = self.completion.complete(messages, **extra)
            except Exception as exc:  # noqa: BLE001 - counted and logged, never raised
                self._fail(str(classify_llm_exception(exc)), describe_exception(exc))
                return None
            try:  # (an injected completion's reply may be any object at all)
                message = _message(response)
                content = _plain(getattr(message, "content", None))
                calls = _tool_calls(message) if extra else []
            except Exception as exc:  # noqa: BLE001 - the model's failure, counted
                self._fail(MALFORMED, f"a reply that cannot be read: {describe_exception(exc)}")
                return None
            if calls is None:
                self._fail(MALFORMED, "the reply's tool_calls is not a list")
                return None
            if calls and not last_round:
                messages = [*messages, *self._run_tools(content, calls, turn)]
                continue
            if calls:
                self._fail(TOOL_LOOP, f"still calling tools after {self.max_tool_rounds} rounds")
                return None
            action = parse_action(content)
            if action is None:
                shown = repr(content[:200]) if isinstance(content, str) else type(content).__name__
                self._fail(MALFORMED, f"not one short game command: {shown}")
            return action
        return None  # pragma: no cover - the loop always returns

    def _run_tools(
        self, content: object, calls: list[dict[str, Any]], turn: _ToolBudget
    ) -> list[dict[str, Any]]:
        """The assistant's tool-calling turn and the results of its first
        MAX_TOOL_CALLS_SHOWN calls. The calls within the round's and the turn's limits, and
        before the turn's tool deadline, are run; the others are refused and counted."""
        if turn.deadline is None:
            turn.deadline = time.monotonic() + self.config.timeout
        shown = calls[:MAX_TOOL_CALLS_SHOWN]
        turns: list[dict[str, Any]] = [_assistant_turn(content, shown)]
        for index, call in enumerate(calls):
            if index >= MAX_TOOL_CALLS_PER_ROUND or turn.used >= MAX_TOOL_CALLS_PER_TURN:
                self.failures[TOO_MANY_TOOL_CALLS] += 1
                result = (
                    f"Error: too many tool calls: at most {MAX_TOOL_CALLS_PER_ROUND} of one "
                    f"reply and {MAX_TOOL_CALLS_PER_TURN} of a turn are run; this one was not."
                )
            elif time.monotonic() >= turn.deadline:
                self.failures[TOOL_DEADLINE] += 1
                result = (
                    f"Error: no time left for tools this turn (they share "
                    f"{self.config.timeout:g} s); answer with a command."
                )
            else:
                turn.used += 1
                result = self._run_tool(call, turn.deadline)
            if index < len(shown):
                turns.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return turns

    def _run_tool(self, call: dict[str, Any], deadline: float) -> str:
        """Run one tool call; the toolkit's failures (refused, timeout...) are counted as
        ``tool_<kind>``."""
        assert self.toolkit is not None
        self.tool_calls += 1
        before = self.toolkit.failures.copy()
        result = self.toolkit.call_tool(call["name"], call["arguments"], deadline=deadline)
        for kind, count in (self.toolkit.failures - before).items():
            self.failures[f"tool_{kind}"] += count
        return result


TRACEBACK = "Traceback (most recent call last):"


def without_traceback(text: str) -> str:
    """``text`` with a traceback it quotes (litellm puts one, then the whole response body,
    in some of its errors' messages) replaced by the traceback's last line, the error."""
    head, marker, tail = text.partition(TRACEBACK)
    if not marker:
        return text
    error = next(
        (line.strip() for line in tail.splitlines() if line.strip() and line[0] not in " \t"),
        "",
    )
    return f"{head.rstrip()} ({error or 'a traceback'}; traceback left out)"


class _ToolBudget:
    """One turn's tool calls: how many were run, and their shared deadline."""

    def __init__(self) -> None:
        self.used = 0
        self.deadline: float | None = None  # time.monotonic(), set at the first tool call


def printable_line(text: str, limit: int) -> str:
    """``text`` on one line, characters a terminal or log would act on (controls, NUL, lone
    surrogates) escaped, cut to ``limit`` characters (the cut marked with "…")."""
    line = " ".join(text[: limit * 4].split())
    line = "".join(c if c.isprintable() else _escape(c) for c in line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _message(response: Any) -> Any:
    """The reply's message, or None when it has none that can be read."""
    try:
        return response.choices[0].message
    except Exception:  # noqa: BLE001 - (KeyError of a dict, an attribute that raises...)
        return None


def _plain(value: object) -> object:
    """A str from the reply as a plain str (a str subclass's own methods never run: it
    is read as the text it holds); anything else as it is."""
    return str.__str__(value) if isinstance(value, str) else value


def _tool_calls(message: Any) -> list[dict[str, Any]] | None:
    """The message's tool calls as plain dicts (id, name, JSON arguments); None when its
    ``tool_calls`` is neither absent nor a list."""
    raw = getattr(message, "tool_calls", None)
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        return None
    found = []
    for index, call in enumerate(raw):
        function = getattr(call, "function", None)
        call_id = _plain(getattr(call, "id", None))
        name = _plain(getattr(function, "name", None))
        arguments = _plain(getattr(function, "arguments", None))
        if isinstance(arguments, dict):
            try:
                arguments = json.dumps(arguments)
            except (TypeError, ValueError, RecursionError):  # the toolkit refuses it
                arguments = "(arguments that are not JSON)"
        found.append(
            {
                "id": call_id[:MAX_CALL_ID_CHARS]
                if isinstance(call_id, str) and call_id
                else f"call_{index}",
                "name": name[:MAX_CALL_ID_CHARS] if isinstance(name, str) else "",
                "arguments": arguments
                if isinstance(arguments, str)
                else ""
                if arguments is None
                else "(arguments that are not JSON)",
            }
        )
    return found


def _assistant_turn(content: object, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant's tool-calling message, as it goes back to the model (its text and
    each call's arguments cut: they were the model's, it need not read them again)."""
    return {
        "role": "assistant",
        "content": content[:MAX_ECHOED_CHARS] if isinstance(content, str) else "",
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if len(call["arguments"]) <= MAX_ECHOED_CHARS
                    else "{}",
                },
            }
            for call in calls
        ],
    }
