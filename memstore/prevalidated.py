"""Build domain objects from values of the exact types, without a second pydantic pass.

``Memory(...)`` validates every field through pydantic, including five Python validators;
the Memories.md parser builds thousands of memories per file, from values it has already
typed (enum members from lookup tables, ints from digit runs). The functions here give
exactly what the model constructor would give, faster in that case:

- when every value has its field's exact type and visibly meets every rule of the model
  (the same rules, checked here one by one), the object is assembled the way
  ``BaseModel.model_construct`` assembles it;
- in every other case (a string for an enum, a bool for an int, a broken rule, a lone
  surrogate that pydantic refuses) the model constructor is called and decides, so the
  result or the ``ValidationError`` is the constructor's.

``tests/test_prevalidated.py`` checks that equivalence with hypothesis, valid and invalid
values alike.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

from memstore.models import (
    TEXT_MAX,
    TITLE_MAX,
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    blank_for_sqlite,
    parse_turns,
)

__all__ = [
    "memory_from_fields",
    "typed_memory",
    "location_from_fields",
    "location_memories",
    "typed_location_memories",
]

_Model = TypeVar("_Model", bound=BaseModel)
_SUPERSEDED = Status.SUPERSEDED
#: Lone surrogates: Python strings may hold them, pydantic refuses them.
_SURROGATE = re.compile("[\ud800-\udfff]")
_MEMORY_FIELDS = frozenset(Memory.model_fields)
_LOCATION_FIELDS = frozenset(LocationInfo.model_fields)
_LOCATION_MEMORIES_FIELDS = frozenset(LocationMemories.model_fields)


# The instance slots of every pydantic model, set directly as ``model_construct`` does.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
#: Memory's fields in their declared order, the four supersession fields None.
_NO_LINKS: dict[str, Any] = dict.fromkeys(Memory.model_fields)


def _assemble(cls: type[_Model], values: dict[str, Any], fields: frozenset[str]) -> _Model:
    """What ``cls.model_construct(**values)`` does when ``values`` names every field."""
    instance = _new(cls)  # BaseModel keeps object.__new__
    _set_dict(instance, values)
    _set_fields_set(instance, set(fields))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def _plain_str(value: object) -> bool:
    """A str (not a subclass) that pydantic takes as it is."""
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


def _optional_str(value: object) -> bool:
    return value is None or _plain_str(value)


def _optional_int(value: object, minimum: int) -> bool:
    return value is None or (type(value) is int and value >= minimum)


def _turns_ok(turns: str) -> bool:
    try:
        parse_turns(turns)
    except ValueError:
        return False
    return True


def _values_hold(title: str, text: str, episode: int, turns: str) -> bool:
    """Whether the values (of their exact types) meet Memory's rules for them."""
    return (
        (title.isascii() or _SURROGATE.search(title) is None)
        and 0 < len(title) <= TITLE_MAX
        # Memory._title_clean: "title must not be blank"
        and (not title.isspace() if "\x00" not in title else not blank_for_sqlite(title))
        and (text.isascii() or _SURROGATE.search(text) is None)
        and len(text) <= TEXT_MAX
        and episode >= 1
        and ((turns.isdigit() and turns.isascii()) or _turns_ok(turns))
    )


def _memory(
    category: Category,
    title: str,
    text: str,
    episode: int,
    turns: str,
    score_change: int | None,
    persistence: Persistence,
    status: Status,
    superseded_by: str | None,
    superseded_at_turn: int | None,
    superseded_at_episode: int | None,
    invalidation_reason: str | None,
) -> Memory:
    """A Memory of values already checked against every rule of the model."""
    return _assemble(
        Memory,
        {
            "category": category,
            "title": title,
            "text": text,
            "episode": episode,
            "turns": turns,
            "score_change": score_change,
            "persistence": persistence,
            "status": status,
            "superseded_by": superseded_by,
            "superseded_at_turn": superseded_at_turn,
            "superseded_at_episode": superseded_at_episode,
            "invalidation_reason": invalidation_reason,
        },
        _MEMORY_FIELDS,
    )


def typed_memory(
    category: Category,
    title: str,
    text: str,
    episode: int,
    turns: str,
    score_change: int | None,
    persistence: Persistence,
    status: Status,
) -> Memory | None:
    """A memory with no supersession from values already of their fields' exact types.

    For a caller that made the values itself (the canonical Memories.md reader: enum
    members from lookup tables, ints from digit runs, strs from the file), and so skips
    the type checks of ``memory_from_fields``. Returns None when a value breaks a rule of
    ``Memory`` (a blank or too long title, episode 0, a turn range that ends before it
    starts, ...): call ``Memory(...)`` for the error. Otherwise the memory equals
    ``Memory(...)`` given all twelve fields, the four supersession fields as None.
    """
    if not _values_hold(title, text, episode, turns):
        return None
    values = _NO_LINKS.copy()  # a copy and eight stores: cheaper than a 12-key literal
    values["category"] = category
    values["title"] = title
    values["text"] = text
    values["episode"] = episode
    values["turns"] = turns
    values["score_change"] = score_change
    values["persistence"] = persistence
    values["status"] = status
    return _assemble(Memory, values, _MEMORY_FIELDS)


def memory_from_fields(
    category: Category,
    title: str,
    text: str,
    episode: int,
    turns: str,
    score_change: int | None,
    persistence: Persistence,
    status: Status,
    superseded_by: str | None = None,
    superseded_at_turn: int | None = None,
    superseded_at_episode: int | None = None,
    invalidation_reason: str | None = None,
) -> Memory:
    """``Memory(category=category, title=title, ...)``: the same result or ValidationError."""
    if (
        type(category) is Category
        and type(persistence) is Persistence
        and type(status) is Status
        and type(title) is str
        and type(text) is str
        and type(episode) is int  # not bool, not a subclass
        and type(turns) is str
        and (score_change is None or type(score_change) is int)
        and _values_hold(title, text, episode, turns)
        and (
            # the common case: no supersession at all
            (
                superseded_by is None
                and invalidation_reason is None
                and superseded_at_turn is None
                and superseded_at_episode is None
            )
            or (
                _optional_str(superseded_by)
                and _optional_str(invalidation_reason)
                # Memory._reason_clean
                and (invalidation_reason is None or not blank_for_sqlite(invalidation_reason))
                and _optional_int(superseded_at_turn, 0)
                and _optional_int(superseded_at_episode, 1)
                # Memory._supersession_consistent
                and (superseded_by is None or invalidation_reason is None)
                and (
                    status is _SUPERSEDED or (superseded_by is None and invalidation_reason is None)
                )
            )
        )
    ):
        return _memory(
            category,
            title,
            text,
            episode,
            turns,
            score_change,
            persistence,
            status,
            superseded_by,
            superseded_at_turn,
            superseded_at_episode,
            invalidation_reason,
        )
    return Memory(
        category=category,
        title=title,
        text=text,
        episode=episode,
        turns=turns,
        score_change=score_change,
        persistence=persistence,
        status=status,
        superseded_by=superseded_by,
        superseded_at_turn=superseded_at_turn,
        superseded_at_episode=superseded_at_episode,
        invalidation_reason=invalidation_reason,
    )


def location_from_fields(
    id: int,  # noqa: A002 - the field's name
    name: str,
    visit_count: int,
    episodes: tuple[int, ...],
) -> LocationInfo:
    """``LocationInfo(id=id, name=name, ...)``: the same result or ValidationError."""
    if (
        type(id) is int
        and id >= 0
        and _plain_str(name)
        and type(visit_count) is int
        and visit_count >= 0
        and type(episodes) is tuple
        and all(type(episode) is int for episode in episodes)
    ):
        return _assemble(
            LocationInfo,
            {
                "id": id,
                "name": name,
                "visit_count": visit_count,
                "episodes": tuple(sorted(set(episodes))),  # LocationInfo._sorted_unique
            },
            _LOCATION_FIELDS,
        )
    return LocationInfo(id=id, name=name, visit_count=visit_count, episodes=episodes)


def location_memories(location: LocationInfo, memories: tuple[Memory, ...]) -> LocationMemories:
    """``LocationMemories(location=location, memories=memories)``: the same result or error.

    Pydantic takes model instances as they are, but runs their model validator again;
    so does this (``Memory._supersession_consistent``'s two rules).
    """
    if (
        type(location) is LocationInfo
        and type(memories) is tuple
        and all(
            type(memory) is Memory
            and (memory.superseded_by is None or memory.invalidation_reason is None)
            and (
                memory.status is _SUPERSEDED
                or (memory.superseded_by is None and memory.invalidation_reason is None)
            )
            for memory in memories
        )
    ):
        return _assemble(
            LocationMemories,
            {"location": location, "memories": memories},
            _LOCATION_MEMORIES_FIELDS,
        )
    return LocationMemories(location=location, memories=memories)


def typed_location_memories(
    location: LocationInfo, memories: tuple[Memory, ...]
) -> LocationMemories:
    """``LocationMemories`` of a location and memories that the caller built itself, through
    the checked builders here or the model constructors (so their rules hold already)."""
    return _assemble(
        LocationMemories, {"location": location, "memories": memories}, _LOCATION_MEMORIES_FIELDS
    )
