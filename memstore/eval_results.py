"""The evaluation's results (memstore.evaluation plays, memstore.eval_report presents):
one episode of one arm (:class:`EpisodeResult`), an arm over every seed (:class:`ArmSummary`),
the whole run and the issue's targets judged on it (:class:`EvalReport`, :class:`Target`).
Pure values and arithmetic: no game, no database, no output.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memstore.metrics import percentile

MEMORY, NO_MEMORY = "memory", "no_memory"
ARMS = (MEMORY, NO_MEMORY)
ARM_LABELS = {MEMORY: "with memory", NO_MEMORY: "without memory"}
AGENTS = ("explorer", "llm")
OFFLINE, MODEL = "offline", "model"
SYNTHESIS = (OFFLINE, MODEL)
#: what a repeated failure was this time: the action worked now (it had failed once
#: before), a refusal the game's state decides (kept for its episode only), an "already so"
#: answer (the same), a refusal proving a rule, the same answer again, a death
WORKED, FOR_NOW, ALREADY, RULE = "worked", "refused_for_now", "refused_already", "refused_rule"
REPEAT_KINDS = (WORKED, FOR_NOW, ALREADY, RULE, "repeated", "died")
REPEAT_LABELS = {
    WORKED: "worked this time (it had failed there before)",
    FOR_NOW: "refused by the state of the game (such failures are kept for their episode only)",
    ALREADY: "'already so' answers (kept for their episode only)",
    RULE: "refusals worded as a rule ('You can't go that way.' where the action worked before)",
    "repeated": "the same answer again",
    "died": "deaths",
}
#: the issue's targets
REPEAT_TARGET = 0.05
COVERAGE_TARGET = 0.80
BY_EPISODE = 3


#: the key of an arm's ``llm`` that holds the LLM agent's last failure, when it had one
LAST_FAILURE = "agent_last_failure"


def rate(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p95": 0.0}
    return {
        "median": round(float(statistics.median(values)), 2),
        "p95": round(percentile(list(values), 0.95), 2),
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def empty_llm() -> dict[str, Any]:
    return {"agent_calls": 0, "agent_failures": {}, "synthesis_calls": 0, "synthesis_failures": {}}


def add_llm(total: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key in ("agent_calls", "synthesis_calls"):
        total[key] += more.get(key, 0)
    for key in ("agent_failures", "synthesis_failures"):
        for kind, count in more.get(key, {}).items():
            total[key][kind] = total[key].get(kind, 0) + count
    if more.get(LAST_FAILURE):  # the LLM agent's last failure (absent without one)
        total[LAST_FAILURE] = more[LAST_FAILURE]


@dataclass
class EpisodeResult:
    """One episode of one arm and seed."""

    seed: int
    arm: str
    episode: int  # 1-based within the arm
    turns: int
    rooms: int
    score: int
    first_point_turn: int | None
    deaths: int
    game_over: bool
    repeated_across: int  # turns repeating a failure of this or an earlier episode
    repeated_within: int  # turns repeating a failure of this episode
    repeated_across_old: int  # the same, by the older definition of a failure
    repeated_within_old: int
    failed_turns: int
    coverage_with_memory: int
    coverage_visited: int
    memory_tokens: list[int] = field(default_factory=list, repr=False)
    overhead_us: list[float] = field(default_factory=list, repr=False)
    #: the across-episode repeats by what the turn was (``REPEAT_KINDS``)
    repeat_kinds: dict[str, int] = field(default_factory=dict)
    #: the LLM agent's turns whose command was the model's (the others were the explorer's,
    #: its fallback when a call fails or gives no command); None for the explorer agent
    model_turns: int | None = None

    @property
    def coverage(self) -> float:
        return self.coverage_with_memory / self.coverage_visited if self.coverage_visited else 0.0

    def share(self, count: int) -> float:
        return count / self.turns if self.turns else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "arm": self.arm,
            "episode": self.episode,
            "turns": self.turns,
            "rooms": self.rooms,
            "score": self.score,
            "first_point_turn": self.first_point_turn,
            "deaths": self.deaths,
            "game_over": self.game_over,
            "failed_turns": self.failed_turns,
            "repeated_failed_across": rate(self.repeated_across, self.turns),
            "repeated_failed_within": rate(self.repeated_within, self.turns),
            "repeated_failed_across_old": rate(self.repeated_across_old, self.turns),
            "repeated_failed_within_old": rate(self.repeated_within_old, self.turns),
            "coverage": {
                "with_memory": self.coverage_with_memory,
                "visited": self.coverage_visited,
                "share": round(self.coverage, 4),
            },
            "memory_tokens": spread(self.memory_tokens),
            "repeats_by_kind": {
                kind: self.repeat_kinds[kind] for kind in REPEAT_KINDS if kind in self.repeat_kinds
            },
        } | ({} if self.model_turns is None else {"model_turns": self.model_turns})


@dataclass
class ArmSummary:
    """One arm over every seed: per-episode means, and the arm's rates."""

    arm: str
    episodes: list[EpisodeResult]
    #: model calls and failures by kind, of the agent and of synthesis
    llm: dict[str, Any] = field(default_factory=lambda: empty_llm())

    def by_episode(self, number: int) -> list[EpisodeResult]:
        return [e for e in self.episodes if e.episode == number]

    def mean(self, number: int, value: Callable[[EpisodeResult], float | None]) -> float | None:
        """The mean over seeds of one figure of episode ``number`` (None when none has it)."""
        found = [v for e in self.by_episode(number) if (v := value(e)) is not None]
        return statistics.fmean(found) if found else None

    def rate(self, attribute: str) -> float:
        """The share of the arm's turns with that repeat, averaged over seeds."""
        seeds = sorted({e.seed for e in self.episodes})
        shares = []
        for seed in seeds:
            mine = [e for e in self.episodes if e.seed == seed]
            turns = sum(e.turns for e in mine)
            shares.append(sum(getattr(e, attribute) for e in mine) / turns if turns else 0.0)
        return statistics.fmean(shares) if shares else 0.0

    def kind_rate(self, kind: str) -> float:
        """The share of the arm's turns that repeated a failure and were of ``kind``."""
        seeds = sorted({e.seed for e in self.episodes})
        shares = []
        for seed in seeds:
            mine = [e for e in self.episodes if e.seed == seed]
            turns = sum(e.turns for e in mine)
            count = sum(e.repeat_kinds.get(kind, 0) for e in mine)
            shares.append(count / turns if turns else 0.0)
        return statistics.fmean(shares) if shares else 0.0

    @property
    def tokens(self) -> dict[str, float]:
        return spread([t for e in self.episodes for t in e.memory_tokens])

    @property
    def overhead(self) -> dict[str, float]:
        return spread([t for e in self.episodes for t in e.overhead_us])

    def as_dict(self) -> dict[str, Any]:
        numbers = sorted({e.episode for e in self.episodes})
        return {
            "repeated_failed_across": round(self.rate("repeated_across"), 4),
            "repeated_failed_within": round(self.rate("repeated_within"), 4),
            "repeated_failed_across_old": round(self.rate("repeated_across_old"), 4),
            "repeated_failed_within_old": round(self.rate("repeated_within_old"), 4),
            "memory_tokens": self.tokens,
            "repeats_by_kind": {kind: round(self.kind_rate(kind), 4) for kind in REPEAT_KINDS},
            "llm": self.llm,
            "mean_by_episode": [
                {
                    "episode": n,
                    "rooms": rounded(self.mean(n, lambda e: e.rooms)),
                    "score": rounded(self.mean(n, lambda e: e.score)),
                    "first_point_turn": rounded(self.mean(n, lambda e: e.first_point_turn)),
                    "repeated_failed_across": rounded(
                        self.mean(n, lambda e: e.share(e.repeated_across)), 4
                    ),
                    "repeated_failed_within": rounded(
                        self.mean(n, lambda e: e.share(e.repeated_within)), 4
                    ),
                    "coverage": rounded(self.mean(n, lambda e: e.coverage), 4),
                    "seeds_scoring": sum(1 for e in self.by_episode(n) if e.first_point_turn),
                }
                for n in numbers
            ],
            "episodes": [e.as_dict() for e in self.episodes],
        }


@dataclass(frozen=True)
class Target:
    """One of the issue's targets: met, not met, or not judged (``met`` None, and
    ``not_judged`` says why: the run cannot show it), with the measured figures."""

    name: str
    met: bool | None
    measured: str
    not_judged: str = ""


@dataclass
class EvalReport:
    """Everything ``run_eval`` measured."""

    agent: str
    episodes: int
    moves: int
    seeds: list[int]
    model: str
    arms: dict[str, ArmSummary]
    seconds: float = 0.0
    #: who wrote the memories: "offline recorder" or the model's name
    synthesis: str = "offline recorder"
    #: the LLM agent was offered the memory tools
    tools: bool = False

    def model_never_played(self) -> list[tuple[str, int]]:
        """Each (arm, seed) whose LLM agent made calls but played none of the model's
        commands (every call failed or gave no command: the explorer, its fallback, played
        every turn); [] for the explorer agent."""
        played: dict[tuple[str, int], int] = {}  # one pass: seeds x episodes may be 100,000
        for arm in ARMS:
            for e in self.arms[arm].episodes:
                if e.model_turns is not None:
                    played[arm, e.seed] = played.get((arm, e.seed), 0) + e.model_turns
        return [(arm, seed) for arm in ARMS for seed in self.seeds if played.get((arm, seed)) == 0]

    def targets(self) -> list[Target]:
        """The issue's "done when", judged on the measured figures (means over seeds); a
        target is not judged (``met`` None) on play it is not about: an arm the model
        never played (``model_never_played``), one episode for "across episodes", fewer
        than BY_EPISODE for "by episode 3"."""
        memory, none = self.arms[MEMORY], self.arms[NO_MEMORY]
        with_mem, without = memory.rate("repeated_across"), none.rate("repeated_across")
        last = min(BY_EPISODE, self.episodes)
        at = "" if last == BY_EPISODE else f" at episode {last}"
        coverage = memory.mean(last, lambda e: e.coverage) or 0.0
        rooms = (memory.mean(last, lambda e: e.rooms), none.mean(last, lambda e: e.rooms))
        score = (memory.mean(last, lambda e: e.score), none.mean(last, lambda e: e.score))
        never = self.model_never_played()
        memory_only = never_played_text([found for found in never if found[0] == MEMORY])
        both = never_played_text(never)
        across = (
            ""
            if self.episodes >= 2
            else f"needs at least 2 episodes to repeat anything across episodes; this run "
            f"played {self.episodes}"
        )
        by = (
            ""
            if self.episodes >= BY_EPISODE
            else f"needs {BY_EPISODE} episodes (it is judged at episode {BY_EPISODE}); this run "
            f"played {self.episodes}"
        )
        return [
            _target(
                f"repeated failed actions with memory, across episodes, < {REPEAT_TARGET:.0%}",
                with_mem < REPEAT_TARGET,
                f"{with_mem:.1%}",
                memory_only,
                across,
            ),
            _target(
                "... and at most half of the memory-off arm",
                with_mem <= without / 2,
                f"{with_mem:.1%} vs {without:.1%}",
                both,
                across,
            ),
            _target(
                f"location coverage >= {COVERAGE_TARGET:.0%} by episode {BY_EPISODE} (with memory)",
                coverage >= COVERAGE_TARGET,
                f"{coverage:.0%}{at}",
                memory_only,
                by,
            ),
            _target(
                f"more distinct rooms or more score by episode {BY_EPISODE} with memory",
                (rooms[0] or 0) > (rooms[1] or 0) or (score[0] or 0) > (score[1] or 0),
                f"rooms {fmt(rooms[0])} vs {fmt(rooms[1])}, "
                f"score {fmt(score[0])} vs {fmt(score[1])}{at}",
                both,
                by,
            ),
        ]


#: at most this many seeds are named for an arm the model never played (then "N more")
NAMED_SEEDS = 10


def never_played_text(never: Sequence[tuple[str, int]], who: str = "the model") -> str:
    """``the model played no turn with memory (seed 1) nor without memory (seeds 1, 2)``
    (``who`` first), or "" when ``never`` (``EvalReport.model_never_played``) is empty."""
    parts = []
    for arm in ARMS:
        seeds = [seed for found, seed in never if found == arm]
        if not seeds:
            continue
        named = ", ".join(map(str, seeds[:NAMED_SEEDS]))
        if len(seeds) > NAMED_SEEDS:
            named += f" and {len(seeds) - NAMED_SEEDS:,} more"
        parts.append(f"{ARM_LABELS[arm]} (seed{'s' if len(seeds) > 1 else ''} {named})")
    return f"{who} played no turn {' nor '.join(parts)}" if parts else ""


def _target(name: str, met: bool, measured: str, never: str, precondition: str) -> Target:
    """A target, not judged when the model never played an arm it uses (``never``: which)
    or when the run cannot meet its ``precondition`` (why not)."""
    reasons = []
    if never:
        reasons.append(f"{never}: that play was the explorer's")
    if precondition:
        reasons.append(precondition)
    if reasons:
        return Target(name, None, measured, "; ".join(reasons))
    return Target(name, met, measured)
