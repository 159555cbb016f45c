"""Store benchmark: memstore's per-turn operations as ratios to raw sqlite3, interleaved.

    python bench/store_bench.py [--quick]

The machines here share their host and their speed swings 2x from minute to minute, so
every memstore figure is measured in the same loop as its floor, one sample of each in
turn, and printed as a ratio of medians:

* durable ``add_memory`` and ``supersede_memory`` beside raw sqlite3 doing the same rows in
  one ``BEGIN IMMEDIATE`` transaction (WAL, synchronous=FULL) on a table of the same shape
  (insert; update + insert + link insert);
* read after write: ``get_location_memory`` right after a durable supersession at a
  location holding 10, 50, 200 and 1,000 live memories, beside the floor's indexed SELECT
  of those live rows; the cold read (the view dropped, as after another process's write)
  is printed too;
* ``reset_episode`` with 1,000 ephemeral memories (absolute figure).

Targets (issue 15): add and supersede <= 1.5x, read after write <= 2x.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe  # noqa: E402

from memstore.connection import PAGE_SIZE  # noqa: E402
from memstore.models import Memory  # noqa: E402
from memstore.store import MemoryStore  # noqa: E402

TEXT = "The troll blocks the passage and swings his axe; a sword is the only defence."
LIVE_COUNTS = (10, 50, 200, 1000)
TARGETS = {"add": 1.5, "supersede": 1.5, "read": 2.0}


def memory(title: str, turn: int, persistence: str = "permanent") -> Memory:
    return Memory(
        category="DISCOVERY",
        title=title,
        text=TEXT,
        episode=1,
        turns=str(turn),
        score_change=0,
        persistence=persistence,
    )


def interleaved(runs: int, *actions: Callable[[int], object]) -> list[list[float]]:
    """Run each action once per round, in turn; the samples of each, in seconds."""
    samples: list[list[float]] = [[] for _ in actions]
    for i in range(runs):
        for action, out in zip(actions, samples, strict=True):
            started = time.perf_counter()
            action(i)
            out.append(time.perf_counter() - started)
    return samples


def med_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


class Floor:
    """Raw sqlite3 on a file of its own, with the memories table's shape and indexes."""

    def __init__(self, path: Path, page_size: int | None = None) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        if page_size is not None:  # else SQLite's default (4 KiB)
            self.conn.execute(f"PRAGMA page_size={page_size}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(
            "CREATE TABLE m (id INTEGER PRIMARY KEY, location_id INTEGER, category TEXT, "
            "title TEXT, text TEXT, episode INTEGER, turn_start INTEGER, persistence TEXT, "
            "status TEXT, created_version INTEGER, changed_version INTEGER);"
            "CREATE INDEX ix ON m (location_id, status);"
            "CREATE TABLE l (id INTEGER PRIMARY KEY, memory_id INTEGER UNIQUE, "
            "superseded_by_id INTEGER, episode INTEGER, turn INTEGER)"
        )
        self.next_title = 0

    def fill(self, location_id: int, count: int) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO m (location_id, category, title, text, episode, turn_start, "
            "persistence, status) VALUES (?, 'DISCOVERY', ?, ?, 1, ?, 'permanent', 'ACTIVE')",
            ((location_id, f"fact {n}", TEXT, n) for n in range(count)),
        )
        self.conn.execute("COMMIT")

    def insert(self, i: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT INTO m (location_id, category, title, text, episode, turn_start, "
            "persistence, status) VALUES (?, 'DISCOVERY', ?, ?, 1, ?, 'permanent', 'ACTIVE')",
            (i % 110, f"raw {i}", TEXT, i),
        )
        self.conn.execute("COMMIT")

    def supersede(self, location_id: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        (old,) = self.conn.execute(
            "SELECT id FROM m WHERE location_id = ? AND status != 'SUPERSEDED' LIMIT 1",
            (location_id,),
        ).fetchone()
        self.conn.execute("UPDATE m SET status = 'SUPERSEDED' WHERE id = ?", (old,))
        new = self.conn.execute(
            "INSERT INTO m (location_id, category, title, text, episode, turn_start, "
            "persistence, status) VALUES (?, 'DISCOVERY', 'newer', ?, 1, 9, 'permanent', "
            "'ACTIVE')",
            (location_id, TEXT),
        ).lastrowid
        self.conn.execute(
            "INSERT INTO l (memory_id, superseded_by_id, episode, turn) VALUES (?, ?, 1, 9)",
            (old, new),
        )
        self.conn.execute("COMMIT")

    def read(self, location_id: int) -> None:
        self.conn.execute(
            "SELECT category, title, text, persistence, status FROM m "
            "WHERE location_id = ? AND status != 'SUPERSEDED' ORDER BY id",
            (location_id,),
        ).fetchall()


def bench_writes(
    folder: Path, runs: int, small: dict[str, tuple[float, float]]
) -> list[tuple[str, float, float]]:
    """The durable writes beside the floor; ``small`` gets each one's figures beside the
    same floor with memstore's own page size (memstore.connection.PAGE_SIZE), measured in
    the same rounds: not the issue's floor (SQLite's default pages), printed beside it."""
    floor = Floor(folder / "floor_writes.db")
    small_floor = Floor(folder / "floor_writes_small.db", page_size=PAGE_SIZE)
    with MemoryStore.open(folder / "writes.db") as store:
        for n in range(110):  # a live memory to supersede at each location, for both
            store.add_memory(n, f"Room {n}", memory("fact", 1))
            floor.fill(n, 1)
            small_floor.fill(n, 1)
        # the caller builds its Memory objects; the floor's rows are literals too
        new = [memory(f"new {i}", i) for i in range(runs)]
        add, raw_add, small_add = interleaved(
            runs,
            lambda i: store.add_memory(i % 110, "Room", new[i]),
            floor.insert,
            small_floor.insert,
        )
        titles = {n: "fact" for n in range(110)}
        newer = [memory(f"newer {i}", i) for i in range(runs)]

        def supersede(i: int) -> None:
            location = i % 110
            assert store.supersede_memory(location, "Room", titles[location], newer[i])
            titles[location] = newer[i].title

        sup, raw_sup, small_sup = interleaved(
            runs,
            supersede,
            lambda i: floor.supersede(i % 110),
            lambda i: small_floor.supersede(i % 110),
        )
    small["add"] = (med_us(add), med_us(small_add))
    small["supersede"] = (med_us(sup), med_us(small_sup))
    return [
        ("add_memory (durable)", med_us(add), med_us(raw_add)),
        ("supersede_memory (durable)", med_us(sup), med_us(raw_sup)),
    ]


def bench_reads(folder: Path, live: int, runs: int) -> list[tuple[str, float, float]]:
    floor = Floor(folder / f"floor_read_{live}.db")
    floor.fill(7, live)
    with MemoryStore.open(folder / f"read_{live}.db") as store:
        for n in range(live):
            store.add_memory(7, "Room", memory(f"fact {n}", n))
        store.get_location_memory(7)
        titles = [f"fact {n}" for n in range(live)]
        read_after: list[float] = []
        cold: list[float] = []

        newer = [memory(f"newer {i}", 1000 + i) for i in range(runs)]

        def write_then_read(i: int) -> None:
            old = titles[i % live]
            titles[i % live] = newer[i].title
            store.supersede_memory(7, "Room", old, newer[i])
            started = time.perf_counter()
            store.get_location_memory(7)
            read_after.append(time.perf_counter() - started)

        def cold_read(_i: int) -> None:
            store._forget(7)  # noqa: SLF001 - as after another process's write
            started = time.perf_counter()
            store.get_location_memory(7)
            cold.append(time.perf_counter() - started)

        _w, _c, raw = interleaved(runs, write_then_read, cold_read, lambda _i: floor.read(7))
    return [
        (f"read after write, {live} live here", med_us(read_after), med_us(raw)),
        (f"cold read, {live} live here", med_us(cold), med_us(raw)),
    ]


def bench_reset(folder: Path) -> float:
    samples = []
    with MemoryStore.open(folder / "reset.db") as store:
        for _ in range(5):
            for n in range(1000):
                store.add_memory(n % 110, "Room", memory(f"eph {n}", n, "ephemeral"))
            started = time.perf_counter()
            store.reset_episode()
            samples.append(time.perf_counter() - started)
    return med_us(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    args = parser.parse_args()
    runs = 60 if args.quick else 300
    print(describe("before"))
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small: dict[str, tuple[float, float]] = {}
        rows += bench_writes(folder, runs, small)
        for live in LIVE_COUNTS:
            rows += bench_reads(folder, live, runs)
        reset = bench_reset(folder)
    print(f"medians of {runs} interleaved rounds (us); ratio = memstore / raw sqlite3")
    print(f"  {'operation':38s} {'memstore':>9s} {'floor':>9s} {'ratio':>6s}")
    for name, ours, floor in rows:
        kind = "add" if name.startswith("add") else "supersede" if "supersede" in name else ""
        kind = "read" if name.startswith("read after") else kind
        target = TARGETS.get(kind)
        ratio = ours / floor
        verdict = (
            ""
            if target is None
            else f"  target <= {target}x: " + ("met" if ratio <= target else "MISSED")
        )
        print(f"  {name:38s} {ours:9.1f} {floor:9.1f} {ratio:6.2f}{verdict}")
    print(
        f"  (not the issue's floor: memstore makes its files with {PAGE_SIZE}-byte pages, the "
        f"floor keeps SQLite's default 4 KiB; the same floor with {PAGE_SIZE}-byte pages, in "
        f"the same rounds: "
        + "; ".join(
            f"{name} {floor:.1f} us, memstore {ours / floor:.2f}x it"
            for name, (ours, floor) in small.items()
        )
        + ")"
    )
    print(f"  reset_episode with 1,000 ephemeral memories: {reset:.0f} us")
    print(describe("after"))


if __name__ == "__main__":
    main()
