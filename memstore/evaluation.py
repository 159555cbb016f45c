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
system's overhead per turn, LLM calls and failures (the agent's and synthesis'), and the
LLM agent's turns whose command was the model's (``EpisodeResult.model_turns``: the others
were its fallback's, the explorer's).
``EvalReport`` holds it all (memstore.eval_targets); ``report_json``, ``render_table``,
``render_markdown`` and ``plot_report`` present it (memstore.eval_report). This module plays
and computes; it prints nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memstore.connection import DEFAULT_BUSY_TIMEOUT_S
from memstore.errors import ModelUnavailable, StoreBusy
from memstore.eval_lock import EvalFolderInUse, folder_lock

# the results and their presentation live in eval_results, eval_targets and eval_report;
# importable from here too, as before the split
from memstore.eval_report import (
    PlotUnavailable,
    plot_report,
    render_markdown,
    render_table,
    report_json,
)
from memstore.eval_results import (
    AGENTS,
    ALREADY,
    ARM_LABELS,
    ARMS,
    BY_EPISODE,
    COVERAGE_TARGET,
    FOR_NOW,
    LAST_FAILURE,
    MEMORY,
    MODEL,
    NO_MEMORY,
    OFFLINE,
    REPEAT_KINDS,
    REPEAT_LABELS,
    REPEAT_TARGET,
    RULE,
    SYNTHESIS,
    WORKED,
    ArmSummary,
    EpisodeResult,
    add_llm,
    empty_llm,
)
from memstore.eval_targets import EvalReport, Target
from memstore.metrics import STATE, coverage_from_records, repeat_flags, turn_failed
from memstore.outcome import Outcome, RefusalKind, classify_refusal

if TYPE_CHECKING:
    from memstore.config import MemstoreConfig
    from memstore.explorer import Choice, Observation
    from memstore.manager import SimpleMemoryManager
    from memstore.synthesis import LLMCallable

__all__ = [
    "AGENTS",
    "ARMS",
    "ARM_LABELS",
    "BY_EPISODE",
    "COVERAGE_TARGET",
    "MEMORY",
    "MODEL_FAILURES_IN_A_ROW",
    "NO_MEMORY",
    "REPEAT_KINDS",
    "REPEAT_LABELS",
    "REPEAT_TARGET",
    "AgentLike",
    "ArmSummary",
    "EpisodeResult",
    "EvalReport",
    "PlotUnavailable",
    "Target",
    "EvalFolderInUse",
    "database_paths",
    "make_agent",
    "plot_report",
    "render_markdown",
    "render_table",
    "repeat_kind",
    "report_json",
    "run_eval",
]

Progress = Callable[[int, int, str], None]

#: the most episodes per arm one evaluation plays in all (seeds x episodes): each episode
#: without memory is a database of its own, so a count nobody could play is refused
#: before anything is listed or made (memstore.cli_eval refuses the same count as a
#: usage error)
MAX_EPISODES_IN_ALL = 100_000


class AgentLike(Protocol):
    """What ``run_eval`` needs of an agent (memstore.explorer, memstore.llm_agent)."""

    name: str

    def start_episode(self, manager: SimpleMemoryManager) -> None: ...

    def choose(self, observation: Observation) -> Choice: ...


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


#: the LLM agent's turns in a row with no command from the model (each waited up to the
#: model's timeout) after which an evaluation stops: a model that does not answer would
#: otherwise be waited on every turn (6,000 of them, about 50 hours, by default)
MODEL_FAILURES_IN_A_ROW = 20


def _stop_for_a_dead_model(agent: AgentLike, config: MemstoreConfig) -> None:
    """ModelUnavailable, one line, once the LLM agent's model failed
    MODEL_FAILURES_IN_A_ROW turns in a row."""
    failed = getattr(agent, "failed_in_a_row", 0)
    if failed >= MODEL_FAILURES_IN_A_ROW:
        raise ModelUnavailable(
            f"the model ({config.model}) gave no command memstore plays for {failed} turns in "
            f"a row (the last failure: {getattr(agent, 'last_failure', None)}): the evaluation "
            f"stopped; check the model's name, API base and key, or, where its answers were "
            f"read and refused, what it answers"
        )


def database_paths(folder: Path, agent: str, seeds: Sequence[int], episodes: int) -> list[Path]:
    """Every database one evaluation writes in ``folder``."""
    return list(_each_database_path(folder, agent, seeds, episodes))


def _each_database_path(
    folder: Path, agent: str, seeds: Sequence[int], episodes: int
) -> Iterator[Path]:
    for seed in seeds:
        yield folder / f"{agent}-seed{seed}-memory.db"
        for number in range(1, episodes + 1):
            yield folder / f"{agent}-seed{seed}-nomemory-ep{number}.db"


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
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
) -> EvalReport:
    """Play both arms for every seed; the databases go to ``folder`` (it must not hold
    them already: an evaluation starts from nothing).

    ``config.model`` is the LLM agent's model (``tools``: it may call the memory
    tools). Memories are written by the offline recorder (``synthesis="offline"``, the
    default: both agents are then judged on the same kind of memories, and a run costs
    no synthesis call) or by that model (``synthesis="model"``). ``agent_llm`` (a
    LiteLLMCompletion) and ``synthesis_llm`` inject models (tests). Each database is
    opened with ``busy_timeout_s`` (``--busy-timeout``); when one refuses the rows that
    wait at an episode's end past it, the evaluation stops (StoreBusy): its figures would
    leave those turns out."""
    from memstore.config import MemstoreConfig

    if episodes < 1 or moves < 1 or not seeds:
        raise ValueError("episodes, moves and seeds must be at least 1")
    twice = next((seed for n, seed in enumerate(seeds) if seed in seeds[:n]), None)
    if twice is not None:  # (its second pass would reopen the first one's databases)
        raise ValueError(f"seed {twice} is given twice: give each seed once")
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r} (choose from {', '.join(AGENTS)})")
    if synthesis not in SYNTHESIS:
        raise ValueError(f"synthesis must be one of {', '.join(SYNTHESIS)}, not {synthesis!r}")
    if len(seeds) * episodes > MAX_EPISODES_IN_ALL:
        raise ValueError(
            f"seeds x episodes must be at most {MAX_EPISODES_IN_ALL:,}, got {len(seeds):,} x "
            f"{episodes:,}"
        )
    config = config or MemstoreConfig()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder):
        # one at a time, stopping at the first: never a list of every path up front;
        # a WAL left alone would be replayed into a new database of the same name
        paths = _each_database_path(folder, agent, seeds, episodes)
        files = (file for p in paths for file in (p, Path(f"{p}-wal")))
        existing = next((file for file in files if file.exists()), None)
        if existing is not None:
            raise FileExistsError(
                f"{existing} already exists: an evaluation starts from empty databases (a "
                f"run that was stopped leaves its databases behind: remove "
                f"{folder / f'{agent}-seed*-*.db*'}, or give another --db folder)"
            )
        return _play(agent, episodes, moves, seeds, folder, (config, busy_timeout_s), rom,
                     agent_llm, tools, synthesis, synthesis_llm, progress)  # fmt: skip


def _play(
    agent: str,
    episodes: int,
    moves: int,
    seeds: Sequence[int],
    folder: Path,
    settings: tuple[MemstoreConfig, float],
    rom: str | Path | None,
    agent_llm: Any,
    tools: bool,
    synthesis: str,
    synthesis_llm: LLMCallable | None,
    progress: Progress | None,
) -> EvalReport:
    """``run_eval``'s play, its arguments checked and its folder locked; ``settings``:
    the configuration and the busy timeout."""
    config = settings[0]
    started = time.perf_counter()
    total = 2 * len(seeds) * episodes * moves
    counter = _Counter(total, progress)
    arms = {arm: ArmSummary(arm, []) for arm in ARMS}
    llm_totals: dict[str, dict[str, Any]] = {arm: empty_llm() for arm in ARMS}
    for seed in seeds:
        for arm in ARMS:
            results, llm = _play_arm(
                arm,
                agent,
                seed,
                episodes,
                moves,
                folder,
                settings,
                rom,
                (agent_llm, tools),
                synthesis_llm if synthesis == MODEL else None,
                synthesis,
                counter,
            )
            arms[arm].episodes += results
            add_llm(llm_totals[arm], llm)
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


def _play_arm(
    arm: str,
    kind: str,
    seed: int,
    episodes: int,
    moves: int,
    folder: Path,
    settings: tuple[MemstoreConfig, float],
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

    config, busy_timeout_s = settings
    agent = make_agent(kind, seed, config, *agent_llm)
    records: list[dict[str, Any]] = []
    results: list[EpisodeResult] = []
    llm = empty_llm()
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
                store = MemoryStore.open(
                    db,
                    config=config.model_copy(update={"db": str(db)}),
                    busy_timeout_s=busy_timeout_s,
                )
                writer = store.config
                if synthesis == OFFLINE:
                    writer = writer.model_copy(update={"model": None})
                manager = SimpleMemoryManager(store, writer, synthesis_llm, run_id=f"{arm}-{seed}")
            assert manager is not None and store is not None
            agent.start_episode(manager)
            fallbacks = _fallbacks(agent)
            text, snapshot = game.reset()
            observation = observe(game, snapshot, text)
            rooms = {snapshot.location_id}
            played, over, kinds = 0, False, []
            for _ in range(moves):
                choice = agent.choose(observation)
                _stop_for_a_dead_model(agent, config)
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
            if not manager.flush():  # the episode's rows, and its number, are stored
                raise StoreBusy(
                    f"{store.target.display} stayed locked by another writer past the busy "
                    f"timeout: the turns of this episode could not be written, so the "
                    f"evaluation stopped (its figures would leave them out)"
                )
            stored_episode = manager.episode  # (numbered now, if it began while busy)
            mine = [
                {**r, "episode": number}
                for r in store.turn_records(manager.run_id)
                if r["episode"] == stored_episode
            ]
            covered = {number: store.locations_with_memory(stored_episode)}
            manager.reset_episode()
            records += mine
            result = _episode_result(
                seed, arm, number, mine, records, rooms, observation, covered, over, kinds
            )
            if fallbacks is not None:  # the LLM agent: the turns the model's command played
                result.model_turns = played - ((_fallbacks(agent) or 0) - fallbacks)
            results.append(result)
        assert manager is not None and store is not None
        _close(manager, store, llm)
    stats = getattr(agent, "stats", None)
    if callable(stats):
        agent_stats = stats()
        llm["agent_calls"] += agent_stats.get("calls", 0)
        add_llm(llm, {"agent_failures": agent_stats.get("failures", {})})
        add_llm(llm, {LAST_FAILURE: getattr(agent, "last_failure", None)})
    return results, llm


def _fallbacks(agent: AgentLike) -> int | None:
    """The turns the LLM agent's fallback (the explorer) played so far; None for an agent
    without ``stats()`` (the explorer itself)."""
    stats = getattr(agent, "stats", None)
    return int(stats().get("fallbacks", 0)) if callable(stats) else None


def _close(manager: SimpleMemoryManager, store: Any, llm: dict[str, Any]) -> None:
    status = manager.get_status()
    add_llm(
        llm,
        {"synthesis_calls": status["llm_calls"], "synthesis_failures": status["failures"]},
    )
    try:
        manager.close_final("the evaluation stopped (its figures would leave them out)")
    finally:
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
