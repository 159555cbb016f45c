"""Memories and locations as plain rows, checked against the models' one rule table.

What flows between the database and Memories.md (the export, the reader, the import): a
``MemoryRow`` has ``Memory``'s fields in its order, a ``LocationRow`` ``LocationInfo``'s,
with no pydantic object built. ``memory_row_problem`` and ``location_row_problem`` check
one against ``memstore.models.MEMORY_RULES`` / ``LOCATION_RULES`` (and the rule functions
the models' validators call); a row passes exactly when the model accepts its values as
they are (tests/test_md_rows.py proves it with hypothesis). The conversions to and from
the public models are at the end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import TypeAdapter

from memstore.models import (
    LOCATION_RULES,
    MEMORY_RULES,
    Category,
    FieldRule,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    episodes_problem,
    parse_turns,
    reason_problem,
    supersession_problem,
    turns_problem,
)

__all__ = [
    "LocationRow",
    "LocationRows",
    "MemoryRow",
    "location_memories_of_rows",
    "locations_of_rows",
    "location_row_problem",
    "location_rows_of",
    "memory_of_row",
    "memory_row_of",
    "memory_row_problem",
]

#: Lone surrogates: a Python str may hold them; pydantic refuses them in a str field with a
#: length limit (it measures the text as UTF-8, and they have none; a field with no limit
#: takes them as they are), and so does the row check.
_SURROGATE = re.compile("[\ud800-\udfff]")


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
    elif isinstance(value, int) and rule.maximum is not None and value > rule.maximum:
        return f"{name}: more than {rule.maximum}"
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
#: every other int field's largest value (and a score change's smallest): the database's
#: 64 bits; an episode's (a memory's, its link's) is one below (models.MAX_EPISODE)
_INT_MAX = MEMORY_RULES["score_change"].maximum or 0
_EPISODE_MAX = MEMORY_RULES["episode"].maximum or 0
_SCORE_MIN = MEMORY_RULES["score_change"].minimum or 0
assert MEMORY_RULES["superseded_at_turn"].maximum == _INT_MAX
assert MEMORY_RULES["superseded_at_episode"].maximum == _EPISODE_MAX
#: a turn string of at most this many digits is a number the database holds
_SHORT_TURNS = len(str(_INT_MAX)) - 1


def memory_row_problem(row: MemoryRow) -> str | None:
    """Why ``Memory`` would refuse the row's values (the first rule broken), or None.

    A row passes exactly when ``Memory(**row._asdict())`` would accept it unchanged: every
    value of its field's exact type (enum members, not their names), within the limits of
    ``MEMORY_RULES``, and its status and supersession fields consistent.
    """
    (category, title, text, episode, turns, score, persistence, status, by, turn, at, reason) = row
    if (
        # The common case, decided at once from MEMORY_RULES' limits and checks: an ASCII
        # title, a text of any script with no lone surrogate, and a well-formed link or
        # none. Everything else goes through the table rule by rule.
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
        and (text.isascii() or _SURROGATE.search(text) is None)  # the text's whole rule
        and type(episode) is int
        and _EPISODE_MIN <= episode <= _EPISODE_MAX
        and type(turns) is str
        and turns.isascii()
        and ((turns.isdigit() and len(turns) <= _SHORT_TURNS) or turns_problem(turns) is None)
        and (score is None or (type(score) is int and _SCORE_MIN <= score <= _INT_MAX))
        and (
            (by is None and turn is None and at is None and reason is None)
            or (
                (turn is None or (type(turn) is int and _TURN_MIN <= turn <= _INT_MAX))
                and (at is None or (type(at) is int and _AT_EPISODE_MIN <= at <= _EPISODE_MAX))
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
_INT_ONLY = {int}


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
        and _ID_MIN <= location_id <= _INT_MAX
        and type(name) is str
        and type(visit_count) is int
        and _VISITS_MIN <= visit_count <= _INT_MAX
        and type(episodes) is tuple
        and set(map(type, episodes)) <= _INT_ONLY
        and episodes_problem(episodes) is None
    ):
        return None  # the common case, decided at once from LOCATION_RULES
    for (name, rule), value in zip(LOCATION_RULES.items(), row, strict=False):
        problem = _value_problem(name, value, rule)
        if problem is not None:
            return problem
    if type(row.episodes) is not tuple or any(type(e) is not int for e in row.episodes):
        return "episodes: not a tuple of ints"
    return episodes_problem(row.episodes)


class LocationRows(NamedTuple):
    """A location and its memories as plain rows (``LocationMemories``' fields)."""

    location: LocationRow
    memories: tuple[MemoryRow, ...] = ()


#: validates many memories in one call (cheaper per memory than one constructor call each)
_MEMORIES = TypeAdapter(tuple[Memory, ...])


def locations_of_rows(entries: Sequence[LocationRows]) -> tuple[LocationMemories, ...]:
    """The public models of locations' rows, every memory and location validated by
    pydantic (ValidationError if one breaks a rule), the memories in one call."""
    memories = _MEMORIES.validate_python(
        [row._asdict() for entry in entries for row in entry.memories]
    )
    models = []
    start = 0
    for entry in entries:
        location = entry.location
        end = start + len(entry.memories)
        info = LocationInfo(
            id=location.id,
            name=location.name,
            visit_count=location.visit_count,
            episodes=location.episodes,
        )
        # Both parts validated just above: put together as the constructor would.
        models.append(LocationMemories.model_construct(location=info, memories=memories[start:end]))
        start = end
    return tuple(models)


def location_memories_of_rows(entry: LocationRows) -> LocationMemories:
    """The public models of a location's rows, validated by pydantic."""
    return locations_of_rows((entry,))[0]


def location_rows_of(entry: LocationMemories) -> LocationRows:
    """The rows of a location's public models."""
    info = entry.location
    return LocationRows(
        LocationRow(info.id, info.name, info.visit_count, info.episodes),
        tuple([memory_row_of(memory) for memory in entry.memories]),
    )
