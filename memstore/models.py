"""Domain objects shared by the store, the exporters, synthesis and the command line.

Everything that crosses a boundary (an API argument, a parsed file, an LLM answer) is
validated here once, by pydantic, and passed inward as a typed, immutable object.
"""

from __future__ import annotations

import re
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


class Persistence(StrEnum):
    """How long a memory lives (spec 002): CORE and PERMANENT on disk, EPHEMERAL in memory."""

    CORE = "core"
    PERMANENT = "permanent"
    EPHEMERAL = "ephemeral"

    @property
    def on_disk(self) -> bool:
        return self is not Persistence.EPHEMERAL

    def may_be_superseded_by(self, new: Persistence) -> bool:
        """The one rule for persistence transitions (spec 002): anything may be superseded
        by something on disk, and an ephemeral memory by an ephemeral one; a core or
        permanent memory never by an ephemeral one (a game mechanic or the spawn state
        would be lost at the episode's end)."""
        return new.on_disk or not self.on_disk


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
    if end is not None and end < start:
        raise ValueError(f"turn range {turns!r} ends before it starts")
    return start, end


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
    return location_id


# --- the rules of a memory, defined once ---------------------------------------------------
#
# ``Memory`` (pydantic, at the public API's edges) and ``memory_row_problem`` (the plain
# rows that flow between the database and Memories.md) both read this table; a property
# test (tests/test_md_rows.py) checks that they accept and refuse exactly the same values.

#: Lone surrogates: a Python str may hold them; pydantic refuses them in a str field with a
#: length limit (it measures the text as UTF-8, and they have none; a field with no limit
#: takes them as they are), and so does the row check.
_SURROGATE = re.compile("[\ud800-\udfff]")


def title_problem(value: str) -> str | None:
    """Why a title is refused beyond its length (blank to Python or to SQLite), or None."""
    return "title must not be blank" if blank_for_sqlite(value) else None


def reason_problem(value: str) -> str | None:
    """Why an invalidation reason is refused (blank), or None."""
    return "an invalidation reason must not be blank" if blank_for_sqlite(value) else None


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
    ``minimum`` is an int's smallest value or a str's shortest length, ``maximum`` a str's
    longest length; ``check`` says why a value of the right type is refused, or None.
    """

    type: type
    optional: bool = False
    minimum: int | None = None
    maximum: int | None = None
    check: Callable[[Any], str | None] | None = None


#: Every field of a memory, in ``Memory``'s (and ``MemoryRow``'s) order.
MEMORY_RULES: dict[str, FieldRule] = {
    "category": FieldRule(Category),
    "title": FieldRule(str, minimum=1, maximum=TITLE_MAX, check=title_problem),
    "text": FieldRule(str, maximum=TEXT_MAX),
    "episode": FieldRule(int, minimum=1),
    "turns": FieldRule(str, check=turns_problem),
    "score_change": FieldRule(int, optional=True),
    "persistence": FieldRule(Persistence),
    "status": FieldRule(Status),
    "superseded_by": FieldRule(str, optional=True),
    "superseded_at_turn": FieldRule(int, optional=True, minimum=0),
    "superseded_at_episode": FieldRule(int, optional=True, minimum=1),
    "invalidation_reason": FieldRule(str, optional=True, check=reason_problem),
}
#: A location's fields (``LocationInfo``, ``LocationRow``); its episodes are ints, any.
LOCATION_RULES: dict[str, FieldRule] = {
    "id": FieldRule(int, minimum=0),
    "name": FieldRule(str),
    "visit_count": FieldRule(int, minimum=0),
}


def _value_problem(name: str, value: object, rule: FieldRule) -> str | None:
    if value is None:
        return None if rule.optional else f"{name}: a value is required"
    if type(value) is not rule.type:  # exact: no bool for an int, no str for an enum
        return f"{name}: {type(value).__name__} is not {rule.type.__name__}"
    limited = rule.minimum is not None or rule.maximum is not None
    if isinstance(value, str) and rule.type is str:
        if rule.minimum is not None and len(value) < rule.minimum:
            return f"{name}: shorter than {rule.minimum}"
        if rule.maximum is not None and len(value) > rule.maximum:
            return f"{name}: longer than {rule.maximum}"
        if limited and not value.isascii() and _SURROGATE.search(value) is not None:
            return f"{name}: not a valid unicode string"
    elif isinstance(value, int) and rule.minimum is not None and value < rule.minimum:
        return f"{name}: less than {rule.minimum}"
    if rule.check is not None:
        problem = rule.check(value)
        if problem is not None:
            return f"{name}: {problem}"
    return None


_MEMORY_RULES = tuple(MEMORY_RULES.items())


class MemoryRow(NamedTuple):
    """One memory as a plain row: ``Memory``'s fields, in its order, with no validation.

    What flows between the database and Memories.md (the export, the parser, the import);
    ``memory_row_problem`` checks one against ``MEMORY_RULES``, and ``Memory(**row._asdict())``
    makes the public model of it.
    """

    category: Category
    title: str
    text: str
    episode: int
    turns: str
    score_change: int | None
    persistence: Persistence
    status: Status = Status.ACTIVE
    superseded_by: str | None = None
    superseded_at_turn: int | None = None
    superseded_at_episode: int | None = None
    invalidation_reason: str | None = None

    @property
    def turn_start(self) -> int:
        return parse_turns(self.turns)[0]

    @property
    def turn_end(self) -> int | None:
        return parse_turns(self.turns)[1]


#: The limits of MEMORY_RULES that the common case of memory_row_problem reads.
_TITLE_MAX = MEMORY_RULES["title"].maximum or 0
_TEXT_MAX = MEMORY_RULES["text"].maximum or 0
_EPISODE_MIN = MEMORY_RULES["episode"].minimum or 0
_TURN_MIN = MEMORY_RULES["superseded_at_turn"].minimum or 0
_AT_EPISODE_MIN = MEMORY_RULES["superseded_at_episode"].minimum or 0


def memory_row_problem(row: MemoryRow) -> str | None:
    """Why ``Memory`` would refuse the row's values (the first rule broken), or None.

    A row passes exactly when ``Memory(**row._asdict())`` would accept it unchanged: every
    value of its field's exact type (enum members, not their names), within the limits of
    ``MEMORY_RULES``, and its status and supersession fields consistent.
    """
    (category, title, text, episode, turns, score, persistence, status, by, turn, at, reason) = row
    if (
        # The common case, decided at once from MEMORY_RULES' limits and checks: ASCII
        # texts and a well-formed link or none. Everything else goes through the table
        # rule by rule.
        type(category) is Category
        and type(persistence) is Persistence
        and type(status) is Status
        and type(title) is str
        and 0 < len(title) <= _TITLE_MAX
        and title.isascii()
        and "\x00" not in title
        and not title.isspace()  # title_problem, for an ASCII title with no NUL
        and type(text) is str
        and len(text) <= _TEXT_MAX
        and text.isascii()
        and type(episode) is int
        and episode >= _EPISODE_MIN
        and type(turns) is str
        and turns.isascii()
        and (turns.isdigit() or turns_problem(turns) is None)
        and (score is None or type(score) is int)
        and (
            (by is None and turn is None and at is None and reason is None)
            or (
                (turn is None or (type(turn) is int and turn >= _TURN_MIN))
                and (at is None or (type(at) is int and at >= _AT_EPISODE_MIN))
                and (by is None or type(by) is str)
                and (reason is None or (type(reason) is str and reason_problem(reason) is None))
                and supersession_problem(status, by, reason) is None
            )
        )
    ):
        return None
    for (name, rule), value in zip(_MEMORY_RULES, row, strict=True):
        problem = _value_problem(name, value, rule)
        if problem is not None:
            return problem
    return supersession_problem(status, by, reason)


def memory_row_of(memory: Memory) -> MemoryRow:
    """The row of a (validated) Memory."""
    return MemoryRow(
        memory.category,
        memory.title,
        memory.text,
        memory.episode,
        memory.turns,
        memory.score_change,
        memory.persistence,
        memory.status,
        memory.superseded_by,
        memory.superseded_at_turn,
        memory.superseded_at_episode,
        memory.invalidation_reason,
    )


def memory_of_row(row: MemoryRow) -> Memory:
    """The public model of a row, validated by pydantic (ValidationError if it breaks a rule)."""
    return Memory(**row._asdict())


_ID_MIN = LOCATION_RULES["id"].minimum or 0
_VISITS_MIN = LOCATION_RULES["visit_count"].minimum or 0


class LocationRow(NamedTuple):
    """A location as a plain row: ``LocationInfo``'s fields (episodes sorted, unique)."""

    id: int
    name: str
    visit_count: int = 0
    episodes: tuple[int, ...] = ()


def location_row_problem(row: LocationRow) -> str | None:
    """Why ``LocationInfo`` would refuse the row's values, or None (see memory_row_problem)."""
    location_id, name, visit_count, episodes = row
    if (
        type(location_id) is int
        and location_id >= _ID_MIN
        and type(name) is str
        and type(visit_count) is int
        and visit_count >= _VISITS_MIN
        and type(episodes) is tuple
        and all(type(episode) is int for episode in episodes)
    ):
        return None  # the common case, decided at once from LOCATION_RULES
    for (name, rule), value in zip(LOCATION_RULES.items(), row, strict=False):
        problem = _value_problem(name, value, rule)
        if problem is not None:
            return problem
    if type(row.episodes) is not tuple or any(type(e) is not int for e in row.episodes):
        return "episodes: not a tuple of ints"
    return None


class LocationRows(NamedTuple):
    """A location and its memories as plain rows (``LocationMemories``' fields)."""

    location: LocationRow
    memories: tuple[MemoryRow, ...] = ()


def location_memories_of_rows(entry: LocationRows) -> LocationMemories:
    """The public models of a location's rows, validated by pydantic."""
    location = entry.location
    return LocationMemories(
        location=LocationInfo(
            id=location.id,
            name=location.name,
            visit_count=location.visit_count,
            episodes=location.episodes,
        ),
        memories=tuple([Memory(**row._asdict()) for row in entry.memories]),
    )


def location_rows_of(entry: LocationMemories) -> LocationRows:
    """The rows of a location's public models."""
    info = entry.location
    return LocationRows(
        LocationRow(info.id, info.name, info.visit_count, info.episodes),
        tuple([memory_row_of(memory) for memory in entry.memories]),
    )


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
    episode: int = Field(ge=MEMORY_RULES["episode"].minimum)
    turns: str
    score_change: int | None = None
    persistence: Persistence
    status: Status = Status.ACTIVE

    superseded_by: str | None = None
    superseded_at_turn: int | None = Field(
        default=None, ge=MEMORY_RULES["superseded_at_turn"].minimum
    )
    superseded_at_episode: int | None = Field(
        default=None, ge=MEMORY_RULES["superseded_at_episode"].minimum
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

    id: int = Field(ge=LOCATION_RULES["id"].minimum)
    name: str
    visit_count: int = Field(default=0, ge=LOCATION_RULES["visit_count"].minimum)
    episodes: tuple[int, ...] = ()

    @field_validator("id", mode="before")
    @classmethod
    def _int_id(cls, value: object) -> object:
        return check_location_id(value)

    @field_validator("episodes")
    @classmethod
    def _sorted_unique(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(value)))


class LocationMemories(BaseModel):
    """A location with its persistent memories, in the order they were stored.

    This is the unit the Memories.md exporter renders and the parser returns.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: LocationInfo
    memories: tuple[Memory, ...] = ()
