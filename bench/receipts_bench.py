"""The manager's write receipts on PostgreSQL (memstore.commit_doubt): their cost a turn.

    python bench/receipts_bench.py [--runs N]

Each run plays the first 120 actions of Jericho's Zork I walkthrough through a
``SimpleMemoryManager`` (the offline recorder and the map) on a new database of a
throwaway durable cluster (tests/pg_cluster.py: fsync and synchronous_commit on), once
with receipts (as shipped) and once without (``CommitDoubt.enabled`` off), interleaved;
it prints the medians of the time a turn takes, and their ratio. Needs the PostgreSQL
server binaries and MEMSTORE_ROM.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from machine import describe  # noqa: E402
from pg_cluster import PgCluster  # noqa: E402

from memstore.game import z_machine_context  # noqa: E402
from memstore.manager import SimpleMemoryManager  # noqa: E402
from memstore.store import MemoryStore  # noqa: E402
from memstore.triggers import ZMachineContext  # noqa: E402
from tests.fixtures.walkthrough import get_zork1_walkthrough, new_game  # noqa: E402

TURNS = 120
#: (location id, location name, action, response, context): one walkthrough turn
Turn = tuple[int, str, str, str, ZMachineContext]


def walkthrough_turns() -> list[Turn]:
    game = new_game()
    try:
        turns = []
        for action in get_zork1_walkthrough()[:TURNS]:
            step = game.step(action)
            context = z_machine_context(step.before, step.after, step.response)
            turns.append(
                (step.before.location_id, step.before.location_name, action, step.response, context)
            )
        return turns
    finally:
        game.close()


def one_run(url: str, turns: list[Turn], receipts: bool) -> float:
    """Microseconds a turn, ``close()`` included."""
    with MemoryStore.open(url) as store:
        manager = SimpleMemoryManager(store)
        manager._synthesis.doubt.enabled = receipts
        start = time.perf_counter()
        for here, name, action, response, context in turns:
            manager.get_location_memory(here)
            manager.record_action_outcome(here, name, action, response, context)
        manager.close()
        return (time.perf_counter() - start) / len(turns) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    print(describe("before"))
    turns = walkthrough_turns()
    cluster = PgCluster.start(Path(tempfile.mkdtemp()), durable=True)
    try:
        times: dict[bool, list[float]] = {True: [], False: []}
        for run in range(args.runs):
            for receipts in (True, False):
                url = cluster.create_database(f"receipts_{run}_{int(receipts)}")
                times[receipts].append(one_run(url, turns, receipts))
    finally:
        cluster.stop()
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    print(
        f"PostgreSQL, {TURNS} walkthrough turns a run, medians of {args.runs} interleaved runs: "
        f"{with_:,.0f} us a turn with receipts, {without:,.0f} us without: "
        f"{with_ / without:.2f}x"
    )
    print(describe("after"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
