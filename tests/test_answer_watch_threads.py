"""The answer watch's threads and server connections: failed opens, many stores, threads
sharing one store, and a forked child.

A failed open leaves no server connection and no watch thread; two hundred stores opened
and closed (or only dropped) leave none either; threads sharing one store through stopped
backends keep every acknowledged write once; a forked child has a working watch of its own
and leaves the parent's store untouched.

Part of the adversarial review of the answer watch (memstore.pg_connection.AnswerWatch: a
thread shuts down the socket of a wait for the server's answer older than
``answer_timeout_s``, the call ends with DatabaseUnavailable and the next call connects
again).
"""

from __future__ import annotations

import gc
import multiprocessing
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pg_cluster import PgCluster

from memstore.errors import DatabaseUnavailable, StoreBusy
from memstore.pg_connection import write_lock_key
from memstore.store import MemoryStore
from tests.answer_watch_helpers import MARGIN_S, _schema_url, backend_pid, stopped
from tests.answer_watch_helpers import pg_url as pg_url  # a fixture
from tests.pg_attack_helpers import note

WATCH_THREAD = "memstore-answer"


def watch_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == WATCH_THREAD}


def new_watch_threads(before: set[threading.Thread], seconds: float = 5.0) -> int:
    """The watch threads started since ``before`` still running, once they had time to
    notice they were closed."""
    deadline = time.monotonic() + seconds
    while watch_threads() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(watch_threads() - before)


@pytest.fixture
def admin(pg_cluster: PgCluster) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_cluster.conninfo("postgres"), autocommit=True) as conn:
        yield conn


# =============================================================================================
# Defects found, each fixed
# =============================================================================================


def test_a_failed_open_leaves_no_server_connection_and_no_watch_thread(
    pg_cluster: PgCluster, admin: psycopg.Connection[Any]
) -> None:
    # was: each failed open left its server connection and its watch thread behind
    app = f"leak_{uuid.uuid4().hex[:12]}"
    url = _schema_url(pg_cluster, query=f"application_name={app}&")
    schema = url.rsplit("%3D", 1)[1]
    threads_before = watch_threads()
    with psycopg.connect(pg_cluster.conninfo("review_watch"), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (write_lock_key(schema),))
        for _ in range(5):
            with pytest.raises(StoreBusy):
                MemoryStore.open(url, busy_timeout_s=0.2)
        # a closed connection's server process ends on its own time (under load, after the
        # first look): a leaked one stays, so look until none is left or 5 s have passed
        deadline = time.monotonic() + 5.0
        while True:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
            ).fetchone()
            assert row is not None
            if row[0] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        leaked_threads = new_watch_threads(threads_before, 3.0)
    assert (row[0], leaked_threads) == (0, 0)


# =============================================================================================
# Properties that held
# =============================================================================================


def test_two_hundred_stores_opened_and_closed_leave_no_watch_thread_nor_connection(
    pg_cluster: PgCluster, admin: psycopg.Connection[Any]
) -> None:
    app = f"many_{uuid.uuid4().hex[:12]}"
    url = _schema_url(pg_cluster, query=f"application_name={app}&")
    MemoryStore.open(url).close()
    before = watch_threads()
    for n in range(200):
        with MemoryStore.open(url, answer_timeout_s=5 + n % 3) as store:
            store.get_location_memory(1)
    assert new_watch_threads(before) == 0
    # stores never closed, only dropped: the garbage collector ends their threads too
    for _ in range(30):
        MemoryStore.open(url).get_location_memory(1)
    gc.collect()
    gc.collect()
    assert new_watch_threads(before) == 0
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
    ).fetchone()
    assert row is not None and row[0] == 0


def test_threads_sharing_one_store_through_stopped_backends_keep_every_write_once(
    pg_cluster: PgCluster, admin: psycopg.Connection[Any]
) -> None:
    app = f"shared_{uuid.uuid4().hex[:12]}"
    url = _schema_url(pg_cluster, query=f"application_name={app}&")
    per_thread, workers = 15, 6
    acknowledged: list[str] = []
    refused: Counter[str] = Counter()
    unexpected: list[BaseException] = []
    longest = [0.0]
    chaos_over = threading.Event()
    with MemoryStore.open(url, busy_timeout_s=2, answer_timeout_s=1) as store:

        def worker(index: int) -> None:
            n = 0  # at least per_thread facts each, and on until the stops are over
            while (n < per_thread or not chaos_over.is_set()) and n < 5000:
                title = f"Worker {index} fact {n}"
                for _attempt in range(40):
                    began = time.monotonic()
                    try:
                        store.add_memory(index, "Room", note(title))  # False: it was there
                        store.memories(index)
                        acknowledged.append(title)
                        break
                    except (DatabaseUnavailable, StoreBusy) as exc:
                        refused[type(exc).__name__] += 1
                        time.sleep(0.05)
                    except BaseException as exc:  # noqa: BLE001
                        unexpected.append(exc)
                        return
                    finally:
                        longest[0] = max(longest[0], time.monotonic() - began)
                n += 1

        def chaos() -> None:
            try:
                for _ in range(3):
                    time.sleep(0.4)
                    pids = [
                        row[0]
                        for row in admin.execute(
                            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                            (app,),
                        )
                    ]
                    assert pids
                    with stopped(*pids):
                        time.sleep(1.6)
            finally:
                chaos_over.set()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
        stopper = threading.Thread(target=chaos)
        for thread in [*threads, stopper]:
            thread.start()
        stopper.join(60)
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in [*threads, stopper])
        assert unexpected == []
        assert refused["DatabaseUnavailable"] >= 3  # every stop was seen
        # a call waits for its own answer and for the calls ahead of it on the store
        assert longest[0] < 3 * (1 + 2) + MARGIN_S
        stored = Counter(m.title for index in range(workers) for m in store.memories(index))
    assert len(acknowledged) >= per_thread * workers
    assert set(stored) == set(acknowledged) and max(stored.values()) == 1


def _child_with_its_own_store(url: str, answers: Any) -> None:
    try:
        with MemoryStore.open(url, answer_timeout_s=1.5) as store:
            assert store.add_memory(2, "Child room", note("From the child"))
            began = time.monotonic()
            with stopped(backend_pid(store)):
                try:
                    store.memories(2)
                    answers.put("no error")
                except DatabaseUnavailable as exc:
                    answers.put(("unavailable", time.monotonic() - began, str(exc)))
            assert [m.title for m in store.memories(2)] == ["From the child"]
        answers.put("done")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        answers.put(f"{type(exc).__name__}: {exc}")


def test_a_forked_child_has_a_working_watch_and_the_parents_store_is_untouched(
    pg_url: str,
) -> None:
    with MemoryStore.open(pg_url, answer_timeout_s=1.5) as parent:
        assert parent.add_memory(1, "Here", note("Session note", "ephemeral"))
        backend = backend_pid(parent)
        context = multiprocessing.get_context("fork")
        answers = context.Queue()
        child = context.Process(target=_child_with_its_own_store, args=(pg_url, answers))
        child.start()
        try:
            first = answers.get(timeout=60)
            second = answers.get(timeout=60)
        finally:
            child.join(60)
            if child.is_alive():
                child.kill()
        assert child.exitcode == 0
        assert second == "done", second
        kind, seconds, message = first
        assert kind == "unavailable" and 1.5 <= seconds < 1.5 + MARGIN_S
        assert "did not answer within 1.5 s" in message
        # the parent kept its connection, and so its session memory
        assert backend_pid(parent) == backend
        assert [m.title for m in parent.memories(1)] == ["Session note"]
        assert [m.title for m in parent.memories(2)] == ["From the child"]
