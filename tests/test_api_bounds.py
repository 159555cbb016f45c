"""The public API's edges: a closed store, and integers past the database's 64-bit range.

Each call here is a caller's mistake. It gets memstore's own one-line error (StoreClosed,
or ValueError for a bad argument), never the driver's (sqlalchemy's ResourceClosedError,
sqlite3's OverflowError), and loses no stored data.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memstore import MemstoreError, SimpleMemoryManager, StoreClosed, ZMachineContext
from memstore.flagged import FlaggedMemories
from memstore.md_rows import MemoryRow, memory_row_problem
from memstore.models import INT64_MAX, INT64_MIN, Category, Persistence
from memstore.rows import Bookkeeping
from memstore.store import MemoryStore
from tests.conftest import note

TOO_BIG = 2**63
TOO_SMALL = -(2**63) - 1


def one_line_value_error(call: Callable[[], object], *needles: str) -> str:
    """The ValueError ``call`` raises: one line, naming each of ``needles``."""
    with pytest.raises(ValueError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message, message
    assert not isinstance(raised.value, OverflowError)
    for needle in needles:
        assert needle in message, message
    return message


# --- a closed store -----------------------------------------------------------------------


def closed_store(db_path: Path) -> tuple[MemoryStore, SimpleMemoryManager]:
    with MemoryStore.open(db_path) as store:
        store.add_memory(1, "Room", note("Kept"))
        manager = SimpleMemoryManager(store)
        manager.get_location_memory(1)
    return store, manager


CLOSED_CALLS: dict[str, Callable[[MemoryStore, SimpleMemoryManager], object]] = {
    "add_memory": lambda s, _m: s.add_memory(1, "Room", note("Late")),
    "add_memory ephemeral": lambda s, _m: s.add_memory(1, "Room", note("Late", "ephemeral")),
    "get_location_memory": lambda s, _m: s.get_location_memory(1),
    "memories": lambda s, _m: s.memories(1),
    "get_status": lambda s, _m: s.get_status(),
    "reset_episode": lambda s, _m: s.reset_episode(),
    "invalidate_memory": lambda s, _m: s.invalidate_memory(1, "Kept", "why", turn=1),
    "transaction": lambda s, _m: s.transaction(write=False).__enter__(),
    "flagged add": lambda s, _m: FlaggedMemories(s).add_flagged_memory("A note", 5, 1, 1, "R"),
    "manager.get_location_memory": lambda _s, m: m.get_location_memory(1),
    "manager.reset_episode": lambda _s, m: m.reset_episode(),
    "manager.get_status": lambda _s, m: m.get_status(),
}


@pytest.mark.parametrize("name", sorted(CLOSED_CALLS))
def test_a_closed_store_says_it_was_closed_in_one_line(db_path: Path, name: str) -> None:
    store, manager = closed_store(db_path)
    assert store.closed
    with pytest.raises(StoreClosed) as raised:
        CLOSED_CALLS[name](store, manager)
    assert isinstance(raised.value, MemstoreError)
    message = str(raised.value)
    assert "\n" not in message and "closed" in message, message
    with MemoryStore.open(db_path) as again:  # nothing stored was lost
        assert [m.title for m in again.memories(1)] == ["Kept"]


def test_closing_twice_is_harmless(db_path: Path) -> None:
    store = MemoryStore.open(db_path)
    store.close()
    store.close()
    assert store.closed


# --- integers past 64 bits: the store -----------------------------------------------------


def test_the_64_bit_limits_are_sqlites() -> None:
    assert (INT64_MIN, INT64_MAX) == (-(2**63), 2**63 - 1)


@pytest.mark.parametrize("location_id", [TOO_BIG, 2**100])
def test_a_location_id_past_64_bits_is_a_value_error_everywhere(
    store: MemoryStore, location_id: int
) -> None:
    store.add_memory(1, "Room", note("Kept"))
    calls: list[Callable[[], object]] = [
        lambda: store.add_memory(location_id, "Room", note("Far")),
        lambda: store.get_location_memory(location_id),
        lambda: store.memories(location_id),
        lambda: store.memories(location_id, include_superseded=True),
        lambda: store.location(location_id),
        lambda: store.history(location_id, "Kept"),
        lambda: store.get_memory_breakdown(location_id),
        lambda: store.get_persistent_count(location_id),
        lambda: store.get_ephemeral_count(location_id),
        lambda: store.record_visit(location_id, "Room", 1),
        lambda: store.supersede_memory(location_id, "Room", "Kept", note("New")),
        lambda: store.invalidate_memory(location_id, "Kept", "why"),
        lambda: store.apply_synthesis(
            location_id, "Room", new_memory=note("New"), episode=1, turn=1
        ),
    ]
    for call in calls:
        one_line_value_error(call, "location_id")
    assert [m.title for m in store.memories(1)] == ["Kept"]


def test_the_largest_64_bit_location_id_is_stored(store: MemoryStore) -> None:
    assert store.add_memory(INT64_MAX, "Edge", note("At the edge"))
    assert "At the edge" in store.get_location_memory(INT64_MAX)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("episode", TOO_BIG),
        ("score_change", TOO_BIG),
        ("score_change", TOO_SMALL),
        ("turns", str(TOO_BIG)),
        ("turns", f"1-{TOO_BIG}"),
    ],
)
def test_a_memory_whose_numbers_do_not_fit_is_refused_by_the_model(
    store: MemoryStore, field: str, value: object
) -> None:
    """The limits are MEMORY_RULES' (models): a Memory the database cannot hold is never
    made, so no store call meets one."""
    store.add_memory(1, "Room", note("Old"))
    with pytest.raises(ValidationError, match=field):
        note("Huge", **{field: value})
    values: dict[str, Any] = {
        "category": Category.NOTE,
        "title": "Huge",
        "text": "x",
        "episode": 1,
        "turns": "5",
        "score_change": 0,
        "persistence": Persistence.PERMANENT,
    }
    values[field] = value
    assert memory_row_problem(MemoryRow(**values)) is not None  # the plain row's check agrees
    assert [m.title for m in store.memories(1)] == ["Old"]
    assert store.memories(1)[0].status.value == "ACTIVE"


def test_the_extremes_of_a_64_bit_score_change_are_stored(store: MemoryStore) -> None:
    assert store.add_memory(1, "Room", note("Most", score_change=INT64_MAX))
    assert store.add_memory(1, "Room", note("Least", score_change=INT64_MIN))
    assert [m.score_change for m in store.memories(1)] == [INT64_MAX, INT64_MIN]


def test_clock_values_past_64_bits_are_refused(store: MemoryStore) -> None:
    store.add_memory(1, "Room", note("Kept"))
    one_line_value_error(lambda: store.invalidate_memory(1, "Kept", "why", turn=TOO_BIG), "turn")
    one_line_value_error(
        lambda: store.invalidate_memory(1, "Kept", "why", turn=1, episode=TOO_BIG), "episode"
    )
    one_line_value_error(lambda: store.record_visit(1, "Room", TOO_BIG), "episode")
    one_line_value_error(lambda: store.locations_with_memory(TOO_BIG), "episode")
    assert [m.title for m in store.memories(1)] == ["Kept"]


# --- integers past 64 bits: flagged memories ----------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("turn", TOO_BIG),
        ("episode", TOO_BIG),
        ("score", TOO_BIG),
        ("score", TOO_SMALL),
        ("moves", TOO_BIG),
        ("location_id", TOO_BIG),
    ],
)
def test_a_flagged_memory_whose_numbers_do_not_fit_is_refused(
    store: MemoryStore, field: str, value: int
) -> None:
    flagged = FlaggedMemories(store)
    values: dict[str, Any] = {"turn": 3, "location_id": 1, "location_name": "Room"}
    values[field] = value
    one_line_value_error(lambda: flagged.add_flagged_memory("A note", 5, **values), field)
    one_line_value_error(lambda: flagged.top(TOO_BIG), "limit")
    one_line_value_error(lambda: flagged.by_location_id(TOO_BIG), "location_id")
    assert flagged.count() == 0


# --- integers past 64 bits: the manager ---------------------------------------------------


@pytest.mark.parametrize(
    "context",
    [
        {"location_before": 1, "location_after": 1, "score_after": TOO_BIG},
        {"location_before": 1, "location_after": 1, "score_before": TOO_SMALL},
        {"location_before": 1, "location_after": TOO_BIG},
        {"location_before": TOO_BIG, "location_after": 1},
        # each fits, their difference (the memory's score_change) does not
        {"location_before": 1, "location_after": 1, "score_before": INT64_MIN, "score_after": 1},
    ],
)
def test_the_manager_refuses_a_context_whose_numbers_do_not_fit_before_recording_anything(
    store: MemoryStore, context: dict[str, int]
) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    one_line_value_error(
        lambda: manager.record_action_outcome(
            1, "Room", "wait", "Time passes.", ZMachineContext(**context)
        ),
        "z_machine_context",
    )
    assert manager.turn == 0  # the turn was not counted: nothing was recorded
    # the agent loop goes on: the next, sound turn is recorded and written
    manager.record_action_outcome(
        1, "Room", "take lamp", "Taken.", ZMachineContext(location_before=1, location_after=1)
    )
    manager.flush()
    assert [record["turn"] for record in store.turn_records()] == [1]


def test_the_manager_refuses_memory_tokens_past_64_bits(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    one_line_value_error(
        lambda: manager.record_action_outcome(
            1, "Room", "wait", "Time passes.", {}, memory_tokens=TOO_BIG
        ),
        "memory_tokens",
    )
    assert manager.turn == 0
    manager.flush()
    assert store.turn_records() == []


def test_the_manager_refuses_a_location_id_past_64_bits(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    one_line_value_error(lambda: manager.get_location_memory(TOO_BIG), "location_id")
    one_line_value_error(
        lambda: manager.record_action_outcome(TOO_BIG, "Room", "wait", "Time passes.", {}),
        "location_id",
    )


@pytest.mark.parametrize(
    "update",
    [
        {"episode": 2**63},
        {"episode": 0},
        {"episode": 1.5},
        {"score_change": 2**64},
        {"category": "FOO"},
        {"text": "x" * 30_000},
        {"title": "y" * 600},
        {"turns": "5 "},
        {"text": None},
    ],
    ids=repr,
)
def test_a_memory_that_skipped_validation_is_refused_at_the_store(
    store: MemoryStore, update: dict[str, Any]
) -> None:
    """``model_copy(update=...)`` and ``model_construct`` skip pydantic's checks: the store
    checks the memory's row again, so nothing unreadable is ever stored; what the model
    would refuse is one ValueError line."""
    store.add_memory(1, "Room", note("Old"))
    bad = note("Bad").model_copy(update=update)
    one_line_value_error(lambda: store.add_memory(1, "Room", bad), "breaks a rule of Memory")
    one_line_value_error(
        lambda: store.supersede_memory(1, "Room", "Old", bad), "breaks a rule of Memory"
    )
    assert [m.title for m in store.memories(1)] == ["Old"]
    assert store.export_snapshot()  # still readable


def test_a_memory_that_skipped_validation_is_stored_as_the_model_reads_it(
    store: MemoryStore,
) -> None:
    """What ``Memory(...)`` itself would take ("permanent" for Persistence.PERMANENT, "3"
    for 3) is stored normalised, as if the memory had been made so."""
    copy = note("Copied", persistence="ephemeral").model_copy(
        update={"persistence": "permanent", "episode": "3", "status": "tentative"}
    )
    assert store.add_memory(1, "Room", copy)
    (stored,) = store.memories(1)
    assert (stored.persistence, stored.episode, stored.status.value) == (
        Persistence.PERMANENT,
        3,
        "TENTATIVE",
    )
    assert store.get_persistent_count(1) == 1


@pytest.mark.parametrize(
    ("visit", "error"),
    [
        ((1, "Room", 0), ValueError),
        ((1, "Room", 1.5), ValueError),
        ((1, "Room", 2**63), ValueError),
        ((2**63, "Room", 1), ValueError),
        ((1, None, 1), TypeError),
    ],
    ids=repr,
)
def test_buffered_visits_are_checked_whichever_write_carries_them(
    store: MemoryStore, visit: tuple[Any, Any, Any], error: type[Exception]
) -> None:
    """The manager hands its buffered visits to the next memory write (apply_synthesis)
    or to write_bookkeeping: both check them before any SQL (a REAL episode once got in
    through the first, and the database could no longer be exported)."""
    with pytest.raises(error) as raised:
        store.apply_synthesis(
            1,
            "Room",
            new_memory=note("Carried"),
            episode=1,
            turn=1,
            bookkeeping=Bookkeeping(visits=[visit]),
        )
    assert "\n" not in str(raised.value)
    with pytest.raises(error):
        store.write_bookkeeping(Bookkeeping(visits=[visit]))
    assert store.memories(1) == [] and store.locations() == []
