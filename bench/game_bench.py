"""Benchmark: Jericho's full Zork I walkthrough, bare and through memstore's game adapter.

    MEMSTORE_ROM=/path/to/zork1.z3 python bench/game_bench.py [--repeats 5] [--json]

Modes (each replays Jericho's 396-action walkthrough with seed 12, from reset):

* ``bare``    - ``FrotzEnv.step`` only: the emulator's own speed;
* ``adapter`` - ``ZorkGame.step``: the emulator plus the Z-machine state reads before and
  after every action (location, score, moves, inventory with names) and the text checks;
  the per-turn state read (one snapshot) is also timed on its own, next to its target;
* ``memory``  - the adapter with the memory manager (offline recorder) in the loop, one
  episode per repeat on one database: its last column is the memory system's overhead per
  turn (target: >= 2,000 turns per second end to end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe  # noqa: E402

from memstore.game import DEFAULT_SEED, ZorkGame  # noqa: E402
from memstore.rom import RomError, find_rom  # noqa: E402

#: per-turn budget for reading location, score, moves, inventory and names
STATE_READ_TARGET_US = 60.0
#: end-to-end turns per second with the memory manager in the loop
MEMORY_TARGET_TPS = 2000


@dataclass
class BenchResult:
    mode: str
    turns: int
    seconds: float
    final_score: int | None = None
    #: per-turn state-read samples in microseconds (adapter mode only)
    read_us: list[float] = field(default_factory=list, repr=False)

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds if self.seconds else float("inf")

    @property
    def us_per_turn(self) -> float:
        return self.seconds / self.turns * 1e6 if self.turns else 0.0

    def read_stats(self) -> dict[str, float] | None:
        if not self.read_us:
            return None
        ordered = sorted(self.read_us)
        return {
            "median_us": statistics.median(ordered),
            "p95_us": ordered[int(0.95 * (len(ordered) - 1))],
            "max_us": ordered[-1],
        }

    def summary(self) -> dict:
        out = asdict(self)
        out.pop("read_us")
        out["turns_per_second"] = self.turns_per_second
        out["us_per_turn"] = self.us_per_turn
        out["state_read"] = self.read_stats()
        return out


def walkthrough() -> list[str]:
    from memstore.game import zork1_walkthrough

    return zork1_walkthrough()


def bench_bare(rom: Path, actions: list[str], repeats: int) -> BenchResult:
    """(a) bare Jericho: reset, then ``env.step`` for every action."""
    from jericho import FrotzEnv
    from jericho.jericho import UnsupportedGameWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedGameWarning)
        env = FrotzEnv(str(rom), seed=DEFAULT_SEED)
    total = 0.0
    for _ in range(repeats):
        env.reset()
        t0 = time.perf_counter()
        for action in actions:
            env.step(action)
        total += time.perf_counter() - t0
    env.close()
    return BenchResult("bare", len(actions) * repeats, total)


def bench_adapter(rom: Path, actions: list[str], repeats: int) -> BenchResult:
    """(b) the adapter: ``ZorkGame.step`` (reads before and after each action).

    A second pass steps the bare environment and times one state read after each step:
    the per-turn cost that counts against the target.
    """
    game = ZorkGame(rom, seed=DEFAULT_SEED)
    total = 0.0
    score = None
    for _ in range(repeats):
        game.reset()
        t0 = time.perf_counter()
        for action in actions:
            result = game.step(action)
        total += time.perf_counter() - t0
        score = result.after.score
    reads: list[float] = []
    read = game.reader.read
    clock = time.perf_counter_ns
    for _ in range(repeats):
        game.reset()
        for action in actions:
            game.env.step(action)
            t0 = clock()
            read(False, False)
            reads.append((clock() - t0) / 1000)
    game.close()
    return BenchResult("adapter", len(actions) * repeats, total, score, reads)


def bench_with_memory_manager(rom: Path, actions: list[str], repeats: int) -> BenchResult:
    """(c) the adapter with the memory manager (offline recorder) in the loop, end to end.

    Each repeat is one episode on the same database file (in a temporary folder): before
    each action the agent's context is read (``get_location_memory``); after it,
    ``record_action_outcome`` judges it; ``reset_episode`` between repeats. The memory
    system's own time per turn is kept as ``read_us`` (the overhead samples).
    """
    import tempfile

    from memstore.config import MemstoreConfig
    from memstore.game import z_machine_context
    from memstore.manager import SimpleMemoryManager
    from memstore.store import MemoryStore
    from memstore.tokens import count_tokens

    count_tokens("warm the tokenizer up")  # a one-off load, not a per-turn cost
    overhead: list[float] = []
    total = 0.0
    score = None
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore.open(Path(folder) / "bench.db", config=MemstoreConfig())
        manager = SimpleMemoryManager(store)
        game = ZorkGame(rom, seed=DEFAULT_SEED)
        clock = time.perf_counter
        for _ in range(repeats):
            _, snapshot = game.reset()
            t0 = clock()
            for action in actions:
                a = clock()
                manager.get_location_memory(snapshot.location_id)
                b = clock()
                result = game.step(action)
                c = clock()
                manager.record_action_outcome(
                    result.before.location_id,
                    result.before.location_name,
                    action,
                    result.response,
                    z_machine_context(result.before, result.after, result.response),
                )
                overhead.append((b - a + clock() - c) * 1e6)
                snapshot = result.after
            manager.reset_episode()
            total += clock() - t0
            score = snapshot.score
        game.close()
        manager.close()
        store.close()
    return BenchResult("memory", len(actions) * repeats, total, score, overhead)


MODES: dict[str, Callable[[Path, list[str], int], BenchResult]] = {
    "bare": bench_bare,
    "adapter": bench_adapter,
    "memory": bench_with_memory_manager,
}


def report(results: list[BenchResult]) -> str:
    lines = [
        f"{'mode':<10}{'turns':>8}{'turns/s':>12}{'µs/turn':>10}  "
        "state read (adapter) / memory overhead (memory) per turn"
    ]
    for r in results:
        stats = r.read_stats()
        if stats and r.mode == "memory":
            read = (
                f"median {stats['median_us']:.1f} µs, p95 {stats['p95_us']:.1f} µs; "
                f"{r.turns_per_second:,.0f} turns/s (target >= {MEMORY_TARGET_TPS:,}: "
                f"{'met' if r.turns_per_second >= MEMORY_TARGET_TPS else 'MISSED'})"
            )
        elif stats:
            read = (
                f"median {stats['median_us']:.1f} µs, p95 {stats['p95_us']:.1f} µs "
                f"(target ≤ {STATE_READ_TARGET_US:.0f} µs: "
                f"{'met' if stats['median_us'] <= STATE_READ_TARGET_US else 'MISSED'})"
            )
        else:
            read = "-"
        lines.append(
            f"{r.mode:<10}{r.turns:>8}{r.turns_per_second:>12,.0f}{r.us_per_turn:>10.1f}  {read}"
        )
        if r.final_score is not None:
            lines.append(f"{'':<10}final score {r.final_score}/350")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rom", help="story file (default: find_rom())")
    parser.add_argument("--repeats", type=int, default=5, help="walkthrough replays per mode")
    parser.add_argument(
        "--modes", default="bare,adapter,memory", help=f"comma-separated, from {', '.join(MODES)}"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        rom = find_rom(args.rom)
    except RomError as exc:
        print(exc, file=sys.stderr)
        return 2
    actions = walkthrough()
    if not args.json:
        print(describe("before"))
    results = []
    for mode in args.modes.split(","):
        mode = mode.strip()
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}")
        try:
            results.append(MODES[mode](rom, actions, args.repeats))
        except NotImplementedError as exc:
            print(f"{mode}: skipped ({exc})", file=sys.stderr)
    if args.json:
        print(json.dumps([r.summary() for r in results], indent=2))
    else:
        print(f"Zork I walkthrough: {len(actions)} actions x {args.repeats} repeats, {rom}")
        print(report(results))
        print(describe("after"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
