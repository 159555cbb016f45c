"""The agent loop during a database outage (review C #2) and under a table lock that blocks
readers (review C #1).

A lost connection (DatabaseUnavailable: the server stopped, restarted, or cannot be
reached) on the per-turn path (``get_location_memory``, ``record_action_outcome`` and what
they write) is handled as StorageFull is: never raised to the loop, counted
(``store_unavailable``), logged once per refusal (not once per turn), what the turns
produced waits in order within the busy bound and is written when the server answers
again; the store is tried again by the clock's backoff only (a connect attempt may cost
the connect timeout), so no turn tries it more than once per backoff period.

The outage is simulated on SQLite (every store access raises the DatabaseUnavailable the
PostgreSQL store raises) for the quick tests, and real (a cluster of the test's own
stopped and started again) for one slow test. The turns are the first ones of Jericho's
walkthrough, played once per module and replayed into each manager (the offline recorder
is deterministic, so a run with an outage must store what a run without one stores).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from pg_cluster import PgCluster

from memstore import busy_buffer
from memstore.errors import DatabaseUnavailable
from memstore.game import z_machine_context
from memstore.manager import SimpleMemoryManager
from memstore.rows import SupersedeOutcome
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext
from tests.pg_attack_helpers import note
from tests.pg_attack_helpers import own_cluster as own_cluster  # a fixture

try:
    from tests.fixtures.walkthrough import get_zork1_walkthrough, new_game
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import get_zork1_walkthrough, new_game  # type: ignore[no-redef]

#: turns of the walkthrough played (enough for rooms, items, a score, refusals)
TURNS = 120
#: the simulated outage: turns OUTAGE_FROM .. OUTAGE_TO - 1 find the server gone
OUTAGE_FROM, OUTAGE_TO = 30, 90
LOST = "lost the connection to the test server (simulated); nothing was written"

Turn = tuple[int, str, str, str, ZMachineContext]


@pytest.fixture(scope="module")
def turns() -> list[Turn]:
    game = new_game()
    try:
        played = []
        for action in get_zork1_walkthrough()[:TURNS]:
            step = game.step(action)
            context = z_machine_context(step.before, step.after, step.response)
            played.append(
                (step.before.location_id, step.before.location_name, action, step.response, context)
            )
        return played
    finally:
        game.close()


def play(
    manager: SimpleMemoryManager,
    turns: list[Turn],
    before: Callable[[int], None] = lambda _turn: None,
) -> list[tuple[int, str, BaseException]]:
    """The README's agent loop over ``turns``: every exception that reached it."""
    errors: list[tuple[int, str, BaseException]] = []
    for number, (here, name, action, response, context) in enumerate(turns):
        before(number)
        try:
            manager.get_location_memory(here)
        except Exception as exc:  # noqa: BLE001 - what reaches the loop is the finding
            errors.append((number, "get", exc))
        try:
            manager.record_action_outcome(here, name, action, response, context)
        except Exception as exc:  # noqa: BLE001
            errors.append((number, "record", exc))
    return errors


def stored(store: MemoryStore) -> dict[str, Any]:
    """What the database holds of the turns: memories, turn records, decision rows, map."""
    with store.transaction(write=False) as conn:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in conn.exec_driver_sql(sql).all()]

        return {
            "memories": Counter(
                rows(
                    "SELECT location_id, title, status, persistence, turn_start, text FROM memories"
                )
            ),
            "turns": Counter(rows("SELECT episode, turn, location_id, action FROM turn_records")),
            "decisions": Counter(
                rows(
                    "SELECT location_id, turn, error_kind, applied IS NULL FROM synthesis_decisions"
                )
            ),
            "connections": Counter(
                rows("SELECT from_id, action_key, to_id, verifications FROM map_connections")
            ),
            "visits": Counter(rows("SELECT location_id, episode FROM location_episodes")),
        }


class Outage:
    """While ``down``, every access of ``store`` to its database raises the one-line
    DatabaseUnavailable a PostgreSQL store raises for a server that is gone; each such
    attempt (a connect attempt, on a real server) is counted in ``attempts``."""

    def __init__(self, store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = False
        self.attempts = 0
        real = store._check_open

        def check_open() -> None:
            real()
            if self.down:
                self.attempts += 1
                raise DatabaseUnavailable(LOST)

        monkeypatch.setattr(store, "_check_open", check_open)


class Clock:
    """busy_buffer's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@contextmanager
def manager_on(db: Path | str, **open_args: Any) -> Iterator[SimpleMemoryManager]:
    with MemoryStore.open(db, **open_args) as store:
        manager = SimpleMemoryManager(store, run_id="outage")
        yield manager


def reference(tmp_path: Path, turns: list[Turn]) -> dict[str, Any]:
    """What the same turns store without an outage."""
    with manager_on(tmp_path / "reference.db") as manager:
        assert play(manager, turns) == []
        assert manager.flush()
        return stored(manager.store)


# =============================================================================================
# Simulated outage (SQLite store whose every access raises DatabaseUnavailable)
# =============================================================================================


def test_an_outage_never_reaches_the_loop_and_every_turn_is_stored_once_when_it_is_back(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = reference(tmp_path, turns)
    assert sum(expected["memories"].values()) > 10  # the turns teach something
    clock = Clock()
    monkeypatch.setattr(busy_buffer, "time", SimpleNamespace(monotonic=clock.monotonic))
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)

        def before(turn: int) -> None:
            outage.down = OUTAGE_FROM <= turn < OUTAGE_TO
            clock.now += 0.1  # a turn every 0.1 s: the backoff tries again in the outage

        errors = play(manager, turns, before)
        assert errors == []  # was: DatabaseUnavailable twice a turn, turns 30-89
        assert manager.flush()
        status = manager.get_status()
        assert status["store_unavailable"] >= 1
        assert status["syntheses_waiting"] == 0
        assert status["syntheses_dropped"] == status["waiting_rows_dropped"] == 0
        got = stored(manager.store)
    assert got == expected  # every memory, turn record, decision row, visit, map event: once
    assert sum(got["turns"].values()) == TURNS
    assert max(got["turns"].values()) == 1


def test_in_an_outage_no_turn_tries_the_server_more_than_once_per_backoff_period(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(busy_buffer, "time", SimpleNamespace(monotonic=clock.monotonic))
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:10]) == []
        outage.down = True
        assert play(manager, turns[10:40]) == []  # 30 turns within one backoff period
        assert outage.attempts == 1  # the first refusal; then the clock decides
        clock.now += busy_buffer.BACKOFF_FIRST_S + 0.01
        assert play(manager, turns[40:60]) == []
        assert outage.attempts == 2  # once more after the first period, then 2 s to wait
        clock.now += 2 * busy_buffer.BACKOFF_FIRST_S + 0.01
        assert play(manager, turns[60:61]) == []
        assert outage.attempts == 3
        assert manager.get_status()["store_unavailable"] == 3
        assert manager.get_status()["writes_deferred"] > 0
        outage.down = False
        clock.now += busy_buffer.BACKOFF_MAX_S
        assert play(manager, turns[61:62]) == []
        assert manager.get_status()["syntheses_waiting"] == 0
        assert manager._pending.empty  # written by that turn
        assert manager.flush()
        assert sum(stored(manager.store)["turns"].values()) == 62


def test_an_outage_is_logged_once_per_refusal_not_once_per_turn(
    tmp_path: Path,
    turns: list[Turn],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    monkeypatch.setattr(busy_buffer, "time", SimpleNamespace(monotonic=clock.monotonic))
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:5]) == []
        outage.down = True
        with caplog.at_level(logging.WARNING, logger="memstore"):
            assert play(manager, turns[5:60]) == []
        lines = [r.getMessage() for r in caplog.records if "simulated" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "\n" not in lines[0]
        assert "wait" in lines[0]  # says what happens to the turns' rows


def test_get_location_memory_answers_empty_in_an_outage(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:10]) == []
        here = turns[10][0]
        outage.down = True
        assert manager.get_location_memory(here) == ""
        assert manager.get_location_memory(here) == ""  # not tried again: the clock waits
        assert outage.attempts == 1
        assert manager.get_status()["store_unavailable"] == 1
        assert manager.last_context_tokens == 0


def test_flush_and_close_raise_the_one_line_error_and_keep_what_waits(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:10]) == []
        outage.down = True
        assert play(manager, turns[10:40]) == []
        waiting = manager.get_status()["syntheses_waiting"]
        assert waiting > 0
        attempts = outage.attempts
        with pytest.raises(DatabaseUnavailable) as raised:
            manager.flush()  # asks for the write: tried at once, whatever the backoff
        assert outage.attempts == attempts + 1
        assert "\n" not in str(raised.value) and "simulated" in str(raised.value)
        assert "what waits stays in this manager" in str(raised.value)
        with pytest.raises(DatabaseUnavailable):
            manager.close()
        assert manager.get_status()["syntheses_waiting"] == waiting  # still waits
        outage.down = False
        assert manager.flush()
        assert manager.get_status()["syntheses_waiting"] == 0
        assert sum(stored(manager.store)["turns"].values()) == 40


def test_reset_episode_in_an_outage_ends_the_episode_without_raising(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:20]) == []
        episode = manager.episode
        outage.down = True
        assert play(manager, turns[20:30]) == []
        manager.reset_episode()  # was: DatabaseUnavailable raised to the loop
        assert manager.turn == 0
        assert play(manager, turns[:5]) == []  # the next episode, played unnumbered
        assert manager.get_status()["episodes_unnumbered"] == 1
        outage.down = False
        assert manager.flush()
        got = stored(manager.store)
        assert sum(got["turns"].values()) == 35
        assert {ep for ep, *_rest in got["turns"]} == {episode, episode + 1}


def test_the_spec_004_writes_answer_not_done_in_an_outage(
    tmp_path: Path, turns: list[Turn], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(busy_buffer, "time", SimpleNamespace(monotonic=clock.monotonic))
    with manager_on(tmp_path / "outage.db") as manager:
        outage = Outage(manager.store, monkeypatch)
        assert play(manager, turns[:5]) == []
        assert manager.flush()
        outage.down = True
        assert manager.add_memory(1, "Here", note("Written in the outage")) is False
        assert (
            manager.supersede_memory(1, "Here", "Written in the outage", note("Newer"))
            is SupersedeOutcome.STORE_BUSY
        )
        assert manager.invalidate_memories(1, ["Newer"], "it was wrong") == {"Newer": False}
        assert manager.get_status()["store_unavailable"] >= 1
        outage.down = False
        clock.now += busy_buffer.BACKOFF_MAX_S
        assert manager.add_memory(1, "Here", note("Written after it"))


# =============================================================================================
# A real PostgreSQL server
# =============================================================================================


def pg_ctl(cluster: PgCluster, *args: str) -> None:
    done = cluster._run("pg_ctl", *args, "-w", "-D", str(cluster.data))
    assert done.returncode == 0, done.stderr + cluster.log_tail()


@pytest.mark.slow
def test_a_real_server_stopped_mid_run_loses_no_turn(
    own_cluster: PgCluster, turns: list[Turn]
) -> None:
    with manager_on(own_cluster.create_database("reference"), answer_timeout_s=2) as manager:
        assert play(manager, turns) == []
        assert manager.flush()
        expected = stored(manager.store)
    with manager_on(own_cluster.create_database("outage"), answer_timeout_s=2) as manager:
        stop_at, start_at = 30, 70

        def before(turn: int) -> None:
            if turn == stop_at:
                pg_ctl(own_cluster, "stop", "-m", "fast")
            if stop_at <= turn < start_at:
                time.sleep(0.05)  # 2 s of turns: the backoff tries the server again
            if turn == start_at:
                pg_ctl(
                    own_cluster, "start", "-l", str(own_cluster.log), "-o", own_cluster._options()
                )

        errors = play(manager, turns, before)
        assert errors == []  # was: DatabaseUnavailable twice a turn
        assert manager.get_status()["store_unavailable"] >= 1
        with pytest.raises(DatabaseUnavailable):  # the store's own API still raises it...
            pg_ctl(own_cluster, "stop", "-m", "fast")
            manager.store.get_persistent_count()
        pg_ctl(own_cluster, "start", "-l", str(own_cluster.log), "-o", own_cluster._options())
        assert manager.flush()  # ...and the manager's writes wait for the server
        assert manager.get_status()["syntheses_waiting"] == 0
        got = stored(manager.store)
    assert sum(got["turns"].values()) == TURNS and max(got["turns"].values()) == 1
    assert got["turns"] == expected["turns"]
    assert got["decisions"] == expected["decisions"]
    assert got["connections"] == expected["connections"]
    assert got["visits"] == expected["visits"]
    # the persistent memories of every turn, once each (the ephemeral tier went with the
    # connection, as documented, so a session memory of before the outage is gone)
    assert got["memories"] == expected["memories"]


@pytest.mark.slow
def test_a_table_lock_that_blocks_readers_reaches_no_loop_and_loses_no_turn_record(
    pg_cluster: PgCluster, turns: list[Turn]
) -> None:
    """Review C #1: another session holds ``LOCK TABLE memories IN ACCESS EXCLUSIVE MODE``
    (ALTER TABLE, TRUNCATE, VACUUM FULL, a migration) past the busy timeout while turns
    play: the reads on the turn's way are refused (StoreBusy), never raised, and every
    turn record is written once the lock is gone."""
    url = pg_cluster.schema_url("outage_l")
    with manager_on(url, busy_timeout_s=0.3, answer_timeout_s=5) as manager:
        assert play(manager, turns[:10]) == []
        assert manager.flush()
        schema = url.rsplit("%3D", 1)[1]
        locked, release = threading.Event(), threading.Event()

        def hold() -> None:
            with psycopg.connect(pg_cluster.conninfo("outage_l"), autocommit=False) as conn:
                conn.execute(f'LOCK TABLE "{schema}".memories IN ACCESS EXCLUSIVE MODE')
                locked.set()
                release.wait(30)
                conn.rollback()

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert locked.wait(30)
            errors = play(manager, turns[10:16])
        finally:
            release.set()
            holder.join()
        assert errors == []  # was: StoreBusy from get_location_memory and the synthesis
        assert manager.get_status()["store_busy"] >= 1
        assert play(manager, turns[16:30]) == []
        assert manager.flush()
        got = stored(manager.store)
    assert sorted(turn for _episode, turn, *_rest in got["turns"]) == list(range(1, 31))
