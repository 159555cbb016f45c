"""Six findings of the second review of the busy-database buffering (memstore.busy_buffer,
memstore.manager_api), each reproduced:

1. the bound measured text in characters, not in the bytes Python holds (non-ASCII: 2-4x);
2. a waiting memory later turns deduplicated against was dropped first (the oldest);
3. outside ``record_action_outcome`` the busy stretch was ignored: ``manager.episode``
   raised StoreBusy (the demo lost its buffered turns), the spec-004 writes each waited the
   busy timeout;
4. PostgreSQL: the probe saw only memstore's advisory lock, so a table lock made every
   turn wait the busy timeout again;
5. the probe's connection outlived ``manager.close()`` returning False;
6. the provisional episode number showed in the synthesis prompt.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import assert_sound
from test_busy_gaps import FIELD, NORTH, file_locked, go, go_north, held_while_busy, look

import memstore.busy_buffer as busy_buffer
from memstore.manager import SimpleMemoryManager
from memstore.models import Memory
from memstore.rows import SupersedeOutcome
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext

# --- 1. the bound counts the bytes Python holds --------------------------------------------


def _writer(text: str) -> Any:
    """An LLM callable answering every move with a permanent memory of ``text``."""
    calls = []

    def llm(messages: list[dict[str, str]]) -> str:
        calls.append(1)
        return json.dumps(
            {
                "should_remember": True,
                "category": "DANGER",
                "memory_title": f"Note {len(calls)}",
                "memory_text": text,
                "persistence": "permanent",
                "status": "ACTIVE",
                "reasoning": "r",
            },
            ensure_ascii=False,
        )

    return llm


@pytest.mark.parametrize("text", ["é" * 3000, "😀" * 3000, "a" * 2999 + "→"])
def test_the_bound_holds_for_text_python_stores_wide(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    bound = 96 * 1024
    monkeypatch.setattr(busy_buffer, "MAX_WAITING_BYTES", bound)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store, llm=_writer(text))
        look(manager)
        estimated, held = held_while_busy(manager, db_path, range(100, 140))
        assert manager.get_status()["syntheses_dropped"] > 0
        assert held <= bound * 1.2, (held, estimated)
        assert estimated * 0.7 < held < estimated * 1.2, (held, estimated)
        manager.close()


# --- 2. a re-sighting keeps a waiting memory ----------------------------------------------------


def test_a_waiting_memory_seen_again_is_not_the_first_dropped(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(busy_buffer, "MAX_WAITING_SYNTHESES", 5)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            go_north(manager)  # learned: Field north -> Hall (waits)
            for start in range(100, 103):
                go(manager, start, start + 1)
            go_north(manager)  # the recorder sees the waiting memory: not repeated
            for start in range(200, 203):  # two more than the bound holds
                go(manager, start, start + 1)
            status = manager.get_status()
        assert status["syntheses_dropped"] == 2
        assert manager.flush()
        assert [m.title for m in store.memories(FIELD)] == [NORTH]  # kept: seen again
        manager.close()
        assert_sound(store)


# --- 3. the busy stretch outside record_action_outcome --------------------------------------------


def test_the_episode_asked_for_while_busy_is_provisional_never_store_busy(
    db_path: Path,
) -> None:
    busy_s = 0.3
    with MemoryStore.open(db_path, busy_timeout_s=busy_s) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        with file_locked(db_path):
            go(manager, 10, 11)  # refused: the busy stretch starts
            manager.reset_episode()
            started = time.perf_counter()
            episode = manager.episode  # no StoreBusy, no wait
            assert time.perf_counter() - started < busy_s / 2
            assert episode >= busy_buffer.PROVISIONAL_EPISODES
            assert manager.get_status()["episode"] is None
            go(manager, 20, 21)
        assert manager.episode == 2  # numbered once the lock is free
        assert manager.flush()
        assert sorted({r["episode"] for r in store.turn_records(manager.run_id)}) == [1, 2]
        manager.close()
        assert_sound(store)


def _memory(title: str) -> Memory:
    return Memory(
        title=title, text="x", category="NOTE", persistence="permanent", episode=1, turns="1"
    )


def test_the_spec_writes_answer_not_done_without_waiting_in_a_busy_stretch(
    db_path: Path,
) -> None:
    busy_s = 0.3
    with MemoryStore.open(db_path, busy_timeout_s=busy_s) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        go(manager, 10, 11)  # "'north' leads to Room 11 (11)" is stored
        title = "'north' leads to Room 11 (11)"
        with file_locked(db_path):
            go(manager, 12, 13)  # refused: the busy stretch starts
            deferred = manager.get_status()["writes_deferred"]
            started = time.perf_counter()
            assert manager.add_memory(10, "Room 10", _memory("note")) is False
            assert manager.invalidate_memory(10, title, "wrong") is False
            assert manager.invalidate_memories(10, [title], "wrong") == {title: False}
            outcome = manager.supersede_memory(10, "Room 10", title, _memory("new"))
            assert outcome is SupersedeOutcome.STORE_BUSY and not outcome
            manager.reset_episode()
            assert manager.add_memory(10, "Room 10", _memory("note")) is False  # unnumbered
            assert time.perf_counter() - started < busy_s / 2
            status = manager.get_status()
            assert status["writes_deferred"] - deferred >= 5  # each counted
        # the lock is free: what waits is written first, then the write
        assert manager.add_memory(12, "Room 12", _memory("note")) is True
        assert manager.get_status()["syntheses_waiting"] == 0
        assert [m.title for m in store.memories(12)] == ["'north' leads to Room 13 (13)", "note"]
        assert manager.invalidate_memory(10, title, "wrong") is True
        episodes = {m.episode for m in store.memories(10, include_superseded=True)}
        assert max(episodes) < busy_buffer.PROVISIONAL_EPISODES  # no provisional number stored
        manager.close()
        assert_sound(store)


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_the_demo_loses_no_turn_of_an_episode_started_while_busy(tmp_path: Path) -> None:
    from memstore.demo import run_demo
    from tests.fixtures.walkthrough import rom_or_skip

    rom = rom_or_skip()
    db = tmp_path / "m.db"
    holder: list[subprocess.Popen[str]] = []
    calls = []

    def llm(messages: list[dict[str, str]]) -> str:
        calls.append(1)
        if len(calls) == 6:  # another process takes the write lock in episode 1 ...
            holder.append(_hold(db))
        if len(calls) == 22 and holder:  # ... and lets it go in episode 2
            _release(holder.pop())
        return json.dumps({"should_remember": False, "reasoning": "nothing"})

    try:
        with MemoryStore.open(db, busy_timeout_s=0.2) as store:
            run_demo(store, episodes=2, moves=15, llm=llm, rom=rom, progress=False,
                     out=tmp_path / "Memories.md", stream=io.StringIO())  # fmt: skip
            per_episode: dict[int, int] = {}
            for row in store.turn_records():
                per_episode[row["episode"]] = per_episode.get(row["episode"], 0) + 1
            assert per_episode == {1: 15, 2: 15}
    finally:
        for process in holder:
            _release(process)


# --- 4. PostgreSQL: a lock other than memstore's ------------------------------------------

TABLE_LOCK = """
import sys, psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute("BEGIN")
conn.execute("LOCK TABLE turn_records IN SHARE MODE")
print("locked", flush=True)
sys.stdin.readline()
conn.rollback()
"""


def test_a_table_lock_on_postgresql_is_not_waited_for_by_every_turn(pg_database: str) -> None:
    busy_s = 0.4
    with MemoryStore.open(pg_database, busy_timeout_s=busy_s) as store:
        manager = SimpleMemoryManager(store)
        look(manager)
        conninfo = pg_database.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(conninfo):
            pass  # the URL is one libpq takes
        holder = subprocess.Popen(
            [sys.executable, "-c", TABLE_LOCK, conninfo],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        waits = []
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            for start in range(10, 16):
                started = time.perf_counter()
                go(manager, start, start + 1)
                waits.append(time.perf_counter() - started)
        finally:
            _release(holder)
        assert waits[0] >= busy_s * 0.9
        assert sum(waits[1:]) < busy_s, waits  # five turns: less than one busy timeout
        assert manager.flush()
        assert len(store.turn_records(manager.run_id)) == 7
        manager.close()
        assert_sound(store)


# --- 5. the probe's connection ends with the manager ---------------------------------------------


def _fds(db: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(db)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_closing_the_manager_in_a_busy_stretch_closes_the_probe(db_path: Path) -> None:
    store = MemoryStore.open(db_path, busy_timeout_s=0.05)
    manager = SimpleMemoryManager(store)
    look(manager)
    with file_locked(db_path):
        go(manager, 10, 11)
        go(manager, 11, 12)  # probed
        assert manager._synthesis.buffer.probe._file is not None
        assert manager.close() is False
        store.close()
        assert manager._synthesis.buffer.probe._file is None
    assert _fds(db_path) == []
    assert not Path(f"{db_path}-wal").exists()  # the last connection checkpointed it


# --- 6. the provisional number stays out of the prompt ------------------------------------------


def test_the_prompt_shows_no_provisional_episode(db_path: Path) -> None:
    prompts: list[str] = []
    answers = [
        {"should_remember": False, "reasoning": "nothing"},
        {
            "should_remember": True,
            "category": "DANGER",
            "memory_title": "A troll guards the bridge",
            "memory_text": "A troll guards the bridge.",
            "persistence": "permanent",
            "status": "ACTIVE",
            "reasoning": "r",
        },
        {"should_remember": False, "reasoning": "nothing"},
    ]

    def llm(messages: list[dict[str, str]]) -> str:
        prompts.append("\n".join(m["content"] for m in messages))
        return json.dumps(answers.pop(0))

    troll = ZMachineContext(location_before=30, location_after=30)
    with MemoryStore.open(db_path, busy_timeout_s=0.05) as store:
        manager = SimpleMemoryManager(store, llm=llm)
        with file_locked(db_path):  # the episode starts unnumbered
            manager.record_action_outcome(30, "Troll Room", "look", "A troll.", troll)
            for _ in range(2):
                manager.record_action_outcome(
                    30, "Troll Room", "attack troll", "The troll " + "swings his axe. " * 8, troll
                )
        [line] = [x for x in prompts[2].splitlines() if "A troll guards the bridge (" in x]
        assert re.search(r"episode \d{6,}", line) is None, line
        assert "this episode" in line, line
        manager.close()


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE locations SET name = name WHERE id = -1")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def _hold(db: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "locked"
    return process


def _release(process: subprocess.Popen[str]) -> None:
    if process.poll() is None and process.stdin is not None and not process.stdin.closed:
        process.stdin.write("\n")
        process.stdin.close()
    process.wait(30)
    if process.stdout is not None:
        process.stdout.close()
