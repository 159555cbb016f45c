"""Several processes on one database: opening a new file together, numbering episodes,
and session-tier (ephemeral) work that never waits for another process's write lock."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from pathlib import Path

import pytest

from memstore.errors import StoreBusy
from memstore.manager import SimpleMemoryManager
from memstore.models import Memory
from memstore.store import MemoryStore

SPAWN = multiprocessing.get_context("spawn")


def _open_and_write(db: str, n: int, start: float, results) -> None:  # type: ignore[no-untyped-def]
    while time.time() < start:
        time.sleep(0.001)
    try:
        with MemoryStore.open(db) as store:
            memory = Memory(
                category="NOTE",
                title=f"From process {n}",
                text="x",
                episode=1,
                turns="1",
                persistence="permanent",
            )
            results.put((n, "ok" if store.add_memory(1, "Room", memory) else "refused"))
    except Exception as exc:  # the test reports every failure
        results.put((n, f"{type(exc).__name__}: {exc}"))


def _allocate(db: str, start: float, count: int, results) -> None:  # type: ignore[no-untyped-def]
    while time.time() < start:
        time.sleep(0.001)
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store)
        for _ in range(count):
            results.put(manager.episode)
            manager.reset_episode()


def _gather(queue, count: int) -> list:  # type: ignore[no-untyped-def]
    return [queue.get(timeout=60) for _ in range(count)]


def test_eight_processes_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    db = str(tmp_path / "new.db")
    results = SPAWN.Queue()
    start = time.time() + 1.5  # every process imported and waiting
    workers = [
        SPAWN.Process(target=_open_and_write, args=(db, n, start, results)) for n in range(8)
    ]
    for worker in workers:
        worker.start()
    outcomes = dict(_gather(results, 8))
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == {n: "ok" for n in range(8)}
    with MemoryStore.open(db) as store:
        assert store.get_persistent_count() == 8


def test_episode_numbers_are_allocated_once_across_processes(tmp_path: Path) -> None:
    db = str(tmp_path / "episodes.db")
    MemoryStore.open(db).close()
    results = SPAWN.Queue()
    start = time.time() + 1.5
    workers = [SPAWN.Process(target=_allocate, args=(db, start, 5, results)) for _ in range(3)]
    for worker in workers:
        worker.start()
    episodes = _gather(results, 15)
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(episodes) == list(range(1, 16))


def test_a_rerun_continues_after_the_episodes_played(tmp_path: Path) -> None:
    db = tmp_path / "rerun.db"
    with MemoryStore.open(db) as store:
        manager = SimpleMemoryManager(store)
        assert manager.episode == 1
        manager.record_action_outcome(1, "Room", "look", "A room.", {})
        manager.reset_episode()  # the next episode is numbered only when it is played
        manager.close()
    with MemoryStore.open(db) as store:
        assert SimpleMemoryManager(store).episode == 2


@pytest.fixture
def locked_by_another_connection(tmp_path: Path):  # type: ignore[no-untyped-def]
    db = tmp_path / "busy.db"
    MemoryStore.open(db).close()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO locations (id, name, visit_count) VALUES (999, 'Held', 0)")
    yield db
    other.execute("ROLLBACK")
    other.close()


def test_ephemeral_work_never_waits_for_another_processes_write_lock(
    locked_by_another_connection: Path,
) -> None:
    with MemoryStore.open(locked_by_another_connection, busy_timeout_s=0.2) as store:
        sack = Memory(
            category="NOTE",
            title="Dropped sack",
            text="x",
            episode=1,
            turns="3",
            persistence="ephemeral",
        )
        # each of these would wait out the busy timeout and raise StoreBusy if it took
        # the file's write lock
        assert store.add_memory(79, "Kitchen", sack)
        newer = sack.model_copy(update={"title": "Sack taken back", "turns": "4"})
        assert store.supersede_memory(79, "Kitchen", "Dropped sack", newer)
        assert "Sack taken back" in store.get_location_memory(79)
        assert store.reset_episode() == 2
        disk = sack.model_copy(update={"persistence": "permanent"})
        with pytest.raises(StoreBusy):  # the file's own writes still wait, and say so
            store.add_memory(79, "Kitchen", disk)
