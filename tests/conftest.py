"""Shared fixtures: a fresh store, and a compact Memory factory.

A test that takes ``store`` (or ``database``) runs twice, on SQLite and on PostgreSQL (a
fresh database in a throwaway cluster this session starts: tests/pg_cluster.py), unless
it also takes ``db_path``: it then works on the SQLite file itself and runs on SQLite only.
Where no PostgreSQL can be started the PostgreSQL runs skip with the reason, or fail when
MEMSTORE_REQUIRE_POSTGRES=1 (as in CI).
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_cluster import (
    PgCluster,
    PgClusterError,
    require_or_skip,
    shared_cluster,
    unavailable_reason,
)

from memstore.invariants import check_invariants
from memstore.models import Memory
from memstore.store import MemoryStore

MakeMemory = Callable[..., Memory]

#: test modules that start processes, servers or the game: marked ``slow``, so the
#: everyday loop is ``pytest -m "not slow and not property"`` (CI runs everything)
SLOW_MODULES = frozenset(
    {
        "test_concurrent_processes",
        "test_review_concurrent",
        "test_store_durability",
        "test_llm_deadline",
        "test_litellm_path",
        "test_game",
        "test_walkthrough",
        "test_end_to_end",
        "test_cli_game",
        "test_demo_interrupt",
        "test_read_only",
        "test_alembic_guards",
        "test_map_ground_truth",
        "test_map_exports",
        "test_outcome_game",
        "test_explorer_game",
        "test_llm_agent",
        "test_eval_report",
        "test_postgres",
        "test_pg_cluster",
        "test_fleet",
    }
)
#: single tests elsewhere that start a process or a server
SLOW_TESTS = frozenset(
    {
        "test_manager_through_litellm_and_a_local_fake_server",
        "test_two_processes_adding_the_same_content_at_once_store_it_once",
        "test_the_console_script_runs",
        "test_show_and_export_do_not_import_litellm",
        "test_a_reader_that_goes_away_gets_no_broken_pipe_error",
    }
)
#: fixtures that start a server (PostgreSQL; the fake OpenAI server, reached through
#: litellm, whose import alone takes 2.4 s): every test using one is ``slow``
SERVER_FIXTURES = frozenset({"pg_cluster", "pg_database", "server"})


BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``database`` on both backends, but on SQLite only for a test that uses the file."""
    if "database" in metafunc.fixturenames:
        backends = ("sqlite",) if "db_path" in metafunc.fixturenames else BACKENDS
        metafunc.parametrize("database", backends, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark hypothesis tests ``property``, and ``slow`` the tests of SLOW_MODULES and every
    test's run on PostgreSQL."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if (
            module in SLOW_MODULES
            or getattr(item, "originalname", item.name) in SLOW_TESTS
            or SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.slow)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("database") == "postgresql":
            item.add_marker(pytest.mark.slow)  # it starts a server (once a session)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


def assert_sound(store: MemoryStore) -> None:
    """The database keeps its rules (memstore check): every store test ends with this."""
    with store.transaction(write=False) as conn:
        assert check_invariants(conn, sqlite_checks=True) == []


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    """Where a test's store lives: the SQLite file ``db_path``, or a new PostgreSQL
    database (a URL), dropped after the test."""
    if request.param == "sqlite":
        yield request.getfixturevalue("db_path")
        return
    base_url, conninfo = _test_database()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    # the test's own schema: memstore works in current_schema(), which the URL sets
    yield f"{base_url}?options=-csearch_path%3D{schema}"
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SET lock_timeout = '20s'")  # a store left in a transaction: fail
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _cluster() -> PgCluster:
    """The session's throwaway PostgreSQL cluster; where none can start, the test skips
    saying why (or fails, with MEMSTORE_REQUIRE_POSTGRES=1)."""
    reason = unavailable_reason()
    if reason is not None:
        require_or_skip(reason)
    try:
        return shared_cluster()
    except PgClusterError as exc:
        require_or_skip(f"the test PostgreSQL cluster did not start: {exc}")


@functools.cache
def _test_database() -> tuple[str, str]:
    """(URL, libpq conninfo) of one database in the session's cluster; each test gets a
    schema of its own in it (far cheaper than a database each)."""
    cluster = _cluster()
    return cluster.create_database("memstore_tests"), cluster.conninfo("memstore_tests")


@pytest.fixture(scope="session")
def pg_cluster() -> PgCluster:
    """The session's throwaway PostgreSQL cluster, for tests that administer it."""
    return _cluster()


@pytest.fixture
def pg_database(pg_cluster: PgCluster) -> Iterator[str]:
    """A new, empty PostgreSQL database of the test's own (its URL), dropped afterwards."""
    name = f"db_{uuid.uuid4().hex[:16]}"
    yield pg_cluster.create_database(name)
    pg_cluster.drop_database(name)


@pytest.fixture
def store(database: str | Path) -> Iterator[MemoryStore]:
    opened = MemoryStore.open(database)
    yield opened
    if opened.closed:  # the test closed it: look again through a new connection
        with MemoryStore.open(database, read_only=True) as again:
            assert_sound(again)
        return
    try:
        assert_sound(opened)
    finally:
        opened.close()


def note(title: str = "A memory", persistence: str = "permanent", **fields: Any) -> Memory:
    """A NOTE memory learned at turn 5 of episode 1, its text made from its title."""
    values: dict[str, Any] = {
        "category": "NOTE",
        "title": title,
        "text": f"What we learned: {title}.",
        "episode": 1,
        "turns": "5",
        "score_change": 0,
        "persistence": persistence,
    }
    values.update(fields)
    return Memory(**values)


def remember(title: str, **extra: Any) -> dict[str, Any]:
    """A model's answer that remembers a new permanent NOTE titled ``title`` (``extra``:
    more of the answer's fields)."""
    return {
        "should_remember": True,
        "category": "NOTE",
        "memory_title": title,
        "memory_text": f"Learned: {title}.",
        "persistence": "permanent",
        "reasoning": "test",
        **extra,
    }


@pytest.fixture
def mem() -> MakeMemory:
    return note


@pytest.fixture(autouse=True)
def _no_memstore_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their database and model themselves: a developer's MEMSTORE_DB or
    MEMSTORE_MODEL must not reach them (MemoryStore.open reads the configuration)."""
    for variable in ("MEMSTORE_DB", "MEMSTORE_MODEL", "MEMSTORE_API_BASE"):
        monkeypatch.delenv(variable, raising=False)


@contextmanager
def write_lock_held(store: MemoryStore, seconds: float = 30) -> Iterator[None]:
    """While the block runs, another thread holds a write transaction open on ``store``
    (so every other writer waits, then gets StoreBusy); released when the block ends, or
    after ``seconds`` (then a writer waiting in the block gets the lock)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction(write=True):
            entered.set()
            release.wait(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(30), "the holder never got the write lock"
        yield
    finally:
        release.set()
        holder.join()
