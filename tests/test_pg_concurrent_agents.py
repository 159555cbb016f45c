"""A fleet of agents on one PostgreSQL database at once.

Eight agents upgrading a new database, adding the same title, superseding or invalidating
one memory, numbering episodes or flagging the same note at the same moment; an agent's
session upgrade seen by the others; an import and the reviewer loop while agents and
writer processes write: nothing is lost, nothing is stored twice.

A test that takes ``database`` runs on SQLite and PostgreSQL (tests/conftest.py), so the
SQLite run shows what the same call does there. Part of the adversarial review of the
PostgreSQL backend (issue 18): tests that fail are defects found; tests that pass prove a
property that held under attack.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore.flagged import FlaggedMemories
from memstore.invariants import check_invariants
from memstore.rows import SupersedeOutcome
from memstore.store import MemoryStore
from tests.pg_attack_helpers import MEMSTORE, note
from tests.pg_attack_helpers import cluster as cluster  # a fixture
from tests.pg_attack_helpers import pg_url as pg_url  # a fixture

pytestmark = pytest.mark.slow


AGENTS = 8


def race(database: str | Path, action: Callable[[MemoryStore, int], Any]) -> list[Any]:
    """AGENTS stores (each its own connection) run ``action`` at the same moment."""
    stores = [MemoryStore.open(database) for _ in range(AGENTS)]
    barrier = threading.Barrier(AGENTS)
    results: list[Any] = [None] * AGENTS

    def agent(index: int) -> None:
        barrier.wait()
        try:
            results[index] = action(stores[index], index)
        except Exception as exc:  # noqa: BLE001 - reported by the test's assertion
            results[index] = exc

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(AGENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for store in stores:
        store.close()
    return results


# =============================================================================================
# Defects found by the review: each failed before its fix
# =============================================================================================


def test_a_fleet_running_db_upgrade_at_once_on_a_new_database_all_succeed(pg_url: str) -> None:
    upgrades = [
        subprocess.Popen(
            [str(MEMSTORE), "--db", pg_url, "db", "upgrade"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(AGENTS)
    ]
    failures = []
    for upgrade in upgrades:
        _out, err = upgrade.communicate(timeout=120)
        if upgrade.returncode != 0:
            failures.append(err.strip().splitlines()[-1])
    # most failed: "internal error: IntegrityError ... pg_type_typname_nsp_index"
    assert failures == []


# =============================================================================================
# Properties that held
# =============================================================================================


def test_same_title_added_by_eight_agents_at_once_is_stored_once(database: str | Path) -> None:
    results = race(database, lambda store, _i: store.add_memory(7, "Cellar", note("Trap door")))
    assert sorted(map(repr, results)) == ["False"] * (AGENTS - 1) + ["True"]
    with MemoryStore.open(database) as store:
        assert [m.title for m in store.memories(7, include_superseded=True)] == ["Trap door"]


def test_one_memory_superseded_by_eight_agents_at_once_has_one_successor(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as store:
        store.add_memory(7, "Cellar", note("Old"))
    results = race(
        database, lambda store, i: store.supersede_memory(7, "Cellar", "Old", note(f"New {i}"))
    )
    assert Counter(results) == {
        SupersedeOutcome.SUPERSEDED: 1,
        SupersedeOutcome.NOT_FOUND: AGENTS - 1,
    }
    with MemoryStore.open(database) as store:
        assert len(store.memories(7)) == 1
        assert len(store.history(7, "Old")) == 2
        with store.transaction(write=False) as conn:
            assert check_invariants(conn, sqlite_checks=True) == []


def test_supersede_and_invalidate_of_one_memory_at_once_end_in_one_result(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as store:
        store.add_memory(7, "Cellar", note("Contested"))

    def act(store: MemoryStore, i: int) -> Any:
        if i % 2:
            return store.invalidate_memory(7, "Contested", f"agent {i} says no", turn=4)
        return store.supersede_memory(7, "Cellar", "Contested", note(f"Replacement {i}"))

    results = race(database, act)
    wins = [r for r in results if r is True or r == SupersedeOutcome.SUPERSEDED]
    assert len(wins) == 1, results
    with MemoryStore.open(database) as store:
        assert len(store.memories(7)) == (1 if wins[0] is not True else 0)
        with store.transaction(write=False) as conn:
            assert check_invariants(conn, sqlite_checks=True) == []


def test_episode_numbers_from_eight_agents_are_never_handed_out_twice(
    database: str | Path,
) -> None:
    results = race(database, lambda store, _i: [store.allocate_episode() for _ in range(25)])
    episodes = [episode for batch in results for episode in batch]
    assert len(episodes) == len(set(episodes)) == AGENTS * 25


def test_an_agents_session_upgrade_shows_only_the_new_memory_to_others(pg_url: str) -> None:
    with MemoryStore.open(pg_url) as one, MemoryStore.open(pg_url) as two:
        assert one.add_memory(5, "Cellar", note("Dropped sword", "ephemeral"))
        outcome = one.supersede_memory(5, "Cellar", "Dropped sword", note("Sword belongs here"))
        assert outcome == SupersedeOutcome.SUPERSEDED
        assert [m.title for m in two.memories(5, include_superseded=True)] == ["Sword belongs here"]
        assert two.get_ephemeral_count() == 0 and one.get_ephemeral_count() == 0
        assert two.reset_episode() == 0
        assert [m.title for m in one.history(5, "Sword belongs here")] == [
            "Dropped sword",
            "Sword belongs here",
        ]


def test_an_import_while_agents_write_loses_nothing(database: str | Path, tmp_path: Path) -> None:
    from memstore.md_store import export_memories_md
    from memstore.store_import import import_memories

    with MemoryStore.open(database) as store:
        store.add_memory(1, "Hall", note("Reviewed"))
        text = export_memories_md(store)
    edited = text.replace("What we learned: Reviewed.", "A reviewer rewrote this.")
    assert edited != text
    stop = threading.Event()
    acknowledged: list[str] = []
    errors: list[BaseException] = []

    def agent(index: int) -> None:
        with MemoryStore.open(database) as store:
            n = 0
            while not stop.is_set():
                title = f"Agent {index} fact {n}"
                try:
                    if store.add_memory(2 + n % 5, "Room", note(title)):
                        acknowledged.append(title)
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)
                    return
                n += 1

    agents = [threading.Thread(target=agent, args=(i,)) for i in range(4)]
    for thread in agents:
        thread.start()
    try:
        time.sleep(0.3)
        with MemoryStore.open(database) as reviewer:
            outcome = import_memories(reviewer, edited, apply=True)
            assert outcome.applied, outcome.refused
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in agents:
            thread.join(60)
    assert errors == []
    with MemoryStore.open(database) as store:
        stored = Counter(m.title for location in range(1, 7) for m in store.memories(location))
        assert all(stored[title] == 1 for title in acknowledged)
        assert len(stored) == len(acknowledged) + 1
        assert [m.text for m in store.memories(1)] == ["A reviewer rewrote this."]
        with store.transaction(write=False) as conn:
            assert check_invariants(conn, sqlite_checks=True) == []


class _FolderWithServerDatabase:
    """tmp_path for tests/test_review_concurrent.py's reviewer loop, whose database
    (``tmp_path / "memories.db"``) is a server URL instead."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder, self.url = folder, url

    def __truediv__(self, name: str) -> Any:
        return self.url if name == "memories.db" else self.folder / name


def test_the_reviewer_loop_against_three_writer_processes_loses_nothing_on_a_server(
    tmp_path: Path, pg_url: str
) -> None:
    import test_review_concurrent as review

    review.test_reviewer_loop_against_three_writer_processes_loses_nothing(
        _FolderWithServerDatabase(tmp_path, pg_url)  # type: ignore[arg-type]
    )


def test_the_same_flagged_note_from_eight_agents_at_once_is_stored_once(
    database: str | Path,
) -> None:
    def flag(store: MemoryStore, i: int) -> bool:
        # the same note, spaced and cased differently by each agent (one normalised key)
        content = ("The  troll " if i % 2 else "the troll ") + "guards the   Round Room passage"
        return FlaggedMemories(store).add_flagged_memory(content, 10 + i, i, 15, "Round Room")

    results = race(database, flag)
    assert sorted(results) == [False] * (AGENTS - 1) + [True]
    with MemoryStore.open(database) as store:
        (stored,) = FlaggedMemories(store).all()
        assert stored.importance == 10 + AGENTS - 1  # the highest importance won
