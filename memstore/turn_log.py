"""What the manager records about each turn and each synthesis call, as typed values.

A :class:`TurnRecord` is one row of ``turn_records`` (the metrics' source); a
:class:`DecisionLog` is the decision-log entry of one synthesis call, filled in as the call
goes, and a :class:`DecisionRow` that entry for a call that changed no memory, waiting for
the next write. :class:`PendingWrites` buffers them with visits and map events. The store's
bookkeeping API takes rows as dicts: ``row()`` and ``PendingWrites.bookkeeping()`` convert at
that boundary, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memstore.llm import usage_cost, usage_count
from memstore.map_graph import MapEvent
from memstore.rows import now
from memstore.store import Bookkeeping
from memstore.synthesis import loggable_text
from memstore.triggers import Trigger

__all__ = ["DecisionLog", "DecisionRow", "PendingWrites", "TurnRecord", "joined_triggers", "now"]


#: a model's name in the decision log is cut to this many characters
MAX_MODEL_CHARS = 1000


def joined_triggers(triggers: list[Trigger] | tuple[Trigger, ...]) -> str:
    """The triggers as the tables store them: their values, comma-separated."""
    return ",".join(triggers)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One turn as ``turn_records`` keeps it (memstore.metrics reads these back)."""

    run_id: str
    episode: int
    turn: int
    location_id: int
    action: str
    score_before: int
    score_after: int
    location_after: int | None
    #: the action changed the score, the location or the inventory
    state_changed: bool
    #: memstore.outcome.Outcome's value: ok, refused, repeated or died
    outcome: str
    died: bool
    triggers: str
    memory_tokens: int
    overhead_us: float
    created_at: str

    def row(self) -> dict[str, Any]:
        """The row to insert (every column but ``id``; flags as 0/1)."""
        return {
            "run_id": self.run_id,
            "episode": self.episode,
            "turn": self.turn,
            "location_id": self.location_id,
            "action": self.action,
            "score_before": self.score_before,
            "score_after": self.score_after,
            "location_after": self.location_after,
            "state_changed": int(self.state_changed),
            "outcome": self.outcome,
            "died": int(self.died),
            "triggers": self.triggers,
            "memory_tokens": self.memory_tokens,
            "overhead_us": self.overhead_us,
            "created_at": self.created_at,
        }


@dataclass(slots=True)
class DecisionLog:
    """The decision-log entry of one synthesis call: who decided, what it answered, what it
    cost, or how it failed. Filled in while the call runs."""

    triggers: str
    mode: str
    model: str
    latency_ms: float | None = None
    raw_answer: str | None = None
    #: the validated answer, JSON
    decision: str | None = None
    error_kind: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None

    def fields(self) -> dict[str, Any]:
        """The entry as ``MemoryStore.apply_synthesis(log=...)`` takes it (the store adds
        the location, episode, turn and what was applied).

        Every value is one the database holds, whatever the entry was given: a usage
        number it cannot hold is None (memstore.llm drops and counts those where they
        enter; this is the second line), a NUL or lone surrogate in the model's name is
        written out. So a buffered row never fails every later write."""
        return {
            "triggers": self.triggers,
            "mode": self.mode,
            "model": loggable_text(self.model, MAX_MODEL_CHARS),
            "latency_ms": self.latency_ms,
            "raw_answer": self.raw_answer,
            "decision": self.decision,
            "error_kind": self.error_kind,
            "error": self.error,
            "prompt_tokens": usage_count(self.prompt_tokens),
            "completion_tokens": usage_count(self.completion_tokens),
            "cost_usd": usage_cost(self.cost_usd),
        }


@dataclass(frozen=True, slots=True)
class DecisionRow:
    """The decision-log row of a call that changed no memory (``applied`` stays empty)."""

    location_id: int
    location_name: str
    episode: int
    turn: int
    log: DecisionLog
    created_at: str

    def row(self) -> dict[str, Any]:
        """The row to insert: every column of ``synthesis_decisions`` but ``id``."""
        return {
            **self.log.fields(),
            "episode": self.episode,
            "turn": self.turn,
            "location_id": self.location_id,
            "location_name": self.location_name,
            "applied": None,
            "created_at": self.created_at,
        }


@dataclass
class PendingWrites:
    """Visits, no-op decisions, turn records and map events waiting for the next memory
    write (or the flush at episode end and on close): a turn that changes no memory costs
    no commit."""

    visits: list[tuple[int, str, int]] = field(default_factory=list)
    decisions: list[DecisionRow] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    map_events: list[MapEvent] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.visits or self.decisions or self.turns or self.map_events)

    def bookkeeping(self) -> Bookkeeping:
        """What the store's ``write_bookkeeping`` / ``apply_synthesis`` take: rows as dicts
        (copies: clearing this buffer afterwards changes nothing handed over)."""
        return Bookkeeping(
            visits=list(self.visits),
            decisions=[decision.row() for decision in self.decisions],
            turns=[record.row() for record in self.turns],
            map_events=list(self.map_events),
        )

    def snapshot(self) -> tuple[tuple[object, ...], ...]:
        """The rows waiting now, list by list (the same objects: ``drop_written``)."""
        return tuple(self.visits), tuple(self.decisions), tuple(self.turns), tuple(self.map_events)

    def drop_written(self, written: tuple[tuple[object, ...], ...]) -> None:
        """Take out the rows of a ``snapshot`` that were written after all (a COMMIT in
        doubt that went through: memstore.commit_doubt); the rows buffered since stay."""
        lists: tuple[list[Any], ...] = (self.visits, self.decisions, self.turns, self.map_events)
        for rows, done in zip(lists, written, strict=True):
            gone = {id(row) for row in done}
            rows[:] = [row for row in rows if id(row) not in gone]

    def clear(self) -> None:
        self.visits.clear()
        self.decisions.clear()
        self.turns.clear()
        self.map_events.clear()
