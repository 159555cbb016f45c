"""The report of a `memstore demo` run (memstore.demo plays it): what was played, stored and
spent, and what an interrupted run saved; ten episodes or fewer as lines, more as a table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from memstore.metrics import percentile

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
