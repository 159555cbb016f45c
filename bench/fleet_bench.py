"""Fleet benchmark (issue 18): 1, 2, 4 and 8 agent processes on one database, SQLite and
PostgreSQL side by side, every write durable.

    python bench/fleet_bench.py [--ops N] [--rounds R] [--agents 1,2,4,8] [--quick]

Each agent is a process (multiprocessing, spawn) with a store of its own. It opens the
store, waits at a barrier with the others, then runs N operations through memstore's
public API: half ``add_memory``, a quarter ``supersede_memory`` of one of its own memories
and a quarter ``get_location_memory``, in rooms every agent shares (so each agent's view
is refreshed after the others' writes, as in a real fleet). Every write is one committed,
durable transaction: SQLite in WAL with synchronous=FULL; PostgreSQL in a throwaway
cluster (tests/pg_cluster.py) with fsync, synchronous_commit and full_page_writes on.

Reported per backend and agent count, medians over the rounds: aggregate operations and
writes per second (all agents' operations over the time from the first agent's start to
the last one's end), each process's p95 latency (the median process and the worst), the
agents' CPU (their CPU seconds over the run's wall time, in cores), the whole machine's
busy share (every process, the database server's and other users' too, from /proc/stat;
near 100% means the fleet is bound by this machine's CPUs) and its CPU milliseconds per
operation (on an otherwise idle machine, the most its CPUs can serve is cpu_count divided
by that), and the aggregate throughput at N agents as a ratio to 1 agent. The backends
and agent counts are interleaved in every round, since this machine's speed drifts from
minute to minute.

The raw floor, for context: the same number of processes doing durable single-row inserts
with no memstore (sqlite3 in WAL with synchronous=FULL; psycopg with one commit each).

Until MemoryStore accepts PostgreSQL URLs, the PostgreSQL rows say why they are missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
ROOMS = 40
TEXT = "The troll blocks the passage and swings his axe; a sword is the only defence."
BACKENDS = ("sqlite", "postgresql")


def load_pg_cluster() -> ModuleType:
    """tests/pg_cluster.py, by path: bench/ is not a package and the cluster code stays out
    of the installed one."""
    spec = importlib.util.spec_from_file_location("pg_cluster", ROOT / "tests" / "pg_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_cluster"] = module
    spec.loader.exec_module(module)
    return module


# --- one agent (runs in a process of its own) ---------------------------------------------


def _memory(title: str, turn: int) -> Any:
    from memstore.models import Category, Memory, Persistence

    return Memory(
        category=Category.DISCOVERY,
        title=title,
        text=TEXT,
        episode=1,
        turns=str(turn),
        persistence=Persistence.PERMANENT,
    )


def memstore_agent(db: str, agent: int, ops: int, barrier: Any) -> dict[str, Any]:
    """``ops`` mixed operations; per-operation latencies and the run's wall and CPU time."""
    from memstore.store import MemoryStore

    store = MemoryStore.open(db)
    own: list[tuple[int, str]] = []
    writes = 0

    def run(i: int) -> None:
        nonlocal writes
        location = (agent * 7 + i) % ROOMS
        kind = i % 4
        if kind == 2 and own:
            where, old = own.pop(0)
            new = f"{old}, seen again at {i}"
            assert store.supersede_memory(where, f"Room {where}", old, _memory(new, i + 1))
            own.append((where, new))
            writes += 1
        elif kind == 3:
            store.get_location_memory(location)
        else:
            title = f"agent {agent} fact {i}"
            assert store.add_memory(location, f"Room {location}", _memory(title, i + 1))
            own.append((location, title))
            writes += 1

    measured = _timed(run, ops, store.close, barrier)
    measured["writes"] = writes
    return measured


def raw_sqlite_agent(db: str, agent: int, ops: int, barrier: Any) -> dict[str, Any]:
    """The floor: durable single-row inserts with sqlite3 (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=60)
    conn.execute("PRAGMA synchronous=FULL")

    def run(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO m (agent, title, text) VALUES (?, ?, ?)", (agent, str(i), TEXT))
        conn.execute("COMMIT")

    return _timed(run, ops, conn.close, barrier) | {"writes": ops}


def raw_postgresql_agent(conninfo: str, agent: int, ops: int, barrier: Any) -> dict[str, Any]:
    """The floor: durable single-row inserts with psycopg, one commit each."""
    import psycopg

    conn = psycopg.connect(conninfo)

    def run(i: int) -> None:
        conn.execute(
            "INSERT INTO m (agent, title, text) VALUES (%s, %s, %s)", (agent, str(i), TEXT)
        )
        conn.commit()

    return _timed(run, ops, conn.close, barrier) | {"writes": ops}


def machine_busy_ticks() -> tuple[int, int]:
    """(busy, all) CPU ticks of the whole machine so far (/proc/stat; zeros elsewhere):
    the agents, the database server and everything else."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _timed(
    run: Callable[[int], None], ops: int, close: Callable[[], None], barrier: Any
) -> dict[str, Any]:
    """Wait at the barrier, run ``ops`` operations, time each; close afterwards."""
    latencies: list[float] = []
    barrier.wait()
    machine = machine_busy_ticks()
    cpu = time.process_time()
    started = time.time()
    for i in range(ops):
        began = time.perf_counter()
        run(i)
        latencies.append(time.perf_counter() - began)
    ended = time.time()
    cpu = time.process_time() - cpu
    machine_after = machine_busy_ticks()
    close()
    return {
        "started": started,
        "ended": ended,
        "cpu": cpu,
        "latencies": latencies,
        "machine": (machine, machine_after),
    }


def _agent_main(kind: str, db: str, agent: int, ops: int, barrier: Any, results: Any) -> None:
    try:
        target = {
            "memstore": memstore_agent,
            "raw-sqlite": raw_sqlite_agent,
            "raw-postgresql": raw_postgresql_agent,
        }[kind]
        results.put((agent, target(db, agent, ops, barrier)))
    except BaseException:
        barrier.abort()  # the others must not wait for this one
        results.put((agent, {"error": traceback.format_exc()}))


# --- one fleet --------------------------------------------------------------------------


@dataclass
class Fleet:
    """What one run of ``agents`` processes measured."""

    agents: int
    ops_per_s: float
    writes_per_s: float
    p95_ms_median: float
    p95_ms_worst: float
    busy_cores: float
    machine_busy: float
    #: the whole machine's CPU milliseconds per operation (other users' load included)
    machine_ms_per_op: float


def run_fleet(kind: str, db: str, agents: int, ops: int) -> Fleet:
    barrier = SPAWN.Barrier(agents)
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_agent_main, args=(kind, db, agent, ops, barrier, results))
        for agent in range(agents)
    ]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=900) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    errors = [outcome["error"] for outcome in outcomes.values() if "error" in outcome]
    if errors:
        raise RuntimeError(f"{kind} with {agents} agents failed:\n{errors[0]}")
    first = min(outcomes.values(), key=lambda o: o["started"])
    last = max(outcomes.values(), key=lambda o: o["ended"])
    wall = last["ended"] - first["started"]
    (busy_0, all_0), (busy_1, all_1) = first["machine"][0], last["machine"][1]
    machine_busy = (busy_1 - busy_0) / (all_1 - all_0) if all_1 > all_0 else float("nan")
    p95s = [
        statistics.quantiles(o["latencies"], n=20)[-1] * 1000
        for o in outcomes.values()
        if len(o["latencies"]) >= 20
    ]
    return Fleet(
        agents=agents,
        ops_per_s=agents * ops / wall,
        writes_per_s=sum(o["writes"] for o in outcomes.values()) / wall,
        p95_ms_median=statistics.median(p95s) if p95s else float("nan"),
        p95_ms_worst=max(p95s) if p95s else float("nan"),
        busy_cores=sum(o["cpu"] for o in outcomes.values()) / wall,
        machine_busy=machine_busy,
        machine_ms_per_op=machine_busy * (os.cpu_count() or 1) * wall / (agents * ops) * 1000,
    )


# --- the databases ------------------------------------------------------------------------


class Backends:
    """A fresh database per fleet: a SQLite file, or a database in one durable cluster."""

    def __init__(self, folder: Path, want: list[str]) -> None:
        self.folder = folder
        self.cluster: Any = None
        self.missing: dict[str, str] = {}  # backend -> why it is not measured
        if "postgresql" in want:
            self._start_postgresql()

    def _start_postgresql(self) -> None:
        pg = load_pg_cluster()
        reason = pg.unavailable_reason()
        if reason is not None:
            self.missing["postgresql"] = f"unavailable: {reason}"
            return
        self.cluster = pg.PgCluster.start(self.folder, durable=True)
        probe = self.new("postgresql")
        try:
            from memstore.store import MemoryStore

            MemoryStore.open(probe).close()
        except Exception as exc:  # the store does not speak PostgreSQL (yet)
            self.missing["postgresql"] = f"unsupported: {type(exc).__name__}: {exc}"

    def new(self, backend: str, raw: bool = False) -> str:
        """A new empty database; for ``raw``, with the floor's table."""
        name = f"fleet_{uuid.uuid4().hex[:12]}"
        if backend == "sqlite":
            path = self.folder / f"{name}.db"
            if raw:
                with sqlite3.connect(path) as conn:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute(
                        "CREATE TABLE m (id INTEGER PRIMARY KEY, agent INTEGER, title TEXT, "
                        "text TEXT)"
                    )
            return str(path)
        url = self.cluster.create_database(name)
        if raw:
            import psycopg

            with psycopg.connect(self.cluster.conninfo(name), autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE m (id bigserial PRIMARY KEY, agent integer, title text, "
                    "text text)"
                )
            return str(self.cluster.conninfo(name))
        return str(url)

    def prepare(self, backend: str) -> str:
        """A new memstore database, its schema made before the agents start."""
        from memstore.store import MemoryStore

        db = self.new(backend)
        MemoryStore.open(db).close()
        return db

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


# --- the report ---------------------------------------------------------------------------


def median_fleet(runs: list[Fleet]) -> Fleet:
    return Fleet(
        agents=runs[0].agents,
        ops_per_s=statistics.median(r.ops_per_s for r in runs),
        writes_per_s=statistics.median(r.writes_per_s for r in runs),
        p95_ms_median=statistics.median(r.p95_ms_median for r in runs),
        p95_ms_worst=statistics.median(r.p95_ms_worst for r in runs),
        busy_cores=statistics.median(r.busy_cores for r in runs),
        machine_busy=statistics.median(r.machine_busy for r in runs),
        machine_ms_per_op=statistics.median(r.machine_ms_per_op for r in runs),
    )


def print_table(
    title: str, results: dict[str, dict[int, list[Fleet]]], missing: dict[str, str]
) -> None:
    print(title)
    print(
        f"  {'backend':11s} {'agents':>6s} {'ops/s':>8s} {'writes/s':>9s} {'x 1 agent':>9s} "
        f"{'p95 ms (median proc)':>21s} {'p95 ms (worst)':>15s} "
        f"{'agents CPU':>10s} {'machine busy':>12s} {'CPU ms/op':>9s}"
    )
    for backend, by_agents in results.items():
        if backend in missing:
            print(f"  {backend:11s} {missing[backend]}")
            continue
        one = median_fleet(by_agents[min(by_agents)]).ops_per_s
        for agents in sorted(by_agents):
            fleet = median_fleet(by_agents[agents])
            print(
                f"  {backend:11s} {agents:6d} {fleet.ops_per_s:8.0f} {fleet.writes_per_s:9.0f} "
                f"{fleet.ops_per_s / one:8.2f}x {fleet.p95_ms_median:21.2f} "
                f"{fleet.p95_ms_worst:15.2f} {fleet.busy_cores:10.2f} {fleet.machine_busy:12.0%} "
                f"{fleet.machine_ms_per_op:9.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300, help="operations per agent (300)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--agents", default="1,2,4,8", help="agent counts (1,2,4,8)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgresql")
    parser.add_argument("--quick", action="store_true", help="60 operations, 1 round")
    args = parser.parse_args()
    ops, rounds = (60, 1) if args.quick else (args.ops, args.rounds)
    counts = [int(n) for n in args.agents.split(",")]
    want = [b for b in args.backends.split(",") if b]
    print(describe("before"))
    print(f"{os.cpu_count()} CPUs; {ops} operations per agent; {rounds} rounds; medians")
    results: dict[str, dict[int, list[Fleet]]] = {b: {n: [] for n in counts} for b in want}
    floors: dict[str, dict[int, list[Fleet]]] = {b: {n: [] for n in (1, max(counts))} for b in want}
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        backends = Backends(Path(tmp), want)
        try:
            for round_number in range(rounds):
                order = want if round_number % 2 == 0 else want[::-1]
                for agents in counts:
                    for backend in order:
                        if backend in backends.missing:
                            continue
                        db = backends.prepare(backend)
                        results[backend][agents].append(run_fleet("memstore", db, agents, ops))
                for agents in floors[want[0]]:
                    for backend in order:
                        if backend in backends.missing:
                            continue
                        db = backends.new(backend, raw=True)
                        kind = f"raw-{backend}"
                        floors[backend][agents].append(run_fleet(kind, db, agents, ops))
                print(f"  round {round_number + 1} of {rounds} done", file=sys.stderr)
        finally:
            backends.close()
    print_table(
        "memstore (add 1/2, supersede 1/4, read 1/4; every write durable)",
        results,
        backends.missing,
    )
    print_table("raw floor (durable single-row inserts, no memstore)", floors, backends.missing)
    print(describe("after"))


if __name__ == "__main__":
    main()
