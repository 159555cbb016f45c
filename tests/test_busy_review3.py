"""Review round 3 of the busy buffering: a provisional episode number is never stored.

- An agent that read ``manager.episode`` during a busy stretch (a provisional number)
  and built a memory with it had that number stored by ``add_memory`` once the lock was
  free; the database then handed out real numbers inside the provisional range, and a
  later busy episode's rows were renumbered into another episode.
- ``memstore demo`` reported an episode begun while busy under its provisional number,
  and its coverage against it (0% where the database held 17/17).
"""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.busy_buffer import PROVISIONAL_EPISODES
from memstore.demo import run_demo
from memstore.manager import SimpleMemoryManager
from memstore.models import Memory
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.fixtures.walkthrough import rom_or_skip
from tests.test_review_busy_turns import locked_by_another_process

pytestmark = pytest.mark.slow  # another process holds the lock

#: another process holds the write lock for argv[2] seconds, then lets go
TIMED_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE locations SET name = name WHERE id = -1")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def go(manager: SimpleMemoryManager, n: int) -> None:
    context = ZMachineContext(location_before=100 + n, location_after=101 + n)
    manager.record_action_outcome(100 + n, f"R{n}", "north", "You go.", context)


def test_a_memory_built_with_a_provisional_episode_is_stored_under_the_real_one(
    db_path: Path,
) -> None:
    with MemoryStore.open(db_path, busy_timeout_s=0.3) as store:
        manager = SimpleMemoryManager(store)
        with locked_by_another_process(db_path):
            episode = manager.episode
            assert episode > PROVISIONAL_EPISODES
            go(manager, 1)
            mailbox = Memory(
                category="NOTE", title="Mailbox", text="A small mailbox.", episode=episode,
                turns=str(manager.turn), persistence="permanent",
            )  # fmt: skip
            assert manager.add_memory(101, "R1", mailbox) is False  # busy: not done
        assert manager.add_memory(101, "R1", mailbox) is True
        real = manager.episode
        assert real < PROVISIONAL_EPISODES and manager.stored_episode(episode) == real
        manager.close()
    with sqlite3.connect(db_path) as conn:
        episodes = {e for (e,) in conn.execute("SELECT episode FROM memories")}
        assert episodes == {real}
        assert conn.execute("SELECT last_episode FROM store_meta").fetchone() == (real,)


def test_the_demo_reports_an_episode_begun_while_busy_under_its_stored_number(
    tmp_path: Path,
) -> None:
    rom = rom_or_skip()
    db = tmp_path / "m.db"
    MemoryStore.open(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", TIMED_HOLDER, str(db), "0.45"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    with MemoryStore.open(db, busy_timeout_s=0.3) as store:
        report = run_demo(
            store, episodes=2, moves=40, rom=rom, out=tmp_path / "Memories.md",
            progress=False, stream=io.StringIO(),
        )  # fmt: skip
    holder.wait()
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT episode, count(*) FROM turn_records GROUP BY episode"))
    assert sorted(report.episodes) == sorted(stored) and report.episode_turns == stored
    assert all(visited and with_memory for with_memory, visited in report.coverage.values())
    assert str(PROVISIONAL_EPISODES)[:6] not in report.render()


#: another session locks the tables argv[2:] in SHARE mode, each released at a line on stdin
TABLE_LOCKS = """
import sys, psycopg
sessions = []
for table in sys.argv[2:]:
    conn = psycopg.connect(sys.argv[1])
    conn.execute("BEGIN")
    conn.execute(f"LOCK TABLE {table} IN SHARE MODE")
    sessions.append(conn)
print("locked", flush=True)
for conn in sessions:
    sys.stdin.readline()
    conn.rollback()
    print("released", flush=True)
"""


def test_a_lock_on_a_table_no_waiting_row_needs_ends_no_stretch(pg_database: str) -> None:
    """Was: a SHARE lock on flagged_memories (a CREATE INDEX there) kept the stretch going
    after the lock that began it was gone: every turn deferred, 45 memories dropped."""
    conninfo = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with MemoryStore.open(pg_database, busy_timeout_s=0.3) as store:
        manager = SimpleMemoryManager(store)
        go(manager, 1)
        holder = subprocess.Popen(
            [sys.executable, "-c", TABLE_LOCKS, conninfo, "turn_records", "flagged_memories"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            go(manager, 2)  # refused after the busy timeout: the stretch begins
            assert manager.get_status()["store_busy"] == 1
            assert holder.stdin is not None
            holder.stdin.write("\n")  # turn_records is free; flagged_memories still locked
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "released"
            go(manager, 3)
            status = manager.get_status()
            assert status["syntheses_waiting"] == 0, status
        finally:
            if holder.stdin is not None and not holder.stdin.closed:
                holder.stdin.write("\n")
                holder.stdin.close()
            holder.wait(30)
        manager.close()
