"""Store benchmark: medians for the per-turn paths at 1,100 and 100,000 memories.

    python bench/store_bench.py [--quick]

Prints, for each size, the median of: durable add_memory (WAL, synchronous=FULL, committed
before return), supersede_memory, get_location_memory, reset_episode with 1,000 ephemeral
rows; and raw sqlite3 baselines on the same machine: one durable insert, one indexed
per-location query. Targets (issue 2): get_location_memory <= 100 us and durable
add_memory <= 0.5 ms at both sizes.
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

from memstore.models import Memory  # noqa: E402
from memstore.store import MemoryStore  # noqa: E402

LOCATIONS = 110
TEXT = "The troll blocks the passage and swings his axe; a sword is the only defence."


def memory(title: str, persistence: str = "permanent", turn: int = 1) -> Memory:
    return Memory(
        category="DISCOVERY",
        title=title,
        text=TEXT,
        episode=1,
        turns=str(turn),
        score_change=0,
        persistence=persistence,
    )


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def timed(action: Callable[[int], object], runs: int) -> list[float]:
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        action(i)
        samples.append(time.perf_counter() - start)
    return samples


def fill(store: MemoryStore, total: int) -> None:
    """Bulk-load ``total`` memories, 10 per location (setup, not measured).

    1,100 memories are Zork's 110 locations x 10; 100,000 spread the same 10-per-location
    density over 10,000 location ids, so the queried location holds 10 memories either way
    and the figures show whether retrieval depends on the total.
    """
    from sqlalchemy import insert

    from memstore.schema import locations, memories

    location_count = total // 10
    with store._write() as conn:  # noqa: SLF001 - benchmark setup
        conn.execute(
            insert(locations), [{"id": i, "name": f"Room {i}"} for i in range(location_count)]
        )
        rows = [
            {
                "location_id": i % location_count,
                "category": "NOTE",
                "title": f"fact {i}",
                "text": TEXT,
                "episode": 1,
                "turn_start": i,
                "turn_end": None,
                "score_change": 0,
                "persistence": "permanent",
                "status": "ACTIVE",
                "created_at": "2026-11-22T00:00:00",
            }
            for i in range(total)
        ]
        conn.execute(insert(memories), rows)


def bench_size(total: int, runs: int, folder: Path) -> dict[str, float]:
    db = folder / f"bench_{total}.db"
    results: dict[str, float] = {}
    with MemoryStore.open(db) as store:
        fill(store, total)
        results["add_memory (durable)"] = median_us(
            timed(lambda i: store.add_memory(i % LOCATIONS, "Room", memory(f"new {i}")), runs)
        )
        results["supersede_memory"] = median_us(
            timed(
                lambda i: store.supersede_memory(
                    i % LOCATIONS, "Room", f"new {i}", memory(f"newer {i}")
                ),
                runs,
            )
        )
        # a location holding 10 live memories, as in the 110 x 10 layout
        location = 7
        live = store.get_persistent_count(location)
        results["get_location_memory"] = median_us(
            timed(lambda _i: store.get_location_memory(location), max(runs, 2000))
        )

        def uncached(_i: int) -> None:
            store._forget()  # noqa: SLF001 - as after a write: the next read goes to SQLite
            start = time.perf_counter()
            store.get_location_memory(location)
            miss_times.append(time.perf_counter() - start)

        miss_times: list[float] = []
        for i in range(max(runs, 2000)):
            uncached(i)
        results["get_location_memory (cache miss)"] = median_us(miss_times)
        results["(live memories at the queried location)"] = live

        def reset(_i: int) -> None:
            for n in range(1000):
                store.add_memory(n % LOCATIONS, "Room", memory(f"eph {n}", "ephemeral"))
            start = time.perf_counter()
            store.reset_episode()
            reset_times.append(time.perf_counter() - start)

        reset_times: list[float] = []
        for i in range(5):
            reset(i)
        results["reset_episode (1,000 ephemeral)"] = median_us(reset_times)
    return results


def raw_baselines(total: int, runs: int, folder: Path) -> dict[str, float]:
    db = folder / f"raw_{total}.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE m (id INTEGER PRIMARY KEY, loc INTEGER, title TEXT, text TEXT, status TEXT)"
    )
    conn.execute("CREATE INDEX ix ON m (loc, status)")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO m (loc, title, text, status) VALUES (?, ?, ?, 'ACTIVE')",
        ((i % (total // 10), f"fact {i}", TEXT) for i in range(total)),
    )
    conn.execute("COMMIT")

    def insert(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO m (loc, title, text, status) VALUES (?, ?, ?, 'ACTIVE')",
            (i % LOCATIONS, f"raw {i}", TEXT),
        )
        conn.execute("COMMIT")

    query = "SELECT title, text FROM m WHERE loc = ? AND status != 'SUPERSEDED' ORDER BY id"
    out = {
        "raw sqlite3 durable insert": median_us(timed(insert, runs)),
        "raw sqlite3 indexed per-location query": median_us(
            timed(lambda _i: conn.execute(query, (7,)).fetchall(), max(runs, 2000))
        ),
    }
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (for a smoke test)")
    args = parser.parse_args()
    runs = 100 if args.quick else 500
    targets = {
        "add_memory (durable)": 500.0,
        "get_location_memory": 100.0,
        "get_location_memory (cache miss)": 100.0,
    }
    print(describe("before"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for total in (1_100, 100_000):
            print(f"\n== {total:,} memories ({total // 10:,} locations x 10) — medians ==")
            figures = bench_size(total, runs, folder)
            figures.update(raw_baselines(total, runs, folder))
            for name, value in figures.items():
                if name.startswith("("):
                    print(f"  {name:42s} {int(value)}")
                    continue
                target = targets.get(name)
                verdict = ""
                if target is not None:
                    verdict = (
                        f"  target <= {target:.0f} us: {'met' if value <= target else 'MISSED'}"
                    )
                print(f"  {name:42s} {value:9.1f} us{verdict}")
    print(describe("after"))


if __name__ == "__main__":
    main()
