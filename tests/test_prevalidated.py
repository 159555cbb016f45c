"""The fast builders of memstore.prevalidated give exactly what the pydantic constructors give."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memstore.models import Category, LocationInfo, LocationMemories, Memory, Persistence, Status
from memstore.prevalidated import (
    location_from_fields,
    location_memories,
    memory_from_fields,
    typed_memory,
)

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class StrSubclass(str):
    pass


# Values of every kind the constructors may meet: right, wrong and borderline.
some_strings = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", " ", "\t\n", "ok", "\ud800 lone surrogate", "x" * 500, "x" * 501]),
    # blank to SQLite (its length() stops at a NUL), or not
    st.sampled_from(["\x00", " \x00note", "note\x00", "\x00\x00"]),
    st.just(StrSubclass("subclass")),
)
some_ints = st.one_of(
    st.integers(-3, 10**6),
    st.sampled_from([True, False, 0, 1, -1, 10**30]),
)
enum_like = st.one_of(
    st.sampled_from(list(Category) + list(Persistence) + list(Status)),
    st.sampled_from(["note", " SUCCESS ", "core", "Permanent", "tentative", "bogus", ""]),
    st.none(),
)
turn_strings = st.one_of(
    st.sampled_from(["0", "45", "23-24", "24-23", "45\n", "4 5", "", "-1", "٣", "²", "1-"]),
    st.integers(0, 500).map(str),
    st.integers(0, 500),
    st.just(True),
)
optional_strings = st.one_of(st.none(), some_strings)
optional_ints = st.one_of(st.none(), some_ints)


@st.composite
def memory_arguments(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-typed arguments, with one or two fields of any kind now and then."""
    status = draw(st.sampled_from(Status))
    arguments: dict[str, Any] = {
        "category": draw(st.sampled_from(Category)),
        "title": draw(st.text(min_size=1, max_size=40)),
        "text": draw(st.text(max_size=60)),
        "episode": draw(st.integers(1, 50)),
        "turns": draw(st.integers(0, 500).map(str)),
        "score_change": draw(st.none() | st.integers(-50, 50)),
        "persistence": draw(st.sampled_from(Persistence)),
        "status": status,
        "superseded_by": None,
        "superseded_at_turn": None,
        "superseded_at_episode": None,
        "invalidation_reason": None,
    }
    if status is Status.SUPERSEDED and draw(st.booleans()):
        arguments["superseded_at_turn"] = draw(st.integers(0, 500))
        arguments["superseded_at_episode"] = draw(st.integers(1, 50))
        link = draw(st.sampled_from(["superseded_by", "invalidation_reason", None]))
        if link is not None:
            arguments[link] = draw(st.text(max_size=20))
    wild = {
        "category": enum_like,
        "title": some_strings,
        "text": some_strings,
        "episode": some_ints,
        "turns": turn_strings,
        "score_change": optional_ints,
        "persistence": enum_like,
        "status": enum_like,
        "superseded_by": optional_strings,
        "superseded_at_turn": optional_ints,
        "superseded_at_episode": optional_ints,
        "invalidation_reason": optional_strings,
    }
    for name in draw(st.lists(st.sampled_from(sorted(wild)), max_size=2)):
        arguments[name] = draw(wild[name])
    return arguments


def outcome(build: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", build()
    except ValidationError as error:
        return "error", [(e["type"], e["loc"]) for e in error.errors()]
    except TypeError as error:  # check_location_id's answer to a bool or a str id
        return "type error", str(error)


def assert_same_instance(fast: Any, slow: Any) -> None:
    assert type(fast) is type(slow)
    assert fast == slow
    assert list(fast.__dict__) == list(slow.__dict__)  # the same field order
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_fields_set == slow.model_fields_set
    assert repr(fast) == repr(slow)
    assert hash(fast) == hash(slow)


@PROPERTY
@given(memory_arguments())
def test_memory_from_fields_equals_the_model_constructor(arguments: dict[str, Any]) -> None:
    slow = outcome(lambda: Memory(**arguments))
    fast = outcome(lambda: memory_from_fields(**arguments))

    assert fast[0] == slow[0]
    if slow[0] == "ok":
        assert_same_instance(fast[1], slow[1])
    else:
        assert fast[1] == slow[1]


@PROPERTY
@given(
    st.one_of(st.integers(-2, 10**6), st.sampled_from([True, "3", 2.0])),
    some_strings,
    st.one_of(st.integers(-2, 10**4), st.just(True)),
    st.one_of(
        st.lists(st.integers(-3, 100), max_size=5).map(tuple),
        st.lists(st.integers(1, 100), max_size=3),  # a list, not a tuple
        st.just((1, True)),
        st.just(("2",)),
    ),
)
def test_location_from_fields_equals_the_model_constructor(
    location_id: Any, name: Any, visits: Any, episodes: Any
) -> None:
    def slow() -> LocationInfo:
        return LocationInfo(id=location_id, name=name, visit_count=visits, episodes=episodes)

    def fast() -> LocationInfo:
        return location_from_fields(location_id, name, visits, episodes)

    expected = outcome(slow)
    got = outcome(fast)

    assert got[0] == expected[0]
    if expected[0] == "ok":
        assert_same_instance(got[1], expected[1])
    else:
        assert got[1] == expected[1]


def test_location_memories_equals_the_model_constructor() -> None:
    location = LocationInfo(id=3, name="Room", visit_count=1, episodes=(2, 1, 2))
    memory = Memory(category="NOTE", title="T", text="x", episode=1, turns="1", persistence="core")
    # model_construct skips validation: both builders must still refuse the inconsistency
    inconsistent = Memory.model_construct(**{**memory.model_dump(), "superseded_by": "Other"})

    assert_same_instance(
        location_memories(location, (memory, memory)),
        LocationMemories(location=location, memories=(memory, memory)),
    )
    for memories in [(inconsistent,), [memory], ("not a memory",)]:
        assert outcome(lambda: location_memories(location, memories)) == outcome(  # noqa: B023
            lambda: LocationMemories(location=location, memories=memories)  # noqa: B023
        )


def test_fast_built_memories_behave_like_validated_ones() -> None:
    arguments = {
        "category": Category.DANGER,
        "title": "Troll",
        "text": "It hits hard.",
        "episode": 2,
        "turns": "23-24",
        "score_change": None,
        "persistence": Persistence.PERMANENT,
        "status": Status.ACTIVE,
    }
    fast = memory_from_fields(**arguments)
    slow = Memory(**arguments)

    assert pickle.loads(pickle.dumps(fast)) == slow
    assert copy.deepcopy(fast) == slow
    changed = fast.model_copy(update={"title": "Troll room"})
    assert changed.title == "Troll room" and fast.title == "Troll"
    assert fast.model_fields_set is not memory_from_fields(**arguments).model_fields_set
    assert fast.turn_start == 23 and fast.turn_end == 24
    with pytest.raises(ValidationError):
        fast.title = "frozen"  # type: ignore[misc]


@PROPERTY
@given(
    st.sampled_from(Category),
    st.one_of(st.text(max_size=20), st.sampled_from(["", " \t", "\ud800", "t" * 500, "t" * 501])),
    st.one_of(st.text(max_size=40), st.sampled_from(["\udfff", "x" * 20_000, "x" * 20_001])),
    st.integers(-1, 5),
    st.one_of(
        st.integers(0, 99).map(str),
        st.sampled_from(["3-2", "2-3", "7-7", "45\n", "", "٣"]),
    ),
    st.none() | st.integers(-5, 5),
    st.sampled_from([Persistence.CORE, Persistence.PERMANENT]),
    st.sampled_from([Status.ACTIVE, Status.TENTATIVE]),
)
def test_typed_memory_is_none_exactly_when_the_model_refuses(
    category: Category,
    title: str,
    text: str,
    episode: int,
    turns: str,
    score: int | None,
    persistence: Persistence,
    status: Status,
) -> None:
    arguments = (category, title, text, episode, turns, score, persistence, status)
    names = ("category", "title", "text", "episode", "turns", "score_change")
    fields = dict(zip(names, arguments, strict=False))
    no_links = dict.fromkeys(
        ("superseded_by", "superseded_at_turn", "superseded_at_episode", "invalidation_reason")
    )
    expected = outcome(lambda: Memory(**fields, persistence=persistence, status=status, **no_links))

    built = typed_memory(*arguments)

    if expected[0] == "ok":
        assert built is not None
        assert_same_instance(built, expected[1])
    else:
        assert built is None
