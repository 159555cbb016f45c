"""The synthesis answer (spec 000, Phase 2): the schema the model answers in, its checks,
and the parsing of a raw answer into a validated :class:`MemorySynthesisResponse`.

Pure code, no database, no model call (memstore.synthesis calls the model and applies the
guards). Existing memories are referred to by handle (``[1]``) or by exact title.
"""

from __future__ import annotations

import json
import re
import unicodedata
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

from memstore.errors import AnswerError, SynthesisErrorKind
from memstore.models import (
    CONTROL_CHARACTERS,
    Category,
    Persistence,
    Status,
    blank_for_sqlite,
    unstorable_text,
)

#: Spec limits: a synthesis touches few memories at once.
MAX_SUPERSEDES = 3
MAX_INVALIDATES = 3
#: a reference list longer than this is refused before it is read
MAX_LISTED_REFERENCES = 50

#: The longest raw answer read (characters). An answer is a few hundred characters; a
#: longer one is refused as a ``schema`` failure before it is parsed.
MAX_ANSWER_CHARS = 100_000

#: A reference like 2, "2" or "[2]" is a handle; anything else is a title.
#: a handle as the prompt writes it ("[2]"): read as that handle wherever it appears
_BRACKETED = re.compile(r"^\s*\[\s*(\d+)\s*\]\s*$")
#: a handle written as a bare number ("2"), at most 18 digits: read as a handle only when
#: no memory has that title (``handle_in``)
_HANDLE = re.compile(r"^\s*\[?\s*(\d{1,18})\s*\]?\s*$")
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
    """``text`` cut to ``limit`` characters, lone surrogates written as ``\\udxxx`` escapes
    and NUL characters as ``\\x00``: safe to store in the decision log, on SQLite and on
    PostgreSQL (which holds no NUL in text), whatever the model sent."""
    text = text[:limit]
    if has_lone_surrogate(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


def shows_nothing(text: str) -> bool:
    """Whether ``text`` is blank once its format characters (Unicode category Cf: zero-width
    spaces and joiners, soft hyphens, byte order marks, bidi controls) are left out: a
    reader sees nothing there."""
    if text.isascii():
        return not text.strip()
    return not "".join(char for char in text if unicodedata.category(char) != "Cf").strip()


def _storable(value: str, what: str) -> str:
    """``value``, if the database can store it whichever it is (memstore.models'
    ``unstorable_text``: a NUL, which SQLite's checks also stop reading at, or a lone
    surrogate makes the answer a schema failure)."""
    problem = unstorable_text(value)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return value


# --------------------------------------------------------------------------- the answer


def handle_in(reference: str) -> int | None:
    """The handle a text reference writes as a bare number (``"2"``), or None. It is read
    so only when no memory has that exact title: a memory may be titled ``"2"``."""
    match = _HANDLE.match(reference)
    return int(match.group(1)) if match else None


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
        if isinstance(item, str):  # a title, a handle as shown ("[2]"), or either ("2")
            _storable(item, "a memory reference")
            match = _BRACKETED.match(item)
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

    @property
    def supersedes_memory_titles(self) -> set[Reference]:
        """Spec 002's name for ``supersedes``, as its set (a handle the prompt showed, an
        int, stays an int)."""
        return set(self.supersedes)

    @property
    def invalidate_memory_titles(self) -> set[Reference]:
        """Spec 004's name for ``invalidates``, as its set (a handle stays an int)."""
        return set(self.invalidates)

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
            for name in ("memory_title", "memory_text"):
                if shows_nothing(getattr(self, name) or ""):
                    raise ValueError(
                        f"{name} shows nothing: it holds only invisible format characters "
                        f"(zero-width spaces and the like)"
                    )
            if CONTROL_CHARACTERS.search(self.memory_title or ""):
                raise ValueError(
                    "memory_title must be one line: no line breaks or other control "
                    "characters (a title is shown on a line of its own)"
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


#: the deepest nesting of JSON arrays and objects an answer may have (a decision is 3 deep)
MAX_NESTING = 32


def _nesting(text: str) -> int:
    """How deep the text's brackets nest, strings left out. At the limit of Python's
    recursion, the JSON reader would raise RecursionError after the stack was exhausted,
    where any finaliser that runs meanwhile fails too; this is counted first instead."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


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
    if _nesting(text) > MAX_NESTING:  # refused before the reader recurses to Python's limit
        raise AnswerError(SynthesisErrorKind.SCHEMA, "answer is nested too deeply")
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
