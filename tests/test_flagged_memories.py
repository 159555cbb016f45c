"""FlaggedMemories: capture, de-duplication, importance, validation, reads, persistence."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from memstore.flagged import NEAR_DUPLICATE_CANDIDATES, FlaggedMemories, FlaggedMemory, is_similar
from memstore.store import MemoryStore

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def flagged(store: MemoryStore) -> FlaggedMemories:
    return FlaggedMemories(store, session_id="session-a")


def add(flagged: FlaggedMemories, content: str, importance: int = 100, **fields: object) -> bool:
    values: dict[str, object] = {
        "turn": 5,
        "location_id": 180,
        "location_name": "West of House",
    }
    values.update(fields)
    return flagged.add_flagged_memory(content, importance, **values)  # type: ignore[arg-type]


# --- capture ----------------------------------------------------------------------------------


def test_a_memory_is_stored_with_every_field(flagged: FlaggedMemories) -> None:
    assert flagged.add_flagged_memory(
        "  Mailbox contains a leaflet  ",
        300,
        5,
        180,
        " West of House ",
        score=0,
        moves=5,
        episode=2,
    )
    [memory] = flagged.all()
    assert isinstance(memory, FlaggedMemory)
    assert memory.content == "Mailbox contains a leaflet"  # stripped
    assert (memory.importance, memory.turn, memory.location_id) == (300, 5, 180)
    assert memory.location_name == "West of House"
    assert (memory.score, memory.moves, memory.episode) == (0, 5, 2)
    assert memory.session_id == "session-a"
    assert memory.created_at.startswith("20")
    assert memory.location_label == "West of House (#180)"
    assert str(memory) == (
        "[Turn 5 @ West of House (#180)] Mailbox contains a leaflet (importance: 300)"
    )


def test_flagged_memory_is_frozen(flagged: FlaggedMemories) -> None:
    add(flagged, "Mailbox contains a leaflet")
    memory = flagged.all()[0]
    with pytest.raises(ValidationError):
        memory.importance = 5  # type: ignore[misc]


# "\x00": blank to SQLite, whose length() stops at the first NUL
@pytest.mark.parametrize("content", ["", "   ", "\n\t ", "\x00", " \x00 note"])
def test_empty_content_is_ignored(flagged: FlaggedMemories, content: str) -> None:
    assert add(flagged, content) is False
    assert flagged.count() == 0


def test_empty_content_is_ignored_even_without_an_importance(flagged: FlaggedMemories) -> None:
    # a turn that flags nothing may carry no importance at all
    assert flagged.add_flagged_memory("", None, 3, 180, "West of House") is False  # type: ignore[arg-type]
    assert flagged.count() == 0


def test_non_string_content_is_a_type_error(flagged: FlaggedMemories) -> None:
    with pytest.raises(TypeError, match="content must be a str"):
        add(flagged, 42)  # type: ignore[arg-type]


def test_session_id_defaults_to_a_fresh_uuid_per_instance(store: MemoryStore) -> None:
    first, second = FlaggedMemories(store), FlaggedMemories(store)
    assert len(first.session_id) == 32 and first.session_id != second.session_id
    add(first, "Mailbox contains a leaflet")
    assert flagged_session(store) == [first.session_id]


def flagged_session(store: MemoryStore) -> list[str]:
    return [m.session_id for m in FlaggedMemories(store).all()]


# --- de-duplication ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "again",
    [
        "Mailbox contains a leaflet",
        "MAILBOX contains a LEAFLET",
        "  mailbox   contains\ta\nleaflet ",
    ],
)
def test_exact_case_and_whitespace_duplicates_are_not_stored(
    flagged: FlaggedMemories, again: str
) -> None:
    assert add(flagged, "Mailbox contains a leaflet") is True
    assert add(flagged, again) is False
    assert [m.content for m in flagged.all()] == ["Mailbox contains a leaflet"]


def test_containment_of_at_least_80_percent_is_a_duplicate(flagged: FlaggedMemories) -> None:
    longer = "The troll blocks the east passage"  # 33 characters
    assert add(flagged, longer)
    contained = "troll blocks the east passage"  # 29/33 = 88%
    assert add(flagged, contained) is False
    containing = longer + " now"  # 33/37 = 89%
    assert add(flagged, containing) is False
    assert flagged.count() == 1


def test_containment_threshold_is_the_spec_s_more_than_80_percent() -> None:
    # review S6 A F10: it was 80% or more; spec 001's _is_similar says "> 0.8"
    assert not is_similar("abcd", "abcde")  # 4/5 = 80%
    assert not is_similar("abcde", "abcd")
    assert is_similar("abcdefghi", "abcdefghij")  # 90%
    assert not is_similar("abc", "abcde")  # 60%


def test_a_short_substring_is_a_different_memory(flagged: FlaggedMemories) -> None:
    assert add(flagged, "The troll blocks the east passage of the cellar")
    assert add(flagged, "troll blocks the east passage") is True  # 29/47 = 62%
    assert flagged.count() == 2


def test_a_higher_importance_duplicate_raises_the_stored_importance(
    flagged: FlaggedMemories,
) -> None:
    add(flagged, "Mailbox contains a leaflet", 300, turn=5)
    assert add(flagged, "mailbox contains a leaflet", 700, turn=9) is False
    [memory] = flagged.all()
    assert memory.importance == 700
    assert memory.turn == 5 and memory.content == "Mailbox contains a leaflet"


def test_a_lower_importance_duplicate_does_not_lower_it(flagged: FlaggedMemories) -> None:
    add(flagged, "Mailbox contains a leaflet", 700)
    assert add(flagged, "Mailbox contains a leaflet", 50) is False
    assert flagged.all()[0].importance == 700


def test_duplicates_are_found_across_sessions(store: MemoryStore) -> None:
    add(FlaggedMemories(store, "one"), "Mailbox contains a leaflet", 100)
    assert add(FlaggedMemories(store, "two"), "Mailbox contains a leaflet", 400) is False
    [memory] = FlaggedMemories(store).all()
    assert (memory.session_id, memory.importance) == ("one", 400)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("importance", [0, 1001, -5, "5", True, False, 5.0, None])
def test_invalid_importance_is_rejected_with_a_clear_error(
    flagged: FlaggedMemories, importance: object
) -> None:
    with pytest.raises(ValueError, match=r"importance must be an int from 1 to 1000"):
        add(flagged, "Mailbox contains a leaflet", importance)  # type: ignore[arg-type]
    assert flagged.count() == 0


@pytest.mark.parametrize("importance", [1, 1000])
def test_importance_bounds_are_accepted(flagged: FlaggedMemories, importance: int) -> None:
    assert add(flagged, f"Boundary {importance}", importance)
    assert flagged.all()[0].importance == importance


@pytest.mark.parametrize("location_id", ["180", 180.0, True, [180]])
def test_location_id_must_be_an_int(flagged: FlaggedMemories, location_id: object) -> None:
    with pytest.raises(TypeError, match="location_id must be an int"):
        add(flagged, "Mailbox contains a leaflet", location_id=location_id)
    assert flagged.count() == 0


def test_location_id_may_be_none(flagged: FlaggedMemories) -> None:
    assert add(flagged, "Somewhere dark", location_id=None, location_name="Darkness")
    memory = flagged.all()[0]
    assert memory.location_id is None and memory.location_label == "Darkness"


def test_negative_location_id_is_rejected(flagged: FlaggedMemories) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        add(flagged, "Mailbox contains a leaflet", location_id=-1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("turn", -1), ("turn", "3"), ("episode", 0), ("moves", -2), ("score", "10")],
)
def test_other_numbers_are_checked(flagged: FlaggedMemories, field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        add(flagged, "Mailbox contains a leaflet", **{field: value})


def test_location_name_must_be_a_string(flagged: FlaggedMemories) -> None:
    with pytest.raises(TypeError, match="location_name"):
        add(flagged, "Mailbox contains a leaflet", location_name=None)


# --- reading ----------------------------------------------------------------------------------


def populate(flagged: FlaggedMemories) -> None:
    add(flagged, "Mailbox contains a leaflet", 300, turn=5)
    add(
        flagged,
        "Brass lantern on the trophy case",
        800,
        turn=9,
        location_id=193,
        location_name="Living Room",
    )
    add(
        flagged,
        "A songbird sings in the trees",
        200,
        turn=12,
        location_id=34,
        location_name="Forest Path",
    )
    add(
        flagged,
        "The path winds north to a clearing",
        300,
        turn=14,
        location_id=36,
        location_name="forest path",
    )
    add(
        flagged,
        "Tree with a jewelled egg nest",
        900,
        turn=15,
        location_id=34,
        location_name="Forest Path",
    )


def test_all_and_top_are_by_importance_then_oldest(flagged: FlaggedMemories) -> None:
    populate(flagged)
    assert [m.importance for m in flagged.all()] == [900, 800, 300, 300, 200]
    ties = [m.content for m in flagged.all() if m.importance == 300]
    assert ties == ["Mailbox contains a leaflet", "The path winds north to a clearing"]
    assert [m.importance for m in flagged.top(2)] == [900, 800]
    assert flagged.top(0) == []
    assert len(flagged.top(50)) == 5
    assert flagged.count() == 5


def test_top_rejects_a_negative_limit(flagged: FlaggedMemories) -> None:
    with pytest.raises(ValueError, match="limit"):
        flagged.top(-1)


def test_by_location_id(flagged: FlaggedMemories) -> None:
    populate(flagged)
    assert [m.content for m in flagged.by_location_id(34)] == [
        "Tree with a jewelled egg nest",
        "A songbird sings in the trees",
    ]
    assert flagged.by_location_id(999) == []
    with pytest.raises(TypeError):
        flagged.by_location_id("34")  # type: ignore[arg-type]


def test_by_location_name_is_case_insensitive_and_groups_rooms(flagged: FlaggedMemories) -> None:
    populate(flagged)
    groups = flagged.by_location_name("  FOREST   path ")
    assert list(groups) == [34, 36]
    assert [m.importance for m in groups[34]] == [900, 200]
    assert [m.content for m in groups[36]] == ["The path winds north to a clearing"]
    assert list(flagged.by_location_name("living room")) == [193]
    assert flagged.by_location_name("Kitchen") == {}
    assert flagged.by_location_name("  ") == {}


def test_by_location_name_puts_memories_without_a_number_last(flagged: FlaggedMemories) -> None:
    add(flagged, "Dark and scary", 100, location_id=None, location_name="Darkness")
    add(flagged, "A grue lurks here", 500, location_id=7, location_name="darkness")
    assert list(flagged.by_location_name("Darkness")) == [7, None]


def test_stats_when_empty(flagged: FlaggedMemories) -> None:
    assert flagged.stats() == {
        "total_memories": 0,
        "avg_importance": 0.0,
        "locations_covered": 0,
        "top_location": None,
    }


def test_stats(flagged: FlaggedMemories) -> None:
    populate(flagged)
    stats = flagged.stats()
    assert stats["total_memories"] == 5
    assert stats["avg_importance"] == pytest.approx((300 + 800 + 200 + 300 + 900) / 5)
    assert stats["locations_covered"] == 4  # 180, 193, 34, 36: two rooms named Forest Path
    assert stats["top_location"] == "Forest Path (#34)"


# --- persistence ------------------------------------------------------------------------------


def test_memories_survive_reopening_the_store(db_path: Path) -> None:
    with MemoryStore.open(db_path) as first:
        flagged = FlaggedMemories(first, session_id="run-1")
        populate(flagged)
        add(flagged, "mailbox contains a leaflet", 650)  # raises 300 to 650
        before = flagged.all()
    with MemoryStore.open(db_path) as second:
        again = FlaggedMemories(second, session_id="run-2")
        assert again.all() == before
        assert again.by_location_id(180)[0].importance == 650
        assert add(again, "Mailbox contains a leaflet", 10) is False  # still a duplicate
        assert add(
            again, "The kitchen window is ajar", 400, location_id=205, location_name="Behind House"
        )
    rows = (
        sqlite3.connect(db_path)
        .execute("SELECT session_id, count(*) FROM flagged_memories GROUP BY session_id ORDER BY 1")
        .fetchall()
    )
    assert rows == [("run-1", 5), ("run-2", 1)]


def test_the_database_enforces_the_importance_range(db_path: Path) -> None:
    MemoryStore.open(db_path).close()
    conn = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO flagged_memories (content, importance, turn, location_name, episode, "
            "session_id, created_at) VALUES ('x', 1001, 1, 'Here', 1, 's', 'now')"
        )
    conn.close()


# --- de-duplication at scale: an index, a bounded candidate set, no scan under the lock -------


def traced_statements(store: MemoryStore, action: Callable[[], object]) -> list[str]:
    """Every SQL statement ``action`` ran on the store's connection, parameters expanded."""
    statements: list[str] = []
    with store.trace_sql(statements.append):
        action()
    return statements


def query_plan(db_path: Path, statement: str) -> list[str]:
    """The plan's steps, each table named without the ``main.`` the store's statements
    qualify it with (``SCAN flagged_memories``)."""
    conn = sqlite3.connect(db_path)
    try:
        return [
            row[3].replace(" main.", " ") for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")
        ]
    finally:
        conn.close()


def fill_flagged(db_path: Path, count: int, locations: int = 20) -> None:
    """``count`` distinct flagged memories spread over ``locations`` rooms (by hand, fast)."""
    conn = sqlite3.connect(db_path)
    with conn:
        conn.executemany(
            "INSERT INTO flagged_memories (content, content_key, importance, turn, location_id, "
            "location_name, episode, session_id, created_at) "
            "VALUES (?, ?, 100, 1, ?, 'Room', 1, 'fill', 'now')",
            [
                (f"Fact number {i} about room {i % locations}",) * 2 + (i % locations,)
                for i in range(count)
            ],
        )
    conn.close()


def reads_of_flagged(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and "flagged" in s]


@pytest.mark.parametrize(
    "content", ["A brand new fact", "fact number 7 about room 7", "Fact number 7 about room 7!"]
)
def test_the_duplicate_check_never_scans_the_table(
    store: MemoryStore, db_path: Path, content: str
) -> None:
    # new, an exact duplicate (case aside), a near duplicate (containment): each is found
    # through an index, never by reading every row
    fill_flagged(db_path, 500)
    flagged = FlaggedMemories(store)
    statements = traced_statements(
        store, lambda: add(flagged, content, 900, location_id=3, location_name="Room")
    )
    reads = reads_of_flagged(statements)
    assert reads
    for statement in reads:
        plan = query_plan(db_path, statement)
        assert not any(step.startswith("SCAN flagged_memories") for step in plan), (statement, plan)


def test_the_write_lock_is_held_only_for_index_lookups_and_the_write(
    store: MemoryStore, db_path: Path
) -> None:
    fill_flagged(db_path, 500)
    flagged = FlaggedMemories(store)
    statements = traced_statements(store, lambda: add(flagged, "A brand new fact", 900))
    begin = statements.index("BEGIN IMMEDIATE")
    locked = statements[begin : statements.index("COMMIT", begin) + 1]
    reads = reads_of_flagged(locked)
    assert reads, locked  # the exact duplicate is checked again under the lock
    for statement in reads:
        plan = query_plan(db_path, statement)
        assert not any(step.startswith("SCAN") for step in plan), (statement, plan)
        assert any(step.startswith("SEARCH flagged_memories") for step in plan), (statement, plan)
    # the exact check goes through the normalised text's index
    assert any(
        "ix_flagged_memories_content_key" in step
        for statement in reads
        for step in query_plan(db_path, statement)
    )


def test_the_normalised_text_is_stored_beside_the_content(
    flagged: FlaggedMemories, db_path: Path
) -> None:
    add(flagged, "  The Troll\tblocks   the EAST passage ")
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT content, content_key FROM flagged_memories").fetchall()
    conn.close()
    assert rows == [("The Troll\tblocks   the EAST passage", "the troll blocks the east passage")]


def test_exact_duplicates_are_found_anywhere_in_the_database(flagged: FlaggedMemories) -> None:
    add(flagged, "The grating is locked from below", 200, location_id=9, location_name="Clearing")
    for i in range(2 * NEAR_DUPLICATE_CANDIDATES):  # far more than the candidate cap
        assert add(flagged, f"Unrelated fact {i:04d} seen", 100, location_id=9)
    assert add(flagged, "the GRATING is locked from below", 600, location_id=77) is False
    assert flagged.by_location_id(9)[0].content == "The grating is locked from below"
    assert flagged.by_location_id(9)[0].importance == 600


def test_a_near_duplicate_at_another_location_sharing_its_start_is_found(
    flagged: FlaggedMemories,
) -> None:
    add(flagged, "The lamp is in the living room", 300, location_id=193)
    assert add(flagged, "The lamp is in the living room now", 500, location_id=5) is False
    assert add(flagged, "the lamp is in the living", 100, location_id=6) is False  # 25/30
    [memory] = flagged.all()
    assert (memory.location_id, memory.importance) == (193, 500)


def test_near_duplicates_are_looked_for_among_a_bounded_candidate_set(
    flagged: FlaggedMemories,
) -> None:
    # the documented limit: a containment that shares no start with the stored text is
    # found only among the NEAR_DUPLICATE_CANDIDATES most recent memories of the location
    add(flagged, "The troll blocks the east passage", 300, location_id=12)
    assert add(flagged, "troll blocks the east passage", 300, location_id=12) is False
    assert add(flagged, "troll blocks the east passage", 300, location_id=13) is True
    for i in range(NEAR_DUPLICATE_CANDIDATES):
        assert add(flagged, f"Later fact {i:04d} noted", 100, location_id=12)
    assert add(flagged, "he troll blocks the east passage", 300, location_id=12) is True


def _add_many(db: str, contents: list[str], start: float, results) -> None:  # type: ignore[no-untyped-def]
    while time.time() < start:
        time.sleep(0.001)
    try:
        with MemoryStore.open(db) as store:
            flagged = FlaggedMemories(store)
            stored = [
                flagged.add_flagged_memory(content, 100 + i, i, i % 5, f"Room {i % 5}")
                for i, content in enumerate(contents)
            ]
        results.put(stored)
    except Exception as exc:  # the test reports every failure
        results.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_adding_the_same_content_at_once_store_it_once(db_path: Path) -> None:
    MemoryStore.open(db_path).close()
    contents = [f"Process-shared fact {i}: the {i}th door opens" for i in range(60)]
    shouted = [content.upper() for content in contents]  # exact duplicates once normalised
    results = SPAWN.Queue()
    start = time.time() + 1.5  # both processes imported and waiting
    workers = [
        SPAWN.Process(target=_add_many, args=(str(db_path), texts, start, results))
        for texts in (contents, shouted)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    first, second = outcomes
    assert [a + b for a, b in zip(first, second, strict=True)] == [1] * len(contents)
    conn = sqlite3.connect(db_path)
    keys = conn.execute("SELECT content_key, count(*) FROM flagged_memories GROUP BY 1").fetchall()
    conn.close()
    assert sorted(keys) == sorted((content.lower(), 1) for content in contents)
