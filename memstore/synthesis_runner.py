"""One synthesis call for the manager: ask the LLM (or the offline recorder), guard the
answer, apply it with the buffered bookkeeping in one transaction, count and log.

No exception from an LLM failure leaves :meth:`SynthesisRunner.run`: it is logged, counted
and recorded in the decision log, and the turn goes on with nothing written. The episode and
turn of every write are passed in, never read from the store.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence

from memstore.errors import AnswerError, SynthesisErrorKind
from memstore.models import Memory
from memstore.prompt import build_synthesis_messages
from memstore.recorder import record_offline
from memstore.store import AppliedSynthesis, MemoryStore
from memstore.synthesis import (
    LLMCallable,
    SynthesisDecision,
    SynthesisError,
    loggable_text,
    number_memories,
    resolve_decision,
    synthesize,
)
from memstore.triggers import Trigger, ZMachineContext
from memstore.turn_log import DecisionLog, DecisionRow, PendingWrites, joined_triggers, now

log = logging.getLogger("memstore.manager")


class SynthesisRunner:
    """The manager's synthesis: ``llm`` None means the offline recorder. Counters are the
    manager's (``counters``); failures, tokens and cost are kept here."""

    def __init__(
        self,
        store: MemoryStore,
        llm: LLMCallable | None,
        *,
        mode: str,
        model: str,
        counters: Counter[str],
        pending: PendingWrites,
    ) -> None:
        self.store = store
        self.llm = llm
        self.mode = mode
        self.model = model
        self.counters = counters
        self.pending = pending
        self.failures: Counter[str] = Counter()
        #: the last failed synthesis, "kind: message" (None before any)
        self.last_failure: str | None = None
        self.tokens = {"prompt": 0, "completion": 0}
        self.cost_usd = 0.0

    def run(
        self,
        location_id: int,
        location_name: str,
        action: str,
        response: str,
        ctx: ZMachineContext,
        triggers: list[Trigger],
        *,
        first_visit: bool,
        episode: int,
        turn: int,
        recent_actions: Sequence[tuple[int, str, str]],
        recent_reasoning: Sequence[tuple[int, str, str]],
    ) -> AppliedSynthesis | None:
        """Decide and apply what this turn teaches; None when nothing changed."""
        existing = number_memories(self.store.memories(location_id))
        started = time.perf_counter()
        entry = DecisionLog(triggers=joined_triggers(triggers), mode=self.mode, model=self.model)
        where = (location_id, location_name, episode, turn)
        if self.llm is None:
            try:
                answer = record_offline(
                    location_id=location_id,
                    location_name=location_name,
                    action=action,
                    response=response,
                    ctx=ctx,
                    existing=existing,
                )
            except ValueError as exc:  # pydantic's too: the recorder's answer breaks a rule
                self._record_failure(
                    _schema_failure("the offline answer", exc), entry, started, where
                )
                return None
            raw = answer.model_dump_json()
        else:
            self.counters["llm_calls"] += 1
            messages = build_synthesis_messages(
                location_id=location_id,
                location_name=location_name,
                action=action,
                response=response,
                ctx=ctx,
                existing=existing,
                recent_actions=list(recent_actions),
                recent_reasoning=list(recent_reasoning),
                first_visit=first_visit,
                turn=turn,
            )
            try:
                raw, answer = synthesize(self.llm, messages)
            except SynthesisError as exc:
                self._count_usage(entry)  # a failed call's tokens were spent too
                self._record_failure(exc, entry, started, where)
                return None
            self._count_usage(entry)
        entry.latency_ms = (time.perf_counter() - started) * 1000
        decision = resolve_decision(answer, existing, first_visit)
        self._count_guards(decision)
        entry.raw_answer = loggable_text(raw)
        entry.decision = raw if self.llm is None else answer.model_dump_json()
        if not decision.has_effect:
            self._log_later(entry, where)
            return None
        try:
            new_memory = self._new_memory(decision, ctx, episode, turn)
        except ValueError as exc:  # pydantic's too: the answer passed, its memory breaks a rule
            self._record_failure(_schema_failure("the new memory", exc, raw), entry, started, where)
            return None
        applied = self.store.apply_synthesis(
            location_id,
            location_name,
            new_memory=new_memory,
            supersede_titles=decision.supersede_titles,
            invalidate_titles=decision.invalidate_titles,
            invalidation_reason=decision.invalidation_reason,
            episode=episode,
            turn=turn,
            log=entry.fields(),
            bookkeeping=self.pending.bookkeeping(),
        )
        self.pending.clear()
        self.counters["memories_written"] += int(applied.new_memory is not None)
        self.counters["supersessions"] += len(applied.superseded)
        self.counters["invalidations"] += len(applied.invalidated)
        return applied if applied.changed_anything else None

    @staticmethod
    def _new_memory(
        decision: SynthesisDecision, ctx: ZMachineContext, episode: int, turn: int
    ) -> Memory | None:
        if decision.new_memory is None:
            return None
        return decision.new_memory.to_memory(
            episode=episode, turns=turn, score_change=ctx.score_delta
        )

    def _count_guards(self, decision: SynthesisDecision) -> None:
        self.counters["core_downgrades"] += int(decision.core_downgraded)
        self.counters["hallucinated_references"] += decision.hallucinated_count
        self.counters["forbidden_transitions"] += decision.forbidden_count
        self.counters["duplicates_dropped"] += int(decision.duplicate_title)
        if decision.hallucinated_count:
            log.warning(
                "ignored references to memories that do not exist here: %s",
                decision.hallucinated_references,
            )

    def _count_usage(self, entry: DecisionLog) -> None:
        usage = getattr(self.llm, "last_usage", None)
        if usage is None:
            return
        entry.prompt_tokens = usage.prompt_tokens
        entry.completion_tokens = usage.completion_tokens
        entry.cost_usd = usage.cost_usd
        self.tokens["prompt"] += usage.prompt_tokens or 0
        self.tokens["completion"] += usage.completion_tokens or 0
        self.cost_usd += usage.cost_usd or 0.0

    def _record_failure(
        self,
        exc: SynthesisError,
        entry: DecisionLog,
        started: float,
        where: tuple[int, str, int, int],
    ) -> None:
        kind = str(exc.kind)
        self.failures[kind] += 1
        self.last_failure = loggable_text(f"{kind}: {exc.message}", 500)
        log.warning(
            "memory synthesis failed (%s): %s; turn %d skipped", kind, exc.message, where[3]
        )
        entry.error_kind = kind
        entry.error = loggable_text(exc.message, 2000)
        entry.latency_ms = (time.perf_counter() - started) * 1000
        raw = getattr(exc, "raw", None) or getattr(exc.__cause__, "raw", None)
        if isinstance(raw, str):
            entry.raw_answer = loggable_text(raw)
        self._log_later(entry, where)

    def _log_later(self, entry: DecisionLog, where: tuple[int, str, int, int]) -> None:
        """Queue the decision-log row of a call that changed no memory (it goes with the
        next write of the buffered bookkeeping)."""
        location_id, location_name, episode, turn = where
        self.pending.decisions.append(
            DecisionRow(location_id, location_name, episode, turn, entry, now())
        )


def _schema_failure(what: str, exc: ValueError, raw: str | None = None) -> AnswerError:
    """A ``schema`` failure for ``what`` a rule refused (pydantic's message on one line)."""
    failure = AnswerError(SynthesisErrorKind.SCHEMA, f"{what}: {' '.join(str(exc).split())}")
    failure.raw = raw
    return failure
