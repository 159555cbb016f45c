"""Memory synthesis, the "what" (spec 000, Phase 2): the LLM's answer, its checks, the guards.

Pure code, no database. The manager builds the messages (``memstore.prompt``), calls an
``LLMCallable`` through :func:`synthesize`, turns the validated answer (its schema and
parsing are in memstore.synthesis_answer) into a :class:`SynthesisDecision` with
:func:`resolve_decision`, and applies the decision to the store.

Existing memories are shown to the model with short integer handles (``[1]``, ``[2]``...), so
the model refers to them by handle instead of retyping titles. Titles are still accepted (the
spec's ``supersedes_memory_titles`` / ``invalidate_memory_titles`` shape) but only match
exactly: nothing is ever fuzzy-matched.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from memstore.errors import (  # noqa: F401 - importable from here too
    AnswerError,
    LLMCallError,
    MemstoreError,
    SynthesisError,
    SynthesisErrorKind,
)
from memstore.models import Category, Memory, Persistence, Status, plain_str, title_spelling
from memstore.shown_memories import ShownMemories, ShownRows, ShownTitle

# the answer's schema and parsing (memstore.synthesis_answer), importable from here too
from memstore.synthesis_answer import (  # noqa: F401
    MAX_ANSWER_CHARS,
    MAX_INVALIDATES,
    MAX_LISTED_REFERENCES,
    MAX_SUPERSEDES,
    MemorySynthesisResponse,
    Reference,
    handle_in,
    has_lone_surrogate,
    json_schema_response_format,
    loggable_text,
    parse_synthesis_answer,
)

log = logging.getLogger("memstore.manager")

#: Takes chat messages ({"role": ..., "content": ...}), returns the model's raw text.
LLMCallable = Callable[[list[dict[str, str]]], str]

# --------------------------------------------------------------------------- calling


def _is_instance_of(kind: type, module: str, *names: str) -> bool:
    """issubclass against classes of an already imported module, without importing it."""
    loaded = sys.modules.get(module)
    if loaded is None:
        return False
    classes = tuple(cls for name in names if isinstance(cls := getattr(loaded, name, None), type))
    return bool(classes) and issubclass(kind, classes)


def classify_llm_exception(exc: BaseException) -> SynthesisErrorKind:
    """Map an exception raised while calling the model to a kind (unknown → provider_error).

    By its type, never by what the exception says of itself (``isinstance`` would ask a
    foreign exception for its ``__class__``, which may raise)."""
    kind = type(exc)
    if issubclass(kind, SynthesisError):
        return cast(SynthesisError, exc).kind
    # litellm.Timeout subclasses APIConnectionError: test timeouts first.
    if (
        issubclass(kind, TimeoutError)
        or _is_instance_of(kind, "litellm", "Timeout")
        or _is_instance_of(kind, "openai", "APITimeoutError")
        or _is_instance_of(kind, "httpx", "TimeoutException")
    ):
        return SynthesisErrorKind.TIMEOUT
    if _is_instance_of(kind, "litellm", "RateLimitError") or _is_instance_of(
        kind, "openai", "RateLimitError"
    ):
        return SynthesisErrorKind.RATE_LIMIT
    return SynthesisErrorKind.PROVIDER_ERROR


def describe_exception(exc: BaseException, limit: int = 1000) -> str:
    """``"TypeName: message"`` of an exception, cut to ``limit`` characters and safe to
    store (``loggable_text``); never raises. A message that cannot be had (its
    ``__str__`` raises, recurses or returns no str) is said to be unreadable instead; a
    str subclass is read as plain text. For every exception from a model, or a callable
    standing for one, that is logged, counted or shown."""
    name = _plain_text(lambda: type(exc).__name__) or "Exception"
    message = _plain_text(lambda: str(exc))
    if message is None:
        return loggable_text(f"{name} (its message could not be read)", limit)
    return loggable_text(f"{name}: {message}", limit)


def _plain_text(get: Callable[[], object]) -> str | None:
    """``get()`` as an exact str, or None when it raises or gives no str."""
    try:
        value = get()
        return str.__str__(value) if isinstance(value, str) else None
    except Exception:  # noqa: BLE001 - a message that cannot be read is left out
        return None


def synthesize(
    llm: LLMCallable, messages: list[dict[str, str]]
) -> tuple[str, MemorySynthesisResponse]:
    """Call the model and validate its answer: (raw text, response) or one SynthesisError."""
    try:
        raw = llm(messages)
    except SynthesisError:
        raise
    except Exception as exc:  # noqa: BLE001 - every call failure becomes a SynthesisError
        kind = classify_llm_exception(exc)
        raise LLMCallError(kind, describe_exception(exc, 1000)) from exc
    if not isinstance(raw, str):
        raise LLMCallError(
            SynthesisErrorKind.PROVIDER_ERROR,
            f"the LLM callable returned {type(raw).__name__}, expected str",
        )
    raw = plain_str("the LLM's answer", raw)  # (a str subclass's own methods never run)
    try:
        return raw, parse_synthesis_answer(raw)
    except AnswerError as exc:
        exc.raw = raw
        raise


# --------------------------------------------------------------------------- the guards


class NumberedMemories(list[tuple[int, Memory]]):
    """(handle, Memory) pairs, and the row each memory was read from (``rows``) when they
    came from ``MemoryStore.memories``: a handle then names that row, not just a title."""

    __slots__ = ("rows",)

    def __init__(self, numbered: Iterable[tuple[int, Memory]], rows: ShownRows | None) -> None:
        super().__init__(numbered)
        self.rows = rows


def number_memories(memories: Sequence[Memory]) -> NumberedMemories:
    """Give memories the handles [1], [2]... in the order given (use the same list twice:
    for ``build_synthesis_messages`` and for ``resolve_decision``). Memories listed by
    ``MemoryStore.memories`` keep their rows, so that ``resolve_decision`` names them."""
    rows = memories.rows if isinstance(memories, ShownMemories) else None
    return NumberedMemories(enumerate(memories, start=1), rows)


@dataclass(frozen=True)
class MemoryDraft:
    """The new memory's fields; the manager adds episode, turns and score change."""

    category: Category
    title: str
    text: str
    persistence: Persistence
    status: Status

    def to_memory(
        self, *, episode: int, turns: str | int, score_change: int | None = None
    ) -> Memory:
        return Memory(
            category=self.category,
            title=self.title,
            text=self.text,
            episode=episode,
            turns=str(turns),
            score_change=score_change,
            persistence=self.persistence,
            status=self.status,
        )


@dataclass(frozen=True)
class SynthesisDecision:
    """Exactly what to apply, after the guards. Titles are exact existing titles; where the
    memories came from ``MemoryStore.memories`` each is a ``ShownTitle`` naming the row the
    prompt showed, which is the one the store retires (or none, if it is no longer live).

    Counters (tuples, so they can be logged): ``hallucinated_references`` (handles or titles
    not at this location), ``unshown_references`` (handles or titles of memories at this
    location the prompt did not show, past its bound: ignored, logged as "not shown"),
    ``forbidden_supersessions`` (core/permanent titles a new
    ephemeral memory tried to supersede), ``already_superseded`` (references to memories
    already SUPERSEDED), ``conflicting_references`` (a memory both superseded and
    invalidated, once resolved: the runner refuses the answer as the validator does when
    both lists name it alike). ``duplicate_title`` means the new memory repeated the
    title of an existing memory it does not supersede, as a reader reads it
    (``title_spelling``: Unicode NFC, runs of whitespace one space), and was dropped; a
    title of a live memory the prompt did not show is no duplicate: the new memory
    supersedes it where the persistence rule allows (``unshown_superseded``), and is
    dropped otherwise (``duplicate_title``, its reason logged).
    """

    new_memory: MemoryDraft | None = None
    supersede_titles: tuple[str, ...] = ()
    invalidate_titles: tuple[str, ...] = ()
    invalidation_reason: str | None = None
    core_downgraded: bool = False
    duplicate_title: bool = False
    hallucinated_references: tuple[Reference, ...] = ()
    unshown_references: tuple[Reference, ...] = ()
    unshown_superseded: tuple[str, ...] = ()
    forbidden_supersessions: tuple[str, ...] = ()
    already_superseded: tuple[Reference, ...] = ()
    conflicting_references: tuple[str, ...] = ()
    reasoning: str = ""

    @property
    def has_effect(self) -> bool:
        return bool(self.new_memory or self.supersede_titles or self.invalidate_titles)

    @property
    def hallucinated_count(self) -> int:
        return len(self.hallucinated_references)

    @property
    def forbidden_count(self) -> int:
        return len(self.forbidden_supersessions)


def _resolve(
    refs: Sequence[Reference],
    lookups: tuple[dict[int, Memory], dict[str, Memory]],
    hallucinated: list[Reference],
    superseded: list[Reference],
    unshown: tuple[dict[int, Memory], dict[str, Memory], list[tuple[Reference, Memory]]],
) -> list[Memory]:
    """The live memories ``refs`` name among those shown (``lookups``: by handle, by title).
    A reference to a memory at this location the prompt did not show goes to ``unshown``'s
    list (with the memory), one to no memory at all to ``hallucinated``."""
    if not refs:
        return []
    by_handle, by_title = lookups
    found: dict[int, Memory] = {}  # by identity: two memories of one title are two
    for ref in refs:
        memory = _lookup(ref, by_handle, by_title)
        if memory is None:
            hidden = _lookup(ref, unshown[0], unshown[1])
            if hidden is None:
                hallucinated.append(ref)
            else:
                unshown[2].append((ref, hidden))
        elif memory.status is Status.SUPERSEDED:
            superseded.append(ref)
        else:
            found.setdefault(id(memory), memory)
    return list(found.values())


def _lookup(
    ref: Reference, by_handle: dict[int, Memory], by_title: dict[str, Memory]
) -> Memory | None:
    if isinstance(ref, int):
        return by_handle.get(ref)
    memory = by_title.get(ref)  # an exact title first, then a handle written as text ("[2]")
    if memory is None and (handle := handle_in(ref)) is not None:
        memory = by_handle.get(handle)
    return memory


def _lookups(pairs: Iterable[tuple[int, Memory]]) -> tuple[dict[int, Memory], dict[str, Memory]]:
    """By handle and by title; an active memory wins over a superseded one of its title."""
    by_handle: dict[int, Memory] = {}
    by_title: dict[str, Memory] = {}
    for handle, memory in pairs:
        by_handle[handle] = memory
        current = by_title.get(memory.title)
        if current is None or current.status is Status.SUPERSEDED:
            by_title[memory.title] = memory
    return by_handle, by_title


#: ``title_spelling`` of the titles seen lately: a room's titles come back every turn
_spelling = functools.lru_cache(maxsize=4096)(title_spelling)


def resolve_decision(
    response: MemorySynthesisResponse,
    existing: Sequence[tuple[int, Memory]],
    first_visit: bool,
    listed: Collection[int] | None = None,
) -> SynthesisDecision:
    """Apply the guards to a validated answer (spec 002 edge cases, spec 004 transitions).

    ``listed``: the handles the prompt listed (``memstore.prompt.listed_handles``; None:
    all of ``existing``). A reference, by handle or by title, names only a listed memory:
    one to a memory the prompt left out is ignored and logged as "not shown"
    (``unshown_references``), one to no memory at all counts as hallucinated. A new title
    is checked against every live memory of ``existing``: one the prompt showed and the
    answer does not supersede makes it a duplicate (dropped); one it did not show is
    superseded by it where the persistence rule allows (``unshown_superseded``: the model
    could not see it, and its title says the new memory replaces it), and otherwise the
    new memory is dropped and the reason logged."""
    shown = existing if listed is None else [pair for pair in existing if pair[0] in listed]
    lookups = _lookups(shown)
    hidden_lookups = _lookups(pair for pair in existing if pair[0] not in lookups[0])
    rows = existing.rows if isinstance(existing, NumberedMemories) else None
    hallucinated: list[Reference] = []
    superseded: list[Reference] = []
    unshown: list[tuple[Reference, Memory]] = []

    draft: MemoryDraft | None = None
    core_downgraded = False
    duplicate = False
    if response.should_remember:
        persistence = response.persistence
        assert persistence is not None and response.category is not None  # validated
        if persistence is Persistence.CORE and not first_visit:
            persistence, core_downgraded = Persistence.PERMANENT, True
        draft = MemoryDraft(
            category=response.category,
            title=(response.memory_title or "").strip(),
            text=(response.memory_text or "").strip(),
            persistence=persistence,
            status=response.status,
        )

    hidden = (*hidden_lookups, unshown)
    to_supersede = _resolve(response.supersedes, lookups, hallucinated, superseded, hidden)
    to_invalidate = _resolve(response.invalidates, lookups, hallucinated, superseded, hidden)

    forbidden: list[str] = []
    superseding: dict[int, Memory] = {}  # by identity
    unshown_twins: dict[int, Memory] = {}  # live, not shown, of the new memory's title
    if draft is not None:
        for memory in to_supersede:
            if not memory.persistence.may_be_superseded_by(draft.persistence):
                forbidden.append(memory.title)
            else:
                superseding[id(memory)] = memory
        spelling = _spelling(draft.title)
        for handle, memory in existing:
            if (
                memory.status is Status.SUPERSEDED
                or _spelling(memory.title) != spelling
                or id(memory) in superseding
            ):
                continue
            if handle in lookups[0]:  # shown, and not superseded: a duplicate
                duplicate, draft, superseding, unshown_twins = True, None, {}, {}
                break
            unshown_twins[id(memory)] = memory
        if draft is not None and unshown_twins:
            refused = [
                m
                for m in unshown_twins.values()
                if not m.persistence.may_be_superseded_by(draft.persistence)
            ]
            if refused:
                log.warning(
                    "dropped the new memory %r: a live %s memory of that title, not shown in "
                    "the prompt (past its bound), may not be superseded by a %s one",
                    draft.title,
                    refused[0].persistence.value,
                    draft.persistence.value,
                )
                duplicate, draft, superseding, unshown_twins = True, None, {}, {}
            else:
                superseding.update(unshown_twins)
    ignored = [ref for ref, memory in unshown if id(memory) not in unshown_twins]
    if ignored:
        log.warning(
            "ignored references to memories at this location not shown in the prompt "
            "(past its bound): %s",
            tuple(ignored),
        )

    # (one the answer supersedes, whether or not the persistence rule let it)
    superseded_ids = {id(m) for m in to_supersede} | set(superseding)
    conflicting = [m.title for m in to_invalidate if id(m) in superseded_ids]
    invalidating = [m for m in to_invalidate if id(m) not in superseding]

    return SynthesisDecision(
        new_memory=draft,
        supersede_titles=_named(superseding.values(), rows),
        invalidate_titles=_named(invalidating, rows),
        invalidation_reason=(
            ((response.invalidation_reason or "").strip() or None) if invalidating else None
        ),
        core_downgraded=core_downgraded,
        duplicate_title=duplicate,
        hallucinated_references=tuple(hallucinated),
        unshown_references=tuple(ignored),
        unshown_superseded=tuple([memory.title for memory in unshown_twins.values()]),
        forbidden_supersessions=tuple(forbidden),
        already_superseded=tuple(superseded),
        conflicting_references=tuple(conflicting),
        reasoning=response.reasoning,
    )


def _named(memories: Iterable[Memory], rows: ShownRows | None) -> tuple[str, ...]:
    """The memories' titles; a ShownTitle naming its row where ``rows`` knows it."""
    if rows is None:
        return tuple([memory.title for memory in memories])
    named: list[str] = []
    for memory in memories:
        row = rows.row_of(memory)
        named.append(memory.title if row is None else ShownTitle(memory.title, row))
    return tuple(named)
