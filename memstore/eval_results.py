"""The evaluation's results (memstore.evaluation plays, memstore.eval_report presents):
one episode of one arm (:class:`EpisodeResult`), an arm over every seed (:class:`ArmSummary`),
and the figures the targets are judged by (their thresholds and minimum samples); the whole
run and the issue's targets judged on it (``EvalReport``, ``Target``) are in
memstore.eval_targets. Pure values and arithmetic: no game, no database, no output.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from memstore.metrics import percentile
from memstore.moved_names import forwarding

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

#: the minimum sample a target is judged on, on every seed (``EvalReport.targets``; below
#: it the target is not judged, and says why): a rate of a few turns shows nothing. The
#: repeat targets read at least MIN_ARM_TURNS turns of each arm they use (over its
#: episodes: one turn is then at most 1 point of the rate), and the memory arm's failed
#: turns before its last episode (its repeat opportunities: what a later episode could
#: repeat) at least MIN_REPEAT_OPPORTUNITIES; "at most half of the memory-off arm" needs
#: that arm to have repeated a failure at least MIN_MEMORY_OFF_REPEATS times (none:
#: nothing to halve). The targets "by episode 3" read an episode 3 of at least
#: MIN_EPISODE_TURNS turns in each arm they use, and coverage one that visited at least
#: MIN_COVERAGE_ROOMS rooms with memory.
MIN_ARM_TURNS = 100
MIN_REPEAT_OPPORTUNITIES = 10
MIN_MEMORY_OFF_REPEATS = 10
MIN_EPISODE_TURNS = 50
MIN_COVERAGE_ROOMS = 5


#: an episode of the LLM agent is the model's play (a target may read it) only when the
#: model chose more than this share of its commands (the explorer, its fallback, the rest)
MODEL_MAJORITY = 0.5

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
    """``value`` with ``digits`` decimals, a half rounded up (50.5 is 51 as 19.5 is 20:
    Python's own format rounds a half to the even neighbour)."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    exact = Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP)
    return f"{exact:.{digits}f}"


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

    @property
    def model_played(self) -> bool:
        """The model chose more than half of the episode's commands (``MODEL_MAJORITY``);
        True for the explorer agent (no model: its own play)."""
        return self.model_turns is None or self.model_turns > self.turns * MODEL_MAJORITY

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

    def per_seed(
        self, value: Callable[[EpisodeResult], int], episodes: Container[int] | None = None
    ) -> dict[int, int]:
        """``value`` summed over the arm's episodes (those numbered in ``episodes``; every
        one when None), by seed: a seed with none of them counts 0."""
        found = {e.seed: 0 for e in self.episodes}
        for e in self.episodes:
            if episodes is None or e.episode in episodes:
                found[e.seed] += value(e)
        return found

    def model_commands(self) -> tuple[int, int] | None:
        """(commands the model chose, all commands) over every seed and episode; None for
        the explorer agent."""
        mine = [e for e in self.episodes if e.model_turns is not None]
        if not mine:
            return None
        return sum(e.model_turns or 0 for e in mine), sum(e.turns for e in mine)

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


#: at most this many episodes are named the model did not play (then "and N more")
NAMED_EPISODES = 10


def not_played_text(short: Sequence[EpisodeResult], who: str = "the model") -> str:
    """``the model chose at most half of the commands of episodes 2 (0 of 20), 3 (0 of 20)
    with memory (seed 1); episode 3 (0 of 20) without memory (seed 1)`` (``who`` first),
    or "" when ``short`` (from ``EvalReport.model_did_not_play``) is empty."""
    groups: dict[tuple[str, int], list[EpisodeResult]] = {}
    for e in short[:NAMED_EPISODES]:
        groups.setdefault((e.arm, e.seed), []).append(e)
    parts = []
    for (arm, seed), found in groups.items():
        named = ", ".join(f"{e.episode} ({e.model_turns or 0} of {e.turns})" for e in found)
        parts.append(
            f"episode{'s' if len(found) > 1 else ''} {named} {ARM_LABELS[arm]} (seed {seed})"
        )
    if not parts:
        return ""
    more = len(short) - NAMED_EPISODES
    return (
        f"{who} chose at most half of the commands of "
        + "; ".join(parts)
        + (f"; and {more:,} more episode{'s' if more > 1 else ''}" if more > 0 else "")
    )


#: names that moved when this module was split (issue 15), found here as before
__getattr__ = forwarding(
    __name__, {"EvalReport": "memstore.eval_targets", "Target": "memstore.eval_targets"}
)
