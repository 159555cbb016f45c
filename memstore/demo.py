"""`memstore demo`: play Zork I with the memory manager in the loop, then export Memories.md.

The "agent" is Jericho's walkthrough (its first ``moves`` actions, up to all 396), so a run
is reproducible: with the offline recorder, the same database state always gives the same
Memories.md. Before each action the agent's context is read (``get_location_memory``) and
counted in tokens; after it, ``record_action_outcome`` judges the outcome at the SOURCE
location. The report gives coverage, memories by tier and category, triggers, LLM calls
and their failures by kind, tokens of memory per turn, and the memory system's overhead
per turn; when every LLM call failed it says so (``all_llm_calls_failed``), and
``memstore demo`` exits 1.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
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


@dataclass
class DemoReport:
    """What a demo run did, for the closing report and for tests."""

    mode: str
    model: str
    episodes: list[int] = field(default_factory=list)
    turns: int = 0
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
    seconds: float = 0.0

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
        lines = [
            f"played {len(self.episodes)} episode(s) {self.episodes}, {self.turns} turns "
            f"in {self.seconds:.1f} s; final scores "
            + ", ".join(f"ep{e}: {s}" for e, s in self.scores.items())
            + f"; deaths: {self.deaths}",
        ]
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
            lines.append(f"exported persistent memories to {self.exported_to}")
        return "\n".join(lines)


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
) -> DemoReport:
    """Play ``episodes`` episodes of the walkthrough's first ``moves`` actions; export; report."""
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    actions = zork1_walkthrough()
    if not 1 <= moves <= len(actions):
        raise ValueError(f"moves must be between 1 and {len(actions)} (the whole walkthrough)")
    actions = actions[:moves]
    started = time.perf_counter()
    manager = SimpleMemoryManager(store, store.config, llm)
    report = DemoReport(mode=manager.mode, model=manager.model)
    bar = _Progress(episodes * len(actions), stream, progress)
    with ZorkGame(rom) as game:
        for _ in range(episodes):
            _play_episode(game, manager, actions, report, bar)
            manager.reset_episode()
    manager.close()
    covered = {episode: store.locations_with_memory(episode) for episode in report.episodes}
    report.coverage = coverage_from_records(store.turn_records(manager.run_id), covered)
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

        report.exported_to = write_atomically(out, render_memories_md(*store.export_snapshot()))
    report.seconds = time.perf_counter() - started
    return report


def _play_episode(
    game: ZorkGame,
    manager: SimpleMemoryManager,
    actions: list[str],
    report: DemoReport,
    bar: _Progress,
) -> None:
    episode = manager.episode
    report.episodes.append(episode)
    _, snapshot = game.reset()
    for action in actions:
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
        report.deaths += int(result.after.died)
        snapshot = result.after
        bar.advance(f"ep{episode} {snapshot.location_name}")
    report.scores[episode] = snapshot.score
