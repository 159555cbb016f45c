"""Shared fixtures: a fresh store on a temporary file, and a compact Memory factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark hypothesis tests ``property`` and the tests of SLOW_MODULES ``slow``."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if module in SLOW_MODULES or getattr(item, "originalname", item.name) in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


def assert_sound(store: MemoryStore) -> None:
    """The database keeps its rules (memstore check): every store test ends with this."""
    with store.transaction(write=False) as conn:
        assert check_invariants(conn, sqlite_checks=True) == []


@pytest.fixture
def store(db_path: Path) -> Iterator[MemoryStore]:
    opened = MemoryStore.open(db_path)
    yield opened
    if opened.closed:  # the test closed it: look again through a new connection
        with MemoryStore.open(db_path, read_only=True) as again:
            assert_sound(again)
        return
    try:
        assert_sound(opened)
    finally:
        opened.close()


@pytest.fixture
def mem() -> MakeMemory:
    def make(title: str = "A memory", persistence: str = "permanent", **fields: Any) -> Memory:
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

    return make


@pytest.fixture(autouse=True)
def _no_memstore_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their database and model themselves: a developer's MEMSTORE_DB or
    MEMSTORE_MODEL must not reach them (MemoryStore.open reads the configuration)."""
    for variable in ("MEMSTORE_DB", "MEMSTORE_MODEL", "MEMSTORE_API_BASE"):
        monkeypatch.delenv(variable, raising=False)
