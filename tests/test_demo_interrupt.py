"""Ctrl-C during `memstore demo`, and the compact report of long runs (issue 14).

An interrupted demo keeps every turn it played (its turn records are flushed), refreshes
Memories.md from what was saved and says so, tells what was saved, and exits 130. A run
of more than 10 episodes reports them in one table instead of a line per episode.
"""

from __future__ import annotations

import signal
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore.demo import run_demo
from memstore.game import ZorkGame
from memstore.metrics import coverage_from_records
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import assert_sound
from tests.fixtures.walkthrough import rom_or_skip

MOVES = 8
EPISODES = 3


def demo(capsys: pytest.CaptureFixture[str], tmp_path: Path, episodes: int, moves: int) -> Any:
    rom = rom_or_skip()
    return run(
        capsys, "--db", str(tmp_path / "demo.db"), "demo", "--episodes", str(episodes),
        "--moves", str(moves), "--rom", str(rom), "--out", str(tmp_path / "Memories.md"),
        "--no-progress",
    )  # fmt: skip


def press_ctrl_c() -> None:
    """What the terminal does on Ctrl-C: SIGINT to the process."""
    signal.raise_signal(signal.SIGINT)


def raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt


def interrupt_at_step(
    monkeypatch: pytest.MonkeyPatch, number: int, *interrupts: Callable[[], None]
) -> None:
    """Run ``interrupts`` as the game's ``number``-th step (counted from 1) begins."""
    original = ZorkGame.step
    calls = 0

    def step(self: ZorkGame, action: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == number:
            for interrupt in interrupts:
                interrupt()
        return original(self, action)

    monkeypatch.setattr(ZorkGame, "step", step)


def played(episode: int, turns: int) -> list[tuple[int, int]]:
    """(episode, turn) of every turn up to ``turns`` turns into ``episode``."""
    done = [(e, t) for e in range(1, episode) for t in range(1, MOVES + 1)]
    return done + [(episode, t) for t in range(1, turns + 1)]


def saved_state(db: Path) -> tuple[list[tuple[int, int]], int]:
    """The (episode, turn) of each turn record, and the persistent memories, on disk."""
    with MemoryStore.open(db, read_only=True) as store:
        assert_sound(store)
        records = [(r["episode"], r["turn"]) for r in store.turn_records()]
        return records, store.get_persistent_count()


def assert_memories_md_refreshed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    md = tmp_path / "Memories.md"
    code, out, err = run(
        capsys, "--db", str(tmp_path / "demo.db"), "export", "--check", "--out", str(md)
    )
    assert code == 0, out + err
    code, out, err = run(capsys, "--db", str(tmp_path / "demo.db"), "check")
    assert code == 0, out + err


@pytest.mark.parametrize(("episode", "turn"), [(2, 3), (1, 5), (3, 1)])
def test_ctrl_c_during_the_demo_saves_the_played_turns_refreshes_memories_md_and_exits_130(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    episode: int,
    turn: int,
) -> None:
    # a KeyboardInterrupt raised inside the game's step (as from C code, or a second Ctrl-C)
    interrupt_at_step(monkeypatch, (episode - 1) * MOVES + turn, raise_keyboard_interrupt)
    code, out, err = demo(capsys, tmp_path, EPISODES, MOVES)
    assert code == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    records, persistent = saved_state(tmp_path / "demo.db")
    # every turn played before the interrupt is recorded once; the interrupted one is not
    assert records == played(episode, turn - 1)
    assert f"interrupted in episode {episode} (Ctrl-C) after {turn - 1} of its {MOVES} turns" in out
    assert (
        f"saved: {episode - 1} of {EPISODES} episodes completed, {turn - 1} turns of episode "
        f"{episode}; {persistent} memories on disk"
    ) in out
    assert f"{len(records)} turn records of this run" in out
    assert f"exported persistent memories to {tmp_path / 'Memories.md'} (refreshed" in out
    assert_memories_md_refreshed(capsys, tmp_path)


@pytest.mark.parametrize(("presses", "turns_done"), [(1, 3), (2, 2)])
def test_one_ctrl_c_stops_after_the_current_turn_and_a_second_stops_at_once(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    presses: int,
    turns_done: int,
) -> None:
    interrupt_at_step(monkeypatch, MOVES + 3, *[press_ctrl_c] * presses)
    code, out, err = demo(capsys, tmp_path, EPISODES, MOVES)
    assert code == 130, out + err
    records, _persistent = saved_state(tmp_path / "demo.db")
    assert records == played(2, turns_done)
    assert f"interrupted in episode 2 (Ctrl-C) after {turns_done} of its {MOVES} turns" in out
    assert "stopping after this turn (Ctrl-C again to stop at once)" in err
    assert_memories_md_refreshed(capsys, tmp_path)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_ctrl_c_just_after_a_memory_is_written_duplicates_no_turn_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory write also writes the buffered turn records; an interrupt before the
    manager forgets them must not write them a second time."""
    original = MemoryStore.apply_synthesis
    at: list[tuple[int, int]] = []

    def apply_then_ctrl_c(self: MemoryStore, *args: Any, **kwargs: Any) -> Any:
        applied = original(self, *args, **kwargs)
        if not at and kwargs["turn"] > 1:  # some turn records were written with it
            at.append((kwargs["episode"], kwargs["turn"]))
            press_ctrl_c()
        return applied

    monkeypatch.setattr(MemoryStore, "apply_synthesis", apply_then_ctrl_c)
    code, out, err = demo(capsys, tmp_path, EPISODES, MOVES)
    assert code == 130, out + err
    assert at, "no memory was written after the first turn"
    records, _persistent = saved_state(tmp_path / "demo.db")
    (episode, turn) = at[0]
    assert records == played(episode, turn)  # each once, the interrupted turn finished
    assert_memories_md_refreshed(capsys, tmp_path)


def test_an_interrupted_run_demo_raises_with_its_report_and_the_store_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstore.demo import DemoInterrupted  # new with the fix: not at the module's top

    rom_or_skip()
    interrupt_at_step(monkeypatch, MOVES + 4, raise_keyboard_interrupt)
    with MemoryStore.open(tmp_path / "demo.db") as store:
        with pytest.raises(DemoInterrupted) as caught:
            run_demo(store, episodes=EPISODES, moves=MOVES, out=None, progress=False)
        assert isinstance(caught.value, KeyboardInterrupt)  # callers' Ctrl-C handling still works
        report = caught.value.report
        assert report.completed_episodes == [1] and report.episodes == [1, 2]
        assert report.interrupted_turns == 3 and report.turns == MOVES + 3
        assert len(store.turn_records()) == MOVES + 3
        # the interrupted episode's session memories are gone, as at an episode's end
        assert store.get_ephemeral_count() == 0
        assert "Memories.md was not refreshed" in report.render()
        monkeypatch.undo()
        again = run_demo(store, episodes=1, moves=MOVES, out=None, progress=False)
        assert again.episodes == [3] and again.interrupted_turns is None
        assert_sound(store)


# --- long runs --------------------------------------------------------------------------------


def test_a_run_of_more_than_10_episodes_prints_one_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    episodes, moves = 12, 5
    code, out, err = demo(capsys, tmp_path, episodes, moves)
    assert code == 0, err
    lines = out.splitlines()
    assert not [line for line in lines if line.startswith("coverage, episode")]
    assert "ep12:" not in out  # no list of every score on one line
    assert f"played {episodes} episodes (1-{episodes}), {episodes * moves} turns in" in out
    (header,) = [i for i, line in enumerate(lines) if line.split()[:2] == ["episode", "turns"]]
    rows = lines[header + 1 : header + 1 + episodes]
    assert all(len(row) == len(lines[header]) for row in rows)  # fixed-width columns
    with MemoryStore.open(tmp_path / "demo.db", read_only=True) as store:
        records = store.turn_records()
        covered = {e: store.locations_with_memory(e) for e in range(1, episodes + 1)}
    coverage = coverage_from_records(records, covered)
    scores = []
    for number, row in enumerate(rows, 1):
        episode, turns, score, deaths, have_seen = row.split()[:5]
        assert (int(episode), int(turns), int(deaths)) == (number, moves, 0)
        mine = [r for r in records if r["episode"] == number]
        assert int(score) == mine[-1]["score_after"]
        assert have_seen == "{}/{}".format(*coverage[number])
        scores.append(int(score))
    summary = lines[header + 1 + episodes]
    assert summary.startswith("min/median/max: turns 5/5/5, score ")
    assert f"score {min(scores)}/{statistics.median(scores):g}/{max(scores)}" in summary


def test_a_run_of_10_episodes_keeps_a_line_per_episode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = demo(capsys, tmp_path, 10, 2)
    assert code == 0, err
    assert "played 10 episode(s) [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 20 turns" in out
    assert len([line for line in out.splitlines() if line.startswith("coverage, episode")]) == 10
    assert "min/median/max" not in out
