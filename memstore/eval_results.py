"""The evaluation's results (memstore.evaluation plays, memstore.eval_report presents):
one episode of one arm (:class:`EpisodeResult`), an arm over every seed (:class:`ArmSummary`),
the whole run and the issue's targets judged on it (:class:`EvalReport`, :class:`Target`).
Pure values and arithmetic: no game, no database, no output.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Container, Mapping, Sequence
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


@dataclass(frozen=True)
class Target:
    """One of the issue's targets: met, not met, or not judged (``met`` None, and
    ``not_judged`` says why: the run cannot show it), with the measured figures."""

    name: str
    met: bool | None
    measured: str
    not_judged: str = ""
    #: the episodes it reads that the model did not play (``EpisodeResult.model_played``),
    #: as (arm, seed, episode): why it is not judged, with any other reason
    not_played: tuple[tuple[str, int, int], ...] = ()


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

    def model_did_not_play(self) -> list[EpisodeResult]:
        """Every episode (arm, seed) of the LLM agent whose commands the model chose at
        most half of (``EpisodeResult.model_played``: failed calls, or calls that gave no
        command, left the explorer to choose the rest), in arm, seed, episode order; []
        for the explorer agent."""
        return sorted(
            (e for arm in ARMS for e in self.arms[arm].episodes if not e.model_played),
            key=lambda e: (ARMS.index(e.arm), e.seed, e.episode),
        )

    def synthesis_failed(self) -> str | None:
        """Why no target is about the model's memories, when ``--synthesis model`` made
        calls with memory and every one failed (a failed synthesis writes nothing: that
        arm played with no memory the model wrote); else None."""
        if self.synthesis == "offline recorder":
            return None
        llm = self.arms[MEMORY].llm
        calls, failures = llm["synthesis_calls"], llm["synthesis_failures"]
        if not calls or sum(failures.values()) < calls:
            return None
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(failures.items()))
        return (
            f"every synthesis call of {self.synthesis} with memory failed ({kinds}): that arm "
            f"played with no memory the model wrote"
        )

    def targets(self) -> list[Target]:
        """The issue's "done when", judged on the measured figures (means over seeds); a
        target is not judged (``met`` None) on play it is not about: an episode it reads
        that the model did not play (``model_did_not_play``; "across episodes" reads every
        episode of the arms it uses, "by episode 3" episodes 1 to 3 with memory, whose
        memories carry into episode 3, and episode 3 only without), one episode for
        "across episodes", fewer than BY_EPISODE for "by episode 3", and a sample below the
        minimum (MIN_ARM_TURNS and the rest, on every seed; "at most half" when the
        memory-off arm repeated nothing, which leaves nothing to halve)."""
        memory, none = self.arms[MEMORY], self.arms[NO_MEMORY]
        with_mem, without = memory.rate("repeated_across"), none.rate("repeated_across")
        last = min(BY_EPISODE, self.episodes)
        at = "" if last == BY_EPISODE else f" at episode {last}"
        coverage = memory.mean(last, lambda e: e.coverage) or 0.0
        rooms = (memory.mean(last, lambda e: e.rooms), none.mean(last, lambda e: e.rooms))
        score = (memory.mean(last, lambda e: e.score), none.mean(last, lambda e: e.score))
        short = self.model_did_not_play()
        every = range(1, self.episodes + 1)

        def unplayed(read: Mapping[str, Container[int]]) -> list[EpisodeResult]:
            return [e for e in short if e.arm in read and e.episode in read[e.arm]]

        upto = range(1, last + 1)
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
        sample = self._sample() if not across else ("", "")
        sample_by = self._sample_by_episode(last) if not by else ("", "")
        unwritten = self.synthesis_failed()  # every target reads the memory arm
        preconditions = [
            "; ".join(filter(None, (unwritten, across, sample[0]))),
            "; ".join(filter(None, (unwritten, across, sample[1]))),
            "; ".join(filter(None, (unwritten, by, sample_by[0]))),
            "; ".join(filter(None, (unwritten, by, sample_by[1]))),
        ]
        return [
            _target(
                f"repeated failed actions with memory, across episodes, < {REPEAT_TARGET:.0%}",
                with_mem < REPEAT_TARGET,
                f"{with_mem:.1%}",
                unplayed({MEMORY: every}),
                preconditions[0],
            ),
            _target(
                "... and at most half of the memory-off arm",
                with_mem <= without / 2,
                f"{with_mem:.1%} vs {without:.1%}",
                unplayed({MEMORY: every, NO_MEMORY: every}),
                preconditions[1],
            ),
            _target(
                f"location coverage >= {COVERAGE_TARGET:.0%} by episode {BY_EPISODE} (with memory)",
                coverage >= COVERAGE_TARGET,
                f"{coverage:.0%}{at}",
                unplayed({MEMORY: upto}),
                preconditions[2],
            ),
            _target(
                f"more distinct rooms or more score by episode {BY_EPISODE} with memory",
                (rooms[0] or 0) > (rooms[1] or 0) or (score[0] or 0) > (score[1] or 0),
                f"rooms {fmt(rooms[0])} vs {fmt(rooms[1])}, "
                f"score {fmt(score[0])} vs {fmt(score[1])}{at}",
                unplayed({MEMORY: upto, NO_MEMORY: (last,)}),
                preconditions[3],
            ),
        ]

    def _sample(self) -> tuple[str, str]:
        """Why the repeat targets' sample is too small to judge them (the minimum sample:
        MIN_ARM_TURNS and the rest), or "": (below 5%'s, at most half's)."""
        memory, none = self.arms[MEMORY], self.arms[NO_MEMORY]
        what = "turns of each arm it reads"
        turns = {MEMORY: memory.per_seed(lambda e: e.turns)}
        chances = _too_few(
            MIN_REPEAT_OPPORTUNITIES,
            "failed turns with memory before the last episode (repeat opportunities: what "
            "a later episode could repeat)",
            {MEMORY: memory.per_seed(lambda e: e.failed_turns, range(1, self.episodes))},
            named=False,
        )
        off = none.per_seed(lambda e: e.repeated_across)
        if not any(off.values()):
            halve = (
                "the memory-off arm repeated no failed action (0.0% on every seed): memory "
                "had nothing to halve"
            )
        else:
            halve = _too_few(
                MIN_MEMORY_OFF_REPEATS,
                "repeated failed actions without memory (what memory could halve)",
                {NO_MEMORY: off},
                named=False,
            )
        both = turns | {NO_MEMORY: none.per_seed(lambda e: e.turns)}
        return (
            "; ".join(filter(None, (_too_few(MIN_ARM_TURNS, what, turns), chances))),
            "; ".join(filter(None, (halve, _too_few(MIN_ARM_TURNS, what, both), chances))),
        )

    def _sample_by_episode(self, last: int) -> tuple[str, str]:
        """Why the sample of episode ``last`` is too small to judge the targets "by
        episode 3" (MIN_EPISODE_TURNS, MIN_COVERAGE_ROOMS), or "": (coverage's, rooms or
        score's)."""
        memory, none = self.arms[MEMORY], self.arms[NO_MEMORY]
        what = f"turns of episode {last} of each arm it reads"
        mine = {MEMORY: memory.per_seed(lambda e: e.turns, (last,))}
        rooms = _too_few(
            MIN_COVERAGE_ROOMS,
            f"rooms visited in episode {last} with memory",
            {MEMORY: memory.per_seed(lambda e: e.coverage_visited, (last,))},
            named=False,
        )
        coverage = "; ".join(filter(None, (_too_few(MIN_EPISODE_TURNS, what, mine), rooms)))
        both = mine | {NO_MEMORY: none.per_seed(lambda e: e.turns, (last,))}
        return coverage, _too_few(MIN_EPISODE_TURNS, what, both)

    def targets_not_played(self) -> list[EpisodeResult]:
        """The episodes some target was not judged for because the model did not play them
        (``Target.not_played``), in ``model_did_not_play`` order: what makes eval exit 1."""
        read = {key for t in self.targets() for key in t.not_played}
        return [e for e in self.model_did_not_play() if (e.arm, e.seed, e.episode) in read]


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


def _too_few(
    need: int, what: str, counts: Mapping[str, Mapping[int, int]], *, named: bool = True
) -> str:
    """``needs at least NEED WHAT on every seed (the fewest: 2 with memory, seed 1)``,
    naming each arm of ``counts`` (by arm, by seed) whose smallest count is below
    ``need`` (its label unless not ``named``: ``what`` says the arm); "" when none is."""
    short = []
    for arm, found in counts.items():
        count, seed = min(((c, s) for s, c in found.items()), default=(0, 0))
        if count < need:
            short.append(f"{count:,}{f' {ARM_LABELS[arm]}' if named else ''}, seed {seed}")
    if not short:
        return ""
    return f"needs at least {need:,} {what} on every seed (the fewest: {'; '.join(short)})"


def _target(
    name: str, met: bool, measured: str, short: Sequence[EpisodeResult], precondition: str
) -> Target:
    """A target, not judged when the model did not play an episode it reads (``short``:
    which) or when the run cannot meet its ``precondition`` (why not)."""
    reasons = []
    if short:
        reasons.append(f"{not_played_text(short)}: the explorer chose the rest")
    if precondition:
        reasons.append(precondition)
    if reasons:
        keys = tuple((e.arm, e.seed, e.episode) for e in short)
        return Target(name, None, measured, "; ".join(reasons), keys)
    return Target(name, met, measured)
