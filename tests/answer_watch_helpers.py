"""Helpers of the answer watch's review (tests/test_answer_watch_*.py,
tests/test_read_only_server_stores.py): a store's backend process stopped (SIGSTOP, always
continued), a call run in a thread of its own and timed, a Memories.md of many memories,
and where the stores live (a schema of their own in the session's cluster, or a cluster
of the test's own).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pg_cluster import PgCluster, PgClusterError, require_or_skip
from pg_cluster import unavailable_reason as pg_unavailable

from memstore.errors import DatabaseUnavailable
from memstore.store import MemoryStore

#: how much later than its answer timeout a call may end (the watch looks a few times a
#: second; a loaded machine)
MARGIN_S = 4.0


def backend_pid(store: MemoryStore) -> int:
    return int(store._conn.connection.driver_connection.info.backend_pid)


@contextmanager
def stopped(*pids: int) -> Iterator[None]:
    """The processes ``pids`` stopped (SIGSTOP) for the block, always continued after it."""
    done: list[int] = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            done.append(pid)
        yield
    finally:
        for pid in done:
            os.kill(pid, signal.SIGCONT)


class Outcome:
    """What a call run in a thread of its own did: its value or exception, and how long."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0


def start(call: Callable[[], Any]) -> Outcome:
    outcome = Outcome()

    def run() -> None:
        began = time.monotonic()
        try:
            outcome.value = call()
        except BaseException as exc:  # noqa: BLE001 - examined by the test
            outcome.error = exc
        outcome.seconds = time.monotonic() - began
        outcome.finished.set()

    threading.Thread(target=run, daemon=True).start()
    return outcome


def memories_md(locations_count: int, per_location: int, title: str = "Fact") -> str:
    lines = ["# Location Memories", ""]
    for location in range(1, locations_count + 1):
        lines += [
            f"## Location {location}: Room {location}",
            "**Visits:** 1 | **Episodes:** 1",
            "",
            "### Memories",
            "",
        ]
        for n in range(per_location):
            lines += [
                f"**[NOTE - PERMANENT] {title} {location}-{n}** *(Ep1, T{n + 1})*",
                f"What we learned in room {location}, number {n}.",
                "",
            ]
        lines += ["---", ""]
    return "\n".join(lines)


def one_line_memstore_error(exc: BaseException | None) -> None:
    assert isinstance(exc, DatabaseUnavailable), repr(exc)
    assert "\n" not in str(exc)


def _schema_url(cluster: PgCluster, query: str = "") -> str:
    return cluster.schema_url("review_watch", prefix="w_", query=query)


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """A new, empty memstore database (a schema of its own) in the session's cluster."""
    return _schema_url(pg_cluster)


def _start_cluster(base: Path) -> PgCluster:
    reason = pg_unavailable()
    if reason is not None:
        require_or_skip(reason)
    try:
        return PgCluster.start(base)
    except PgClusterError as exc:
        require_or_skip(f"a PostgreSQL cluster did not start: {exc}")
