"""The four gaps of the busy-database buffering (memstore.busy_buffer), each reproduced.

1. Nothing capped what waits: 500 refused turns held 2.2 MB. Now what waits stays within
   MAX_WAITING_SYNTHESES / MAX_WAITING_BYTES, the least valuable dropped first, counted.
2. Every triggered turn paid the busy timeout again. Now, after a refusal, a turn asks the
   store to write only once its write lock is seen free, and the first turn after that
   writes everything.
3. A busy stretch at an episode's start discarded those turns (the episode could not be
   numbered). Now they are played under a provisional number, renumbered before written.
4. A waiting memory could not be corrected by later turns. Now later syntheses see it.

Here another connection of this process holds the lock; tests/test_busy_processes.py does
the same from another process. The everyday loop runs one test of each gap (the others are
``slow``).
"""

from __future__ import annotations

import logging
import sqlite3
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_sound, write_lock_held
from test_review_busy_turns import go_north, look

import memstore.busy_buffer as busy_buffer
from memstore.manager import SimpleMemoryManager
from memstore.models import Status
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext

FIELD, HALL, KITCHEN = 1, 2, 5
BUSY_S = 0.15
NORTH = "'north' leads to Hall (2)"


@contextmanager
def file_locked(db: Path) -> Iterator[None]:
    """While the block runs, another connection holds the file's write lock."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE locations SET name = name WHERE id = -1")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def go(manager: SimpleMemoryManager, start: int, end: int, action: str = "north") -> Any:
    """A move from room ``start`` to room ``end``: a permanent memory of the exit."""
    return manager.record_action_outcome(
        start,
        f"Room {start}",
        action,
        "You go.",
        ZMachineContext(
            location_before=start, location_after=end, location_after_name=f"Room {end}"
        ),
    )


def drop(manager: SimpleMemoryManager, item: int, name: str) -> Any:
    """A turn whose memory is ephemeral ("Dropped <name> here")."""
    return manager.record_action_outcome(
        HALL,
        "Hall",
        f"drop {name}",
        "Dropped.",
        ZMachineContext(
            location_before=HALL,
            location_after=HALL,
            inventory_before=frozenset({item}),
            item_names={item: name},
        ),
    )


def turns_of(store: MemoryStore, manager: SimpleMemoryManager) -> list[tuple[int, int, str]]:
    return [(r["episode"], r["turn"], r["action"]) for r in store.turn_records(manager.run_id)]


# --- gap 2: no wait per turn while the lock is held ----------------------------------------


def test_after_a_refusal_the_turns_wait_for_nothing_until_the_lock_is_free(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=BUSY_S) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        waits = []
        with file_locked(db_path):
            for start in range(10, 18):
                started = time.perf_counter()
                assert go(manager, start, start + 1) is None
                waits.append(time.perf_counter() - started)
            status = manager.get_status()
        assert waits[0] >= BUSY_S * 0.9  # the first one waited out the busy timeout
        assert max(waits[1:]) < BUSY_S / 2, waits  # the others did not wait for it
        assert (status["store_busy"], status["writes_deferred"]) == (1, 7)
        assert status["syntheses_waiting"] == 8
        # the lock is free: the very next write writes everything, in order
        applied = go(manager, 30, 31)
        assert applied is not None and manager.get_status()["syntheses_waiting"] == 0
        assert [row["turn"] for row in store.decision_log() if row["applied"]] == list(range(2, 11))
        assert manager.get_status()["memories_written"] == 9
        manager.close()
        assert_sound(store)


def test_a_turn_that_decides_nothing_writes_what_waits_once_the_lock_is_free(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            go(manager, 10, 11)  # refused
            assert look(manager) is None  # no trigger: what waits is not tried either
            status = manager.get_status()
            assert (status["store_busy"], status["writes_deferred"]) == (1, 1)
        look(manager)  # no trigger, the lock is free: what waits is written now
        assert manager.get_status()["syntheses_waiting"] == 0
        assert manager.get_status()["waiting_bytes"] == 0
        assert [(m.title, m.turns) for m in store.memories(10)] == [
            ("'north' leads to Room 11 (11)", "2")
        ]
        assert [turn for _e, turn, _a in turns_of(store, manager)] == [1, 2, 3, 4]
        manager.close()
        assert_sound(store)


@pytest.mark.slow  # SQLite's is the test above
def test_the_backoff_on_either_backend(database: str | Path) -> None:
    """PostgreSQL's writers' lock is probed with pg_try_advisory_xact_lock."""
    with (
        MemoryStore.open(database) as holder,
        MemoryStore.open(database, busy_timeout_s=BUSY_S) as store,
    ):
        manager = SimpleMemoryManager(store)
        look(manager)
        with write_lock_held(holder):
            assert go(manager, 10, 11) is None  # refused after the busy timeout
            started = time.perf_counter()
            for start in range(12, 16):
                assert go(manager, start, start + 1) is None
            deferred = time.perf_counter() - started
            manager.reset_episode()  # no wait either
        assert deferred < BUSY_S, deferred  # four turns, not one busy timeout
        status = manager.get_status()
        assert (status["store_busy"], status["writes_deferred"]) == (1, 5)
        look(manager)  # episode 2: a turn that writes nothing
        assert manager.get_status()["syntheses_waiting"] == 5
        assert go(manager, 20, 21) is not None  # the lock is free: everything is written
        assert manager.get_status()["syntheses_waiting"] == 0
        assert len(store.decision_log()) == 8
        manager.close()
        assert_sound(store)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.slow  # the everyday loop keeps one test of each gap
def test_a_store_the_probe_cannot_read_backs_off_by_the_clock(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(busy_buffer, "time", clock)
    monkeypatch.setattr(busy_buffer.LockProbe, "free", lambda self: None)
    with MemoryStore.open(db_path, busy_timeout_s=0.01) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            go(manager, 10, 11)  # refused: the next try in BACKOFF_FIRST_S
            go(manager, 11, 12)  # not tried
            clock.now += busy_buffer.BACKOFF_FIRST_S
            go(manager, 12, 13)  # tried, refused: the next in twice that
            go(manager, 13, 14)  # not tried
            assert manager.get_status()["store_busy"] == 2
            assert manager.get_status()["writes_deferred"] == 2
            delay = busy_buffer.BACKOFF_FIRST_S * 2
            for start in range(20, 40, 2):  # the wait doubles up to BACKOFF_MAX_S
                clock.now += delay - 0.01
                go(manager, start, start + 1)  # not yet
                clock.now += 0.01
                busy = manager.get_status()["store_busy"]
                go(manager, start + 1, start + 2)  # tried
                assert manager.get_status()["store_busy"] == busy + 1
                delay = min(delay * 2, busy_buffer.BACKOFF_MAX_S)
            assert delay == busy_buffer.BACKOFF_MAX_S
            assert manager.get_status()["writes_deferred"] == 12
        clock.now += busy_buffer.BACKOFF_MAX_S
        assert go(manager, 50, 51) is not None
        assert manager.get_status()["syntheses_waiting"] == 0
        manager.close()


# --- gap 1: a bound on what waits ------------------------------------------------------------


def test_what_waits_stays_within_its_bound_and_drops_are_counted_and_logged_once(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(busy_buffer, "MAX_WAITING_BYTES", 32 * 1024)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        buffer = manager._synthesis.buffer
        with file_locked(db_path), caplog.at_level(logging.WARNING):
            for start in range(100, 220):
                go(manager, start, start + 1)
                assert buffer.waiting_bytes(manager._pending) <= 32 * 1024
            status = manager.get_status()
        assert status["turns_seen"] == 121
        assert status["syntheses_dropped"] > 0 and status["waiting_rows_dropped"] > 0
        assert 0 < status["waiting_bytes"] <= 32 * 1024
        lines = [r.getMessage() for r in caplog.records if "passed its bound" in r.getMessage()]
        assert len(lines) == 1  # logged once
        assert manager.flush()
        waiting = status["syntheses_waiting"]
        assert waiting + status["syntheses_dropped"] == 120
        assert store.get_status()["memories_by_tier"]["permanent"] == waiting
        kept = [row["turn"] for row in store.decision_log() if row["applied"]]
        assert kept == list(range(122 - waiting, 122))  # the newest were kept
        assert manager.get_status()["waiting_bytes"] == 0
        manager.close()
        assert_sound(store)


@pytest.mark.slow  # tracemalloc
def held_while_busy(manager: SimpleMemoryManager, db_path: Path, starts: range) -> tuple[int, int]:
    """Turns from each of ``starts`` while another connection holds the lock: what the
    buffer estimates it holds, and what Python frees when what waits is let go."""
    buffer = manager._synthesis.buffer
    with file_locked(db_path):
        tracemalloc.start()
        try:
            for start in starts:
                go(manager, start, start + 1)
            estimated = buffer.waiting_bytes(manager._pending)
            before = tracemalloc.get_traced_memory()[0]
            buffer.syntheses.clear()
            manager._pending.clear()
            return estimated, before - tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()


def test_the_bound_estimates_what_python_holds(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(busy_buffer, "MAX_WAITING_BYTES", 64 * 1024)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        estimated, held = held_while_busy(manager, db_path, range(100, 200))
        assert 60 * 1024 < estimated <= 64 * 1024
        assert estimated * 0.7 < held < estimated * 1.2, (held, estimated)


@pytest.mark.slow  # the everyday loop keeps one test of each gap
def test_the_count_bound(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(busy_buffer, "MAX_WAITING_SYNTHESES", 5)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            for start in range(100, 112):
                go(manager, start, start + 1)
        status = manager.get_status()
        assert (status["syntheses_waiting"], status["syntheses_dropped"]) == (5, 7)
        assert status["waiting_rows_dropped"] == 0  # only the count was passed
        assert manager.flush()
        assert [r["turn"] for r in store.decision_log() if r["applied"]] == [9, 10, 11, 12, 13]
        assert len(store.turn_records(manager.run_id)) == 13
        manager.close()


def waiting_rows(manager: SimpleMemoryManager) -> set[tuple[str, int]]:
    """(kind, turn) of each row that waits (a visit's: its location)."""
    pending = manager._pending
    return {
        *(("synthesis", s["turn"]) for s in manager._synthesis.buffer.syntheses),
        *(("decision", row.turn) for row in pending.decisions),
        *(("turn", row.turn) for row in pending.turns),
        *(("visit", visit[0]) for visit in pending.visits),
        *(("map", event.turn) for event in pending.map_events),
    }


@pytest.mark.slow  # the everyday loop keeps one test of each gap
def test_the_least_valuable_rows_go_first(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision-log rows of calls that changed nothing, then session memories and turn
    records (the oldest first), before persistent memories, visits and map events."""
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)  # turn 1: a first visit that stores nothing (a no-op decision row)
        with file_locked(db_path):
            go_north(manager)  # turn 2: permanent
            drop(manager, 7, "lamp")  # turn 3: ephemeral
            look(manager, HALL, "Hall")  # turn 4: a turn record
            drop(manager, 8, "sword")  # turn 5: ephemeral
            go(manager, 60, 61)  # turn 6: permanent
        pending = manager._pending
        buffer = manager._synthesis.buffer
        assert [s["turn"] for s in buffer.syntheses] == [2, 3, 5, 6]
        rows = len(waiting_rows(manager))
        order = []
        while buffer.syntheses or not pending.empty:
            before = waiting_rows(manager)
            monkeypatch.setattr(busy_buffer, "MAX_WAITING_BYTES", buffer.waiting_bytes(pending) - 1)
            buffer.bound(pending)
            [gone] = before - waiting_rows(manager)  # one at a time
            order.append(gone)
        assert order[0] == ("decision", 1)  # class 0 first
        assert order[1:9] == [  # then class 1, the oldest first
            ("turn", 1),
            ("turn", 2),
            ("synthesis", 3),  # a session memory (before its own turn record)
            ("turn", 3),
            ("turn", 4),
            ("synthesis", 5),
            ("turn", 5),
            ("turn", 6),
        ]
        # class 2: visits (they name no turn: the oldest of their episode), then by turn
        last = order[9:]
        visits = [row for row in last if row[0] == "visit"]
        assert last[: len(visits)] == visits and len(visits) == 3
        assert last[len(visits) :] == [
            ("map", 1),
            ("synthesis", 2),
            ("map", 2),
            ("map", 3),
            ("map", 4),
            ("map", 5),
            ("synthesis", 6),
            ("map", 6),
        ], last
        status = manager.get_status()
        assert status["syntheses_dropped"] == 4
        assert status["waiting_rows_dropped"] == rows - 4
        assert manager.flush()
        assert store.memories(FIELD) == [] and store.turn_records(manager.run_id) == []
        manager.close()


# --- gap 3: an episode the database could not number ----------------------------------------


def test_turns_of_an_episode_started_while_busy_are_kept_and_numbered_later(
    db_path: Path,
) -> None:
    with (
        MemoryStore.open(db_path) as other_agent,
        MemoryStore.open(db_path, busy_timeout_s=0.05) as store,
    ):
        manager = SimpleMemoryManager(store)
        with file_locked(db_path):
            go_north(manager)  # turn 1: the episode cannot be numbered
            drop(manager, 7, "lamp")  # an ephemeral memory of the unnumbered episode
            # asked for, it is the provisional number: never StoreBusy, never a wait
            assert manager.episode >= busy_buffer.PROVISIONAL_EPISODES
            manager.reset_episode()  # the episode ends unnumbered
            go(manager, 10, 11)  # the next one starts unnumbered too, without a wait
            status = manager.get_status()
            assert status["episodes_unnumbered"] == 2 and status["episode"] is None
            assert (status["turn"], status["turns_seen"], status["store_busy"]) == (1, 3, 1)
        assert other_agent.allocate_episode() == 1  # another agent numbers one meanwhile
        assert manager.flush()
        assert manager.get_status()["episode"] == 3
        assert manager.get_status()["episodes_unnumbered"] == 0
        assert turns_of(store, manager) == [
            (2, 1, "north"),
            (2, 2, "drop lamp"),
            (3, 1, "north"),
        ]
        assert [(m.title, m.episode, m.turns) for m in store.memories(FIELD)] == [(NORTH, 2, "1")]
        assert store.get_ephemeral_count() == 0  # episode 2's session memory ended with it
        assert [(m.episode, m.turns) for m in store.memories(10)] == [(3, "1")]
        assert sorted((r["episode"], r["turn"]) for r in store.decision_log()) == [
            (2, 1),
            (2, 2),
            (3, 1),
        ]
        north = manager.map.graph().connections[(FIELD, "north")]
        assert (north.first_episode, north.last_episode) == (2, 2)
        manager.close()
        assert_sound(store)


@pytest.mark.slow  # the everyday loop keeps one test of each gap
def test_the_episode_is_numbered_by_the_first_write_after_the_lock_is_free(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        with file_locked(db_path):
            look(manager)
        go_north(manager)  # turn 2 writes: the episode is numbered first
        assert manager.get_status()["episode"] == 1
        assert manager.episode == 1
        look(manager, HALL, "Hall")
        assert manager.flush()
        assert turns_of(store, manager) == [(1, 1, "look"), (1, 2, "north"), (1, 3, "look")]
        assert [(m.episode, m.turns) for m in store.memories(FIELD)] == [(1, "2")]
        manager.close()


# --- gap 4: later turns correct a waiting memory ----------------------------------------------


def kitchen_west(manager: SimpleMemoryManager, response: str, moved: bool) -> Any:
    after = KITCHEN if moved else 8
    return manager.record_action_outcome(
        8,
        "Behind House",
        "west",
        response,
        ZMachineContext(location_before=8, location_after=after, location_after_name="Kitchen"),
    )


def test_a_later_turn_invalidates_a_waiting_failure(db_path: Path) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            kitchen_west(manager, "The kitchen window is closed.", moved=False)
            kitchen_west(manager, "You enter the kitchen.", moved=True)
        assert manager.flush()
        assert [m.title for m in store.memories(8)] == ["'west' leads to Kitchen (5)"]
        [failure] = [
            m for m in store.memories(8, include_superseded=True) if m.title.endswith("for now")
        ]
        assert failure.status is not Status.ACTIVE and "worked here later" in str(
            failure.invalidation_reason
        )
        manager.close()
        assert_sound(store)
