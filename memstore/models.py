"""Domain objects shared by the store, the exporters, synthesis and the command line.

Everything that crosses a boundary (an API argument, a parsed file, an LLM answer) is
validated here once, by pydantic, and passed inward as a typed, immutable object.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Category(StrEnum):
    """What kind of lesson a memory holds (spec 000, "Memory Categories")."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    DISCOVERY = "DISCOVERY"
    DANGER = "DANGER"
    NOTE = "NOTE"


#: the longest title and text a memory may have (the model's limits; memstore check too)
TITLE_MAX = 500
TEXT_MAX = 20_000
#: the longest location name a write takes (Zork's are under 30 characters): a title's
LOCATION_NAME_MAX = TITLE_MAX

#: The range of an integer the database holds (SQLite's INTEGER, PostgreSQL's BIGINT: signed
#: 64-bit). Every integer a public call sends to SQL is checked against it at the door.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: The largest episode a memory, its link or a location's episode list may hold: one below
#: the database's largest integer, so that the episode after the largest stored can still
#: be numbered (``MemoryStore.allocate_episode``). The store, the export and the import
#: all take it from MEMORY_RULES["episode"]; `memstore check` names a row past it.
MAX_EPISODE = INT64_MAX - 1


class Persistence(StrEnum):
    """How long a memory lives (spec 002): CORE and PERMANENT on disk, EPHEMERAL in memory."""

    CORE = "core"
    PERMANENT = "permanent"
    EPHEMERAL = "ephemeral"

    @property
    def on_disk(self) -> bool:
        return self is not Persistence.EPHEMERAL

    def may_be_superseded_by(self, new: Persistence) -> bool:
        """The one rule for persistence transitions (spec 004 "Allowed Transitions"): an
        ephemeral memory may be superseded by anything (an ephemeral update, or the upgrade
        to core or permanent); a core memory by a core or permanent one; a permanent memory
        only by a permanent one (a game mechanic is not spawn state). A core or permanent
        memory never by an ephemeral one: it would be lost at the episode's end."""
        if not self.on_disk:
            return True
        if self is Persistence.PERMANENT:
            return new is Persistence.PERMANENT
        return new.on_disk


class Tier(StrEnum):
    """Where a memory is stored: the tables on disk or the attached in-memory database."""

    PERSISTENT = "persistent"
    EPHEMERAL = "ephemeral"

    @classmethod
    def of(cls, persistence: Persistence) -> Tier:
        return cls.PERSISTENT if persistence.on_disk else cls.EPHEMERAL


class Status(StrEnum):
    """Confidence in a memory (spec 003): SUPERSEDED memories are kept but never shown."""

    ACTIVE = "ACTIVE"
    TENTATIVE = "TENTATIVE"
    SUPERSEDED = "SUPERSEDED"


#: spec 002's and 004's names for Status
MemoryStatus = Status
MemoryStatusType = Status

#: Sentinel of the older implementation for "superseded by nothing" (spec 004).
INVALIDATION_MARKER = "INVALIDATED"

#: ASCII digits only, to the very end (``\d`` takes other scripts' digits, ``$`` a final
#: line break): what Memories.md writes back must read back.
_TURNS = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def parse_turns(turns: str) -> tuple[int, int | None]:
    """Split a turn string ("45" or "23-24") into (start, end or None); ValueError if malformed."""
    match = _TURNS.fullmatch(turns)
    if match is None:
        raise ValueError(f"turns must look like '45' or '23-24', got {turns!r}")
    start = int(match.group(1))
    end = int(match.group(2)) if match.group(2) is not None else None
    if max(start, end or 0) > INT64_MAX:
        raise ValueError(f"turn numbers must be at most 2**63-1, got {turns[:60]!r}")
    if end is not None and end < start:
        raise ValueError(f"turn range {turns!r} ends before it starts")
    return start, end


def canonical_turns(turns: str) -> str:
    """A well-formed turn string as the database gives it back: no leading zeros ("05" is
    "5", "05-07" is "5-7"), as ``Ep01`` is episode 1. A turn is compared by this string
    (a memory's key), so a file's ``T05`` is the stored ``T5``."""
    if turns[:1] != "0" and "-0" not in turns or turns == "0":
        return turns
    try:
        start, end = parse_turns(turns)
    except ValueError:  # not well-formed: refused where it is checked, as it is
        return turns
    return str(start) if end is None else f"{start}-{end}"


def unstorable_text(value: str) -> str | None:
    """Why neither database could store ``value`` as it is (a NUL: PostgreSQL holds none in
    text; a lone surrogate: not Unicode, so not UTF-8), or None."""
    if "\x00" in value:
        return "holds a NUL character, which the database cannot store"
    if lone_surrogate(value):
        return NOT_UNICODE
    return None


NOT_UNICODE = "is not valid Unicode text (it holds a lone surrogate)"


def lone_surrogate(value: str) -> bool:
    """Whether ``value`` holds a lone surrogate (not Unicode, so not UTF-8: no database
    stores it)."""
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def plain_str(name: str, value: object) -> str:
    """``value`` as a plain str, for a text that comes from outside: a str subclass (a
    ``(str, Enum)`` member, one that overrides ``lower`` or ``__str__``) is read as the
    text it holds (``str.__str__``), never through its own methods. TypeError for
    anything but a str."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    raise TypeError(f"{name} must be a str, got {type(value).__name__}")


def check_location_name(value: object, name: str = "location_name") -> str:
    """A location name a write takes, as a plain str (``plain_str``): TypeError for a
    non-str, ValueError (one line) for text no database can store (``unstorable_text``)
    or longer than LOCATION_NAME_MAX characters."""
    text = plain_str(name, value)
    if len(text) > LOCATION_NAME_MAX:
        raise ValueError(
            f"{name} is {len(text):,} characters, more than the {LOCATION_NAME_MAX:,} allowed"
        )
    problem = unstorable_text(text)
    if problem is not None:
        raise ValueError(f"{name} {problem}: {text[:60]!r}")
    return text


#: a line break or another control character (C0, DEL, C1, the Unicode line separators)
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def on_one_line(text: str) -> str:
    """``text`` as a view or prompt shows it: each run of line breaks and other control
    characters one space, so a memory's text or title never makes a line of its own (one
    a model wrote could pass for another memory, or the prompt's own words)."""
    return text if text.isprintable() else CONTROL_CHARACTERS.sub(" ", text)


def title_spelling(title: str) -> str:
    """A title as a reader sees it: Unicode NFC, runs of whitespace one space. An editor
    that normalises a file, or turns tabs to spaces, changes a title's characters but not
    this; two live memories whose titles have one spelling read as one title twice."""
    return unicodedata.normalize("NFC", " ".join(title.split()))


def blank_for_sqlite(value: str) -> bool:
    """Whether a text is blank to Python or to the database's ``length(trim(x)) > 0`` checks.

    SQLite's ``trim`` drops only spaces and its ``length`` stops at the first NUL, so
    ``"\\x00note"`` is blank to it: such a text would pass here and break the insert.
    """
    return not value.strip() or ("\x00" in value and not value.split("\x00", 1)[0].strip(" "))


def format_turns(start: int, end: int | None) -> str:
    """The inverse of parse_turns."""
    return str(start) if end is None else f"{start}-{end}"


def check_location_id(location_id: object) -> int:
    """Location IDs are Z-machine object numbers: plain ints, never names (spec 000, Risk 6)."""
    if type(location_id) is not int:  # bool is an int subclass: reject it too
        raise TypeError(
            f"location_id must be an int (the Z-machine location number), "
            f"got {type(location_id).__name__} {location_id!r}"
        )
    if location_id < 0:
        raise ValueError(f"location_id must not be negative, got {location_id}")
    if location_id > INT64_MAX:
        raise ValueError(
            f"location_id must be at most 2**63-1 (a 64-bit integer), got {_shown(location_id)}"
        )
    return location_id


def _shown(value: object) -> str:
    """A refused value for a one-line message (a huge int by its size: Python refuses to
    print one of more than 4300 digits)."""
    if type(value) is int:
        return str(value) if abs(value) < 10**40 else f"an int of {value.bit_length()} bits"
    return f"{type(value).__name__} {value!r}"[:100]


def _bounds(minimum: int, maximum: int) -> str:
    low = "-2**63" if minimum == INT64_MIN else str(minimum)
    high = {INT64_MAX: "2**63-1", MAX_EPISODE: "2**63-2"}.get(maximum, str(maximum))
    return f"an int from {low} to {high}"


def check_int(
    name: str,
    value: object,
    minimum: int = INT64_MIN,
    *,
    optional: bool = False,
    maximum: int = INT64_MAX,
) -> None:
    """Refuse (ValueError, one line) a value that is not an int from ``minimum`` to
    ``maximum`` (a bool too; None only when ``optional``): by default what the database
    can hold; an episode's ``maximum`` is MAX_EPISODE."""
    if value is None and optional:
        return
    if type(value) is not int or not minimum <= value <= maximum:
        raise ValueError(
            f"{name} must be {_bounds(minimum, maximum)}{' or None' if optional else ''}, "
            f"got {_shown(value)}"
        )


# --- the rules of a memory, defined once ---------------------------------------------------
#
# ``Memory`` (pydantic, at the public API's edges) and ``memstore.md_rows`` (the plain rows
# that flow between the database and Memories.md) both read this table; a property test
# (tests/test_md_rows.py) checks that they accept and refuse exactly the same values.


def _blank_problem(what: str, value: str) -> str | None:
    """Why ``what`` is refused as blank, or None; one with a NUL (a ``\\x00`` escape in
    Memories.md) says that the database reads it only up to the NUL."""
    if not blank_for_sqlite(value):
        return None
    if "\x00" in value:
        return f"{what} must not be blank before its first NUL character (\\x00)"
    return f"{what} must not be blank"


def title_problem(value: str) -> str | None:
    """Why a title is refused beyond its length (blank to Python or to SQLite), or None."""
    return _blank_problem("title", value)


def reason_problem(value: str) -> str | None:
    """Why an invalidation reason is refused (blank), or None."""
    return _blank_problem("an invalidation reason", value)


def turns_problem(value: str) -> str | None:
    """Why a turn string is refused ("45" and "23-24" are fine), or None."""
    try:
        parse_turns(value)
    except ValueError as error:
        return str(error)
    return None


def supersession_problem(
    status: Status, superseded_by: str | None, invalidation_reason: str | None
) -> str | None:
    """Why a memory's status and supersession fields do not fit together, or None."""
    if superseded_by is not None and invalidation_reason is not None:
        return "a memory is either superseded by another or invalidated, not both"
    if status is not Status.SUPERSEDED and (
        superseded_by is not None or invalidation_reason is not None
    ):
        return "only a SUPERSEDED memory can name a successor or a reason"
    return None


class FieldRule(NamedTuple):
    """What one field of a memory may hold.

    ``type`` is the exact type of the value in a row (an enum class, ``str`` or ``int``);
    ``minimum`` and ``maximum`` are an int's smallest and largest values (every int within
    the database's 64 bits; an episode at most MAX_EPISODE) or a str's shortest and
    longest lengths; ``check`` says why a
    value of the right type is refused, or None.
    """

    type: type
    optional: bool = False
    minimum: int | None = None
    maximum: int | None = None
    check: Callable[[Any], str | None] | None = None


#: Every field of a memory, in ``Memory``'s (and ``md_rows.MemoryRow``'s) order.
MEMORY_RULES: dict[str, FieldRule] = {
    "category": FieldRule(Category),
    "title": FieldRule(str, minimum=1, maximum=TITLE_MAX, check=title_problem),
    "text": FieldRule(str, maximum=TEXT_MAX),
    "episode": FieldRule(int, minimum=1, maximum=MAX_EPISODE),
    "turns": FieldRule(str, check=turns_problem),
    "score_change": FieldRule(int, optional=True, minimum=INT64_MIN, maximum=INT64_MAX),
    "persistence": FieldRule(Persistence),
    "status": FieldRule(Status),
    "superseded_by": FieldRule(str, optional=True),
    "superseded_at_turn": FieldRule(int, optional=True, minimum=0, maximum=INT64_MAX),
    "superseded_at_episode": FieldRule(int, optional=True, minimum=1, maximum=MAX_EPISODE),
    "invalidation_reason": FieldRule(str, optional=True, check=reason_problem),
}


def episodes_problem(episodes: tuple[int, ...]) -> str | None:
    """Why a location's episode list is refused (an episode is a memory's: 1 to
    MAX_EPISODE)."""
    rule = MEMORY_RULES["episode"]
    low, high = rule.minimum or 0, rule.maximum or 0
    if episodes and not (low <= min(episodes) and max(episodes) <= high):
        return f"episodes: each from {low} to {high}"
    return None


#: A location's fields (``LocationInfo``, ``md_rows.LocationRow``); its episodes are each a
#: memory's episode (``episodes_problem``).
LOCATION_RULES: dict[str, FieldRule] = {
    "id": FieldRule(int, minimum=0, maximum=INT64_MAX),
    "name": FieldRule(str),
    "visit_count": FieldRule(int, minimum=0, maximum=INT64_MAX),
}


class Memory(BaseModel):
    """One location memory.

    ``persistence`` is required, with no default, so every memory is classified explicitly
    (spec 002). The supersession fields describe how a SUPERSEDED memory ended: replaced by
    the memory titled ``superseded_by``, or invalidated with ``invalidation_reason``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    category: Category
    title: str = Field(
        min_length=MEMORY_RULES["title"].minimum, max_length=MEMORY_RULES["title"].maximum
    )
    text: str = Field(max_length=MEMORY_RULES["text"].maximum)
    episode: int = Field(ge=MEMORY_RULES["episode"].minimum, le=MEMORY_RULES["episode"].maximum)
    turns: str
    score_change: int | None = Field(
        default=None,
        ge=MEMORY_RULES["score_change"].minimum,
        le=MEMORY_RULES["score_change"].maximum,
    )
    persistence: Persistence
    status: Status = Status.ACTIVE

    superseded_by: str | None = None
    superseded_at_turn: int | None = Field(
        default=None,
        ge=MEMORY_RULES["superseded_at_turn"].minimum,
        le=MEMORY_RULES["superseded_at_turn"].maximum,
    )
    superseded_at_episode: int | None = Field(
        default=None,
        ge=MEMORY_RULES["superseded_at_episode"].minimum,
        le=MEMORY_RULES["superseded_at_episode"].maximum,
    )
    invalidation_reason: str | None = None

    @field_validator("category", mode="before")
    @classmethod
    def _category_upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("persistence", mode="before")
    @classmethod
    def _persistence_lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("status", mode="before")
    @classmethod
    def _status_upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("title")
    @classmethod
    def _title_clean(cls, value: str) -> str:
        problem = title_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("invalidation_reason")
    @classmethod
    def _reason_clean(cls, value: str | None) -> str | None:
        problem = None if value is None else reason_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("turns", mode="before")
    @classmethod
    def _turns_valid(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("turns must be a turn number or range, not a bool")
        if isinstance(value, int):
            value = str(value)
        if isinstance(value, str):
            problem = turns_problem(value)
            if problem is not None:
                raise ValueError(problem)
            return canonical_turns(value)
        return value

    @model_validator(mode="after")
    def _supersession_consistent(self) -> Memory:
        problem = supersession_problem(self.status, self.superseded_by, self.invalidation_reason)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def turn_start(self) -> int:
        return parse_turns(self.turns)[0]

    @property
    def turn_end(self) -> int | None:
        return parse_turns(self.turns)[1]


class LocationInfo(BaseModel):
    """A location: its Z-machine number, display name, and visit record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int = Field(ge=LOCATION_RULES["id"].minimum, le=LOCATION_RULES["id"].maximum)
    name: str
    visit_count: int = Field(
        default=0,
        ge=LOCATION_RULES["visit_count"].minimum,
        le=LOCATION_RULES["visit_count"].maximum,
    )
    episodes: tuple[int, ...] = ()

    @field_validator("id", mode="before")
    @classmethod
    def _int_id(cls, value: object) -> object:
        return check_location_id(value)

    @field_validator("episodes")
    @classmethod
    def _sorted_unique(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        problem = episodes_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return tuple(sorted(set(value)))


class LocationMemories(BaseModel):
    """A location with its persistent memories, in the order they were stored.

    This is the unit the Memories.md exporter renders and the parser returns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: LocationInfo
    memories: tuple[Memory, ...] = ()
