"""Import benchmark: ``memstore import --apply`` of 1,100 memories into an empty database.

    python bench/import_bench.py [--runs N]

The file is 110 locations x 10 memories (each location: 8 live memories, one superseded by
another, one invalidated), written by the exporter. Each run uses a fresh empty database.
Prints medians of:

* library: the function the command calls, ``import_memories`` (parse, merge, plan,
  apply and check the database's rules, in one transaction);
* command: one real in-process ``main(["--db", db, "import", file, "--apply"])``, which
  also reads the file, opens the (existing, empty) database and prints the summary;
* the same command when the database file does not exist yet, so ``MemoryStore.open``
  also creates the schema (a fixed cost of the store, not of the import);
* 3-way re-import: the database's own export (with its base line) imported back after an
  agent superseded 10 memories and a reviewer edited the text of 10 others.

Target: <= 100 ms.

Then the ratios to raw sqlite3 that issue 15 asks for, each sample of memstore taken right
beside a sample of its floor (one of each in turn, so that both see the machine at the same
speed, which swings 2x from one minute to the next):

* import: ``import_memories`` / one durable ``executemany`` of the same rows into a table
  of the same columns (WAL, synchronous=FULL, one transaction);
* export: ``memstore.md_store.export_memories_md`` and ``write_atomically`` (the text of
  ``memstore export``, written) / SELECT every row, write it as text, fsync; the export
  through ``store.export_snapshot()`` and ``render_memories_md`` (the public models) is
  timed beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe  # noqa: E402

from exporters import render_memories_md  # noqa: E402
from memstore import executor  # noqa: E402
from memstore.cli import main  # noqa: E402
from memstore.ddl import ephemeral_ddl  # noqa: E402
from memstore.export_file import write_atomically  # noqa: E402
from memstore.md_store import export_memories_md  # noqa: E402
from memstore.models import (  # noqa: E402
    LocationInfo,
    LocationMemories,
    Memory,
    parse_turns,  # noqa: E402
)
from memstore.store import MemoryStore  # noqa: E402
from memstore.store_import import import_memories  # noqa: E402

LOCATIONS = 110
PER_LOCATION = 10
TARGET_MS = 100.0
TEXT = "The troll blocks the passage and swings his axe; a sword is the only defence."


def build_file() -> str:
    entries = []
    for location_id in range(1, LOCATIONS + 1):
        memories = []
        for n in range(PER_LOCATION - 2):
            memories.append(
                Memory(
                    category="DISCOVERY",
                    title=f"Fact {n}",
                    text=TEXT,
                    episode=1,
                    turns=str(n + 1),
                    score_change=n % 3,
                    persistence="permanent",
                )
            )
        memories.insert(
            0,
            Memory(
                category="NOTE",
                title="Old fact",
                text=TEXT,
                episode=1,
                turns="1",
                persistence="core",
                status="SUPERSEDED",
                superseded_by="Fact 0",
                superseded_at_turn=9,
                superseded_at_episode=1,
            ),
        )
        memories.insert(
            1,
            Memory(
                category="DANGER",
                title="Wrong idea",
                text=TEXT,
                episode=1,
                turns="2-3",
                persistence="permanent",
                status="SUPERSEDED",
                invalidation_reason="it was wrong",
                superseded_at_turn=12,
                superseded_at_episode=2,
            ),
        )
        entries.append(
            LocationMemories(
                location=LocationInfo(
                    id=location_id, name=f"Room {location_id}", visit_count=3, episodes=(1, 2)
                ),
                memories=tuple(memories),
            )
        )
    return render_memories_md(entries)


def library_run(folder: Path, text: str, i: int) -> float:
    with MemoryStore.open(folder / f"lib{i}.db") as store:
        start = time.perf_counter()
        outcome = import_memories(store, text, apply=True)
        elapsed = time.perf_counter() - start
        assert store.get_persistent_count() == LOCATIONS * (PER_LOCATION - 2)
    assert len(outcome.plan.added) == LOCATIONS * PER_LOCATION and outcome.applied
    return elapsed


def three_way_run(folder: Path, text: str, i: int) -> float:
    """Import the database's own export back, after an agent and a reviewer changed it."""
    with MemoryStore.open(folder / f"three{i}.db") as store:
        import_memories(store, text, apply=True)
        exported = render_memories_md(*store.export_snapshot())
        for location_id in range(1, 11):
            new = Memory(
                category="NOTE",
                title="Agent's fact",
                text=TEXT,
                episode=3,
                turns="40",
                persistence="permanent",
            )
            assert store.supersede_memory(location_id, f"Room {location_id}", "Fact 3", new)
        reviewed = exported
        for location_id in range(20, 30):
            header = f"## Location {location_id}: Room {location_id}"
            at = reviewed.index(TEXT, reviewed.index(header))
            reviewed = reviewed[:at] + "Reviewed. " + reviewed[at:]
        start = time.perf_counter()
        outcome = import_memories(store, reviewed, apply=True)
        elapsed = time.perf_counter() - start
    assert outcome.applied and not outcome.plan.conflicts, outcome.plan.summary()
    assert len(outcome.plan.changed) == 10 and not outcome.plan.added
    return elapsed


def floor_rows(text: str) -> list[tuple[object, ...]]:
    """The file's memories as the rows a bulk insert writes (the floor's input)."""
    from exporters import parse_memories_md

    rows = []
    for entry in parse_memories_md(text).locations:
        for m in entry.memories:
            start, end = parse_turns(m.turns)
            rows.append(
                (
                    entry.location.id,
                    m.category.value,
                    m.title,
                    m.text,
                    m.episode,
                    start,
                    end,
                    m.score_change,
                    m.persistence.value,
                    m.status.value,
                    "2026-11-23",
                )
            )
    return rows


def floor_import(folder: Path, rows: list[tuple[object, ...]], i: int) -> float:
    """Raw sqlite3: one durable executemany of the same rows into a table of that shape."""
    conn = sqlite3.connect(folder / f"floor{i}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE m (id INTEGER PRIMARY KEY, location_id INTEGER, category TEXT, "
        "title TEXT, text TEXT, episode INTEGER, turn_start INTEGER, turn_end INTEGER, "
        "score_change INTEGER, persistence TEXT, status TEXT, created_at TEXT)"
    )
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO m VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def schema_floor_import(folder: Path, rows: list[tuple[object, ...]], i: int) -> float:
    """Raw sqlite3: the same durable executemany into memstore's own ``memories`` table (its
    indexes and CHECK constraints), with the locations already there. Not the issue's
    floor: printed beside it, to show what the schema itself costs."""
    path = folder / f"schema-floor{i}.db"
    MemoryStore.open(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executemany(
        "INSERT INTO locations (id, name, visit_count) VALUES (?, ?, 0)",
        [(n, f"Room {n}") for n in range(1, LOCATIONS + 1)],
    )
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO memories (location_id, category, title, text, episode, turn_start, "
        "turn_end, score_change, persistence, status, created_at, created_version, "
        "changed_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 1)",
        rows,
    )
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


class _Recorder:
    """A driver connection that records what the executor runs on it (the replay's input)."""

    def __init__(self, driver: Any, log: list[tuple[str, Any, bool]]) -> None:
        self.driver, self.log = driver, log

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        self.log.append((sql, parameters, False))
        return self.driver.execute(sql, parameters)

    def cursor(self) -> Any:
        recorder = self

        class Cursor:
            def executemany(self, sql: str, rows: Any) -> Any:
                rows = list(rows)
                recorder.log.append((sql, rows, True))
                return recorder.driver.cursor().executemany(sql, rows)

        return Cursor()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.driver, name)


def import_statements(folder: Path, text: str) -> list[tuple[str, Any, bool]]:
    """Every statement one import runs through memstore's executor, with its parameters
    (SQL, parameters, whether it is an executemany)."""
    log: list[tuple[str, Any, bool]] = []
    real = executor.driver_of
    executor.driver_of = lambda conn: _Recorder(real(conn), log)  # type: ignore[assignment]
    try:
        with MemoryStore.open(folder / "recorded.db") as store:
            import_memories(store, text, apply=True)
    finally:
        executor.driver_of = real  # type: ignore[assignment]
    return log


def replay_import(folder: Path, statements: list[tuple[str, Any, bool]], i: int) -> float:
    """Raw sqlite3: the import's own statements, with their parameters, on an empty database
    of memstore's schema, in one durable transaction. Not the issue's floor: the part of
    the import that no speed-up of memstore's Python can remove."""
    path = folder / f"replay{i}.db"
    MemoryStore.open(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("ATTACH DATABASE ':memory:' AS ephemeral")
    for statement in ephemeral_ddl():
        conn.execute(statement)
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for sql, parameters, many in statements:
        if many:
            conn.executemany(sql, parameters)
        else:
            conn.execute(sql, parameters).fetchall()
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def export_run(folder: Path, text: str, i: int) -> tuple[float, float, float]:
    """memstore's export (rows, render, atomic write), the same through the public models
    (``export_snapshot``), and the floor (SELECT every row, write it as text, fsync) on the
    same database, one after the other."""
    db = folder / f"export{i}.db"
    with MemoryStore.open(db) as store:
        import_memories(store, text, apply=True)
        start = time.perf_counter()
        write_atomically(folder / f"M{i}.md", export_memories_md(store))
        ours = time.perf_counter() - start
        start = time.perf_counter()
        write_atomically(folder / f"S{i}.md", render_memories_md(*store.export_snapshot()))
        models = time.perf_counter() - start
    conn = sqlite3.connect(db)
    start = time.perf_counter()
    rows = conn.execute("SELECT * FROM memories ORDER BY location_id, id").fetchall()
    with open(folder / f"F{i}.txt", "w", encoding="utf-8") as out:
        out.write("\n".join("\t".join(map(str, row)) for row in rows))
        out.flush()
        os.fsync(out.fileno())
    floor = time.perf_counter() - start
    conn.close()
    return ours, models, floor


def ratio_samples(folder: Path, text: str, runs: int) -> dict[str, list[float]]:
    """Interleaved samples: an import, its floor, an export and its floor, in turn."""
    rows = floor_rows(text)
    statements = import_statements(folder, text)
    samples: dict[str, list[float]] = {
        "import": [],
        "import floor": [],
        "schema floor": [],
        "replay": [],
        "export": [],
        "export (models)": [],
        "export floor": [],
    }
    for i in range(runs):
        samples["import"].append(library_run(folder, text, 1000 + i))
        samples["import floor"].append(floor_import(folder, rows, i))
        samples["schema floor"].append(schema_floor_import(folder, rows, i))
        samples["replay"].append(replay_import(folder, statements, i))
        ours, models, floor = export_run(folder, text, i)
        samples["export"].append(ours)
        samples["export (models)"].append(models)
        samples["export floor"].append(floor)
    return samples


def command_run(folder: Path, file: Path, i: int, *, create: bool = False) -> float:
    db = folder / f"cmd{i}{'-new' if create else ''}.db"
    if not create:  # an empty database that already exists (created untimed)
        MemoryStore.open(db).close()
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        code = main(["--db", str(db), "import", str(file), "--apply"])
    elapsed = time.perf_counter() - start
    assert code == 0 and "added 1100" in sink.getvalue(), sink.getvalue()
    return elapsed


def print_ratios(samples: dict[str, list[float]], runs: int) -> None:
    """The ratios of the interleaved samples to their floors."""
    median = statistics.median
    ms = {name: median(times) * 1000 for name, times in samples.items()}

    def paired(name: str, floor: str) -> float:
        """The median of the ratios of samples taken side by side."""
        return median([a / b for a, b in zip(samples[name], samples[floor], strict=True)])

    print(
        f"ratios to raw sqlite3, interleaved samples, medians of {runs} "
        f"(issue 15 targets: import <= 3x, export <= 2x):\n"
        f"  import (library) {ms['import']:.1f} ms / durable executemany of the same rows "
        f"{ms['import floor']:.1f} ms = {ms['import'] / ms['import floor']:.1f}x "
        f"(median of paired ratios {paired('import', 'import floor'):.1f}x)\n"
        f"    (not the issue's floor: the same executemany into memstore's own memories "
        f"table, its indexes and CHECK constraints, {ms['schema floor']:.1f} ms, is itself "
        f"{paired('schema floor', 'import floor'):.1f}x that floor; the import is "
        f"{paired('import', 'schema floor'):.1f}x it)\n"
        f"    (not the issue's floor either: the import's own SQL statements, replayed with "
        f"their parameters through raw sqlite3 on memstore's schema, {ms['replay']:.1f} ms, "
        f"are {paired('replay', 'import floor'):.2f}x that floor: the part no speed-up of "
        f"memstore's Python removes)\n"
        f"  export (md_store.export_memories_md + write_atomically) {ms['export']:.1f} ms / "
        f"SELECT + write + fsync {ms['export floor']:.1f} ms = "
        f"{ms['export'] / ms['export floor']:.1f}x "
        f"(median of paired ratios {paired('export', 'export floor'):.1f}x)\n"
        f"  export through export_snapshot() and the models {ms['export (models)']:.1f} ms = "
        f"{ms['export (models)'] / ms['export floor']:.1f}x "
        f"(median of paired ratios {paired('export (models)', 'export floor'):.1f}x)"
    )


def chain_file(length: int) -> str:
    """One location whose memories supersede each other in one chain of ``length`` (the
    last live): the plan's circle check followed it once per title (quadratic: 2.6 s at
    4,000) before it spread from the chain's end."""
    memories = [
        Memory(
            category="NOTE",
            title=f"Fact {n}",
            text=TEXT,
            episode=1,
            turns=str(n + 1),
            persistence="permanent",
            status="ACTIVE" if n == length - 1 else "SUPERSEDED",
            superseded_by=None if n == length - 1 else f"Fact {n + 1}",
            superseded_at_turn=None if n == length - 1 else n + 2,
            superseded_at_episode=None if n == length - 1 else 1,
        )
        for n in range(length)
    ]
    location = LocationInfo(id=5, name="Cave", visit_count=1, episodes=(1,))
    return render_memories_md([LocationMemories(location=location, memories=tuple(memories))])


def chain_plans(folder: Path, lengths: tuple[int, ...]) -> list[tuple[int, float]]:
    """The dry run (parse, merge, plan) of ``chain_file`` of each length, seconds."""
    timed = []
    for length in lengths:
        text = chain_file(length)
        with MemoryStore.open(folder / f"chain{length}.db") as store:
            start = time.perf_counter()
            import_memories(store, text, apply=False)
            timed.append((length, time.perf_counter() - start))
    return timed


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--ratios-only", action="store_true", help="only the interleaved ratios to sqlite3"
    )
    args = parser.parse_args(argv)
    text = build_file()
    print(describe("before"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        file = folder / "Memories.md"
        file.write_text(text, encoding="utf-8")
        library_run(folder, text, -1)  # warm-up: imports, tokenizer, compiled statements
        command_run(folder, file, -1)
        export_run(folder, text, -1)
        if args.ratios_only:
            print_ratios(ratio_samples(folder, text, args.runs), args.runs)
            print(describe("after"))
            return 0
        library = [library_run(folder, text, i) for i in range(args.runs)]
        command = [command_run(folder, file, i) for i in range(args.runs)]
        creating = [command_run(folder, file, i, create=True) for i in range(args.runs)]
        three_way = [three_way_run(folder, text, i) for i in range(args.runs)]
        samples = ratio_samples(folder, text, args.runs)
        chains = chain_plans(folder, (2_000, 20_000))
    total = LOCATIONS * PER_LOCATION
    print(
        f"import of {total} memories ({LOCATIONS} locations x {PER_LOCATION}) into an empty "
        f"database, {len(text):,} bytes of Memories.md, median of {args.runs} runs:"
    )
    for name, times in (
        ("library import_memories (one transaction)", library),
        ("command main([... 'import', FILE, '--apply'])", command),
        ("same, the command also creating the database", creating),
        ("3-way re-import of its own export, edited", three_way),
    ):
        median = statistics.median(times) * 1000
        verdict = "ok" if median <= TARGET_MS else "OVER TARGET"
        print(
            f"  {name:<48} {median:7.1f} ms   (target <= {TARGET_MS:.0f} ms: {verdict}; "
            f"min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})"
        )
    (short, short_s), (long, long_s) = chains
    print(
        f"dry run of one supersession chain at one location: {short:,} memories "
        f"{short_s * 1000:.0f} ms, {long:,} memories {long_s * 1000:.0f} ms "
        f"({long_s / short_s:.1f}x for {long // short}x the memories: linear is {long // short}x)"
    )
    print_ratios(samples, args.runs)
    print(describe("after"))
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
