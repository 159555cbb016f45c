"""Does memory help? The same agent, seeds and move budget with memory and without (issue 17).

``run_eval`` plays, for each seed, two arms of ``episodes`` episodes of at most ``moves``
actions each (an episode also ends when the game does: the third death):

* **memory**: one database across the episodes (what the agent learnt in episode 1 is
  there in episode 2);
* **no memory**: a fresh database for every episode (the agent still has the memory of
  the episode it plays, the map included, but nothing from earlier ones).

Both arms use the same game seed (so every episode starts from the same game), the same
agent seed and the same code; the only difference is the database. Memories are written
by the manager as in any agent loop (the offline recorder without a model).

What is measured, per episode and per arm (memstore.metrics for the definitions): distinct
rooms reached, score at the end, the turn of the first point, deaths, repeated failed
actions across episodes and within one (by the game's evidence, and by the older "changed
no score, location or inventory"), location coverage (visited rooms with a memory at the
episode's end), memory tokens given to the agent per turn (median, p95), the memory
system's overhead per turn, LLM calls and failures (the agent's and synthesis').
``EvalReport`` holds it all; ``report_json``, ``render_table``, ``render_markdown`` and
``plot_report`` present it. This module plays and computes; it prints nothing.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memstore.metrics import STATE, coverage_from_records, percentile, repeat_flags, turn_failed
from memstore.outcome import Outcome, RefusalKind, classify_refusal

if TYPE_CHECKING:
    from memstore.config import MemstoreConfig
    from memstore.explorer import Choice, Observation
    from memstore.manager import SimpleMemoryManager
    from memstore.synthesis import LLMCallable

__all__ = [
    "ARMS",
    "AgentLike",
    "ArmSummary",
    "EpisodeResult",
    "EvalReport",
    "Target",
    "plot_report",
    "render_markdown",
    "render_table",
    "report_json",
    "run_eval",
]

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

Progress = Callable[[int, int, str], None]


class AgentLike(Protocol):
    """What ``run_eval`` needs of an agent (memstore.explorer, memstore.llm_agent)."""

    name: str

    def start_episode(self, manager: SimpleMemoryManager) -> None: ...

    def choose(self, observation: Observation) -> Choice: ...


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (``pip install 'memstore[plot]'``)."""


# --- results ------------------------------------------------------------------------------


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
            "repeated_failed_across": _rate(self.repeated_across, self.turns),
            "repeated_failed_within": _rate(self.repeated_within, self.turns),
            "repeated_failed_across_old": _rate(self.repeated_across_old, self.turns),
            "repeated_failed_within_old": _rate(self.repeated_within_old, self.turns),
            "coverage": {
                "with_memory": self.coverage_with_memory,
                "visited": self.coverage_visited,
                "share": round(self.coverage, 4),
            },
            "memory_tokens": _spread(self.memory_tokens),
            "repeats_by_kind": {
                kind: self.repeat_kinds[kind] for kind in REPEAT_KINDS if kind in self.repeat_kinds
            },
        }


@dataclass
class ArmSummary:
    """One arm over every seed: per-episode means, and the arm's rates."""

    arm: str
    episodes: list[EpisodeResult]
    #: model calls and failures by kind, of the agent and of synthesis
    llm: dict[str, Any] = field(default_factory=lambda: _empty_llm())

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
        return _spread([t for e in self.episodes for t in e.memory_tokens])

    @property
    def overhead(self) -> dict[str, float]:
        return _spread([t for e in self.episodes for t in e.overhead_us])

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
                    "rooms": _round(self.mean(n, lambda e: e.rooms)),
                    "score": _round(self.mean(n, lambda e: e.score)),
                    "first_point_turn": _round(self.mean(n, lambda e: e.first_point_turn)),
                    "repeated_failed_across": _round(
                        self.mean(n, lambda e: e.share(e.repeated_across)), 4
                    ),
                    "repeated_failed_within": _round(
                        self.mean(n, lambda e: e.share(e.repeated_within)), 4
                    ),
                    "coverage": _round(self.mean(n, lambda e: e.coverage), 4),
                    "seeds_scoring": sum(1 for e in self.by_episode(n) if e.first_point_turn),
                }
                for n in numbers
            ],
            "episodes": [e.as_dict() for e in self.episodes],
        }


@dataclass(frozen=True)
class Target:
    """One of the issue's targets: met or not, with the measured figures."""

    name: str
    met: bool
    measured: str


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

    def targets(self) -> list[Target]:
        """The issue's "done when", judged on the measured figures (means over seeds)."""
        memory, none = self.arms[MEMORY], self.arms[NO_MEMORY]
        with_mem, without = memory.rate("repeated_across"), none.rate("repeated_across")
        last = min(BY_EPISODE, self.episodes)
        coverage = memory.mean(last, lambda e: e.coverage) or 0.0
        rooms = (memory.mean(last, lambda e: e.rooms), none.mean(last, lambda e: e.rooms))
        score = (memory.mean(last, lambda e: e.score), none.mean(last, lambda e: e.score))
        return [
            Target(
                f"repeated failed actions with memory, across episodes, < {REPEAT_TARGET:.0%}",
                with_mem < REPEAT_TARGET,
                f"{with_mem:.1%}",
            ),
            Target(
                "... and at most half of the memory-off arm",
                with_mem <= without / 2,
                f"{with_mem:.1%} vs {without:.1%}",
            ),
            Target(
                f"location coverage >= {COVERAGE_TARGET:.0%} by episode {last} (with memory)",
                coverage >= COVERAGE_TARGET,
                f"{coverage:.0%}",
            ),
            Target(
                f"more distinct rooms or more score by episode {last} with memory",
                (rooms[0] or 0) > (rooms[1] or 0) or (score[0] or 0) > (score[1] or 0),
                f"rooms {_fmt(rooms[0])} vs {_fmt(rooms[1])}, "
                f"score {_fmt(score[0])} vs {_fmt(score[1])}",
            ),
        ]


# --- playing ------------------------------------------------------------------------------


def make_agent(
    kind: str, seed: int, config: MemstoreConfig, llm: Any = None, tools: bool = False
) -> AgentLike:
    """A new agent of ``kind`` ("explorer" or "llm") for one arm and seed."""
    from memstore.explorer import ExplorerAgent

    if kind == "explorer":
        return ExplorerAgent(seed)
    if kind == "llm":
        from memstore.llm_agent import LLMAgent

        return LLMAgent(config, seed=seed, completion=llm, tools=tools)
    raise ValueError(f"unknown agent {kind!r} (choose from {', '.join(AGENTS)})")


def database_paths(folder: Path, agent: str, seeds: Sequence[int], episodes: int) -> list[Path]:
    """Every database one evaluation writes in ``folder``."""
    paths = []
    for seed in seeds:
        paths.append(folder / f"{agent}-seed{seed}-memory.db")
        paths += [folder / f"{agent}-seed{seed}-nomemory-ep{n}.db" for n in range(1, episodes + 1)]
    return paths


def run_eval(
    *,
    agent: str = "explorer",
    episodes: int = 5,
    moves: int = 200,
    seeds: Sequence[int] = (1, 2, 3),
    folder: str | Path,
    config: MemstoreConfig | None = None,
    rom: str | Path | None = None,
    agent_llm: Any = None,
    tools: bool = False,
    synthesis: str = OFFLINE,
    synthesis_llm: LLMCallable | None = None,
    progress: Progress | None = None,
) -> EvalReport:
    """Play both arms for every seed; the databases go to ``folder`` (it must not hold
    them already: an evaluation starts from nothing).

    ``config.model`` is the LLM agent's model (``tools``: it may call the memory
    tools). Memories are written by the offline recorder (``synthesis="offline"``, the
    default: both agents are then judged on the same kind of memories, and a run costs
    no synthesis call) or by that model (``synthesis="model"``). ``agent_llm`` (a
    LiteLLMCompletion) and ``synthesis_llm`` inject models (tests)."""
    from memstore.config import MemstoreConfig

    if episodes < 1 or moves < 1 or not seeds:
        raise ValueError("episodes, moves and seeds must be at least 1")
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r} (choose from {', '.join(AGENTS)})")
    if synthesis not in SYNTHESIS:
        raise ValueError(f"synthesis must be one of {', '.join(SYNTHESIS)}, not {synthesis!r}")
    config = config or MemstoreConfig()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    existing = [p for p in database_paths(folder, agent, seeds, episodes) if p.exists()]
    if existing:
        raise FileExistsError(
            f"{existing[0]} already exists: an evaluation starts from empty databases "
            "(give another --db folder, or remove them)"
        )
    started = time.perf_counter()
    total = 2 * len(seeds) * episodes * moves
    counter = _Counter(total, progress)
    arms = {arm: ArmSummary(arm, []) for arm in ARMS}
    llm_totals: dict[str, dict[str, Any]] = {arm: _empty_llm() for arm in ARMS}
    for seed in seeds:
        for arm in ARMS:
            results, llm = _play_arm(
                arm,
                agent,
                seed,
                episodes,
                moves,
                folder,
                config,
                rom,
                (agent_llm, tools),
                synthesis_llm if synthesis == MODEL else None,
                synthesis,
                counter,
            )
            arms[arm].episodes += results
            _add_llm(llm_totals[arm], llm)
    for arm in ARMS:
        arms[arm].llm = llm_totals[arm]
    model = (config.model or "no model") if agent == "llm" else "no model"
    writer = (config.model or "offline recorder") if synthesis == MODEL else "offline recorder"
    return EvalReport(
        agent, episodes, moves, list(seeds), model, arms, time.perf_counter() - started,
        synthesis=writer, tools=tools,
    )  # fmt: skip


class _Counter:
    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.done, self.progress = total, 0, progress

    def step(self, label: str, count: int = 1) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done, self.total, label)


def _empty_llm() -> dict[str, Any]:
    return {"agent_calls": 0, "agent_failures": {}, "synthesis_calls": 0, "synthesis_failures": {}}


def _add_llm(total: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key in ("agent_calls", "synthesis_calls"):
        total[key] += more.get(key, 0)
    for key in ("agent_failures", "synthesis_failures"):
        for kind, count in more.get(key, {}).items():
            total[key][kind] = total[key].get(kind, 0) + count


def _play_arm(
    arm: str,
    kind: str,
    seed: int,
    episodes: int,
    moves: int,
    folder: Path,
    config: MemstoreConfig,
    rom: str | Path | None,
    agent_llm: Any,
    synthesis_llm: LLMCallable | None,
    synthesis: str,
    counter: _Counter,
) -> tuple[list[EpisodeResult], dict[str, Any]]:
    from memstore.explorer import observe
    from memstore.game import ZorkGame, z_machine_context
    from memstore.manager import SimpleMemoryManager
    from memstore.store import MemoryStore

    agent = make_agent(kind, seed, config, *agent_llm)
    records: list[dict[str, Any]] = []
    results: list[EpisodeResult] = []
    llm = _empty_llm()
    store: MemoryStore | None = None
    manager: SimpleMemoryManager | None = None
    with ZorkGame(rom, seed=seed) as game:
        for number in range(1, episodes + 1):
            if store is None or arm == NO_MEMORY:
                if manager is not None and store is not None:
                    _close(manager, store, llm)
                name = (
                    f"{kind}-seed{seed}-memory.db"
                    if arm == MEMORY
                    else f"{kind}-seed{seed}-nomemory-ep{number}.db"
                )
                db = folder / name
                store = MemoryStore.open(db, config=config.model_copy(update={"db": str(db)}))
                writer = store.config
                if synthesis == OFFLINE:
                    writer = writer.model_copy(update={"model": None})
                manager = SimpleMemoryManager(store, writer, synthesis_llm, run_id=f"{arm}-{seed}")
            assert manager is not None and store is not None
            agent.start_episode(manager)
            stored_episode = manager.episode
            text, snapshot = game.reset()
            observation = observe(game, snapshot, text)
            rooms = {snapshot.location_id}
            played, over, kinds = 0, False, []
            for _ in range(moves):
                choice = agent.choose(observation)
                manager.add_reasoning(manager.turn + 1, choice.reasoning, choice.action)
                step = game.step(choice.action)
                manager.record_action_outcome(
                    step.before.location_id,
                    step.before.location_name,
                    choice.action,
                    step.response,
                    z_machine_context(step.before, step.after, step.response),
                )
                kinds.append(repeat_kind(manager.last_outcome, step.response))
                observation = observe(game, step.after, step.response)
                rooms.add(step.after.location_id)
                played += 1
                counter.step(f"seed {seed} {ARM_LABELS[arm]} ep{number}")
                if game.game_over():
                    over = True
                    break
            counter.step(f"seed {seed} {ARM_LABELS[arm]} ep{number}", moves - played)
            manager.flush()
            mine = [
                {**r, "episode": number}
                for r in store.turn_records(manager.run_id)
                if r["episode"] == stored_episode
            ]
            covered = {number: store.locations_with_memory(stored_episode)}
            manager.reset_episode()
            records += mine
            results.append(
                _episode_result(
                    seed, arm, number, mine, records, rooms, observation, covered, over, kinds
                )
            )
        assert manager is not None and store is not None
        _close(manager, store, llm)
    stats = getattr(agent, "stats", None)
    if callable(stats):
        agent_stats = stats()
        llm["agent_calls"] += agent_stats.get("calls", 0)
        _add_llm(llm, {"agent_failures": agent_stats.get("failures", {})})
    return results, llm


def _close(manager: SimpleMemoryManager, store: Any, llm: dict[str, Any]) -> None:
    status = manager.get_status()
    _add_llm(
        llm,
        {"synthesis_calls": status["llm_calls"], "synthesis_failures": status["failures"]},
    )
    manager.close()
    store.close()


def _episode_result(
    seed: int,
    arm: str,
    number: int,
    mine: list[dict[str, Any]],
    records: list[dict[str, Any]],
    rooms: set[int],
    observation: Observation,
    covered: dict[int, set[int]],
    over: bool,
    kinds: list[str],
) -> EpisodeResult:
    """The figures of one episode; ``records`` is the arm's run so far (this one last);
    ``kinds`` says what each of its turns was (``repeat_kind``)."""
    start = len(records) - len(mine)
    across = repeat_flags(records)[start:]
    across_old = repeat_flags(records, definition=STATE)[start:]
    within = repeat_flags(mine)
    within_old = repeat_flags(mine, definition=STATE)

    first = next((r["turn"] for r in mine if r["score_after"] > 0), None)
    have, seen = coverage_from_records(mine, covered).get(number, (0, 0))
    return EpisodeResult(
        seed=seed,
        arm=arm,
        episode=number,
        turns=len(mine),
        rooms=len(rooms),
        score=observation.score,
        first_point_turn=first,
        deaths=sum(r["died"] for r in mine),
        game_over=over,
        repeated_across=sum(across),
        repeated_within=sum(within),
        repeated_across_old=sum(across_old),
        repeated_within_old=sum(within_old),
        failed_turns=sum(1 for r in mine if turn_failed(r)),
        coverage_with_memory=have,
        coverage_visited=seen,
        memory_tokens=[int(r["memory_tokens"]) for r in mine],
        overhead_us=[float(r["overhead_us"]) for r in mine],
        repeat_kinds=dict(Counter(k for k, again in zip(kinds, across, strict=False) if again)),
    )


def repeat_kind(outcome: Outcome | None, response: str) -> str:
    """What a turn was, for telling why failures were repeated (``REPEAT_KINDS``)."""
    if outcome is None or outcome is Outcome.OK:
        return WORKED
    if outcome is not Outcome.REFUSED:
        return outcome.value  # repeated, died
    refusal = classify_refusal(response)
    if refusal is None or refusal.rule:
        return RULE
    return ALREADY if refusal.kind is RefusalKind.ALREADY else FOR_NOW


# --- presenting ---------------------------------------------------------------------------


def _rate(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p95": 0.0}
    return {
        "median": round(float(statistics.median(values)), 2),
        "p95": round(percentile(list(values), 0.95), 2),
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report_json(report: EvalReport, *, timing: bool = True) -> dict[str, Any]:
    """The report as JSON-ready data. Everything but ``timing`` (wall time, the memory
    system's overhead per turn) is the same every time for the same arguments."""
    data: dict[str, Any] = {
        "agent": report.agent,
        "model": report.model,
        "tools": report.tools,
        "memories_written_by": report.synthesis,
        "episodes": report.episodes,
        "moves": report.moves,
        "seeds": report.seeds,
        "arms": {arm: summary.as_dict() for arm, summary in report.arms.items()},
        "targets": [
            {"target": t.name, "met": t.met, "measured": t.measured} for t in report.targets()
        ],
    }
    if timing:
        data["timing"] = {
            "seconds": round(report.seconds, 1),
            "overhead_us_per_turn": {arm: summary.overhead for arm, summary in report.arms.items()},
        }
    return data


def _table_rows(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    header = ["episode", "arm", "rooms", "score", "1st point", "repeats across", "within",
              "old across", "coverage"]  # fmt: skip
    rows = []
    for number in range(1, report.episodes + 1):
        for arm in ARMS:
            summary = report.arms[arm]
            rows.append(
                [
                    str(number),
                    ARM_LABELS[arm],
                    _fmt(summary.mean(number, lambda e: e.rooms)),
                    _fmt(summary.mean(number, lambda e: e.score)),
                    _fmt(summary.mean(number, lambda e: e.first_point_turn), 0),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_across))),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_within))),
                    _pct(summary.mean(number, lambda e: e.share(e.repeated_across_old))),
                    _pct(summary.mean(number, lambda e: e.coverage), 0),
                ]
            )
    return header, rows


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def _arm_lines(report: EvalReport, *, timing: bool) -> list[str]:
    lines = []
    for arm in ARMS:
        summary = report.arms[arm]
        tokens = summary.tokens
        llm = summary.llm
        line = (
            f"{ARM_LABELS[arm]}: repeated failed actions across episodes "
            f"{summary.rate('repeated_across'):.1%} (older definition "
            f"{summary.rate('repeated_across_old'):.1%}), within an episode "
            f"{summary.rate('repeated_within'):.1%} ({summary.rate('repeated_within_old'):.1%}); "
            f"memory tokens per turn median {tokens['median']:.0f}, p95 {tokens['p95']:.0f}; "
            f"LLM calls: agent {llm['agent_calls']} ({_failures(llm['agent_failures'])}), "
            f"synthesis {llm['synthesis_calls']} ({_failures(llm['synthesis_failures'])})"
        )
        if timing:
            overhead = summary.overhead
            line += (
                f"; memory overhead per turn median {overhead['median']:.0f} us, "
                f"p95 {overhead['p95']:.0f} us"
            )
        lines.append(line)
    return lines


def _failures(found: Mapping[str, int]) -> str:
    total = sum(found.values())
    if not total:
        return "no failures"
    return f"{total} failed: " + ", ".join(f"{k} {v}" for k, v in sorted(found.items()))


def _target_lines(report: EvalReport) -> list[str]:
    return [
        f"{'met' if t.met else 'NOT MET'}: {t.name} (measured: {t.measured})"
        for t in report.targets()
    ] + [_why_line(report)]


def _why_line(report: EvalReport) -> str:
    """What the repeated failures with memory were, as shares of all its turns."""
    memory = report.arms[MEMORY]
    parts = [
        f"{memory.kind_rate(kind):.1%} {REPEAT_LABELS[kind]}"
        for kind in REPEAT_KINDS
        if memory.kind_rate(kind) > 0
    ]
    return "repeated failed actions with memory, across episodes, were: " + (
        "; ".join(parts) or "none"
    )


def _title(report: EvalReport) -> str:
    seeds = ", ".join(map(str, report.seeds))
    agent = report.agent if report.agent == "explorer" else f"{report.agent} ({report.model})"
    return (
        f"agent {agent}, memories by the {report.synthesis}, {report.episodes} episodes of "
        f"at most {report.moves} moves, seeds {seeds}; figures are means over the seeds"
    )


def render_table(report: EvalReport, *, timing: bool = True) -> str:
    """The report as a fixed-width table for the terminal."""
    header, rows = _table_rows(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [_title(report), line(header), *map(line, rows)]
    out += _arm_lines(report, timing=timing)
    out += _target_lines(report)
    if timing:
        out.append(f"played in {report.seconds:.1f} s")
    return "\n".join(out)


def render_markdown(report: EvalReport, *, timing: bool = False) -> str:
    """The report as a markdown table (no timing by default: the same every run)."""
    header, rows = _table_rows(report)
    out = [f"**{_title(report)}**", ""]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(" ---: " if i != 1 else " --- " for i in range(len(header))) + "|")
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out.append("")
    out += [f"- {line}" for line in _arm_lines(report, timing=timing)]
    out += [f"- {line}" for line in _target_lines(report)]
    return "\n".join(out) + "\n"


def plot_report(report: EvalReport, path: str | Path) -> Path:
    """Rooms, score, repeated failed actions and coverage by episode, both arms, as a
    PNG. Raises PlotUnavailable when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("the plot needs matplotlib: pip install 'memstore[plot]'") from exc
    numbers = list(range(1, report.episodes + 1))
    panels: list[tuple[str, Callable[[EpisodeResult], float | None], bool]] = [
        ("distinct rooms", lambda e: e.rooms, False),
        ("score", lambda e: e.score, False),
        ("repeated failed actions (across episodes)", lambda e: e.share(e.repeated_across), True),
        ("location coverage", lambda e: e.coverage, True),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(12, 3), dpi=72)
    for axis, (title, value, percent) in zip(axes, panels, strict=True):
        for arm, style in ((MEMORY, "o-"), (NO_MEMORY, "s--")):
            summary = report.arms[arm]
            values = [summary.mean(n, value) for n in numbers]
            axis.plot(numbers, [v if v is not None else float("nan") for v in values], style,
                      label=ARM_LABELS[arm])  # fmt: skip
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("episode", fontsize=8)
        axis.set_xticks(numbers)
        axis.tick_params(labelsize=8)
        if percent:
            axis.set_ylim(0, 1.05)
            axis.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes[0].legend(fontsize=8)
    figure.suptitle(_title(report), fontsize=9)
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, format="png", metadata={"Software": None})
    plt.close(figure)
    return out
