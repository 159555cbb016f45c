"""The answer watch's bound on a stopped backend, and the waits it must not cut.

The store's backend process is stopped (SIGSTOP, always continued in a ``finally``): every
read and write ends in one line within the answer timeout and the next call connects
again; close returns at once and ends a stuck call; a stopped postmaster makes an open give
up within the connect timeout. A large import the server answers all along, and a lock
wait within the bound in each of several waits of one call, are not cut off.

Part of the adversarial review of the answer watch (memstore.pg_connection.AnswerWatch: a
thread shuts down the socket of a wait for the server's answer older than
``answer_timeout_s``, the call ends with DatabaseUnavailable and the next call connects
again).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import write_lock_held
from map_helpers import record_sample
from pg_cluster import PgCluster

from memstore.flagged import FlaggedMemories
from memstore.invariants import check_invariants
from memstore.map_store import MapStore
from memstore.pg_connection import connect_timeout_s
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.answer_watch_helpers import (
    MARGIN_S,
    _start_cluster,
    backend_pid,
    memories_md,
    one_line_memstore_error,
    start,
    stopped,
)
from tests.answer_watch_helpers import pg_url as pg_url  # a fixture
from tests.pg_attack_helpers import note


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[PgCluster]:
    """A cluster of this test's own, which it may stop."""
    started = _start_cluster(tmp_path)
    try:
        yield started
    finally:
        started.stop()


READS: dict[str, Callable[[MemoryStore], Any]] = {
    "get_location_memory": lambda s: s.get_location_memory(1),
    "memories": lambda s: s.memories(1, include_superseded=True),
    "history": lambda s: s.history(1, "Before"),
    "export_snapshot": lambda s: s.export_snapshot(),
    "get_status": lambda s: s.get_status(),
    "get_memory_breakdown": lambda s: s.get_memory_breakdown(1),
    "locations_with_memory": lambda s: s.locations_with_memory(1),
    "flagged top": lambda s: FlaggedMemories(s).top(),
    "map graph": lambda s: MapStore(s).graph(),
    "import dry run": lambda s: import_memories(s, memories_md(1, 3), apply=False),
    "check_invariants": lambda s: _check(s),
}


WRITES: dict[str, Callable[[MemoryStore], Any]] = {
    "add_memory": lambda s: s.add_memory(1, "Here", note(f"New {uuid.uuid4().hex}")),
    "add ephemeral": lambda s: s.add_memory(1, "Here", note(f"E {uuid.uuid4().hex}", "ephemeral")),
    "supersede_memory": lambda s: s.supersede_memory(1, "Here", "Before", note("After")),
    "invalidate_memories": lambda s: s.invalidate_memories(1, ["Before"], "wrong"),
    "apply_synthesis": lambda s: s.apply_synthesis(
        1, "Here", new_memory=note("Synth"), episode=1, turn=4
    ),
    "reset_episode": lambda s: s.reset_episode(),
    "allocate_episode": lambda s: s.allocate_episode(),
    "record_visit": lambda s: s.record_visit(1, "Here", 1),
    "flagged add": lambda s: FlaggedMemories(s).add_flagged_memory("A note", 5, 1, 1, "Here"),
    "map record": lambda s: record_sample(s),
    "import apply": lambda s: import_memories(s, memories_md(1, 3), apply=True),
}


def _check(store: MemoryStore) -> list[str]:
    with store.transaction(write=False) as conn:
        return check_invariants(conn, sqlite_checks=True)


# =============================================================================================
# Defects found, each fixed
# =============================================================================================


def test_a_large_import_the_server_answers_all_along_is_not_cut_off(pg_url: str) -> None:
    # was: the whole executemany, one wait over a pipeline the server answered all along, was
    # timed: 'it did not answer within 1 s', nothing imported
    text = memories_md(1000, 100)
    MemoryStore.open(pg_url).close()
    with MemoryStore.open(pg_url, answer_timeout_s=1) as store:
        outcome = import_memories(store, text, apply=True)
        assert outcome.applied
        assert store.get_persistent_count() == 100_000


# =============================================================================================
# Properties that held
# =============================================================================================


@pytest.mark.parametrize("name", [*READS, *WRITES])
def test_every_call_on_a_stopped_backend_ends_in_one_line_within_the_bound(
    pg_url: str, name: str
) -> None:
    call = {**READS, **WRITES}[name]
    with MemoryStore.open(pg_url, busy_timeout_s=1, answer_timeout_s=1.5) as store:
        assert store.add_memory(1, "Here", note("Before"))
        store.get_location_memory(1)  # connected, caches filled
        with stopped(backend_pid(store)):
            outcome = start(lambda: call(store))
            assert outcome.finished.wait(1.5 + MARGIN_S + 10), f"{name} still waiting"
        one_line_memstore_error(outcome.error)
        assert "did not answer within 1.5 s" in str(outcome.error)
        expected = "may or may not have been committed" if name in WRITES else "nothing was"
        if name == "flagged add":  # it reads without the lock first: the read is cut off
            expected = "nothing was written"
        assert expected in str(outcome.error)
        assert 1.5 <= outcome.seconds < 1.5 + MARGIN_S
        # the next call connects again; what was acknowledged is there
        assert store.add_memory(1, "Here", note("Later"))
        assert {"Before", "Later"} <= {m.title for m in store.memories(1, True)}
        assert _check(store) == []


def test_close_while_the_backend_is_stopped_returns_at_once_and_a_stuck_call_ends(
    pg_url: str,
) -> None:
    store = MemoryStore.open(pg_url, answer_timeout_s=1.5)
    assert store.add_memory(1, "Here", note("Before"))
    with stopped(backend_pid(store)):
        stuck = start(lambda: store.memories(1))
        time.sleep(0.3)
        closing = start(store.close)  # waits for the stuck call, which the watch ends
        assert closing.finished.wait(1.5 + MARGIN_S)
        assert stuck.finished.wait(1)
    assert closing.error is None and store.closed
    one_line_memstore_error(stuck.error)
    again = MemoryStore.open(pg_url, answer_timeout_s=1.5)
    with stopped(backend_pid(again)):
        closing = start(again.close)  # nothing to wait for: no answer is needed
        assert closing.finished.wait(1.0)
    assert closing.error is None and again.closed


def test_a_lock_wait_within_the_answer_timeout_in_several_waits_of_one_call_is_not_cut(
    pg_url: str,
) -> None:
    """A flagged note reads without the lock, then writes under it: with another agent
    holding the lock 1 s, each wait stays under the 1.8 s bound though the call does not."""
    with (
        MemoryStore.open(pg_url, busy_timeout_s=5, answer_timeout_s=1.8) as store,
        MemoryStore.open(pg_url) as other,
    ):
        store.get_location_memory(1)
        with write_lock_held(other, seconds=1.0):
            began = time.monotonic()
            assert FlaggedMemories(store).add_flagged_memory("A lock waited for", 5, 1, 1, "X")
            assert store.add_memory(1, "Here", note("After the lock"))
            assert time.monotonic() - began >= 0.8
        assert store._watch is not None and not store._watch.fired


@pytest.mark.slow
def test_a_stopped_postmaster_makes_open_give_up_within_the_connect_timeout(
    own_cluster: PgCluster,
) -> None:
    """Where the connect timeout bounds the wait: a server whose postmaster and backend both
    stop. The open gives up in one line after the connect timeout the answer timeout gives
    (connect_timeout_s: 2 s here; it was a fixed 10 s); the store's own call ends after its
    answer timeout."""
    url = own_cluster.create_database("stalled")
    store = MemoryStore.open(url, answer_timeout_s=2)
    try:
        assert store.add_memory(1, "Here", note("Before"))
        postmaster = int((own_cluster.data / "postmaster.pid").read_text().split()[0])
        with stopped(postmaster, backend_pid(store)):
            opening = start(lambda: MemoryStore.open(url, answer_timeout_s=2))
            call = start(lambda: store.memories(1))
            assert call.finished.wait(2 + MARGIN_S)
            assert opening.finished.wait(connect_timeout_s(2) + MARGIN_S)
        one_line_memstore_error(call.error)
        one_line_memstore_error(opening.error)
        assert "connection timeout expired" in str(opening.error)
        assert [m.title for m in store.memories(1)] == ["Before"]  # connects again
    finally:
        store.close()
