"""A fleet of agents on one database (issue 18): 8 processes x 500 mixed operations, on
SQLite (a file) and on PostgreSQL (a database in a throwaway cluster).

Each agent (tests/fleet_worker.py) logs what the API answered. Afterwards every
acknowledged write is in the database exactly once, every racing title has exactly one
live memory (and exactly one agent was told it won), every contested memory was superseded
or invalidated by exactly one agent, no agent's session tier reached the database or
another agent, and ``memstore check`` is clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the same module as conftest's (tests/ is on sys.path), so one cluster serves the session
from pg_cluster import PgCluster, PgClusterError, require_or_skip, shared_cluster
from pg_cluster import unavailable_reason as pg_unavailable_reason

from memstore.models import Memory, Status
from memstore.store import MemoryStore
from tests import fleet_worker as fleet

pytestmark = pytest.mark.slow

AGENTS = 8
OPERATIONS = 500
WORKER = Path(__file__).with_name("fleet_worker.py")
MEMSTORE = Path(sys.executable).with_name("memstore")
#: a whole fleet run takes seconds here; a stuck one fails instead of hanging the suite
DEADLINE_S = 600


@pytest.fixture(scope="session")
def pg_cluster() -> PgCluster:
    """The session's PostgreSQL cluster; skipped (or failed, when required) without one."""
    reason = pg_unavailable_reason()
    if reason is not None:
        require_or_skip(reason)
    try:
        return shared_cluster()
    except PgClusterError as exc:
        require_or_skip(f"the cluster did not start: {exc}")


@pytest.fixture(params=["sqlite", "postgresql"])
def fleet_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend: a file, or a new database in the cluster."""
    if request.param == "sqlite":
        yield str(tmp_path / "fleet.db")
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = f"fleet_{uuid.uuid4().hex[:12]}"
    url = cluster.create_database(name)
    try:
        yield url
    finally:
        cluster.drop_database(name)


def _seed_contested(db: str) -> int:
    """The memories the agents contest, one per contest step; how many."""
    steps = [step for step, kind in enumerate(fleet.schedule(OPERATIONS)) if kind == "contest"]
    with MemoryStore.open(db) as store:
        for step in steps:
            location, title = fleet.contest_key(step)
            assert store.add_memory(location, fleet.room(location), fleet.memory(title, 0))
    return len(steps)


def _run_fleet(db: str, folder: Path) -> list[dict[str, Any]]:
    """Start every agent, release them together, and gather their logs."""
    logs = [folder / f"agent{agent}.jsonl" for agent in range(AGENTS)]
    barriers = folder / "barriers"
    barriers.mkdir()
    errs = [(folder / f"agent{agent}.err").open("w") for agent in range(AGENTS)]
    workers = [
        subprocess.Popen(
            [
                *(sys.executable, str(WORKER), db, str(agent), str(AGENTS), str(OPERATIONS)),
                *(str(logs[agent]), str(barriers)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errs[agent],
            text=True,
        )
        for agent in range(AGENTS)
    ]
    try:
        for agent, worker in enumerate(workers):
            assert worker.stdout is not None and worker.stdin is not None
            ready = worker.stdout.readline()
            assert ready == "ready\n", f"agent {agent} did not start: {_tail(folder, agent)}"
        for worker in workers:  # the barrier: every store is open, now all go at once
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.close()
        codes = [worker.wait(timeout=DEADLINE_S) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        for err in errs:
            err.close()
    entries = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    errors = [entry for entry in entries if "error" in entry]
    failed = {agent: _tail(folder, agent) for agent, code in enumerate(codes) if code != 0}
    assert not failed and not errors, (
        f"agents {sorted(failed)} exited with an error; {len(errors)} unexpected answers: "
        + "; ".join(sorted({e["error"].strip().splitlines()[-1] for e in errors}))
        + f"\nthe first: {errors[:1]}\nstderr: {failed}"
    )
    return entries


def _tail(folder: Path, agent: int) -> str:
    return (folder / f"agent{agent}.err").read_text()[-2000:]


def _everything(store: MemoryStore) -> dict[int, list[Memory]]:
    """Every persistent memory, superseded ones too, by location."""
    return {info.id: store.memories(info.id, include_superseded=True) for info in store.locations()}


def test_a_fleet_of_eight_agents_keeps_every_acknowledged_write_exactly_once(
    fleet_db: str, tmp_path: Path
) -> None:
    contests = _seed_contested(fleet_db)
    entries = _run_fleet(fleet_db, tmp_path)
    store = MemoryStore.open(fleet_db)
    try:
        _check_the_fleet(store, entries, contests)
    finally:
        store.close()
    check = subprocess.run(
        [str(MEMSTORE), "--db", fleet_db, "check"], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr


def _check_the_fleet(store: MemoryStore, entries: list[dict[str, Any]], contests: int) -> None:
    assert store.get_ephemeral_count() == 0  # no agent's session tier is visible here
    by_location = _everything(store)
    rows = Counter((loc, m.title) for loc, found in by_location.items() for m in found)
    status = {(loc, m.title): m.status for loc, found in by_location.items() for m in found}
    assert all(count == 1 for count in rows.values()), [k for k, n in rows.items() if n > 1]

    expected: dict[tuple[int, str], Status] = {}  # every row the fleet should have left

    # this agent's own memories: each acknowledged add and revision is there, once
    revised = {(e["loc"], e["title"]) for e in entries if e["op"] == "revise"}
    for entry in entries:
        if entry["op"] in ("add", "revise"):
            assert entry["ok"], entry
            title = entry["title"] if entry["op"] == "add" else entry["new"]
            key = (entry["loc"], title)
            expected[key] = Status.SUPERSEDED if key in revised else Status.ACTIVE
    adds = sum(1 for e in entries if e["op"] == "add")
    assert adds > 1000

    # racing adds of one title: every agent tried, exactly one was told it won
    races: dict[tuple[int, str], list[bool]] = defaultdict(list)
    for entry in entries:
        if entry["op"] == "race":
            races[(entry["loc"], entry["title"])].append(entry["ok"])
    assert len(races) > 30
    won_by = {e["agent"] for e in entries if e["op"] in ("race", "contest") and e["ok"]}
    assert len(won_by) > 1, f"one agent won every race: they did not race ({won_by})"
    for key, answers in races.items():
        assert len(answers) == AGENTS and answers.count(True) == 1, (key, answers)
        expected[key] = Status.ACTIVE

    # one memory superseded and invalidated by several agents at once: one wins
    contested: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry["op"] == "contest":
            contested[(entry["loc"], entry["title"])].append(entry)
    assert len(contested) == contests > 30
    winners: Counter[str] = Counter()
    for (location, title), tries in contested.items():
        won = [entry for entry in tries if entry["ok"]]
        assert len(tries) == AGENTS and len(won) == 1, (title, tries)
        losers = {e["outcome"] for e in tries if not e["ok"] and e["how"] == "supersede"}
        assert losers <= {"NOT_FOUND"}, (title, tries)
        expected[(location, title)] = Status.SUPERSEDED
        winners[won[0]["how"]] += 1
        if won[0]["how"] == "supersede":
            expected[(location, won[0]["new"])] = Status.ACTIVE
            history = [m.title for m in store.history(location, won[0]["new"])]
            assert history == [title, won[0]["new"]]
    assert winners["supersede"] and winners["invalidate"], winners  # both kinds raced

    # session (ephemeral) memories: every agent's own, none of them on disk
    sessions = [entry for entry in entries if entry["op"] == "session"]
    assert sessions and all(entry["ok"] for entry in sessions)
    assert fleet.SESSION_ROOM not in by_location or not by_location[fleet.SESSION_ROOM]

    assert all(entry["ok"] for entry in entries if entry["op"] == "read")
    assert status == expected  # nothing lost, nothing extra, each in its final state
    assert store.get_persistent_count() == sum(
        1 for s in expected.values() if s is not Status.SUPERSEDED
    )
