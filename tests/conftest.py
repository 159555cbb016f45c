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
