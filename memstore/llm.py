"""The litellm-backed LLMCallable. litellm is imported lazily, on the first call.

``config.timeout`` bounds the whole call: every attempt, every retry and the pauses
between them. httpx's timeouts bound each read, not a response (a server sending a byte
every half second never trips them), so each attempt runs in a daemon thread and the caller
waits for it only until the deadline; a connection still open then is left to that thread.
memstore retries itself (litellm's own retries need ``tenacity`` and know no deadline):
litellm and the OpenAI client are told not to retry.

A model callable the caller injects is called as it is, in the caller's thread: it may
need that thread, and it is the caller's to bound. ``with_deadline`` gives one the same
deadline, run in a daemon thread, for a caller who wants it.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from memstore.config import MemstoreConfig
from memstore.errors import LLMDeadlineExceeded  # noqa: F401 - importable from here too
from memstore.synthesis import json_schema_response_format


@dataclass(frozen=True)
class LLMUsage:
    """What one call cost: tokens as litellm reports them (None if not reported), cost in
    USD (None when litellm does not know the model's price), wall time in seconds."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    seconds: float


def import_litellm() -> Any:
    """litellm, imported on first use (it takes seconds), with its local cost map and no
    banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout
    # litellm builds its response objects from whatever the server sent; pydantic then
    # warns, over several lines of stderr, about a field of the wrong type (an answer the
    # caller refuses and counts anyway)
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
    return litellm


#: the first pause between attempts (seconds); it doubles each retry, up to RETRY_PAUSE_MAX
RETRY_PAUSE = 0.5
RETRY_PAUSE_MAX = 4.0
#: no attempt starts with less time than this left before the deadline
MIN_ATTEMPT_SECONDS = 0.25


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: a timeout, a lost connection, a rate limit or a
    server error (HTTP 408, 409, 429, 5xx); not a refused request (other 4xx) or a bug."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status in (408, 409, 429) or status >= 500
    return isinstance(exc, (TimeoutError, ConnectionError))


def call_with_deadline(function: Any, kwargs: dict[str, Any], seconds: float) -> Any:
    """``function(**kwargs)`` in a daemon thread; its result, or its exception re-raised,
    or LLMDeadlineExceeded when it has not returned within ``seconds`` (the thread is
    left to finish on its own: a daemon, it never holds up the interpreter's exit)."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def attempt() -> None:
        try:
            outcome["result"] = function(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=attempt, name="memstore-llm-call", daemon=True).start()
    if not done.wait(max(seconds, 0.0)):
        raise LLMDeadlineExceeded(f"no answer within {seconds:.3g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


class DeadlineCallable:
    """A model callable bounded like litellm's calls, for a caller who asks for it
    (``with_deadline``): each call runs in a daemon thread (``call_with_deadline``) and
    raises LLMDeadlineExceeded (a TimeoutError, so a ``timeout`` failure) when it has not
    returned within ``seconds``. A call that hangs is left to its thread and the caller goes
    on; until it returns, every new call is refused at once the same way, so calls never
    overlap. memstore never wraps a callable by itself: one may need the caller's thread
    (a sqlite3 connection, a signal handler, context variables). Other attributes
    (``last_usage``) are the wrapped callable's, set and read."""

    _OWN = frozenset({"llm", "seconds", "__name__", "_running", "_lock"})

    def __init__(self, llm: Callable[[list[dict[str, str]]], str], seconds: float) -> None:
        if not isinstance(seconds, int | float) or not 0 < seconds <= threading.TIMEOUT_MAX:
            raise ValueError(
                f"seconds must be a positive finite number (at most "
                f"{threading.TIMEOUT_MAX:g}), got {seconds!r}"
            )
        self.llm = llm
        self.seconds = float(seconds)
        self.__name__ = str(getattr(llm, "__name__", type(llm).__name__))
        self._running: threading.Event | None = None  # set when the last call returned
        self._lock = threading.Lock()  # the check of the last call and the start of the next

    def __call__(self, messages: list[dict[str, str]]) -> str:
        return self.within(messages, self.seconds)

    def within(self, messages: list[dict[str, str]], seconds: float) -> str:
        """The answer within the shorter of ``seconds`` and the callable's own limit."""
        with self._lock:
            if self._running is not None and not self._running.is_set():
                raise LLMDeadlineExceeded(
                    "another call is still running (a call abandoned at its deadline, or "
                    "one from another thread): calls never overlap"
                )
            finished = threading.Event()
            self._running = finished

        def call() -> str:
            try:
                return self.llm(messages)
            finally:
                finished.set()

        return cast(str, call_with_deadline(call, {}, min(seconds, self.seconds)))

    def __getattr__(self, name: str) -> Any:
        if name in DeadlineCallable._OWN:  # not set yet (copy, pickle): no endless recursion
            raise AttributeError(name)
        return getattr(self.llm, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in DeadlineCallable._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.llm, name, value)


def with_deadline(
    llm: Callable[[list[dict[str, str]]], str], seconds: float
) -> Callable[[list[dict[str, str]]], str]:
    """``llm`` bounded by ``seconds`` (a DeadlineCallable); a LiteLLMCompletion, which keeps
    its own deadline, and a callable already bounded are returned as they are."""
    if isinstance(llm, LiteLLMCompletion | DeadlineCallable):
        return llm
    return DeadlineCallable(llm, seconds)


class LiteLLMCompletion:
    """Call ``litellm.completion`` with the configured model; return the answer's text.

    ``config.timeout`` bounds the whole call, retries included: with no answer by then it
    raises LLMDeadlineExceeded (a TimeoutError). A failed attempt that may succeed again
    (see ``is_retryable``) is retried up to ``config.num_retries`` times, after a pause
    that doubles from RETRY_PAUSE, while time is left.

    After each successful call ``last_usage`` holds an LLMUsage; the running totals are in
    ``calls``, ``prompt_tokens``, ``completion_tokens`` and ``cost_usd``. A failed call
    sets ``last_usage`` to None and raises the last attempt's exception (``synthesize``
    classifies it).
    """

    def __init__(
        self,
        config: MemstoreConfig,
        *,
        response_format: dict[str, Any] | None = None,
        use_response_format: bool = True,
    ) -> None:
        if not config.model:
            raise ValueError("no model configured: use the offline recorder instead")
        self.config = config
        self.response_format = (
            (response_format or json_schema_response_format()) if use_response_format else None
        )
        self.last_usage: LLMUsage | None = None
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0

    def request_kwargs(
        self,
        messages: list[dict[str, Any]],
        timeout: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of one attempt's ``litellm.completion`` (handy in tests and
        logs): ``timeout`` is the time left (default: all of ``config.timeout``); no retries,
        memstore makes them; ``extra`` adds arguments (``tools``)."""
        config = self.config
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "timeout": config.timeout if timeout is None else timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if config.api_base:
            kwargs["api_base"] = config.api_base
        if config.api_key:
            kwargs["api_key"] = config.api_key
        if self.response_format is not None:
            kwargs["response_format"] = self.response_format
        kwargs.update(extra or {})
        return kwargs

    def __call__(self, messages: list[dict[str, str]]) -> str:
        response = self.complete(messages)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        return content if isinstance(content, str) else ""

    def complete(self, messages: list[dict[str, Any]], **extra: Any) -> Any:
        """One call (with the deadline and retries of ``__call__``), returning litellm's
        whole response, for callers that need more than the text (tool calls); ``extra``
        goes to ``litellm.completion`` (``tools=...``). Usage is counted the same way."""
        litellm = import_litellm()  # before the clock starts: the import takes seconds
        self.last_usage = None
        started = time.perf_counter()
        response = self._complete(
            litellm, messages, deadline=started + self.config.timeout, extra=extra
        )
        seconds = time.perf_counter() - started

        usage = getattr(response, "usage", None)
        prompt_tokens = _int_or_none(getattr(usage, "prompt_tokens", None))
        completion_tokens = _int_or_none(getattr(usage, "completion_tokens", None))
        total_tokens = _int_or_none(getattr(usage, "total_tokens", None))
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - unknown model price: no cost, not a failure
            cost = None
        self.last_usage = LLMUsage(
            model=str(self.config.model),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=total_tokens,
            cost_usd=cost,
            seconds=seconds,
        )
        self.calls += 1
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        self.cost_usd += cost or 0.0
        return response

    def _complete(
        self,
        litellm: Any,
        messages: list[dict[str, Any]],
        deadline: float,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        """One attempt, then retries while they may help and time is left."""
        retries = 0
        while True:
            left = deadline - time.perf_counter()
            try:
                return call_with_deadline(
                    litellm.completion, self.request_kwargs(messages, left, extra), left
                )
            except LLMDeadlineExceeded as exc:
                raise LLMDeadlineExceeded(
                    f"no answer within the {self.config.timeout:g} s timeout "
                    f"({retries + 1} attempt{'s' if retries else ''})"
                ) from exc
            except Exception as exc:
                pause = min(RETRY_PAUSE * 2**retries, RETRY_PAUSE_MAX)
                too_late = time.perf_counter() + pause + MIN_ATTEMPT_SECONDS > deadline
                if retries >= self.config.num_retries or too_late or not is_retryable(exc):
                    raise
            retries += 1
            time.sleep(pause)
