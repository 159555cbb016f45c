"""Review S6 D: fleets of agents on one database.

Was: an agent paused past its answer timeout (SIGSTOP, a debugger, a suspend) while the
server's answer sat unread in its socket had its healthy connection cut by the answer
watch when it resumed, losing its ephemeral memories with it (F2). While another session
held a table lock that blocks reads on PostgreSQL (ACCESS EXCLUSIVE: ``ALTER TABLE``,
``VACUUM FULL``), every turn waited the busy timeout twice and dropped its synthesis
(F1). An agent frozen inside its write held the writers' lock, and the fleet's writes
back, for as long as it stayed frozen (F3). The manager's spec-004 writes answered "not
done" for a write committed when the COMMIT's answer was lost (F4). Review S6 F: the
busy-stretch probes asked about tables the writes and reads at hand do not use (F3); an
ephemeral write waited for a lock that blocks reads (F2); the read probe swallowed a lost
connection (F8).
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from pg_cluster import PgCluster

from memstore import MemoryStore, SimpleMemoryManager, ZMachineContext, pg_connection
from memstore.errors import DatabaseUnavailable, StoreBusy
from memstore.memory_tools import MemoryToolkit
from memstore.pg_connection import AnswerWatch
from memstore.rows import SupersedeOutcome
from tests.answer_watch_helpers import pg_url as pg_url  # a fixture
from tests.conftest import note
from tests.test_answer_watch_frozen_network import FreezingProxy
from tests.test_answer_watch_frozen_network import proxy as proxy  # a fixture

LOOK = ZMachineContext(location_before=7, location_after=7, first_visit=False)


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A client socket and the server's end of its connection, on loopback."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def watched(client: socket.socket, seconds: float) -> AnswerWatch:
    watch = AnswerWatch(0.2)
    watch.begin(client.fileno())
    time.sleep(seconds)
    watch.close()
    return watch


@pytest.mark.slow  # (real time: the watch's limit passes)
def test_an_answer_that_came_while_the_client_did_not_read_is_not_cut_off(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = tcp_pair
    server.sendall(b"the answer")  # it arrives at once; nothing reads it for a while

    watch = watched(client, 0.5)

    assert not watch.fired
    assert client.recv(100) == b"the answer"
    client.sendall(b"still connected")
    assert server.recv(100) == b"still connected"


@pytest.mark.slow  # (real time: the watch's limit passes)
def test_a_server_silent_past_the_limit_is_still_cut_off(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, _ = tcp_pair

    watch = watched(client, 0.5)

    assert watch.fired
    assert client.recv(100) == b""  # shut down


def test_a_table_lock_that_blocks_reads_costs_one_turn_the_busy_timeout(
    pg_database: str,
) -> None:
    # F1: while another session held ACCESS EXCLUSIVE on memories (ALTER TABLE, VACUUM
    # FULL), every turn waited the busy timeout twice (both reads) and dropped its synthesis
    titles = iter(f"Fact {n}" for n in range(100))

    def model(_messages: object) -> str:
        return json.dumps(
            {"should_remember": True, "category": "NOTE", "persistence": "permanent",
             "memory_title": next(titles), "memory_text": "learned", "reasoning": "r"}
        )  # fmt: skip

    with MemoryStore.open(pg_database, busy_timeout_s=0.5, answer_timeout_s=5) as store:
        manager = SimpleMemoryManager(store, llm=model)
        manager.get_location_memory(7)  # connected, the schema read
        locker = psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"))
        locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")  # idle in transaction
        try:
            turns = []
            for turn in range(4):
                started = time.monotonic()
                manager.get_location_memory(7)
                manager.record_action_outcome(7, "Room 7", f"look {turn}", "x" * 150, LOOK)
                turns.append(time.monotonic() - started)
        finally:
            locker.rollback()
            locker.close()

        assert max(turns[1:]) < 0.4, turns  # only the first turn waited for the lock
        status = manager.get_status()
        assert status["reads_deferred"] >= 6 and status["llm_calls"] == 4
        assert manager.close()
        assert sorted(m.title for m in store.memories(7)) == [f"Fact {n}" for n in range(4)]


def test_an_agent_frozen_in_its_write_holds_the_fleet_back_only_so_long(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # F3: a session frozen inside its write transaction (SIGSTOP, a debugger) kept the
    # writers' lock for as long as it stayed frozen: the whole fleet's writes were refused
    monkeypatch.setattr(pg_connection, "IDLE_IN_TRANSACTION_MIN_S", 1.0)
    frozen = MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=0.5)
    other = MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5)
    try:
        with pytest.raises(DatabaseUnavailable):
            with frozen.transaction(write=True):  # the writers' lock, then silence
                with pytest.raises(StoreBusy):
                    other.add_memory(7, "Room 7", note("While it holds the lock"))
                time.sleep(1.6)  # past the server's idle_in_transaction_session_timeout
                assert other.add_memory(7, "Room 7", note("After it was ended"))
        assert [m.title for m in other.memories(7)] == ["After it was ended"]
    finally:
        frozen.close()
        other.close()


def next_commit(armed: list[bool], what: str) -> Callable[[int, bytes], str | None]:
    """A FreezingProxy trigger: ``what`` ("mute", "cut") for the next COMMIT sent alone
    while ``armed[0]``, which it then clears."""

    def trigger(_connection: int, data: bytes) -> str | None:
        if armed[0] and data.endswith(b"COMMIT\x00") and b"BEGIN" not in data:
            armed[0] = False
            return what
        return None

    return trigger


def test_a_spec_004_write_whose_commit_answer_is_lost_is_settled_by_its_receipt(
    pg_url: str, proxy: FreezingProxy
) -> None:
    # F4: the COMMIT reached the server and its answer never came back: the manager's
    # add_memory said False (and its retry False again: the title was live), supersede_memory
    # STORE_BUSY (its retry NOT_FOUND), though both were stored
    MemoryStore.open(pg_url).close()
    armed = [False]

    proxy.trigger = next_commit(armed, "mute")  # (it reaches the server; its answer never comes)
    with MemoryStore.open(proxy.url(pg_url), busy_timeout_s=1, answer_timeout_s=1.5) as store:
        manager = SimpleMemoryManager(store)
        assert manager.add_memory(11, "Room 11", note("Warm up"))
        assert manager.episode  # numbered now (an invalidation is dated by it)
        answers = []
        for write in (
            lambda: manager.add_memory(11, "Room 11", note("Lamp is here")),
            lambda: manager.supersede_memory(11, "Room 11", "Warm up", note("Warm up again")),
            lambda: manager.invalidate_memory(11, "Lamp is here", "taken"),
        ):
            armed[0] = True
            answers.append(write())
            assert not armed[0]  # its COMMIT's answer was lost

        assert answers == [True, SupersedeOutcome.SUPERSEDED, True]
        status = manager.get_status()
        assert status["commits_in_doubt_found"] == 3
        # (each lost the session, and its ephemeral memories: said: review S6 H F2)
        assert status["store_unavailable"] == 3
        manager.close()
    with MemoryStore.open(pg_url) as direct:
        stored = [(m.title, m.status.value) for m in direct.memories(11, include_superseded=True)]
    assert sorted(stored) == [
        ("Lamp is here", "SUPERSEDED"), ("Warm up", "SUPERSEDED"), ("Warm up again", "ACTIVE"),
    ]  # fmt: skip


def locked(pg_database: str, table: str) -> psycopg.Connection[tuple[object, ...]]:
    """Another session holding ACCESS EXCLUSIVE on ``table``, idle in its transaction."""
    locker = psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://"))
    locker.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
    return locker


def test_the_probes_ask_only_about_the_tables_their_writes_and_reads_use(
    pg_database: str,
) -> None:
    # review S6 F F3: a lock on turn_records kept the toolkit's notes (flagged_memories)
    # from being tried, and one on synthesis_decisions kept the agent from its memories
    with MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5) as store:
        other = MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5)
        toolkit = MemoryToolkit(store)
        manager = SimpleMemoryManager(store)
        manager.add_memory(64, "West of House", note("Mailbox here"))
        with other.transaction(write=True):  # another writer: both busy stretches begin
            assert not toolkit.add_memory("a note about the troll", 5, 1, 64, "West")
            assert not manager.add_memory(64, "West of House", note("On disk"))
        other.close()
        lockers = [locked(pg_database, "turn_records"), locked(pg_database, "synthesis_decisions")]
        try:
            started = time.monotonic()
            assert toolkit.add_memory("a note about the thief", 5, 2, 64, "West")
            assert "Mailbox here" in manager.get_location_memory(64)
            assert time.monotonic() - started < 0.3
        finally:
            for locker in lockers:
                locker.close()
        manager.close()


def test_an_ephemeral_write_answers_at_once_while_a_lock_blocks_reads(pg_database: str) -> None:
    # review S6 F F2: written at once in a busy stretch, it read memories first and waited
    # the busy timeout for a lock that blocks reads
    with MemoryStore.open(pg_database, busy_timeout_s=0.5, answer_timeout_s=5) as store:
        manager = SimpleMemoryManager(store)
        manager.add_memory(64, "West of House", note("Sword here", "ephemeral"))
        locker = locked(pg_database, "memories")
        try:
            assert not manager.add_memory(64, "West of House", note("On disk"))  # the stretch
            started = time.monotonic()
            added = manager.add_memory(64, "West of House", note("Eph", "ephemeral"))
            moved = manager.supersede_memory(
                64, "West of House", "Sword here", note("Sword moved", "ephemeral")
            )
            assert time.monotonic() - started < 0.5
        finally:
            locker.close()
        assert (added, moved) == (False, SupersedeOutcome.STORE_BUSY)
        manager.close()


def stretch_then_session_ended(
    store: MemoryStore, pg_database: str, pg_cluster: PgCluster
) -> SimpleMemoryManager:
    """A manager with an ephemeral memory, in a busy stretch (another writer refused its
    write), whose server session the server then ended."""
    other = MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5)
    manager = SimpleMemoryManager(store)
    manager.add_memory(64, "West of House", note("Sword here", "ephemeral"))
    with other.transaction(write=True):  # another writer: the stretch begins
        assert not manager.add_memory(64, "West of House", note("On disk"))
    other.close()
    name = pg_database.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(pg_cluster.conninfo("postgres"), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
    return manager


def test_a_session_the_read_probe_finds_gone_is_counted_and_said(
    pg_database: str, pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # review S6 F F8: the probe swallowed the lost connection; the agent's ephemeral
    # memories went with it, with no line and no count
    with MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5) as store:
        manager = stretch_then_session_ended(store, pg_database, pg_cluster)

        with caplog.at_level(logging.WARNING, logger="memstore"):
            manager.get_location_memory(64)

        assert manager.get_status()["store_unavailable"] == 1
        assert "ephemeral memories went with the connection" in caplog.text
        manager.close()


def test_the_spec_004_writes_leave_one_receipt_behind(pg_database: str) -> None:
    # review S6 H F1: each spec-004 write on a server left its receipt, across runs
    with MemoryStore.open(pg_database, busy_timeout_s=1, answer_timeout_s=5) as store:
        for run in range(2):
            manager = SimpleMemoryManager(store)
            for n in range(10):
                assert manager.add_memory(11, "Room 11", note(f"Run {run} fact {n}"))
            manager.invalidate_memory(11, f"Run {run} fact 0", "wrong")
            manager.close()
        with store.transaction(write=False) as conn:
            kept = conn.exec_driver_sql("SELECT count(*) FROM write_receipts").scalar()
    assert kept == 2  # each run's last one


def test_a_spec_004_write_whose_commit_never_arrived_says_it_was_not_committed(
    pg_url: str, proxy: FreezingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # review S6 H F3: the receipt said the write was not committed, and the line still
    # said "may or may not have been committed (look before writing it again)"
    MemoryStore.open(pg_url).close()
    armed = [False]

    proxy.trigger = next_commit(armed, "cut")  # (the COMMIT never reaches the server)
    with MemoryStore.open(proxy.url(pg_url), busy_timeout_s=1, answer_timeout_s=1.5) as store:
        manager = SimpleMemoryManager(store)
        assert manager.add_memory(11, "Room 11", note("Warm up"))
        armed[0] = True
        with caplog.at_level(logging.WARNING, logger="memstore"):
            assert manager.add_memory(11, "Room 11", note("Lamp is here")) is False
        assert not armed[0]
        assert "what this call was writing was not committed" in caplog.text
        assert "may or may not" not in caplog.text
        assert [m.title for m in store.memories(11)] == ["Warm up"]
        manager.close()


def test_a_session_a_busy_stretch_s_probe_finds_gone_is_counted_and_said(
    pg_database: str, pg_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # review S6 L F1: an ephemeral write's read probe, or a write's lock probe, met the lost
    # session and swallowed it: the write went on, and the ephemeral memories vanished
    with MemoryStore.open(pg_database, busy_timeout_s=0.3, answer_timeout_s=5) as store:
        manager = stretch_then_session_ended(store, pg_database, pg_cluster)

        with caplog.at_level(logging.WARNING, logger="memstore"):
            added = manager.add_memory(64, "West of House", note("Lamp here", "ephemeral"))

        assert added is False
        assert manager.get_status()["store_unavailable"] == 1
        assert "ephemeral memories went with the connection" in caplog.text
        manager.close()
