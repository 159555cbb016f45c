"""The litellm-backed LLMCallable. litellm is imported when a LiteLLMCompletion is built
(it takes seconds), never by importing this module.

``config.timeout`` bounds the whole call, counted from when it starts: every attempt, every
retry and the pauses between them (and litellm's import, when building the completion could
not do it: that one-off import cannot be cut short, and a call it left no time is a timeout
that never asks the server). httpx's timeouts bound each read, not a response (a server
sending a byte every half second never trips them), so each attempt runs in a daemon thread
and the caller waits for it only until the deadline; a connection still open then is left
to that thread. At the process's exit one still running is ended, its connections shut
down, and waited for at most ``llm_threads.EXIT_WAIT`` seconds: left alone, a daemon thread
frozen inside an import hung the interpreter's exit (memstore.llm_threads).
memstore retries itself (litellm's own retries need ``tenacity`` and know no deadline):
litellm and the OpenAI client are told not to retry.

A model callable the caller injects is called as it is, in the caller's thread: it may
need that thread, and it is the caller's to bound. ``with_deadline`` gives one the same
deadline, run in a daemon thread, for a caller who wants it.

Usage numbers come from outside (the server's ``usage``, an injected callable's
``last_usage``) and go into the decision log's 64-bit integer and float columns: one the
database cannot hold is dropped where it enters (``usage_count``, ``usage_cost``,
``checked_usage``), named in ``LLMUsage.refused``, counted and logged once.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from memstore.config import MemstoreConfig
from memstore.errors import LLMDeadlineExceeded  # noqa: F401 - importable from here too
from memstore.llm_threads import ending, start_daemon
from memstore.models import INT64_MAX
from memstore.synthesis import json_schema_response_format

log = logging.getLogger("memstore.llm")


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
    #: the numbers the server reported that the decision log cannot hold (None above)
    refused: tuple[str, ...] = ()


def usage_count(value: object) -> int | None:
    """``value`` if it is a token count the decision log holds (an int, not a bool, from 0
    to 2**63-1: a 64-bit column); None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX:
        return int(value)
    return None


def usage_cost(value: object) -> float | None:
    """``value`` as a cost in USD the decision log holds and a total can add (a finite
    float or int, not a bool, at least 0); None otherwise (NaN, infinity, negative, a
    str)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:  # an int past any float
        return None
    return cost if math.isfinite(cost) and cost >= 0 else None


#: a reported value whose reading raised
_UNREADABLE = object()


def _reported(source: object, name: str) -> object:
    """``source``'s ``name`` (an attribute, or a mapping's key); None when it reports none,
    _UNREADABLE when reading it raised (an object of the caller's: anything may)."""
    try:
        if isinstance(source, Mapping):
            return source.get(name)
        return getattr(source, name, None)
    except Exception:  # noqa: BLE001 - no number, counted as refused
        return _UNREADABLE


@dataclass(frozen=True)
class UsageNumbers:
    """Usage numbers that the decision log holds; ``refused`` names those reported that it
    cannot hold or that could not be read (dropped: None)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    refused: tuple[str, ...] = ()


def checked_usage(source: object, *, with_cost: bool = True) -> UsageNumbers:
    """The usage ``source`` reports (attributes or keys ``prompt_tokens``,
    ``completion_tokens``, ``total_tokens`` and, ``with_cost``, ``cost_usd``), each number
    kept only if the decision log holds it (``usage_count``, ``usage_cost``). A number not
    reported is None; one reported that the database cannot hold, or that cannot be read,
    is None too and named in ``refused``."""
    refused: list[str] = []

    def checked(name: str, check: Callable[[object], Any]) -> Any:
        reported = _reported(source, name)
        value = None if reported is _UNREADABLE else check(reported)
        if reported is not None and value is None:
            refused.append(name)
        return value

    prompt = checked("prompt_tokens", usage_count)
    completion = checked("completion_tokens", usage_count)
    total = checked("total_tokens", usage_count)
    cost = checked("cost_usd", usage_cost) if with_cost else None
    return UsageNumbers(prompt, completion, total, cost, tuple(refused))


def usage_mark(llm: object) -> UsageNumbers | None:
    """Before a call: the numbers ``llm``'s ``last_usage`` holds now (None: none), for
    ``last_usage_of`` to tell a failed call's own usage from the last call's, which a
    callable that raised left there. Read only: the caller's object is never changed."""
    usage = _reported(llm, "last_usage")
    if usage is None or usage is _UNREADABLE:
        return None
    return checked_usage(usage)


def last_usage_of(
    llm: object, since: UsageNumbers | None = None, *, failed: bool = False
) -> tuple[UsageNumbers, tuple[str, ...]] | None:
    """What ``llm`` says its last call used (its ``last_usage``: an LLMUsage, or any
    object or mapping with the same names), checked (``checked_usage``), and the numbers
    refused before (an LLMUsage's ``refused``: LiteLLMCompletion dropped them from the
    server's answer); None when it says nothing. A call that ``failed`` is charged only
    numbers other than those it held before the call (``since``, ``usage_mark``): the same
    ones are the last call's, left by a callable that raised (one that spent exactly as
    much is missed). A ``last_usage`` that cannot be read is refused whole."""
    usage = _reported(llm, "last_usage")
    if usage is None:
        return None
    if usage is _UNREADABLE:
        return UsageNumbers(refused=("last_usage",)), ()
    numbers = checked_usage(usage)
    if failed and since is not None and numbers == since:
        return None
    before = usage.refused if isinstance(usage, LLMUsage) else ()
    return numbers, tuple(before) if isinstance(before, tuple) else ()


def import_litellm() -> Any:
    """litellm, imported the first time (it takes seconds; a LiteLLMCompletion does it when
    built, then it is a lookup), with its local cost map and no banners."""
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
#: an attempt's timeout is the time left rounded up to a step of config.timeout / this
TIMEOUT_STEPS = 32


def attempt_timeout(left: float, timeout: float) -> float:
    """The timeout litellm is given for an attempt with ``left`` of ``timeout`` seconds
    left: ``left`` rounded up to a step of ``timeout / TIMEOUT_STEPS`` (all of ``timeout``
    for a first attempt). litellm keeps an OpenAI client, and its keep-alive connections,
    for each timeout it is given: the exact time left made one a call (about 200 left open
    sockets). The call's deadline is memstore's; this bounds each read of an attempt."""
    step = timeout / TIMEOUT_STEPS
    steps = math.ceil(left / step - 1e-9)
    return timeout if steps >= TIMEOUT_STEPS else max(steps, 1) * step


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: a timeout, a lost connection, a rate limit or a
    server error (HTTP 408, 409, 429, 5xx); not a refused request (other 4xx) or a bug."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status in (408, 409, 429) or status >= 500
    return isinstance(exc, (TimeoutError, ConnectionError))


def call_with_deadline(
    function: Any, kwargs: dict[str, Any], seconds: float, *, connections: bool = False
) -> Any:
    """``function(**kwargs)`` in a daemon thread; its result, or its exception re-raised,
    or LLMDeadlineExceeded when it has not returned within ``seconds`` (the thread is
    left to finish on its own). At the process's exit a call still running is waited for,
    at most ``llm_threads.EXIT_WAIT`` seconds, and with ``connections`` (a litellm attempt)
    its connections are shut down so that it ends at once (memstore.llm_threads)."""
    if ending():
        raise LLMDeadlineExceeded("the process is exiting: an abandoned call starts no other")
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def attempt() -> None:
        try:
            outcome["result"] = function(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc
        finally:
            done.set()

    start_daemon(attempt, connections=connections)
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
    overlap. At exit a call still running is waited for, never cut short, at most
    ``llm_threads.EXIT_WAIT`` seconds. memstore never wraps a callable by itself: one may
    need the caller's thread (a sqlite3 connection, a signal handler, context variables).
    Other attributes (``last_usage``) are the wrapped callable's, set and read."""

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

    litellm is imported when this is built (about 2 s, once a process), so an agent's
    first turn does not wait for it. ``config.timeout`` bounds the whole call, counted
    from when it starts, retries included: with no answer by then it raises
    LLMDeadlineExceeded (a TimeoutError). A failed attempt that may succeed again (see
    ``is_retryable``) is retried up to ``config.num_retries`` times, after a pause that
    doubles from RETRY_PAUSE, while time is left.

    After each successful call ``last_usage`` holds an LLMUsage; the running totals are in
    ``calls``, ``prompt_tokens``, ``completion_tokens`` and ``cost_usd``. A usage number
    the decision log cannot hold is dropped (``LLMUsage.refused``; such calls are counted
    in ``usage_refused``, the first logged). A failed call sets ``last_usage`` to None and
    raises the last attempt's exception (``synthesize`` classifies it).
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
        #: calls whose usage held a number the decision log cannot hold (dropped)
        self.usage_refused = 0
        try:
            import_litellm()  # now, not on the agent's first turn: it takes seconds
        except Exception as exc:  # noqa: BLE001 - each call tries again, and fails counted
            log.debug("litellm could not be imported (%s): each call tries again", exc)

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
        goes to ``litellm.completion`` (``tools=...``). Usage is counted the same way.

        The clock starts here. litellm is normally imported already (when this was built);
        if not, its import counts against ``config.timeout`` and cannot be cut short, and
        a call it left no time is LLMDeadlineExceeded without asking the server."""
        started = time.perf_counter()
        self.last_usage = None
        litellm = import_litellm()  # a lookup once imported
        response = self._complete(
            litellm, messages, deadline=started + self.config.timeout, extra=extra
        )
        seconds = time.perf_counter() - started

        numbers = checked_usage(getattr(response, "usage", None), with_cost=False)
        refused = numbers.refused
        cost = None
        if not refused:  # a cost priced from a refused count is no cost
            try:
                priced = litellm.completion_cost(completion_response=response)
            except Exception:  # noqa: BLE001 - unknown model price: no cost, not a failure
                priced = None
            cost = usage_cost(priced)
            if priced is not None and cost is None:
                refused = ("cost_usd",)
        self.last_usage = LLMUsage(
            model=str(self.config.model),
            prompt_tokens=numbers.prompt_tokens,
            completion_tokens=numbers.completion_tokens,
            total_tokens=numbers.total_tokens,
            cost_usd=cost,
            seconds=seconds,
            refused=refused,
        )
        self.calls += 1
        self.prompt_tokens += numbers.prompt_tokens or 0
        self.completion_tokens += numbers.completion_tokens or 0
        self.cost_usd += cost or 0.0
        if refused:
            self.usage_refused += 1
            log.log(
                logging.WARNING if self.usage_refused == 1 else logging.DEBUG,
                "%s reported usage the database cannot hold (%s): dropped%s",
                self.config.model,
                ", ".join(refused),
                "; from now on only counted (usage_refused)" if self.usage_refused == 1 else "",
            )
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
            if left <= 0:  # before a first attempt only: a retry starts with time left
                raise LLMDeadlineExceeded(
                    f"no time left of the {self.config.timeout:g} s timeout after importing "
                    f"litellm: the server was not asked"
                )
            try:
                return call_with_deadline(
                    litellm.completion,
                    self.request_kwargs(
                        messages, attempt_timeout(left, self.config.timeout), extra
                    ),
                    left,
                    connections=True,
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
                if ending():  # abandoned, and the process is exiting: no retry
                    raise
            retries += 1
            time.sleep(pause)
