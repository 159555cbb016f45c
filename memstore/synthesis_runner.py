"""One synthesis call for the manager: ask the LLM (or the offline recorder), guard the
answer, apply it with the buffered bookkeeping in one transaction, count and log.

No exception from an LLM failure leaves :meth:`SynthesisRunner.run`: it is logged, counted
and recorded in the decision log, and the turn goes on with nothing written. Nor does a
database another process kept locked past the busy timeout (StoreBusy): it is logged and
counted (``counters["store_busy"]``), and the synthesis it refused waits, with its
decision-log row and the buffered bookkeeping, for the next write that succeeds (the next
``run`` that applies something, or ``flush``): bounded, without a wait per turn, seen by
later syntheses, its episode numbered late if need be (memstore.busy_buffer). Nor does a
lost connection (DatabaseUnavailable: the server stopped or cannot be reached), the same
way (``counters["store_unavailable"]``): in the outage the store is asked again only when
the backoff's clock says so, and a synthesis sees the location's memories as last read
(memstore.busy_buffer's "No server"). The episode and turn of every write are passed in,
never read from the store.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from memstore.busy_buffer import BusyBuffer
from memstore.commit_doubt import CommitDoubt
from memstore.errors import (
    AnswerError,
    DatabaseUnavailable,
    LLMCallError,
    StoreBusy,
    SynthesisErrorKind,
)
from memstore.llm import UsageNumbers, last_usage_of, usage_mark
from memstore.models import Memory, Persistence
from memstore.prompt import build_synthesis_messages, listed_handles
from memstore.recorder import record_offline
from memstore.shown_memories import ShownMemories
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
        numbered: Callable[[int, int], None] = lambda _provisional, _episode: None,
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
        self._usage_logged = False  # a refused usage number was logged
        #: what waits for a busy database (memstore.busy_buffer); ``numbered(provisional,
        #: episode)`` is told when an episode played unnumbered gets its number
        self.buffer = BusyBuffer(store, counters)
        #: receipts of the writes on a server, for a COMMIT whose answer was lost
        self.doubt = CommitDoubt(store, pending, counters)
        self.numbered = numbered
        #: a write was tried (or not, for a busy database) since the manager last reset it
        self.tried = False

    @property
    def waiting(self) -> list[dict[str, Any]]:
        """The syntheses the database refused (StoreBusy), oldest first, as the arguments
        of ``store.apply_synthesis`` (its decision-log row included): the next write
        applies them, in order, before anything else."""
        return self.buffer.syntheses

    def new_episode(self) -> int:
        """A new episode's number: the database's (``store.allocate_episode``, after the
        episodes played unnumbered before), or while the database is busy (StoreBusy:
        counted and logged, never raised; nor a lost connection, DatabaseUnavailable) a
        provisional one (memstore.busy_buffer)."""
        buffer = self.buffer
        self.tried = True
        if buffer.may_write():
            try:
                self.doubt.settle(buffer)  # (numbering rewrites the rows that wait)
                buffer.number_episodes(self.pending, self.numbered)
                return self.store.allocate_episode()
            except (StoreBusy, DatabaseUnavailable) as exc:
                buffer.refused()
                self.refused(exc, "the episode is played unnumbered until it can be numbered")
        return buffer.provisional_episode()

    def turn_ended(self) -> bool:
        """A turn ended. In a busy stretch, what waits is written now if this turn tried no
        write and the lock is free (True then), and what still waits is kept within its
        bound (memstore.busy_buffer)."""
        tried = self.tried
        written = self.buffer.busy and not tried and self.flush(wait=False)
        if self.buffer.busy:
            self.buffer.bound(self.pending)
        self.tried = False
        return written

    def number_episodes(self) -> None:
        """Number the episodes played unnumbered, if the lock is free (in a busy stretch,
        only if the probe sees it free: memstore.busy_buffer). StoreBusy is counted and
        logged, never raised (DatabaseUnavailable too): they stay unnumbered."""
        buffer = self.buffer
        if buffer.unnumbered and buffer.may_write():
            try:
                self.doubt.settle(buffer)
                buffer.number_episodes(self.pending, self.numbered)
            except (StoreBusy, DatabaseUnavailable) as exc:
                buffer.refused()
                self.refused(exc, "the episodes played unnumbered stay so")

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
        """Decide and apply what this turn teaches; None when nothing changed (or what it
        decided waits for the database: ``_write``). A read the database refuses
        (StoreBusy) is raised: the turn skips its synthesis; one that finds no server is
        not (``_stored``)."""
        stored = self._stored(location_id, turn)
        if self.buffer.syntheses:  # what waits counts as written: a later turn corrects it
            stored = self.buffer.live_view(location_id, stored)
        shown = stored
        existing = number_memories(stored)
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
                episode=episode,
            )
            before = usage_mark(self.llm)  # (a failed call leaves the last one's there)
            try:
                raw, answer = synthesize(self.llm, messages)
            except SynthesisError as exc:
                # (its tokens were spent too; one that raised may have left the last's)
                self._count_usage(entry, before, failed=isinstance(exc, LLMCallError))
                self._record_failure(exc, entry, started, where)
                return None
            self._count_usage(entry, before)
        entry.latency_ms = (time.perf_counter() - started) * 1000
        listed = None if self.llm is None else listed_handles(existing, episode)
        decision = resolve_decision(answer, existing, first_visit, listed)
        if decision.conflicting_references:  # the answer's rule, on the memories it names
            both = ", ".join(repr(title) for title in decision.conflicting_references)
            refused = ValueError(f"a memory cannot be both superseded and invalidated: {both}")
            self._record_failure(_schema_failure("the answer", refused, raw), entry, started, where)
            return None
        self._count_guards(decision)
        entry.raw_answer = loggable_text(raw)
        entry.decision = raw if self.llm is None else answer.model_dump_json()
        if decision.new_memory is None and self.buffer.syntheses:  # seen again, kept
            retired = [*decision.supersede_titles, *decision.invalidate_titles]
            self.buffer.seen(location_id, shown, retired, (episode, turn))
        if not decision.has_effect:
            self._log_later(entry, where)
            return None
        try:
            new_memory = self._new_memory(decision, ctx, episode, turn)
        except ValueError as exc:  # pydantic's too: the answer passed, its memory breaks a rule
            self._record_failure(_schema_failure("the new memory", exc, raw), entry, started, where)
            return None
        return self._write(
            {
                "location_id": location_id,
                "location_name": location_name,
                "new_memory": new_memory,
                "supersede_titles": decision.supersede_titles,
                "invalidate_titles": decision.invalidate_titles,
                "invalidation_reason": decision.invalidation_reason,
                "episode": episode,
                "turn": turn,
                "log": entry.fields(),
            }
        )[1]

    def _stored(self, location_id: int, turn: int) -> ShownMemories:
        """``store.memories(location_id)``, kept (``buffer.last_read``); when the server cannot
        be reached (DatabaseUnavailable: counted and logged, never raised; in an outage not
        even asked before the backoff's clock says so), as last read (``buffer.unread``)."""
        buffer = self.buffer
        try:
            if buffer.may_read():
                stored = self.store.memories(location_id)
                if buffer.unavailable is not None:
                    buffer.answered()
                buffer.last_read[location_id] = stored
                return stored
        except DatabaseUnavailable as exc:  # (the read, or its probe: the session gone)
            buffer.refused(exc)
            self.refused(exc, f"turn {turn}'s synthesis sees the memories as last read")
        return buffer.unread(location_id)

    def flush(self, *, wait: bool = True) -> bool:
        """Write what waits (``_write``) with nothing new; False when the database refused
        it (counted and logged, never raised; a lost connection, DatabaseUnavailable, too:
        ``buffer.unavailable`` says so): it waits for the next write. ``wait`` False: in a
        busy stretch, only if the lock is free (memstore.busy_buffer)."""
        return self._write(None, wait=wait)[0]

    def _write(
        self, synthesis: dict[str, Any] | None, *, wait: bool = False
    ) -> tuple[bool, AppliedSynthesis | None]:
        """Write what waits: the episodes played unnumbered get their numbers, then the
        syntheses the database refused before (oldest first, each one transaction), then
        ``synthesis`` (``store.apply_synthesis``'s arguments) with the buffered bookkeeping
        in one transaction, or the bookkeeping alone.

        Returns whether everything was written, and what ``synthesis`` changed (None:
        nothing, or it waits). A database locked past the busy timeout (StoreBusy) is never
        raised: it is counted and logged, and what was not written (``synthesis`` too) keeps
        waiting, in order, for the next call. After it, until the write lock is free, the
        store is not asked at all (unless ``wait``): ``synthesis`` waits at once. A lost
        connection (DatabaseUnavailable) is the same, the backoff's clock alone deciding
        when to try again (memstore.busy_buffer). Any other error is
        raised as it comes, and the synthesis it came from does not wait (it would fail
        every later write)."""
        buffer = self.buffer
        self.tried = True
        if buffer.busy and not wait and not buffer.may_write():
            if synthesis is not None:
                buffer.syntheses.append(synthesis)
            return False, None
        waiting = buffer.syntheses
        doubt = self.doubt
        try:
            doubt.settle(buffer)  # first: a write in doubt may have been committed
            if buffer.unnumbered:
                buffer.number_episodes(self.pending, self.numbered, synthesis)
            while waiting:
                try:
                    self._count_applied(
                        self.store.apply_synthesis(
                            **waiting[0], bookkeeping=doubt.alone(waiting[0])
                        )
                    )
                except (StoreBusy, DatabaseUnavailable):
                    raise  # the database's state, not the row's: it keeps waiting
                except Exception:
                    doubt.failed(connection_lost=False)
                    buffer.first_written()
                    raise
                doubt.committed()
                buffer.wrote(waiting[0])
                buffer.first_written()  # (a Ctrl-C, say while waiting for the lock, keeps it)
            if synthesis is None:
                self.store.write_bookkeeping(doubt.with_pending(None))
                applied = None
            else:
                applied = self._count_applied(
                    self.store.apply_synthesis(
                        **synthesis, bookkeeping=doubt.with_pending(synthesis)
                    )
                )
                buffer.wrote(synthesis)
            doubt.committed()
        except (StoreBusy, DatabaseUnavailable) as exc:
            doubt.failed(connection_lost=isinstance(exc, DatabaseUnavailable))
            if synthesis is not None:
                waiting.append(synthesis)
            buffer.refused()
            what = f"turn {synthesis['turn']}'s memory and " if synthesis else ""
            self.refused(exc, f"{what}the buffered rows wait for the next write")
            return False, None
        self.pending.clear()
        buffer.written()
        return True, applied if applied is not None and applied.changed_anything else None

    def end_episode(self) -> None:
        """The episode ended with syntheses still waiting: their ephemeral memories are
        left out (a session memory never outlives its episode); the rest of each, and its
        decision-log row, still waits."""
        for waiting in self.waiting:
            memory = waiting["new_memory"]
            if memory is not None and memory.persistence is Persistence.EPHEMERAL:
                waiting["new_memory"] = None
        self.buffer.resized()

    def refused(self, exc: StoreBusy | DatabaseUnavailable, what: str) -> None:
        """Count and log (one line) a write the database refused: StoreBusy; or a lost
        connection (DatabaseUnavailable: counted by ``buffer.refused``, not as busy)."""
        if isinstance(exc, StoreBusy):
            self.counters["store_busy"] += 1
        log.warning(
            "%s; %s (waiting: %d syntheses, %d turn records)%s",
            exc,
            what,
            len(self.waiting),
            len(self.pending.turns),
            self.buffer.retry_note(),
        )

    def _count_applied(self, applied: AppliedSynthesis) -> AppliedSynthesis:
        self.counters["memories_written"] += int(applied.new_memory is not None)
        self.counters["supersessions"] += len(applied.superseded)
        self.counters["invalidations"] += len(applied.invalidated)
        self.counters["stale_references"] += len(applied.stale)
        return applied

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

    def _count_usage(
        self, entry: DecisionLog, before: UsageNumbers | None = None, *, failed: bool = False
    ) -> None:
        """Count and log what the call used, as the model callable reports it (its
        ``last_usage``): only numbers the decision log holds. One it cannot (an injected
        callable's, or the server's that LiteLLMCompletion dropped) is left out and the
        call counted (``counters["usage_refused"]``); the first one the callable reported
        is logged here (LiteLLMCompletion logs the server's itself). ``before``: what it
        reported before this call (``usage_mark``): a call that ``failed`` and left those
        numbers is not charged them."""
        reported = last_usage_of(self.llm, before, failed=failed)
        if reported is None:
            return
        usage, refused_before = reported
        entry.prompt_tokens = usage.prompt_tokens
        entry.completion_tokens = usage.completion_tokens
        entry.cost_usd = usage.cost_usd
        self.tokens["prompt"] += usage.prompt_tokens or 0
        self.tokens["completion"] += usage.completion_tokens or 0
        self.cost_usd += usage.cost_usd or 0.0
        if usage.refused or refused_before:
            self.counters["usage_refused"] += 1
        if usage.refused and not self._usage_logged:
            self._usage_logged = True
            log.warning(
                "the model callable reported usage the database cannot hold (%s): dropped; "
                "from now on only counted (usage_refused)",
                ", ".join(usage.refused),
            )

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
