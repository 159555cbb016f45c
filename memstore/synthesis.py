"""Memory synthesis, the "what" (spec 000, Phase 2): the LLM's answer, its checks, the guards.

Pure code, no database. The manager builds the messages (``memstore.prompt``), calls an
``LLMCallable`` through :func:`synthesize`, turns the validated answer into a
:class:`SynthesisDecision` with :func:`resolve_decision`, and applies the decision to the store.

Existing memories are shown to the model with short integer handles (``[1]``, ``[2]``...), so
the model refers to them by handle instead of retyping titles. Titles are still accepted (the
spec's ``supersedes_memory_titles`` / ``invalidate_memory_titles`` shape) but only match
exactly: nothing is ever fuzzy-matched.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from memstore.errors import (  # noqa: F401 - importable from here too
    AnswerError,
    LLMCallError,
    MemstoreError,
    SynthesisError,
    SynthesisErrorKind,
)
from memstore.models import Category, Memory, Persistence, Status, blank_for_sqlite

#: Takes chat messages ({"role": ..., "content": ...}), returns the model's raw text.
LLMCallable = Callable[[list[dict[str, str]]], str]

#: Spec limits: a synthesis touches few memories at once.
MAX_SUPERSEDES = 3
MAX_INVALIDATES = 3
#: a reference list longer than this is refused before it is read
MAX_LISTED_REFERENCES = 50

#: The longest raw answer read (characters). An answer is a few hundred characters; a
#: longer one is refused as a ``schema`` failure before it is parsed.
MAX_ANSWER_CHARS = 100_000

#: A reference like 2, "2" or "[2]" is a handle; anything else is a title.
_HANDLE = re.compile(r"^\s*\[?\s*(\d+)\s*\]?\s*$")
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)

Reference = int | str


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate: not Unicode, so neither UTF-8 nor SQLite
    nor JSON serialisation can take it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def loggable_text(text: str, limit: int = 10_000) -> str:
    """``text`` cut to ``limit`` characters, lone surrogates written as ``\\udxxx`` escapes:
    safe to store in the decision log whatever the model sent."""
    text = text[:limit]
    if has_lone_surrogate(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _storable(value: str, what: str) -> str:
    if has_lone_surrogate(value):
        raise ValueError(f"{what} is not valid Unicode text (it holds a lone surrogate)")
    return value


# --------------------------------------------------------------------------- the answer


def _normalise_references(value: object) -> object:
    """Accept a list/set/tuple (or a single value) of handles and titles; keep order, dedupe."""
    if value is None:
        return ()
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    if not isinstance(value, (list, tuple)):
        return value  # let pydantic report the type error
    if len(value) > MAX_LISTED_REFERENCES:
        raise ValueError(
            f"{len(value)} references are too many to read (at most {MAX_LISTED_REFERENCES})"
        )
    seen: list[Reference] = []
    known: set[object] = set()  # linear in the answer's length, however long its lists
    for item in value:
        if isinstance(item, bool):
            raise ValueError(f"a memory reference must be a handle or a title, got {item!r}")
        if isinstance(item, str):
            _storable(item, "a memory reference")
            match = _HANDLE.match(item)
            if match:
                item = int(match.group(1))
            elif not item.strip():
                raise ValueError("a memory reference must not be blank")
        try:
            if item in known:
                continue
            known.add(item)
        except TypeError:  # unhashable: pydantic reports the wrong type
            pass
        seen.append(item)
    return tuple(seen)


class MemorySynthesisResponse(BaseModel):
    """The model's answer (spec 002 "MemorySynthesisResponse Schema", spec 004 invalidation).

    ``supersedes`` and ``invalidates`` hold handles (ints) or exact titles (strs); the
    spec's field names ``supersedes_memory_titles`` / ``invalidate_memory_titles`` are
    accepted as aliases. Unknown fields are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    should_remember: bool
    category: Category | None = None
    memory_title: str | None = Field(default=None, max_length=500)
    memory_text: str | None = Field(default=None, max_length=20_000)
    status: Status = Status.ACTIVE
    persistence: Persistence | None = None
    supersedes: tuple[Reference, ...] = Field(
        default=(),
        validation_alias=AliasChoices(
            "supersedes", "supersedes_memory_titles", "supersedes_memories"
        ),
    )
    invalidates: tuple[Reference, ...] = Field(
        default=(),
        validation_alias=AliasChoices(
            "invalidates", "invalidate_memory_titles", "invalidate_memories"
        ),
    )
    invalidation_reason: str | None = None
    reasoning: str = ""

    @field_validator("category", mode="before")
    @classmethod
    def _category_upper(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().upper()
            return value or None
        return value

    @field_validator("persistence", mode="before")
    @classmethod
    def _persistence_lower(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower()
            return value or None
        return value

    @field_validator("status", mode="before")
    @classmethod
    def _status_upper(cls, value: object) -> object:
        if value is None:
            return Status.ACTIVE
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("supersedes", "invalidates", mode="before")
    @classmethod
    def _references(cls, value: object) -> object:
        return _normalise_references(value)

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning_text(cls, value: object) -> object:
        return "" if value is None else value

    @field_validator("memory_title", "memory_text", "invalidation_reason", "reasoning")
    @classmethod
    def _unicode_text(cls, value: str | None) -> str | None:
        return value if value is None else _storable(value, "the text")

    @model_validator(mode="after")
    def _rules(self) -> MemorySynthesisResponse:
        if self.should_remember:
            missing = [
                name
                for name in ("category", "memory_title", "memory_text", "persistence")
                if getattr(self, name) is None
                or (isinstance(getattr(self, name), str) and blank_for_sqlite(getattr(self, name)))
            ]
            if missing:
                raise ValueError(
                    "should_remember is true, so these fields are required: " + ", ".join(missing)
                )
            if self.status is Status.SUPERSEDED:
                raise ValueError(
                    "a new memory cannot be created SUPERSEDED; use ACTIVE or TENTATIVE"
                )
        elif self.supersedes:
            raise ValueError(
                "supersedes needs a new memory (should_remember true); to retire memories "
                "without a replacement, use invalidates with an invalidation_reason"
            )
        if len(self.supersedes) > MAX_SUPERSEDES:
            raise ValueError(
                f"at most {MAX_SUPERSEDES} memories may be superseded at once, "
                f"got {len(self.supersedes)}"
            )
        if len(self.invalidates) > MAX_INVALIDATES:
            raise ValueError(
                f"at most {MAX_INVALIDATES} memories may be invalidated at once, "
                f"got {len(self.invalidates)}"
            )
        if self.invalidates and blank_for_sqlite((self.invalidation_reason or "").strip()):
            raise ValueError("invalidates is not empty, so invalidation_reason is required")
        both = [ref for ref in self.supersedes if ref in self.invalidates]
        if both:
            raise ValueError(
                "a memory cannot be both superseded and invalidated: "
                + ", ".join(repr(ref) for ref in both)
            )
        return self


def json_schema_response_format() -> dict[str, Any]:
    """``response_format`` for OpenAI-style JSON-schema output (non-strict)."""
    nullable_string = {"type": ["string", "null"]}
    references = {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": MAX_SUPERSEDES,
        "description": "handles of existing memories, as shown in brackets: [1] -> 1",
    }
    schema = {
        "type": "object",
        "properties": {
            "should_remember": {"type": "boolean"},
            "category": {"type": ["string", "null"], "enum": [*(c.value for c in Category), None]},
            "memory_title": nullable_string,
            "memory_text": nullable_string,
            "status": {"type": "string", "enum": [Status.ACTIVE.value, Status.TENTATIVE.value]},
            "persistence": {
                "type": ["string", "null"],
                "enum": [*(p.value for p in Persistence), None],
            },
            "supersedes": references,
            "invalidates": {**references, "maxItems": MAX_INVALIDATES},
            "invalidation_reason": nullable_string,
            "reasoning": {"type": "string"},
        },
        "required": ["should_remember", "reasoning"],
        "additionalProperties": False,
    }
    return {
        "type": "json_schema",
        "json_schema": {"name": "memory_synthesis", "schema": schema, "strict": False},
    }


def _describe_validation_error(exc: ValidationError, shown: int = 5) -> str:
    errors = exc.errors(include_url=False)
    parts = []
    for error in errors[:shown]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = error.get("msg", "invalid")
        message = message.removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    if len(errors) > shown:
        parts.append(f"and {len(errors) - shown} more")
    return "; ".join(parts)


def parse_synthesis_answer(raw: str) -> MemorySynthesisResponse:
    """Parse the model's raw text (bare JSON or a ```json fenced block) into a response.

    Raises AnswerError with kind ``invalid_json`` or ``schema``, and nothing else, whatever
    the text: an answer longer than MAX_ANSWER_CHARS, holding a lone surrogate, nested too
    deeply for the JSON reader or holding an integer too long to convert is ``schema``.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise AnswerError(SynthesisErrorKind.INVALID_JSON, "the model returned an empty answer")
    if len(raw) > MAX_ANSWER_CHARS:
        raise AnswerError(
            SynthesisErrorKind.SCHEMA,
            f"answer of {len(raw):,} characters is longer than the {MAX_ANSWER_CHARS:,} allowed",
        )
    if has_lone_surrogate(raw):
        raise AnswerError(
            SynthesisErrorKind.SCHEMA, "answer is not valid Unicode text (a lone surrogate)"
        )
    text = raw.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text[:80].replace("\n", " ")
        raise AnswerError(
            SynthesisErrorKind.INVALID_JSON, f"answer is not JSON ({exc.msg}): {snippet!r}"
        ) from exc
    except RecursionError as exc:
        raise AnswerError(SynthesisErrorKind.SCHEMA, "answer is nested too deeply") from exc
    except ValueError as exc:  # an integer longer than int's digit limit
        raise AnswerError(SynthesisErrorKind.SCHEMA, f"answer holds a bad value: {exc}") from exc
    if not isinstance(data, dict):
        raise AnswerError(
            SynthesisErrorKind.SCHEMA, f"answer must be a JSON object, got {type(data).__name__}"
        )
    try:
        response = MemorySynthesisResponse.model_validate(data)
        response.model_dump_json()  # what the decision log stores must serialise
    except ValidationError as exc:
        raise AnswerError(SynthesisErrorKind.SCHEMA, _describe_validation_error(exc)) from exc
    except (ValueError, RecursionError) as exc:  # PydanticSerializationError is a ValueError
        raise AnswerError(SynthesisErrorKind.SCHEMA, f"answer cannot be stored: {exc}") from exc
    return response


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
