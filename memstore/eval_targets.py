"""The whole evaluation run (:class:`EvalReport`: what ``run_eval`` measured, its arms'
results from memstore.eval_results) and the issue's targets judged on it
(:class:`Target`): met, not met, or not judged where the run cannot show it (an episode
the model did not play, too few episodes, a sample below the minimum). Pure values and
arithmetic: no game, no database, no output.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from memstore.eval_results import (
    ARM_LABELS,
    ARMS,
    BY_EPISODE,
    COVERAGE_TARGET,
    MEMORY,
    MIN_ARM_TURNS,
    MIN_COVERAGE_ROOMS,
    MIN_EPISODE_TURNS,
    MIN_MEMORY_OFF_REPEATS,
    MIN_REPEAT_OPPORTUNITIES,
    NO_MEMORY,
    REPEAT_TARGET,
    ArmSummary,
    EpisodeResult,
    fmt,
    not_played_text,
)

__all__ = ["EvalReport", "Target", "shown_against"]


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
                shown_against(with_mem, REPEAT_TARGET),
                unplayed({MEMORY: every}),
                preconditions[0],
            ),
            _target(
                "... and at most half of the memory-off arm",
                with_mem <= without / 2,
                f"{shown_against(with_mem, without / 2)} vs "
                f"{without:.{_digits(with_mem, without / 2)}%}",
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
                f"more distinct rooms or more score by episode {BY_EPISODE} with memory, "
                f"and neither fewer",
                _better(rooms, score),
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


def _better(
    rooms: tuple[float | None, float | None], score: tuple[float | None, float | None]
) -> bool:
    """More rooms or more score with memory (the first of each pair), and neither fewer: a
    gain in one figure bought with a loss in the other is not help (review S5 A finding
    6: 6.3 rooms against 4.0 with 6.7 points against 10.0 was "met")."""
    (rooms_on, rooms_off), (score_on, score_off) = ((a or 0, b or 0) for a, b in (rooms, score))
    return (rooms_on > rooms_off or score_on > score_off) and (
        rooms_on >= rooms_off and score_on >= score_off
    )


def _digits(value: float, bound: float) -> int:
    """The decimals of a percentage that tell ``value`` from ``bound``: 1, or up to 4
    where fewer would show the two alike (review S5 A finding 8: "< 5%" met and not met
    both showed "5.0%")."""
    for digits in (1, 2, 3):
        if value == bound or f"{value:.{digits}%}" != f"{bound:.{digits}%}":
            return digits
    return 4


def shown_against(value: float, bound: float) -> str:
    """``value`` as a percentage with the decimals ``_digits`` says."""
    return f"{value:.{_digits(value, bound)}%}"
