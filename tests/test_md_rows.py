"""The plain rows of memories and locations (memstore.models) follow the models' rules.

``memory_row_problem`` and ``location_row_problem`` check a row against the one rule table
(``MEMORY_RULES``, ``LOCATION_RULES``) that ``Memory`` and ``LocationInfo`` use; the
properties here prove that a row passes exactly when pydantic accepts its values as they
are, for right, wrong and borderline values alike.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memstore.md_rows import (
    LocationRow,
    LocationRows,
    MemoryRow,
    location_memories_of_rows,
    location_row_problem,
    location_rows_of,
    memory_of_row,
    memory_row_of,
    memory_row_problem,
)
from memstore.models import (
    MEMORY_RULES,
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
)

PROPERTY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class StrSubclass(str):
    pass


# Values of every kind a row may meet: right, wrong and borderline.
some_strings = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", " ", "\t\n", "ok", "\ud800 lone surrogate", "x" * 500, "x" * 501]),
    st.sampled_from(["é" * 500, "é" * 501, "x" * 20_000, "x" * 20_001, "\u00a0", "\u3000"]),
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
def memory_values(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-typed values, with one to three fields of any kind now and then."""
    status = draw(st.sampled_from(Status))
    values: dict[str, Any] = {
        "category": draw(st.sampled_from(Category)),
        "title": draw(st.text(min_size=1, max_size=40)),
        "text": draw(st.text(max_size=60)),
        "episode": draw(st.integers(1, 50)),
        "turns": draw(st.sampled_from(["1", "23-24"]) | st.integers(0, 500).map(str)),
        "score_change": draw(st.none() | st.integers(-50, 50)),
        "persistence": draw(st.sampled_from(Persistence)),
        "status": status,
        "superseded_by": None,
        "superseded_at_turn": None,
        "superseded_at_episode": None,
        "invalidation_reason": None,
    }
    if status is Status.SUPERSEDED and draw(st.booleans()):
        values["superseded_at_turn"] = draw(st.integers(0, 500))
        values["superseded_at_episode"] = draw(st.integers(1, 50))
        link = draw(st.sampled_from(["superseded_by", "invalidation_reason", None]))
        if link is not None:
            values[link] = draw(st.text(max_size=20))
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
    for name in draw(st.lists(st.sampled_from(sorted(wild)), max_size=3)):
        values[name] = draw(wild[name])
    return values


def accepted_unchanged(model: type[Any], values: dict[str, Any]) -> bool:
    """Whether pydantic accepts the values and keeps each of them as it is (same type)."""
    try:
        built = model(**values)
    except (ValidationError, TypeError):
        return False
    return all(
        type(getattr(built, name)) is type(value) and getattr(built, name) == value
        for name, value in values.items()
    )


@PROPERTY
@given(memory_values())
def test_a_memory_row_passes_exactly_when_the_model_accepts_its_values(
    values: dict[str, Any],
) -> None:
    row = MemoryRow(**values)

    assert (memory_row_problem(row) is None) == accepted_unchanged(Memory, values)


@PROPERTY
@given(memory_values())
def test_typed_values_are_refused_by_the_row_check_exactly_when_the_model_refuses_them(
    values: dict[str, Any],
) -> None:
    """Values of the row's own types (enum members, exact str and int): the model never
    changes them, so it accepts exactly the rows that pass."""
    typed = all(
        value is None or type(value) is MEMORY_RULES[name].type for name, value in values.items()
    )
    if not typed:
        return
    try:
        Memory(**values)
        model_accepts = True
    except ValidationError:
        model_accepts = False
    assert (memory_row_problem(MemoryRow(**values)) is None) == model_accepts


@PROPERTY
@given(
    st.one_of(st.integers(-2, 10**6), st.sampled_from([True, "3", 2.0])),
    some_strings,
    st.one_of(st.integers(-2, 10**4), st.just(True)),
    st.one_of(
        st.lists(st.integers(-3, 100), max_size=5).map(lambda e: tuple(sorted(set(e)))),
        st.lists(st.integers(1, 100), max_size=3),  # a list, not a tuple
        st.just((1, True)),
        st.just(("2",)),
    ),
)
def test_a_location_row_passes_exactly_when_the_model_accepts_its_values(
    location_id: Any, name: Any, visits: Any, episodes: Any
) -> None:
    values = {"id": location_id, "name": name, "visit_count": visits, "episodes": episodes}

    passes = location_row_problem(LocationRow(**values)) is None

    assert passes == accepted_unchanged(LocationInfo, values)


def test_rows_and_models_convert_both_ways_without_loss() -> None:
    memory = Memory(
        category="DANGER",
        title="Troll",
        text="It hits hard.",
        episode=2,
        turns="23-24",
        persistence="permanent",
        status="SUPERSEDED",
        invalidation_reason="it left",
        superseded_at_turn=30,
        superseded_at_episode=2,
    )
    row = memory_row_of(memory)

    assert memory_row_problem(row) is None
    assert memory_of_row(row) == memory
    assert row.turn_start == 23 and row.turn_end == 24
    entry = LocationMemories(
        location=LocationInfo(id=3, name="Room", visit_count=1, episodes=(2, 1, 2)),
        memories=(memory, memory),
    )
    assert location_memories_of_rows(location_rows_of(entry)) == entry
    assert location_rows_of(entry) == LocationRows(LocationRow(3, "Room", 1, (1, 2)), (row, row))


def test_a_row_the_model_refuses_names_the_broken_rule() -> None:
    base = MemoryRow(Category.NOTE, "T", "x", 1, "1", None, Persistence.CORE)

    assert memory_row_problem(base._replace(title=" ")) == "title: title must not be blank"
    assert memory_row_problem(base._replace(episode=0)) == "episode: less than 1"
    assert memory_row_problem(base._replace(category="NOTE")) == "category: str is not Category"
    assert "ends before it starts" in str(memory_row_problem(base._replace(turns="5-4")))
    assert memory_row_problem(base._replace(superseded_by="Other")) == (
        "only a SUPERSEDED memory can name a successor or a reason"
    )
    with pytest.raises(ValidationError):
        memory_of_row(base._replace(episode=0))
