"""Flagged-memory benchmark: add_flagged_memory at 1,000 and 10,000 flagged memories.

    python bench/flagged_bench.py [--quick] [--runs N]

For each size, prints the median and p95 of durable ``add_flagged_memory`` calls that store
a new memory (the duplicate check, then one committed insert: WAL, synchronous=FULL), and of
calls that meet an exact duplicate (found by the read alone: no write); beside them, the
floor: one durable INSERT of the same row with plain sqlite3 into a copy of the table of the
same size (WAL, synchronous=FULL, BEGIN IMMEDIATE ... COMMIT). Store calls and floor inserts
alternate in one loop, so both see the same disk and the same minute, and the ratio of the
medians is printed. Target (issue 14): <= 1 ms median at 10,000 flagged memories.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe  # noqa: E402

from memstore.flagged import FlaggedMemories, normalise  # noqa: E402
from memstore.store import MemoryStore  # noqa: E402

LOCATIONS = 110  # Zork I's rooms: about 91 memories per room at 10,000
VERBS = ("open", "take", "read", "push", "climb", "light", "drop", "wave", "dig", "pray")
THINGS = ("mailbox", "leaflet", "lamp", "sword", "rope", "egg", "coffin", "torch", "bell", "boat")


def content(i: int) -> str:
    """A distinct note, as an agent writes them: no two are near duplicates."""
    verb, thing = VERBS[i % len(VERBS)], THINGS[(i // len(VERBS)) % len(THINGS)]
    return f"Note {i}: {verb} the {thing} here; it worked on try {i * 7 % 13 + 1}"


def row(i: int) -> tuple[object, ...]:
    text = content(i)
    location = i % LOCATIONS
    return (text, normalise(text), 100 + i % 900, i, location, f"Room {location}", 1, "fill")


INSERT = (
    "INSERT INTO flagged_memories (content, content_key, importance, turn, location_id, "
    "location_name, episode, session_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'now')"
)


def fill(db: Path, total: int) -> None:
    """``total`` flagged memories, by hand (setup, not measured)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.executemany(INSERT, [row(i) for i in range(total)])
    conn.close()


def floor_database(db: Path, schema_from: Path, total: int) -> sqlite3.Connection:
    """A plain sqlite3 database with the same flagged_memories table, indexes and rows."""
    source = sqlite3.connect(schema_from)
    ddl = [
        sql
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'flagged_memories' AND sql IS NOT NULL"
        )
    ]
    source.close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for statement in ddl:
        conn.execute(statement)
    conn.execute("BEGIN")
    conn.executemany(INSERT, [row(i) for i in range(total)])
    conn.execute("COMMIT")
    return conn


def durable_insert(conn: sqlite3.Connection, i: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(INSERT, row(i))
    conn.execute("COMMIT")


def summary(samples: list[float]) -> tuple[float, float]:
    """(median, p95) in microseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e6, p95 * 1e6


def bench_size(total: int, runs: int, folder: Path) -> None:
    db, floor_db = folder / f"flagged_{total}.db", folder / f"floor_{total}.db"
    MemoryStore.open(db).close()
    fill(db, total)
    floor = floor_database(floor_db, db, total)
    new: list[float] = []
    duplicate: list[float] = []
    raw: list[float] = []
    with MemoryStore.open(db) as store:
        flagged = FlaggedMemories(store, session_id="bench")

        def add_new(i: int) -> None:
            location = i % LOCATIONS
            if not flagged.add_flagged_memory(content(i), 500, i, location, f"Room {location}"):
                raise SystemExit(f"add_flagged_memory refused new note {i}")

        def insert_floor(i: int) -> None:
            durable_insert(floor, i)

        for run in range(runs):
            i = total + run  # a new memory each time
            steps = [(new, add_new), (raw, insert_floor)]
            if run % 2:
                steps.reverse()  # neither always goes first
            for samples, action in steps:
                started = time.perf_counter()
                action(i)
                samples.append(time.perf_counter() - started)
            # an exact duplicate (case changed) of a memory stored long ago: no write
            old = (run * 37) % total
            started = time.perf_counter()
            stored = flagged.add_flagged_memory(content(old).upper(), 1, 1, 0, "Room 0")
            duplicate.append(time.perf_counter() - started)
            if stored:
                raise SystemExit("a duplicate was stored")
        count = flagged.count()
    floor.close()
    if count != total + runs:
        raise SystemExit(f"expected {total + runs} flagged memories, found {count}")

    print(f"\n{total:,} flagged memories ({runs} runs, floor measured interleaved)")
    for label, samples in (
        ("add_flagged_memory, new (durable)", new),
        ("add_flagged_memory, duplicate", duplicate),
        ("floor: raw sqlite3 durable INSERT", raw),
    ):
        median, p95 = summary(samples)
        print(f"  {label:<36} median {median:7.0f} us   p95 {p95:7.0f} us")
    new_median, raw_median = summary(new)[0], summary(raw)[0]
    print(f"  {'ratio new / floor (medians)':<36} {new_median / raw_median:.2f}x")
    verdict = "met" if new_median <= 1000 else "NOT met"
    print(f"  target <= 1 ms median: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--runs", type=int, default=None, help="measured calls per size")
    args = parser.parse_args()
    runs = args.runs or (100 if args.quick else 500)
    print(describe("before"))
    with tempfile.TemporaryDirectory() as folder:
        for total in (1_000, 10_000):
            bench_size(total, runs, Path(folder))
    print()
    print(describe("after"))


if __name__ == "__main__":
    main()
