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
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TextIO

from memstore.config import MemstoreConfig
from memstore.game import ZorkGame, z_machine_context, zork1_walkthrough
from memstore.manager import SimpleMemoryManager
from memstore.metrics import coverage_from_records, percentile
from memstore.store import MemoryStore
from memstore.synthesis import LLMCallable

DEFAULT_MOVES = 120
DEFAULT_EPISODES = 2
DEFAULT_MEMORIES_MD = "game_files/Memories.md"
#: the map's review file, written beside Memories.md unless run_demo is given ``map_out``
MAP_MD_NAME = "Map.md"
#: runs of more than this many episodes are reported as a table, one row per episode
LONG_RUN_EPISODES = 10


@dataclass
class DemoReport:
    """What a demo run did, for the closing report and for tests."""

    mode: str
    model: str
    #: episodes asked for, and actions per episode
    planned_episodes: int = 0
    moves: int = 0
    #: every episode started, and those played to their last action
    episodes: list[int] = field(default_factory=list)
    completed_episodes: list[int] = field(default_factory=list)
    turns: int = 0
    #: per episode: turns played, deaths, new memories written
    episode_turns: dict[int, int] = field(default_factory=dict)
    episode_deaths: dict[int, int] = field(default_factory=dict)
    episode_memories: dict[int, int] = field(default_factory=dict)
    triggers_fired: int = 0
    llm_calls: int = 0
    #: failed LLM calls by kind (SynthesisErrorKind values), as get_status()["failures"]
    failures: dict[str, int] = field(default_factory=dict)
    #: the last failure's kind and message, if any
    last_failure: str | None = None
    coverage: dict[int, tuple[int, int]] = field(default_factory=dict)
    memory_tokens: list[int] = field(default_factory=list)
    overhead_us: list[float] = field(default_factory=list)
    scores: dict[int, int] = field(default_factory=dict)
    deaths: int = 0
    by_tier: dict[str, int] = field(default_factory=dict)
    by_category: dict[str, int] = field(default_factory=dict)
    exported_to: Path | None = None
    #: where Map.md was written, and why it could not be refreshed after an interrupt
    map_exported_to: Path | None = None
    map_export_error: str | None = None
    seconds: float = 0.0
    #: stopped by Ctrl-C; ``interrupted_turns``: turns played of the episode it stopped
    #: (None when it stopped between episodes, or was not interrupted)
    interrupted: bool = False
    interrupted_turns: int | None = None
    #: turn records of this run on disk, when the run ended
    turn_records: int = 0
    #: why Memories.md could not be refreshed after an interrupt
    export_error: str | None = None

    @property
    def failed_calls(self) -> int:
        return sum(self.failures.values())

    @property
    def all_llm_calls_failed(self) -> bool:
        """The model was called and never gave a usable answer."""
        return self.llm_calls > 0 and self.failed_calls >= self.llm_calls

    def failure_kinds(self) -> str:
        """``timeout 2, schema 1``: failed calls by kind."""
        return ", ".join(f"{kind} {count}" for kind, count in self.failures.items())

    def failures_text(self) -> str:
        """``3 failed (timeout 2, schema 1)``, ``all 3 failed (...)``, or "" without failures."""
        if not self.failed_calls:
            return ""
        share = f"all {self.failed_calls}" if self.all_llm_calls_failed else self.failed_calls
        return f"{share} failed ({self.failure_kinds()})"

    def llm_calls_text(self) -> str:
        failed = self.failures_text()
        return f"LLM calls: {self.llm_calls}" + (f", {failed}" if failed else "")

    def render(self) -> str:
        tokens = [float(t) for t in self.memory_tokens]
        lines = self.interrupt_lines()
        if len(self.episodes) > LONG_RUN_EPISODES:
            lines.append(
                f"played {len(self.episodes)} episodes ({_span(self.episodes)}), {self.turns} "
                f"turns in {self.seconds:.1f} s; deaths: {self.deaths}"
            )
            lines += self.episode_table()
        else:
            lines.append(
                f"played {len(self.episodes)} episode(s) {self.episodes}, {self.turns} turns "
                f"in {self.seconds:.1f} s; final scores "
                + ", ".join(f"ep{e}: {s}" for e, s in self.scores.items())
                + f"; deaths: {self.deaths}"
            )
            for episode, (have, seen) in self.coverage.items():
                share = have / seen if seen else 0.0
                lines.append(
                    f"coverage, episode {episode}: {have}/{seen} visited locations have "
                    f"memories ({share:.0%})"
                )
        lines += [
            "memories by tier: " + ", ".join(f"{k} {v}" for k, v in self.by_tier.items()),
            "memories by category: "
            + (", ".join(f"{k} {v}" for k, v in self.by_category.items()) or "none"),
            f"triggers fired on {self.triggers_fired}/{self.turns} turns; "
            f"{self.llm_calls_text()} ({self.mode}: {self.model})",
            f"memory tokens given to the agent per turn: median "
            f"{statistics.median(tokens) if tokens else 0:.0f}, p95 {percentile(tokens, 0.95):.0f}",
            f"memory system overhead per turn: median "
            f"{statistics.median(self.overhead_us) if self.overhead_us else 0:.0f} us, p95 "
            f"{percentile(self.overhead_us, 0.95):.0f} us",
        ]
        if self.all_llm_calls_failed:
            lines.append(
                "every LLM call failed, so no memory was synthesised (hence the coverage): "
                "check the model name, its API base and key; the decision log has each error"
            )
        if self.exported_to is not None:
            refreshed = " (refreshed with what was saved)" if self.interrupted else ""
            lines.append(f"exported persistent memories to {self.exported_to}{refreshed}")
        elif self.interrupted:
            why = self.export_error or "no export was asked for"
            lines.append(
                f"Memories.md was not refreshed ({why}): run `memstore export` to refresh it"
            )
        if self.map_exported_to is not None:
            refreshed = " (refreshed with what was saved)" if self.interrupted else ""
            lines.append(f"exported the map to {self.map_exported_to}{refreshed}")
        elif self.interrupted and self.map_export_error is not None:
            lines.append(
                f"Map.md was not refreshed ({self.map_export_error}): run `memstore map "
                "export` to refresh it"
            )
        return "\n".join(lines)

    def interrupt_lines(self) -> list[str]:
        """Where Ctrl-C stopped the run, and what was saved; [] if it was not interrupted."""
        if not self.interrupted:
            return []
        partial = ""
        if self.interrupted_turns is not None:
            current = self.episodes[-1]
            where = (
                f"interrupted in episode {current} (Ctrl-C) after {self.interrupted_turns} "
                f"of its {self.moves} turns"
            )
            partial = f", {_plural(self.interrupted_turns, 'turn')} of episode {current}"
        elif self.episodes:
            where = f"interrupted (Ctrl-C) after episode {self.episodes[-1]}"
        else:
            where = "interrupted (Ctrl-C) before the first turn"
        tiers = ", ".join(f"{k} {v}" for k, v in self.by_tier.items())
        completed = len(self.completed_episodes)
        planned = "episode" if self.planned_episodes == 1 else "episodes"
        return [
            where,
            f"saved: {completed} of {self.planned_episodes} {planned} completed{partial}; "
            f"{_plural(sum(self.by_tier.values()), 'memory', 'memories')} on disk ({tiers}); "
            f"{_plural(self.turn_records, 'turn record')} of this run",
        ]

    def episode_table(self) -> list[str]:
        """One header, one fixed-width row per episode, and a min/median/max line."""
        header = ("episode", "turns", "score", "deaths", "coverage", "new memories")
        rows = []
        for episode in self.episodes:
            have, seen = self.coverage.get(episode, (0, 0))
            share = f"{have / seen:.0%}" if seen else "-"
            rows.append(
                (
                    str(episode),
                    str(self.episode_turns.get(episode, 0)),
                    str(self.scores.get(episode, "-")),
                    str(self.episode_deaths.get(episode, 0)),
                    f"{have}/{seen} ({share})",
                    str(self.episode_memories.get(episode, 0)),
                )
            )
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))

        shares = [have / seen for have, seen in self.coverage.values() if seen]
        figures = {
            "turns": [self.episode_turns.get(e, 0) for e in self.episodes],
            "score": list(self.scores.values()),
            "deaths": [self.episode_deaths.get(e, 0) for e in self.episodes],
            "new memories": [self.episode_memories.get(e, 0) for e in self.episodes],
        }
        summary = [f"{name} {_min_median_max(values)}" for name, values in figures.items()]
        if shares:
            summary.insert(3, "coverage " + _min_median_max(shares, percent=True))
        return [line(header), *map(line, rows), "min/median/max: " + ", ".join(summary)]


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _span(episodes: list[int]) -> str:
    """``1-12`` for consecutive episode numbers, else the numbers."""
    if episodes == list(range(episodes[0], episodes[-1] + 1)):
        return f"{episodes[0]}-{episodes[-1]}"
    return ", ".join(map(str, episodes))


def _min_median_max(values: list[float] | list[int], *, percent: bool = False) -> str:
    if not values:
        return "-"
    figures = (min(values), statistics.median(values), max(values))
    return "/".join(f"{v:.0%}" if percent else f"{v:g}" for v in figures)


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
) -> DemoReport:
    """Play ``episodes`` episodes of the walkthrough's first ``moves`` actions; export; report.

    Memories.md goes to ``out`` and Map.md to ``map_out`` (default: ``Map.md`` beside
    ``out``); with ``out`` None neither is written. On Ctrl-C (see the module's docstring)
    raises :class:`DemoInterrupted` after saving.
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    actions = zork1_walkthrough()
    if not 1 <= moves <= len(actions):
        raise ValueError(f"moves must be between 1 and {len(actions)} (the whole walkthrough)")
    actions = actions[:moves]
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
        manager.close()
        _finish_report(store, manager, report, out)
        if out is not None:
            _export_map(
                store, report, Path(out).with_name(MAP_MD_NAME) if map_out is None else map_out
            )
        report.seconds = time.perf_counter() - started
        report.interrupted = report.interrupted or ctrl_c.requested
    if report.interrupted:
        raise DemoInterrupted(report)
    return report


def _finish_report(
    store: MemoryStore, manager: SimpleMemoryManager, report: DemoReport, out: str | Path | None
) -> None:
    """Fill in what the database says about the run, and export Memories.md."""
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

        text = render_memories_md(*store.export_snapshot())
        if not report.interrupted:
            report.exported_to = write_atomically(out, text)
            return
        try:  # after Ctrl-C, a failed export must not hide what was saved
            report.exported_to = write_atomically(out, text)
        except OSError as exc:
            report.export_error = f"{out}: {exc.strerror or exc}"


def _export_map(store: MemoryStore, report: DemoReport, out: str | Path) -> None:
    """Write Map.md (after an interrupt, a failure is reported rather than raised)."""
    from exporters.map_md import render_map_md
    from memstore.export_file import write_atomically
    from memstore.map_store import MapStore

    the_map = MapStore(store)
    text = render_map_md(the_map.graph(), threshold=the_map.threshold)
    if not report.interrupted:
        report.map_exported_to = write_atomically(out, text)
        return
    try:
        report.map_exported_to = write_atomically(out, text)
    except OSError as exc:
        report.map_export_error = f"{out}: {exc.strerror or exc}"


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
