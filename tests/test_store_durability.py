"""Durability and concurrency: acknowledged writes survive SIGKILL; several writers all succeed."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memstore.errors import StoreBusy
from memstore.store import MemoryStore
from tests.conftest import MakeMemory

WRITER = Path(__file__).with_name("store_writer.py")
ROOT = Path(__file__).resolve().parents[1]


def start_writer(db: Path, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(db), name, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def titles_in(db: Path) -> set[str]:
    with MemoryStore.open(db) as store:
        return {
            memory.title for location in store.export_locations() for memory in location.memories
        }


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def test_every_acknowledged_memory_survives_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    MemoryStore.open(db).close()
    rng = random.Random(20261122)
    acknowledged: set[str] = set()
    for round_number in range(5):
        writer = start_writer(db, f"round{round_number}", 100_000)
        assert writer.stdout is not None
        deadline = time.monotonic() + rng.uniform(0.3, 1.2)
        # read acknowledgements until the random kill time, then kill mid-stream
        while time.monotonic() < deadline:
            line = writer.stdout.readline()
            if not line:
                break
            acknowledged.add(line.removeprefix("ack ").strip())
        writer.send_signal(signal.SIGKILL)
        rest, _ = writer.communicate()
        acknowledged.update(
            line.removeprefix("ack ").strip()
            for line in rest.splitlines()
            if line.startswith("ack ")
        )
        assert writer.returncode == -signal.SIGKILL
        assert integrity(db) == "ok"
        stored = titles_in(db)
        missing = acknowledged - stored
        assert not missing, f"acknowledged but lost after SIGKILL: {sorted(missing)[:5]}"
    assert len(acknowledged) > 50  # the writers really wrote before being killed


def test_several_processes_write_to_one_database_without_lock_errors(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    MemoryStore.open(db).close()
    writers = [start_writer(db, f"writer{n}", 60) for n in range(4)]
    results = [writer.communicate(timeout=120) for writer in writers]
    for writer, (out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err
        assert "locked" not in err
        assert out.count("ack ") == 60
    assert len(titles_in(db)) == 240
    assert integrity(db) == "ok"


def test_threads_sharing_one_store_all_succeed(store: MemoryStore, mem: MakeMemory) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                assert store.add_memory(n, f"Room {n}", mem(f"thread {n} fact {i}"))
                store.get_location_memory(n)
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.get_persistent_count() == 100


def test_lock_held_past_the_busy_timeout_gives_a_clear_error_and_loses_nothing(
    db_path: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.2) as store:
        assert store.add_memory(1, "Room", mem("Before the lock"))
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusy, match="locked by another process"):
                store.add_memory(1, "Room", mem("During the lock"))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.add_memory(1, "Room", mem("After the lock"))
        assert [m.title for m in store.memories(1)] == ["Before the lock", "After the lock"]
