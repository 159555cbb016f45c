"""Review round 5: eval's lock file, eval's busy timeout, and rows that never got written.

* A ``memstore-eval.lock`` that is a symbolic link (or a hard link) made eval write its
  process id into, and then delete, the file it names.
* ``eval --busy-timeout`` was not passed to the databases eval opens.
* demo and eval went on (exit 0, an export) when the database refused the last rows at
  ``close``: every buffered turn was lost without a word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import memstore.store
from memstore.demo import run_demo
from memstore.errors import StoreBusy
from memstore.eval_lock import LOCK_NAME, EvalFolderInUse, folder_lock
from memstore.evaluation import run_eval
from memstore.manager import SimpleMemoryManager
from memstore.store import MemoryStore
from tests.fixtures.walkthrough import rom_or_skip

PRECIOUS = "IMPORTANT USER DATA\n"


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_left_alone(
    tmp_path: Path, link: str
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text(PRECIOUS, encoding="utf-8")
    folder = tmp_path / "eval"
    folder.mkdir()
    lock = folder / LOCK_NAME
    if link == "symbolic":
        lock.symlink_to(target)
    else:
        os.link(target, lock)

    with pytest.raises(EvalFolderInUse, match=f"{LOCK_NAME}.*link"), folder_lock(folder):
        pass

    assert target.read_text(encoding="utf-8") == PRECIOUS
    assert lock.is_symlink() or lock.exists()


def test_a_lock_file_left_by_a_run_that_died_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).write_text("12345\n", encoding="ascii")
    with folder_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text(encoding="ascii") == f"{os.getpid()}\n"
    assert not (tmp_path / LOCK_NAME).exists()


def test_eval_opens_its_databases_with_the_busy_timeout_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rom = rom_or_skip()
    seen: list[float] = []
    real_open = memstore.store.MemoryStore.open

    def spy(*args: Any, **kwargs: Any) -> MemoryStore:
        seen.append(kwargs.get("busy_timeout_s", -1.0))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(memstore.store.MemoryStore, "open", spy)
    run_eval(episodes=1, moves=2, seeds=[1], folder=tmp_path / "e", rom=rom, busy_timeout_s=0.25)
    assert seen and set(seen) == {0.25}


def _refuse_at_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database refuses the rows that wait at ``close`` (a writer held it past the
    busy timeout): close says so by returning False."""
    monkeypatch.setattr(SimpleMemoryManager, "close", lambda self: False)


def test_demo_whose_last_rows_the_database_refused_says_so_and_exports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rom = rom_or_skip()
    _refuse_at_close(monkeypatch)
    out = tmp_path / "Memories.md"
    with MemoryStore.open(tmp_path / "d.db") as store, pytest.raises(StoreBusy, match="written"):
        run_demo(store, episodes=1, moves=3, rom=rom, out=out, progress=False)
    assert not out.exists()


def test_eval_whose_last_rows_the_database_refused_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rom = rom_or_skip()
    _refuse_at_close(monkeypatch)
    with pytest.raises(StoreBusy, match="written"):
        run_eval(episodes=1, moves=2, seeds=[1], folder=tmp_path / "e", rom=rom)


def test_eval_whose_episode_rows_the_database_refused_stops_before_counting_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An episode's figures are read from its stored rows, under the number the episode
    has once its rows are written (an episode begun while the database was busy is
    numbered then): rows that could not be written stop the evaluation."""
    rom = rom_or_skip()
    monkeypatch.setattr(SimpleMemoryManager, "flush", lambda self: False)
    with pytest.raises(StoreBusy, match="turns of this episode could not be written"):
        run_eval(episodes=1, moves=2, seeds=[1], folder=tmp_path / "e", rom=rom)
