"""The spec's success metrics (spec 000 "Success Metrics"), computed from turn records.

Definitions (the README repeats them):
- repeated failed action rate: the share of turns whose action (case-insensitive) had
  already failed earlier in the run at the same location; spec target < 5%. The same
  share counting only repeats within one episode is given beside it: the persistent memory
  is what should prevent the first kind, the episode's own memory the second.
  A turn **failed** by the game's own evidence (``outcome``, memstore.outcome): the game
  refused the action ("You can't go that way.", "I don't know the word ..."), answered
  word for word as it did the last time at the same place this episode with nothing
  tracked changed, or the action killed the player. Turns recorded before revision 0007
  have no outcome and fall back to the older definition, which is reported beside it for
  comparison: "changed nothing the Z-machine tracks (score, location, inventory)" (it
  counts a successful ``open window`` as a failure).
- memory tokens per turn: tokens of location memory given to the agent before each
  action (median and 95th percentile); spec target 200-500.
- location coverage by episode: of the locations visited in an episode, the share that had
  a memory at the end of it (``MemoryStore.locations_with_memory``); spec target 80%+ by
  episode 3.
- turns to milestone: per episode, the first turn whose score is above zero; the
  cross-episode change is later episodes minus the first.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the ceil(fraction x n)-th smallest value (0 for no
    values). The product is rounded to 9 places first, so that 0.95 x 100, which floats
    make 95.00000000000001, is rank 95."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(round(fraction * len(ordered), 9))
    return float(ordered[max(0, min(len(ordered), rank) - 1)])


#: the failure definitions ``repeated_failed_action_rate`` knows
OUTCOME, STATE = "outcome", "state"
_FAILED_OUTCOMES = frozenset({"refused", "repeated", "died"})


def turn_failed(record: Mapping[str, Any], definition: str = OUTCOME) -> bool:
    """Whether a turn record's action failed: by the game's evidence (``outcome``, the
    default; a record without one falls back to the other) or, with ``definition="state"``,
    the older "changed no score, location or inventory"."""
    if definition not in (OUTCOME, STATE):
        raise ValueError(f"unknown failure definition {definition!r}")
    outcome = record.get("outcome") if definition == OUTCOME else None
    if outcome is None:
        return not record["state_changed"]
    return outcome in _FAILED_OUTCOMES


def repeat_flags(
    records: Iterable[Mapping[str, Any]],
    *,
    within_episode: bool = False,
    definition: str = OUTCOME,
) -> list[bool]:
    """For each record, in order: whether its action had already failed at the same
    location earlier in the records (in the same episode only, with ``within_episode``)."""
    failed: set[tuple[int, int, str]] = set()
    flags = []
    for record in records:
        episode = record["episode"] if within_episode else 0
        key = (episode, record["location_id"], record["action"].strip().lower())
        flags.append(key in failed)
        if turn_failed(record, definition):
            failed.add(key)
    return flags


def repeated_failed_actions(
    records: Iterable[Mapping[str, Any]],
    *,
    within_episode: bool = False,
    definition: str = OUTCOME,
) -> tuple[int, int]:
    """(turns repeating, at the same location, an action that failed there earlier in the
    records, in the same episode only with ``within_episode``; all turns)."""
    flags = repeat_flags(records, within_episode=within_episode, definition=definition)
    return sum(flags), len(flags)


def repeated_failed_action_rate(
    records: Iterable[Mapping[str, Any]],
    *,
    within_episode: bool = False,
    definition: str = OUTCOME,
) -> float:
    """Share of turns repeating, at the same location, an action that failed earlier in the
    records (in the same episode only, with ``within_episode``); ``definition`` is
    ``"outcome"`` (the game's evidence) or ``"state"`` (the older one)."""
    repeats, total = repeated_failed_actions(
        records, within_episode=within_episode, definition=definition
    )
    return repeats / total if total else 0.0


def turns_to_first_score(records: Iterable[Mapping[str, Any]]) -> dict[int, int | None]:
    """Per episode, the first turn whose score went above zero (None if it never did)."""
    result: dict[int, int | None] = {}
    for record in records:
        episode = record["episode"]
        result.setdefault(episode, None)
        if result[episode] is None and record["score_after"] > 0:
            result[episode] = record["turn"]
    return result


def compute_metrics(
    records: list[Mapping[str, Any]], coverage: Mapping[int, tuple[int, int]] | None = None
) -> dict[str, Any]:
    """All metrics for one run's records; ``coverage`` maps episode -> (with memory, visited)."""
    tokens = [float(r["memory_tokens"]) for r in records]
    overhead = [float(r["overhead_us"]) for r in records]
    milestones = turns_to_first_score(records)
    episodes = sorted(milestones)
    by_episode = sorted(milestones.items())
    first = by_episode[0][1] if by_episode else None
    change = {
        episode: (turns - first) if turns is not None and first is not None else None
        for episode, turns in by_episode[1:]
    }
    return {
        "turns": len(records),
        "episodes": episodes,
        "triggered_turns": sum(1 for r in records if r["triggers"]),
        "repeated_failed_action_rate": repeated_failed_action_rate(records),
        "repeated_failed_action_rate_within_episode": repeated_failed_action_rate(
            records, within_episode=True
        ),
        "repeated_failed_action_rate_old": repeated_failed_action_rate(records, definition=STATE),
        "repeated_failed_action_rate_within_episode_old": repeated_failed_action_rate(
            records, within_episode=True, definition=STATE
        ),
        "failed_turns": sum(1 for r in records if turn_failed(r)),
        "failed_turns_old": sum(1 for r in records if turn_failed(r, STATE)),
        "memory_tokens_per_turn": {
            "median": statistics.median(tokens) if tokens else 0.0,
            "p95": percentile(tokens, 0.95),
        },
        "overhead_us_per_turn": {
            "median": statistics.median(overhead) if overhead else 0.0,
            "p95": percentile(overhead, 0.95),
        },
        "turns_to_first_score": milestones,
        "turns_to_first_score_change": change,
        "coverage_by_episode": {
            episode: {"with_memory": have, "visited": seen, "share": have / seen if seen else 0.0}
            for episode, (have, seen) in sorted((coverage or {}).items())
        },
    }


def coverage_from_records(
    records: Iterable[Mapping[str, Any]], covered: Mapping[int, set[int]]
) -> dict[int, tuple[int, int]]:
    """Per episode, (visited locations that had a memory at its end, visited locations).

    ``covered`` maps each episode to the locations that had a memory at its end
    (``MemoryStore.locations_with_memory``); a location is visited when a record starts or
    ends there.
    """
    visited: dict[int, set[int]] = {}
    for record in records:
        places = visited.setdefault(record["episode"], set())
        places.add(record["location_id"])
        if record["location_after"] is not None:
            places.add(record["location_after"])
    return {
        episode: (len(places & covered.get(episode, set())), len(places))
        for episode, places in visited.items()
    }


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """A short human-readable report."""
    tokens, overhead = metrics["memory_tokens_per_turn"], metrics["overhead_us_per_turn"]
    lines = [
        f"turns: {metrics['turns']} in episodes {metrics['episodes']}; "
        f"triggers fired on {metrics['triggered_turns']}",
        f"repeated failed action rate: {metrics['repeated_failed_action_rate']:.1%} "
        f"(spec target < 5%); within an episode: "
        f"{metrics['repeated_failed_action_rate_within_episode']:.1%}",
        f"  failed = refused by the game, its answer repeated, or deadly "
        f"({metrics['failed_turns']} turns); by the older 'changed no score, location or "
        f"inventory' ({metrics['failed_turns_old']} turns): "
        f"{metrics['repeated_failed_action_rate_old']:.1%}, within an episode "
        f"{metrics['repeated_failed_action_rate_within_episode_old']:.1%}",
        f"memory tokens given per turn: median {tokens['median']:.0f}, p95 {tokens['p95']:.0f} "
        "(spec target 200-500)",
        f"memory system overhead per turn: median {overhead['median']:.0f} us, "
        f"p95 {overhead['p95']:.0f} us",
    ]
    for episode, cover in metrics["coverage_by_episode"].items():
        lines.append(
            f"coverage, episode {episode}: {cover['with_memory']}/{cover['visited']} "
            f"visited locations have memories ({cover['share']:.0%})"
        )
    firsts = ", ".join(
        f"ep{e}: {t if t is not None else '-'}" for e, t in metrics["turns_to_first_score"].items()
    )
    lines.append(f"turns to the first point of score: {firsts}")
    for episode, delta in metrics["turns_to_first_score_change"].items():
        lines.append(
            f"  change in episode {episode} vs the first: "
            f"{'+' if (delta or 0) >= 0 else ''}{delta if delta is not None else '-'} turns"
        )
    return "\n".join(lines)


# --- runs (``memstore metrics --runs``) ---------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    """One run of the demo (one ``run_id`` in the turn records)."""

    run_id: str
    #: its first turn record's ``created_at`` (ISO 8601, UTC)
    started: str
    episodes: tuple[int, ...]
    turns: int
    #: "offline", "llm (MODEL)", "mixed" (decisions of both kinds in its episodes), or
    #: "unknown" (its episodes logged no synthesis decision)
    mode: str


def summarize_runs(
    records: Iterable[Mapping[str, Any]], decisions: Iterable[Mapping[str, Any]]
) -> list[RunSummary]:
    """One summary per run, in the order the runs started (the records' order).

    Turn records carry no mode: it is read from the decision log of the run's episodes
    (episode numbers are handed out once per database, so a run's episodes are its own).
    """
    modes: dict[int, set[str]] = {}
    for row in decisions:
        mode = "offline" if row["mode"] == "offline" else f"llm ({row['model']})"
        modes.setdefault(row["episode"], set()).add(mode)
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        runs.setdefault(record["run_id"], []).append(record)
    summaries = []
    for run_id, rows in runs.items():
        episodes = tuple(sorted({row["episode"] for row in rows}))
        seen = set().union(*(modes.get(episode, set()) for episode in episodes))
        mode = seen.pop() if len(seen) == 1 else "mixed" if seen else "unknown"
        summaries.append(RunSummary(run_id, rows[0]["created_at"], episodes, len(rows), mode))
    return summaries


def _episode_ranges(episodes: Iterable[int]) -> str:
    """``1-3, 5``: consecutive episodes as ranges."""
    ranges: list[list[int]] = []
    for episode in sorted(episodes):
        if ranges and episode == ranges[-1][1] + 1:
            ranges[-1][1] = episode
        else:
            ranges.append([episode, episode])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def _when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


def format_runs(summaries: list[RunSummary]) -> str:
    """A table: run, started (UTC), episodes, turns, mode; then how to see one run."""
    rows = [("run", "started (UTC)", "episodes", "turns", "mode")]
    rows += [
        (s.run_id, _when(s.started), _episode_ranges(s.episodes), str(s.turns), s.mode)
        for s in summaries
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
        + "  "
        + row[4]
        for row in rows
    ]
    count = f"{len(summaries)} run" + ("" if len(summaries) == 1 else "s")
    lines.append(f"{count}; `memstore metrics` shows the last, `--run ID` another")
    return "\n".join(lines)
