"""Read-only stores, and stores on a PostgreSQL hot standby.

A read-only store on a server has no ephemeral tier (so it reads a hot standby) and every
read-only store refuses every write up front, writing nothing: every public read (and the
read-only commands) gives on a standby what it gives on the primary; opening a standby for
writing is ReadOnlyDatabase; a read the standby cancels for a conflict with recovery is a
one-line memstore error. Part of the adversarial review of the answer watch and read-only
stores on a server.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from map_helpers import ATTIC, KITCHEN, NORTH, WEST, record_sample
from pg_cluster import PgCluster

from memstore.errors import MemstoreError, ReadOnlyDatabase
from memstore.flagged import FlaggedMemories
from memstore.invariants import check_invariants
from memstore.map_store import MapStore
from memstore.memory_tools import MemoryToolkit
from memstore.rows import Bookkeeping
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.answer_watch_helpers import _start_cluster, memories_md
from tests.pg_attack_helpers import memstore, note


class Replicated:
    """A primary with memories, flagged notes, a map and a decision, and its hot standby
    (which cancels a read in its way at once: max_standby_streaming_delay = 0)."""

    def __init__(self, cluster: PgCluster, standby_port: int, primary: str, export: str) -> None:
        self.cluster = cluster
        self.standby_port = standby_port
        self.primary = primary
        self.replica = self.on_standby(primary)
        self.export = export  # the primary's Memories.md

    def on_standby(self, url: str) -> str:
        return url.replace(f":{self.cluster.port}/", f":{self.standby_port}/")


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicated]:
    cluster = _start_cluster(tmp_path_factory.mktemp("primary"))
    try:
        url = cluster.create_database("replicated")
        with MemoryStore.open(url) as store:
            store.record_visit(KITCHEN, "Kitchen", 1)
            assert store.add_memory(KITCHEN, "Kitchen", note("Sack"))
            assert store.supersede_memory(KITCHEN, "Kitchen", "Sack", note("Open sack"))
            assert store.add_memory(KITCHEN, "Kitchen", note("Garlic", "core"))
            store.apply_synthesis(
                KITCHEN,
                "Kitchen",
                new_memory=note("Window"),
                episode=1,
                turn=4,
                log={"triggers": "first_visit", "mode": "offline"},
            )
            FlaggedMemories(store).add_flagged_memory(
                "The lamp is in the living room", 50, 3, KITCHEN, "Kitchen"
            )
            record_sample(store)
        exported = memstore("--db", url, "export", "--out", "-")
        assert exported.returncode == 0, exported.stderr
        with cluster.hot_standby("max_standby_streaming_delay=0") as port:
            yield Replicated(cluster, port, url, exported.stdout)
    finally:
        cluster.stop()


def _populate(store: MemoryStore) -> None:
    store.record_visit(KITCHEN, "Kitchen", 1)
    assert store.add_memory(KITCHEN, "Kitchen", note("Sack"))
    assert store.supersede_memory(KITCHEN, "Kitchen", "Sack", note("Open sack"))
    assert store.add_memory(KITCHEN, "Kitchen", note("Garlic", "core"))
    FlaggedMemories(store).add_flagged_memory(
        "The lamp is in the living room", 50, 3, KITCHEN, "Kitchen"
    )
    record_sample(store)


def _every_read(store: MemoryStore, export: str) -> dict[str, Any]:
    """Every public read of the store and its layers, as plain values."""
    flagged, the_map = FlaggedMemories(store), MapStore(store)
    tools = MemoryToolkit(store, llm=None)
    changed = export.replace("What we learned: Garlic.", "Garlic keeps the thief away.")
    with store.transaction(write=False) as conn:
        problems = check_invariants(conn, sqlite_checks=True)
    return {
        "view": store.get_location_memory(KITCHEN),
        "memories": store.memories(KITCHEN, include_superseded=True),
        "history": store.history(KITCHEN, "Open sack"),
        "location": store.location(KITCHEN),
        "locations": store.locations(),
        "decisions": len(store.decision_log()),
        "turns": store.turn_records(),
        "with memory": store.locations_with_memory(1),
        "ephemeral": (store.get_ephemeral_count(), store.get_ephemeral_count(KITCHEN)),
        "persistent": (store.get_persistent_count(), store.get_persistent_count(KITCHEN)),
        "breakdown": store.get_memory_breakdown(KITCHEN),
        "export": store.export_locations(),
        "status": {k: v for k, v in store.get_status().items() if k != "database"},
        "problems": problems,
        "dry import": import_memories(store, changed, apply=False).plan.has_changes,
        "flagged": (flagged.top(), flagged.all(), flagged.by_location_id(KITCHEN)),
        "flagged more": (flagged.by_location_name("kitchen"), flagged.count(), flagged.stats()),
        "map": the_map.graph().rooms,
        "room": (the_map.exits(KITCHEN), the_map.untried_directions(KITCHEN)),
        "route": (the_map.route(WEST, NORTH).actions, the_map.nearest_unexplored(WEST)),
        "rooms": (the_map.rooms(), the_map.exits_line(KITCHEN)),
        "tools": (
            tools.get_top_memories(),
            tools.get_location_memories("Kitchen"),
            tools.get_route("West of House", "North of House"),
            tools.call_tool("get_top_memories", {"limit": 3}),
            tools.get_memory_count(),
        ),
    }


def _every_write(store: MemoryStore, export: str) -> dict[str, Callable[[], Any]]:
    flagged, the_map = FlaggedMemories(store), MapStore(store)
    changed = export.replace("What we learned: Garlic.", "Garlic keeps the thief away.")
    return {
        "add": lambda: store.add_memory(KITCHEN, "Kitchen", note("New")),
        "add ephemeral": lambda: store.add_memory(KITCHEN, "Kitchen", note("Eph", "ephemeral")),
        "supersede": lambda: store.supersede_memory(KITCHEN, "Kitchen", "Garlic", note("G2")),
        "supersede ephemeral": lambda: store.supersede_memory(
            KITCHEN, "Kitchen", "Open sack", note("S2", "ephemeral")
        ),
        "invalidate": lambda: store.invalidate_memory(KITCHEN, "Garlic", "wrong"),
        "invalidate many": lambda: store.invalidate_memories(KITCHEN, ["Garlic"], "wrong"),
        "synthesis": lambda: store.apply_synthesis(
            KITCHEN, "Kitchen", new_memory=note("Synth", "ephemeral"), episode=1, turn=9
        ),
        "reset": store.reset_episode,
        "episode": store.allocate_episode,
        "visit": lambda: store.record_visit(KITCHEN, "Kitchen", 2),
        "bookkeeping": lambda: store.write_bookkeeping(
            Bookkeeping(visits=[(KITCHEN, "Kitchen", 2)])
        ),
        "flag": lambda: flagged.add_flagged_memory("Something new entirely", 5, 1, 1, "X"),
        "flag again, higher": lambda: flagged.add_flagged_memory(
            "The lamp is in the living room", 900, 3, KITCHEN, "Kitchen"
        ),
        "map record": lambda: record_sample(store),
        "map replace": lambda: the_map.replace(the_map.graph()),
        "import": lambda: import_memories(store, changed, apply=True),
        "tool add": lambda: MemoryToolkit(store, llm=None).add_memory("Other", 5, 1, 1, "X"),
        "transaction": lambda: store.transaction().__enter__(),
        "session transaction": lambda: store.transaction(changes_memories=False).__enter__(),
    }


# =============================================================================================
# Defects found, each fixed
# =============================================================================================


@pytest.mark.slow
def test_opening_a_hot_standby_for_writing_is_read_only_database(
    replicated: Replicated, tmp_path: Path
) -> None:
    # was: DatabaseUnavailable '... could not be made: cannot execute CREATE TABLE in a
    # read-only transaction (the role needs the TEMP privilege ...)'
    reviewed = tmp_path / "Memories.md"
    reviewed.write_text(replicated.export.replace("What we learned: Window.", "A window."))
    applied = memstore("--db", replicated.replica, "import", str(reviewed), "--apply")
    assert applied.returncode != 0
    assert "TEMP privilege" not in applied.stderr, applied.stderr
    assert "read-only database" in applied.stderr, applied.stderr
    with pytest.raises(ReadOnlyDatabase, match="read-only database"):
        MemoryStore.open(replicated.replica).close()


@pytest.mark.slow
def test_a_read_a_hot_standby_cancels_for_a_conflict_with_recovery_is_a_memstore_error(
    replicated: Replicated,
) -> None:
    # was: a raw psycopg SerializationFailure or sqlalchemy OperationalError (SQLSTATE 40001),
    # several lines; the CLI said 'internal error'
    name = f"churn_{uuid.uuid4().hex[:10]}"
    url = replicated.cluster.create_database(name)
    with MemoryStore.open(url) as writer:
        assert import_memories(writer, memories_md(1, 30_000), apply=True).applied
    replica = replicated.on_standby(url)
    deadline = time.monotonic() + 60
    while True:  # until the standby has replayed the import
        try:
            with MemoryStore.open(replica, read_only=True) as probe:
                if probe.get_persistent_count() == 30_000:
                    break
        except MemstoreError:
            pass
        assert time.monotonic() < deadline, "the standby never replayed the import"
        time.sleep(0.2)
    stop = threading.Event()

    def churn() -> None:  # the fleet keeps writing on the primary; autovacuum's work too
        with psycopg.connect(replicated.cluster.conninfo(name), autocommit=True) as conn:
            k = 0
            while not stop.is_set():
                conn.execute("UPDATE memories SET text = text WHERE id %% 50 = %s", (k % 50,))
                conn.execute("VACUUM memories")
                k += 1

    churner = threading.Thread(target=churn)
    seen: list[BaseException] = []
    with MemoryStore.open(replica, read_only=True) as reader:
        churner.start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(seen) < 6:
                for call in (lambda: reader.memories(1), reader.export_snapshot, reader.get_status):
                    try:
                        call()
                    except Exception as exc:  # noqa: BLE001 - examined below
                        seen.append(exc)
        finally:
            stop.set()
            churner.join(60)
    assert seen, "the standby cancelled no read in 30 s"
    assert [exc for exc in seen if not isinstance(exc, MemstoreError)] == []
    assert all("\n" not in str(exc) for exc in seen)


# =============================================================================================
# Properties that held
# =============================================================================================


@pytest.mark.slow
def test_a_read_only_store_reads_everything_and_refuses_every_write_writing_nothing(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as writer:
        _populate(writer)
    text = memstore("--db", str(database), "export", "--out", "-").stdout
    with MemoryStore.open(database) as writer:
        export = writer.export_snapshot()
        reads_before = _every_read(writer, text)
        del reads_before["status"]  # the file's size
    with MemoryStore.open(database, read_only=True) as reader:
        reads = _every_read(reader, text)
        assert {k: v for k, v in reads.items() if k != "status"} == reads_before
        assert reads["problems"] == [] and reads["dry import"] is True
        for name, write in _every_write(reader, text).items():
            with pytest.raises(ReadOnlyDatabase, match="read-only database"):
                write()
            assert reader.get_ephemeral_count() == 0, name
        assert _every_read(reader, text) == reads
        assert reader.export_snapshot() == export


@pytest.mark.slow
def test_every_read_and_read_only_command_works_on_a_hot_standby(
    replicated: Replicated, tmp_path: Path
) -> None:
    with (
        MemoryStore.open(replicated.primary, read_only=True) as primary,
        MemoryStore.open(replicated.replica, read_only=True) as replica,
    ):
        assert replica.tiers == ("persistent",)
        on_replica = _every_read(replica, replicated.export)
        on_primary = _every_read(primary, replicated.export)
        sizes = on_replica.pop("status"), on_primary.pop("status")
        assert on_replica == on_primary
        assert sizes[0]["memories_by_tier"] == sizes[1]["memories_by_tier"]
        for name, write in _every_write(replica, replicated.export).items():
            with pytest.raises(ReadOnlyDatabase, match="read-only database"):
                write()
            assert replica.get_ephemeral_count() == 0, name
    reviewed = tmp_path / "Memories.md"
    reviewed.write_text(replicated.export.replace("What we learned: Garlic.", "Garlic!"))
    commands = [
        ("show", str(KITCHEN)),
        ("show", "--flagged", "5"),
        ("show", str(KITCHEN), "--flagged", "3"),
        ("stats",),
        ("check",),
        ("history", str(KITCHEN), "Open sack"),
        ("export", "--out", "-"),
        ("import", str(reviewed)),
        ("map", "export", "--out", "-"),
        ("map", "export-json", "-"),
        ("map", "rooms"),
        ("map", "route", str(WEST), str(NORTH)),
    ]
    for command in commands:
        on_replica = memstore("--db", replicated.replica, *command)
        on_primary = memstore("--db", replicated.primary, *command)
        assert on_replica.returncode == 0, (command, on_replica.stderr)
        assert on_replica.stdout.replace(replicated.replica, "URL") == on_primary.stdout.replace(
            replicated.primary, "URL"
        ), command
    assert "Open sack" in memstore("--db", replicated.replica, "show", str(KITCHEN)).stdout
    routed = memstore("--db", replicated.replica, "map", "route", str(KITCHEN), str(ATTIC))
    assert routed.returncode in (0, 1) and "internal error" not in routed.stderr
