"""`memstore demo`: play Zork I with the memory manager in the loop, then export Memories.md
and Map.md.

The "agent" is Jericho's walkthrough (its first ``moves`` actions, up to all 396), so a run
is reproducible: with the offline recorder, the same database state always gives the same
Memories.md, and the same Map.md (the map the manager records from the Z-machine's
location ids, rendered by exporters.map_md, written beside Memories.md). Before each
action the agent's context is read (``get_location_memory``) and counted in tokens; after
it, ``record_action_outcome`` judges the outcome at the SOURCE location. The report gives
coverage, memories by tier and category, triggers, LLM calls and their failures by kind,
tokens of memory per turn, and the memory system's overhead per turn; when every LLM call
failed it says so (``all_llm_calls_failed``), and ``memstore demo`` exits 1. A run of more
than ten episodes is reported as one table.

Ctrl-C: the first SIGINT lets the current turn finish (so no turn is half-recorded), a
second one stops at once. Either way the turns played are flushed to the database, the
session memories dropped, Memories.md and Map.md refreshed from what was saved, and
``run_demo`` raises :class:`DemoInterrupted` (a ``KeyboardInterrupt``) carrying the
report, which says what was saved.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TextIO

from memstore.config import MemstoreConfig
from memstore.demo_report import LONG_RUN_EPISODES, DemoReport  # noqa: F401 - importable here
from memstore.errors import CliError, MemstoreError
from memstore.export_file import FileState, check_writable
from memstore.game import ZorkGame, z_machine_context, zork1_walkthrough
from memstore.manager import SimpleMemoryManager
from memstore.metrics import coverage_from_records
from memstore.store import MemoryStore
from memstore.synthesis import LLMCallable

DEFAULT_MOVES = 120
DEFAULT_EPISODES = 2
DEFAULT_MEMORIES_MD = "game_files/Memories.md"
#: the map's review file, written beside Memories.md unless run_demo is given ``map_out``
MAP_MD_NAME = "Map.md"


class DemoInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``run_demo``; what was saved is flushed, and ``report`` says what."""

    def __init__(self, report: DemoReport) -> None:
        super().__init__("demo interrupted")
        self.report = report


class _CtrlC:
    """While the demo runs, the first SIGINT asks it to stop after the current turn (a turn
    interrupted halfway could leave the manager's buffered records out of step with the
    database); a second one raises KeyboardInterrupt at once. Installed only in the main
    thread over Python's default handler: an application's own handler is left alone."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.requested = False
        self._installed = False

    def __enter__(self) -> _CtrlC:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        with contextlib.suppress(Exception):  # the stream may be mid-write: never fail here
            self.stream.write("\nstopping after this turn (Ctrl-C again to stop at once)\n")
            self.stream.flush()

    def check(self) -> None:
        """Between turns: stop here if Ctrl-C was pressed."""
        if self.requested:
            raise KeyboardInterrupt


def mode_line(config: MemstoreConfig, llm: LLMCallable | None) -> str:
    """Say plainly whether an LLM decides what to remember, and how to change it."""
    if llm is not None:
        return "memory synthesis: injected LLM callable"
    if config.llm_configured:
        return f"memory synthesis: LLM through litellm, model {config.model}"
    return (
        "memory synthesis: OFFLINE RECORDER (no model configured; it stores only facts "
        "the Z-machine proves; set --model or MEMSTORE_MODEL to use an LLM)"
    )


class _Progress:
    def __init__(self, total: int, stream: TextIO, enabled: bool) -> None:
        self.total, self.stream, self.enabled, self.done = total, stream, enabled, 0

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled or (self.done % 10 and self.done != self.total):
            return
        width = 30
        filled = width * self.done // self.total
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {label[:30]:30s}"
        )
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def run_demo(
    store: MemoryStore,
    *,
    episodes: int = DEFAULT_EPISODES,
    moves: int = DEFAULT_MOVES,
    rom: str | Path | None = None,
    llm: LLMCallable | None = None,
    out: str | Path | None = DEFAULT_MEMORIES_MD,
    progress: bool = True,
    stream: TextIO = sys.stderr,
    map_out: str | Path | None = None,
    before_export: Callable[[MemoryStore], FileState] | None = None,
    map_unchanged: FileState | None = None,
) -> DemoReport:
    """Play ``episodes`` episodes of the walkthrough's first ``moves`` actions; export; report.

    Memories.md goes to ``out`` and Map.md to ``map_out`` (default: ``Map.md`` beside
    ``out``); with ``out`` None neither is written. An output that could not be written
    (``export_file.check_writable``) raises ``OSError`` before anything is played.
    ``before_export`` is called with the store just before Memories.md is written, after
    the episodes: it may raise to refuse the export (``memstore demo`` refuses to replace a
    file holding a reviewer's edits), and then neither file is written; it returns the
    state of the file it checked, which must not change before the write
    (``write_atomically(unchanged=)``); ``map_unchanged``, the state of the Map.md the
    caller checked, likewise. On Ctrl-C (see the module's docstring) raises
    :class:`DemoInterrupted` after saving; the refusal is then reported, not raised.
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    actions = zork1_walkthrough()
    if not 1 <= moves <= len(actions):
        raise ValueError(f"moves must be between 1 and {len(actions)} (the whole walkthrough)")
    actions = actions[:moves]
    map_path: str | Path | None = None
    if out is not None:
        map_path = Path(out).with_name(MAP_MD_NAME) if map_out is None else map_out
        for path in (out, map_path):  # refused before anything is played or recorded
            check_writable(path)
    started = time.perf_counter()
    manager = SimpleMemoryManager(store, store.config, llm)
    report = DemoReport(
        mode=manager.mode, model=manager.model, planned_episodes=episodes, moves=len(actions)
    )
    bar = _Progress(episodes * len(actions), stream, progress)
    with _CtrlC(stream) as ctrl_c:
        try:
            with ZorkGame(rom) as game:
                for _ in range(episodes):
                    ctrl_c.check()
                    _play_episode(game, manager, actions, report, bar, ctrl_c)
                    report.completed_episodes.append(report.episodes[-1])
                    manager.reset_episode()
        except KeyboardInterrupt:
            report.interrupted = True
            if report.episodes and report.episodes[-1] not in report.completed_episodes:
                report.interrupted_turns = report.episode_turns.get(report.episodes[-1], 0)
            if progress:
                stream.write("\n")
            manager.flush()  # the turns played so far
            store.reset_episode()  # the session memories end with the episode
        manager.close_final("nothing was exported (run the demo again once that is mended)")
        _finish_report(store, manager, report, out, before_export)
        if map_path is not None:
            _export_map(store, report, map_path, map_unchanged)
        report.seconds = time.perf_counter() - started
        report.interrupted = report.interrupted or ctrl_c.requested
    if report.interrupted:
        raise DemoInterrupted(report)
    return report


def _finish_report(
    store: MemoryStore,
    manager: SimpleMemoryManager,
    report: DemoReport,
    out: str | Path | None,
    before_export: Callable[[MemoryStore], FileState] | None,
) -> None:
    """Fill in what the database says about the run, and export Memories.md."""
    _stored_episodes(report, manager)
    records = store.turn_records(manager.run_id)
    report.turn_records = len(records)
    covered = {episode: store.locations_with_memory(episode) for episode in report.episodes}
    report.coverage = coverage_from_records(records, covered)
    status = manager.get_status()
    report.triggers_fired = status["triggers_fired"]
    report.llm_calls = status["llm_calls"]
    report.failures = dict(status["failures"])
    report.last_failure = manager.last_failure
    store_status = store.get_status()
    report.by_tier = {k: v for k, v in store_status["memories_by_tier"].items() if k != "ephemeral"}
    report.by_category = store_status["memories_by_category"]
    if out is not None:
        from exporters import render_memories_md
        from memstore.export_file import write_atomically
        from memstore.md_store import export_snapshot_rows

        text = render_memories_md(*export_snapshot_rows(store))
        if not report.interrupted:
            checked = before_export(store) if before_export is not None else None
            report.exported_to = write_atomically(out, text, unchanged=checked)
            return
        try:  # after Ctrl-C, a failed export must not hide what was saved
            checked = before_export(store) if before_export is not None else None
            report.exported_to = write_atomically(out, text, unchanged=checked)
        except OSError as exc:
            report.export_error = f"{out}: {exc.strerror or exc}"
        except (CliError, MemstoreError) as exc:  # before_export's refusal
            report.export_error = str(exc)


def _export_map(
    store: MemoryStore, report: DemoReport, out: str | Path, unchanged: FileState | None
) -> None:
    """Write Map.md (after an interrupt, a failure is reported rather than raised), unless
    the file changed since ``unchanged`` was read (``write_atomically``)."""
    from exporters.map_md import render_map_md
    from exporters.written_mark import marked
    from memstore.export_file import write_atomically
    from memstore.map_store import MapStore

    the_map = MapStore(store)
    text = marked(render_map_md(the_map.graph(), threshold=the_map.threshold))
    if not report.interrupted:
        report.map_exported_to = write_atomically(out, text, unchanged=unchanged)
        return
    try:
        report.map_exported_to = write_atomically(out, text, unchanged=unchanged)
    except OSError as exc:
        report.map_export_error = f"{out}: {exc.strerror or exc}"


def _stored_episodes(report: DemoReport, manager: SimpleMemoryManager) -> None:
    """The report's episodes under the numbers they are stored under: an episode begun
    while another process held the database played under a provisional number, which the
    database replaced when its rows were written (every row is written by now)."""
    number = manager.stored_episode
    report.episodes[:] = [number(e) for e in report.episodes]
    report.completed_episodes[:] = [number(e) for e in report.completed_episodes]
    for by_episode in (
        report.episode_turns,
        report.episode_deaths,
        report.episode_memories,
        report.scores,
    ):
        renumbered = {number(e): value for e, value in by_episode.items()}
        by_episode.clear()
        by_episode.update(renumbered)


def _play_episode(
    game: ZorkGame,
    manager: SimpleMemoryManager,
    actions: list[str],
    report: DemoReport,
    bar: _Progress,
    ctrl_c: _CtrlC,
) -> None:
    episode = manager.episode
    report.episodes.append(episode)
    written = manager.counters["memories_written"]
    _, snapshot = game.reset()
    for action in actions:
        ctrl_c.check()
        t0 = time.perf_counter()
        manager.get_location_memory(snapshot.location_id)  # what the agent would read
        tokens = manager.last_context_tokens
        t1 = time.perf_counter()
        result = game.step(action)
        t2 = time.perf_counter()
        manager.record_action_outcome(
            result.before.location_id,
            result.before.location_name,
            action,
            result.response,
            z_machine_context(result.before, result.after, result.response),
        )
        report.overhead_us.append((t1 - t0 + time.perf_counter() - t2) * 1e6)
        report.memory_tokens.append(tokens)
        report.turns += 1
        died = int(result.after.died)
        report.deaths += died
        report.episode_turns[episode] = report.episode_turns.get(episode, 0) + 1
        report.episode_deaths[episode] = report.episode_deaths.get(episode, 0) + died
        report.episode_memories[episode] = manager.counters["memories_written"] - written
        report.scores[episode] = result.after.score
        snapshot = result.after
        bar.advance(f"ep{episode} {snapshot.location_name}")
