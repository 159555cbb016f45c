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

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memstore.errors import (  # noqa: F401 - importable from here too
    AnswerError,
    LLMCallError,
    MemstoreError,
    SynthesisError,
    SynthesisErrorKind,
)
from memstore.models import Category, Memory, Persistence, Status

# the answer's schema and parsing (memstore.synthesis_answer), importable from here too
from memstore.synthesis_answer import (  # noqa: F401
    MAX_ANSWER_CHARS,
    MAX_INVALIDATES,
    MAX_LISTED_REFERENCES,
    MAX_SUPERSEDES,
    MemorySynthesisResponse,
    Reference,
    has_lone_surrogate,
    json_schema_response_format,
    loggable_text,
    parse_synthesis_answer,
)

#: Takes chat messages ({"role": ..., "content": ...}), returns the model's raw text.
LLMCallable = Callable[[list[dict[str, str]]], str]

# --------------------------------------------------------------------------- calling


def _is_instance_of(exc: BaseException, module: str, *names: str) -> bool:
    """isinstance against classes of an already imported module, without importing it."""
    loaded = sys.modules.get(module)
    if loaded is None:
        return False
    classes = tuple(cls for name in names if isinstance(cls := getattr(loaded, name, None), type))
    return bool(classes) and isinstance(exc, classes)


def classify_llm_exception(exc: BaseException) -> SynthesisErrorKind:
    """Map an exception raised while calling the model to a kind (unknown → provider_error)."""
    if isinstance(exc, SynthesisError):
        return exc.kind
    # litellm.Timeout subclasses APIConnectionError: test timeouts first.
    if (
        isinstance(exc, TimeoutError)
        or _is_instance_of(exc, "litellm", "Timeout")
        or _is_instance_of(exc, "openai", "APITimeoutError")
        or _is_instance_of(exc, "httpx", "TimeoutException")
    ):
        return SynthesisErrorKind.TIMEOUT
    if _is_instance_of(exc, "litellm", "RateLimitError") or _is_instance_of(
        exc, "openai", "RateLimitError"
    ):
        return SynthesisErrorKind.RATE_LIMIT
    return SynthesisErrorKind.PROVIDER_ERROR


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
        raise LLMCallError(kind, loggable_text(f"{type(exc).__name__}: {exc}", 1000)) from exc
    if not isinstance(raw, str):
        raise LLMCallError(
            SynthesisErrorKind.PROVIDER_ERROR,
            f"the LLM callable returned {type(raw).__name__}, expected str",
        )
    try:
        return raw, parse_synthesis_answer(raw)
    except AnswerError as exc:
        exc.raw = raw
        raise


# --------------------------------------------------------------------------- the guards


def number_memories(memories: Sequence[Memory]) -> list[tuple[int, Memory]]:
    """Give memories the handles [1], [2]... in the order given (use the same list twice:
    for ``build_synthesis_messages`` and for ``resolve_decision``)."""
    return [(index, memory) for index, memory in enumerate(memories, start=1)]


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
    """Exactly what to apply, after the guards. Titles are exact existing titles.

    Counters (tuples, so they can be logged): ``hallucinated_references`` (handles or titles
    not at this location), ``forbidden_supersessions`` (core/permanent titles a new
    ephemeral memory tried to supersede), ``already_superseded`` (references to memories
    already SUPERSEDED), ``conflicting_references`` (a memory both superseded and
    invalidated: kept superseded). ``duplicate_title`` means the new memory repeated an
    existing title exactly and was dropped.
    """

    new_memory: MemoryDraft | None = None
    supersede_titles: tuple[str, ...] = ()
    invalidate_titles: tuple[str, ...] = ()
    invalidation_reason: str | None = None
    core_downgraded: bool = False
    duplicate_title: bool = False
    hallucinated_references: tuple[Reference, ...] = ()
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
    by_handle: dict[int, Memory],
    by_title: dict[str, Memory],
    hallucinated: list[Reference],
    superseded: list[Reference],
) -> list[Memory]:
    found: list[Memory] = []
    for ref in refs:
        memory = by_handle.get(ref) if isinstance(ref, int) else by_title.get(ref)
        if memory is None:
            hallucinated.append(ref)
        elif memory.status is Status.SUPERSEDED:
            superseded.append(ref)
        elif all(memory.title != other.title for other in found):
            found.append(memory)
    return found


def resolve_decision(
    response: MemorySynthesisResponse,
    existing: Sequence[tuple[int, Memory]],
    first_visit: bool,
) -> SynthesisDecision:
    """Apply the guards to a validated answer (spec 002 edge cases, spec 004 transitions)."""
    by_handle = {handle: memory for handle, memory in existing}
    by_title: dict[str, Memory] = {}
    for _, memory in existing:  # an active memory wins over a superseded one of the same title
        current = by_title.get(memory.title)
        if current is None or current.status is Status.SUPERSEDED:
            by_title[memory.title] = memory
    hallucinated: list[Reference] = []
    superseded: list[Reference] = []

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

    to_supersede = _resolve(response.supersedes, by_handle, by_title, hallucinated, superseded)
    to_invalidate = _resolve(response.invalidates, by_handle, by_title, hallucinated, superseded)

    forbidden: list[str] = []
    supersede_titles: list[str] = []
    if draft is not None:
        for memory in to_supersede:
            if not memory.persistence.may_be_superseded_by(draft.persistence):
                forbidden.append(memory.title)
            else:
                supersede_titles.append(memory.title)
        same = by_title.get(draft.title)
        if same is not None and same.title not in supersede_titles:
            if same.status is not Status.SUPERSEDED:
                duplicate, draft, supersede_titles = True, None, []

    conflicting = [m.title for m in to_invalidate if m.title in supersede_titles]
    invalidate_titles = tuple(m.title for m in to_invalidate if m.title not in supersede_titles)

    return SynthesisDecision(
        new_memory=draft,
        supersede_titles=tuple(supersede_titles),
        invalidate_titles=invalidate_titles,
        invalidation_reason=(
            ((response.invalidation_reason or "").strip() or None) if invalidate_titles else None
        ),
        core_downgraded=core_downgraded,
        duplicate_title=duplicate,
        hallucinated_references=tuple(hallucinated),
        forbidden_supersessions=tuple(forbidden),
        already_superseded=tuple(superseded),
        conflicting_references=tuple(conflicting),
        reasoning=response.reasoning,
    )
