"""SimpleMemoryManager: the facade an agent loop calls every turn (spec 000, 002, 003, 004).

It orchestrates and nothing else: Z-machine triggers decide *when* (memstore.triggers),
an LLM or the offline recorder decides *what* (memstore.synthesis, memstore.recorder, called
by memstore.synthesis_runner), the store applies the decision and its decision-log row in
one transaction (memstore.store). No exception from an LLM failure reaches the agent loop:
it is logged, counted, recorded in the decision log, and the turn goes on with nothing
written. Nor does StoreBusy (another process kept the database locked past the busy
timeout), nor StorageFull (a StoreBusy: no room for the write, a full disk or an I/O
error), nor a lost connection on the turn's way (DatabaseUnavailable: the server stopped
or cannot be reached): it is logged and counted, and what the turn produced waits for the
next write.
Every text from outside is used as a plain str (memstore.models.plain_str).
Turn records and decision rows are typed (memstore.turn_log) and wait for the next
write. The episode and turn are passed to every write; the manager never sets the store's
defaults (``current_episode``, ``current_turn``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from memstore.config import MemstoreConfig, load_config
from memstore.errors import DatabaseUnavailable, SchemaChanged, StorageFull, StoreBusy
from memstore.manager_args import as_context, check_turn, written_out
from memstore.manager_reads import MAP_RECHECK_S, ManagerReads
from memstore.map_graph import action_key, event_for_turn, stored_action
from memstore.models import (
    check_int,
    check_location_id,
    check_location_name,
    plain_str,
    unstorable_text,
)
from memstore.outcome import Outcome, failed_by_state, judge_outcome, response_key
from memstore.rebuild import rebuild_from_log
from memstore.store import AppliedSynthesis, MemoryStore
from memstore.synthesis import LLMCallable
from memstore.synthesis_runner import SynthesisRunner
from memstore.triggers import ZMachineContext, significance
from memstore.turn_log import PendingWrites, TurnRecord, joined_triggers, now

__all__ = ["MAP_RECHECK_S", "OFFLINE_MODEL", "SimpleMemoryManager", "rebuild_from_log"]

log = logging.getLogger("memstore.manager")

OFFLINE_MODEL = "offline-recorder"
#: what the history window says for an action whose reasoning is missing (spec 003's
#: graceful fallback)
NO_REASONING = "(No reasoning recorded)"


class SimpleMemoryManager(ManagerReads):
    """Location memory for one agent: record outcomes, retrieve context, reset episodes.

    ``llm`` is any callable taking chat messages and returning the model's raw text; when
    it is None and ``config.model`` is set, litellm is used; when neither, the offline
    recorder stores only what the Z-machine proves, and ``get_status()["mode"]`` says so.
    """

    def __init__(
        self,
        store: MemoryStore,
        config: MemstoreConfig | None = None,
        llm: LLMCallable | None = None,
        *,
        episode: int | None = None,
        run_id: str | None = None,
    ) -> None:
        self.store = store
        self.config = config or store.config or load_config()
        self._llm = llm
        if llm is None and self.config.llm_configured:
            from memstore.llm import LiteLLMCompletion

            self._llm = LiteLLMCompletion(self.config)
        self.mode = "llm" if self._llm is not None else "offline"
        self.model = self._model_name()
        self.run_id = run_id or uuid.uuid4().hex[:12]
        #: the episode being played; passed to every write, never set on the store
        self._episode = episode
        self.turn = 0
        self._visited: set[int] = set()
        self._last_location: int | None = None
        window = self.config.history_window
        self._actions: deque[tuple[int, str, str]] = deque(maxlen=window)
        self._reasoning: deque[tuple[int, str, str]] = deque(maxlen=window)
        #: this episode's last answer to each (location, action key): a turn whose answer
        #: repeats it, with nothing tracked changed, failed (memstore.outcome)
        self._answers: dict[tuple[int, str], str] = {}
        #: the outcome of the last recorded turn (None before any)
        self.last_outcome: Outcome | None = None
        #: visits, no-op decisions and turn records wait for the next memory write
        self._pending = PendingWrites()
        self.counters: Counter[str] = Counter()
        self._synthesis = SynthesisRunner(
            store,
            self._llm,
            mode=self.mode,
            model=self.model,
            counters=self.counters,
            pending=self._pending,
            numbered=self._numbered,
        )
        #: tokens of the last get_location_memory answer, until the turn is recorded
        self.last_context_tokens = 0
        #: time spent in get_location_memory since the last recorded turn
        self._context_seconds = 0.0

    # --- lifecycle -----------------------------------------------------------------------

    def _model_name(self) -> str:
        if self.mode == "offline":
            return OFFLINE_MODEL
        return self.config.model or str(getattr(self._llm, "__name__", type(self._llm).__name__))

    def stored_episode(self, episode: int) -> int:
        """The number ``episode`` (as ``episode`` gave it) is stored under: a provisional
        one's real number once the database numbered it (after a ``flush`` that returned
        True), any other as it is."""
        return self._synthesis.buffer.stored_episode(episode)

    @property
    def episode(self) -> int:
        """The episode being played. Numbered when first needed (``store.allocate_episode``:
        one after every episode the database has handed out or seen), so episodes continue
        across runs and agents sharing a database never play the same number. While another
        process keeps the database locked (StoreBusy, or in a busy stretch its lock not
        free) it is never raised nor waited for: the episode is played under a provisional
        number (PROVISIONAL_EPISODES and up, memstore.busy_buffer; ``get_status()["episode"]``
        says None), numbered by the first write after the lock is free; read it again then
        (after ``flush``) for the number its rows are stored under."""
        if self._episode is None:  # those played unnumbered before are numbered first
            self._episode = self._synthesis.new_episode()
        else:
            self._synthesis.number_episodes()  # played unnumbered, if it was: now, if it can
        return self._episode

    def _numbered(self, provisional: int, episode: int) -> None:
        """An episode played unnumbered got its number (memstore.busy_buffer)."""
        self._episode = episode if self._episode == provisional else self._episode

    def reset_episode(self) -> None:
        """Start the next episode: drop ephemeral memories and this episode's history.

        The episode's buffered rows are written first; if the database is locked past the
        busy timeout (StoreBusy: counted and logged, never raised; in a busy stretch not
        even tried: memstore.busy_buffer) they wait, with their own episode number, for
        the next write, and the episode ends all the same (a
        waiting synthesis loses its ephemeral memory: memstore.synthesis_runner). So does
        a lost connection (DatabaseUnavailable: counted in ``store_unavailable``, logged,
        never raised; the rows are not even tried in an outage before the backoff's clock
        says so): the session memories went with the connection. Dropping them asks the
        server even in an outage (one try an episode, bounded by the connect timeout)."""
        self._flush(wait=False)
        self._synthesis.end_episode()
        ended = self._episode
        self._episode = None  # the next one is numbered when it is played
        self.turn = 0
        self._visited.clear()
        self._last_location = None
        self._actions.clear()
        self._reasoning.clear()
        self._answers.clear()
        buffer = self._synthesis.buffer
        buffer.drop_session_memories()
        dropped = 0
        try:  # asked even in an outage: a session tier left behind would outlive its episode
            dropped = self.store.reset_episode()
        except DatabaseUnavailable as exc:  # gone with the connection
            self._refused(exc, f"episode {ended}'s end (its session memories went with it)")
        except StoreBusy as exc:  # (an I/O error): the next episode's writes try again
            self._refused(exc, f"episode {ended}'s end (its session memories not dropped)")
        else:
            buffer.answered()
        log.info("episode %s ended: %d ephemeral memories dropped", ended, dropped)

    def reset(self) -> None:
        """Spec 004's manager lifecycle name ("Reset manager state for new episode"):
        ``reset_episode``."""
        self.reset_episode()

    def flush(self) -> bool:
        """Write buffered bookkeeping: visits, no-op decisions, turn records, map events,
        and the syntheses the database refused before (``get_status()["syntheses_waiting"]``).

        Done with every memory write, at each episode end and by ``close``; memories are
        buffered only after the database refused them. Returns False when it refused again
        (StoreBusy: counted and logged, never raised): everything still waits, for the next
        write or ``flush``. It waits for the lock, even when turns do not (a busy stretch).

        A database with no room for what waits (StorageFull: a full disk, an I/O error) is
        raised here, and only here and in ``close``, the calls that ask for the write: its
        one line says so (the command line prints it); everything still waits all the same.
        So is a server that cannot be reached (DatabaseUnavailable: tried at once, whatever
        the turns' backoff, each try bounded by the connect timeout): one line, and
        everything still waits, for the next ``flush`` or the turns once the server answers.
        So is a table or column gone from under the store (SchemaChanged: a downgrade while
        it ran), until ``memstore db upgrade`` brings it back.
        """
        written = self._flush(wait=True)
        buffer = self._synthesis.buffer
        if not written and buffer.no_room is not None:
            raise StorageFull(
                f"{buffer.no_room}; what waits stays in this manager (flush again once there "
                f"is room; it is lost if the process ends first)"
            ) from buffer.no_room
        if not written and buffer.schema_changed is not None:
            raise SchemaChanged(
                f"{buffer.schema_changed}; what waits stays in this manager (flush again "
                f"after the upgrade; it is lost if the process ends first)"
            ) from buffer.schema_changed
        if not written and buffer.unavailable is not None:
            raise DatabaseUnavailable(
                f"{buffer.unavailable}; what waits stays in this manager (flush again once the "
                f"database answers; it is lost if the process ends first)"
            ) from buffer.unavailable
        return written

    def _flush(self, *, wait: bool) -> bool:
        if self._pending.empty and not self._synthesis.waiting:
            return True
        written = self._synthesis.flush(wait=wait)
        self._map_view.settle(self._pending.map_events)
        return written

    def close(self) -> bool:
        """``flush``: False when the database refused it (StorageFull raised when it had no
        room, DatabaseUnavailable when the server could not be reached, SchemaChanged when
        a table or column was gone), and the rows still
        wait here. The lock probe's connection
        (memstore.lock_probe) is closed either way."""
        try:
            return self.flush()
        finally:
            self._synthesis.buffer.probe.close()

    def close_final(self, consequence: str) -> None:
        """``close`` for a process about to end (a command): what could not be written is
        lost with it, so the refusal is raised in one line saying so, and ``consequence``
        (what the caller leaves undone because of it): StorageFull, SchemaChanged,
        DatabaseUnavailable, or StoreBusy for a lock held past the busy timeout."""
        try:
            written = self.close()
        except (StorageFull, SchemaChanged, DatabaseUnavailable) as exc:
            refusal = exc.__cause__ if isinstance(exc.__cause__, type(exc)) else exc
            raise type(exc)(
                f"{refusal}; the last turns could not be written and are lost: {consequence}"
            ) from exc
        if not written:
            raise StoreBusy(
                f"{self.store.target.display} stayed locked by another writer past the busy "
                f"timeout: the last turns could not be written and are lost: {consequence}"
            )

    # --- the agent loop's calls ------------------------------------------------------------

    def add_reasoning(self, turn: int, reasoning: str | None, action: str) -> None:
        """Remember the agent's reasoning for an action, for the synthesis history window.

        Checked at once, as ``record_action_outcome``'s arguments are: ``turn`` an int of
        at least 0, ``reasoning`` and ``action`` strs (TypeError, ValueError); each text
        is kept as a plain str with a NUL or a lone surrogate written out (``\\x00``), so
        nothing kept here can fail a later turn's synthesis. A missing reasoning (None, as
        an LLM agent's ``"reasoning": null`` gives, or blank) is spec 003's graceful
        fallback, NO_REASONING."""
        check_turn(turn)
        if reasoning is None or (isinstance(reasoning, str) and not reasoning.strip()):
            reasoning = NO_REASONING
        reasoning = written_out(plain_str("reasoning", reasoning))
        action = written_out(plain_str("action", action))
        self._reasoning.append((turn, reasoning, action))

    def record_action_outcome(
        self,
        location_id: int | None,
        location_name: str,
        action: str,
        response: str,
        z_machine_context: ZMachineContext | Mapping[str, Any],
        *,
        memory_tokens: int | None = None,
    ) -> AppliedSynthesis | None:
        """Judge one action taken at ``location_id`` (the SOURCE location) and remember it.

        Works out ``first_visit`` when the context does not give it, and whether the
        action failed by the game's own evidence (``last_outcome`` and the turn record's
        ``outcome``: refused, repeated, died or ok; memstore.outcome); a refusal fires
        the ``refused`` trigger. ``memory_tokens``
        (the tokens of memory the agent was given before this action) defaults to the
        size of the last ``get_location_memory`` answer since the previous turn, 0 if
        none. Returns what was
        written, or None when nothing was (no trigger, nothing worth keeping, or a failure,
        which is logged and counted, never raised).

        A ``location_id`` of None (spec 004's orchestrator passes it when Jericho gives no
        location object) is a turn with no place to remember it at: counted
        (``get_status()["turns_without_location"]``, logged once), nothing else done, None.

        A bad argument is the caller's mistake and raises at once, before the turn is
        counted or anything recorded: TypeError for a wrong type, ValueError (pydantic's
        ValidationError for a context dict) for a value, among them a score, a location or
        a score change the database's 64-bit integers cannot hold, a context value of the
        wrong type (ZMachineContext is strict: ``True``, ``"6"`` or ``6.0`` is no location,
        an object number is an int from 1 to MAX_OBJECT_ID), and a location name the
        database cannot store (a NUL, a lone surrogate) or longer than LOCATION_NAME_MAX
        (memstore.models.check_location_name, the spec-004 writes' rule too), and a
        context whose ``location_before`` is another room than ``location_id``. A str
        subclass (a ``(str, Enum)`` member) is read as its text, never through its own
        methods.

        A database another process kept locked past the busy timeout (StoreBusy) is never
        raised: it is counted (``get_status()["store_busy"]``) and logged in one line, and
        what the turn produced (its memory, decision-log row, turn record, visit and map
        event) waits, in order and under its own episode and turn, for the next write that
        succeeds (the next memory write, ``flush``, ``reset_episode``); it shows to the
        agent once written, to later syntheses at once. Until the lock is free no turn waits
        for it, what waits is bounded, and an episode the database cannot number is played
        unnumbered (memstore.busy_buffer). So does a write the database refused for want
        of room (StorageFull, a StoreBusy: a full disk, an I/O error; counted in
        ``store_full`` too), and a read it refused on the turn's way (its synthesis is
        skipped; ``get_location_memory`` answers ""). So does a lost connection
        (DatabaseUnavailable: the server stopped or cannot be reached; counted in
        ``store_unavailable``): the turn's synthesis sees the location's memories as this
        manager last read them, plus what waits, and in the outage no turn asks the server
        again before the backoff's clock says so (memstore.busy_buffer). Its other refusals
        (StoreClosed, ...) are memstore's errors and pass through.

        The turn record keeps the action as the map does (memstore.map_graph's
        ``stored_action``: a runaway action by its first ACTION_KEY_MAX characters).

        An action, a response or an item name holding such characters is data, not a
        mistake: it is used written out (``\\x00``), and such an action records no exit on
        the map.
        """
        started = time.perf_counter()
        if location_id is None:  # spec 004's orchestrator: no location object this turn
            self.turn += 1
            self.counters["turns_without_location"] += 1
            if self.counters["turns_without_location"] == 1:
                log.warning("record_action_outcome: location_id None: turn not judged (counted)")
            return None
        check_location_id(location_id)
        action = plain_str("action", action)
        response = plain_str("response", response)
        location_name = check_location_name(location_name)
        ctx, ignored = as_context(z_machine_context, response)
        if ctx.location_before is not None and ctx.location_before != location_id:
            raise ValueError(  # (the memory would go to one room and the map to another)
                f"z_machine_context's location_before {ctx.location_before} is not the "
                f"location_id {location_id} the action was taken in: pass the context of "
                f"this action"
            )
        if ignored:  # keys of the caller's dict that say nothing memstore reads
            self.counters["context_keys_ignored"] += len(ignored)
            if self.counters["context_keys_ignored"] == len(ignored):
                log.warning("z_machine_context keys not read (counted): %s", ", ".join(ignored))
        check_int("memory_tokens", memory_tokens, 0, optional=True)
        typed_as_is = unstorable_text(action) is None
        if not typed_as_is:
            action = written_out(action)
        response = written_out(response)
        if any(unstorable_text(name) is not None for name in ctx.item_names.values()):
            written = {item: written_out(name) for item, name in ctx.item_names.items()}
            ctx = ctx.model_copy(update={"item_names": written})
        if self._episode is None:  # the first turn of an episode: numbered now (or later)
            self._episode = self._synthesis.new_episode()
        episode = self._episode
        self.turn += 1
        self.counters["turns"] += 1
        first_visit = (
            ctx.first_visit if ctx.first_visit is not None else (location_id not in self._visited)
        )
        if location_id != self._last_location:  # arrived here: one visit
            self._pending.visits.append((location_id, location_name, episode))
        ctx = ctx.model_copy(update={"first_visit": first_visit})
        # the map, from the context's location ids and death flag; written with the
        # bookkeeping below (memstore.map_graph.event_for_turn says what a turn records)
        map_event = (
            event_for_turn(
                ctx,
                action,
                location_id=location_id,
                location_name=location_name,
                episode=episode,
                turn=self.turn,
                prune_after=self.config.map_prune_after,
                response=response,
            )
            if typed_as_is  # an action written out is not what the game was given
            else None
        )
        if map_event is not None:
            self._pending.map_events.append(map_event)
            self._map_view.recorded(map_event)
        answer_key = (location_id, action_key(action))
        outcome = judge_outcome(response, ctx, self._answers.get(answer_key))
        self._answers[answer_key] = response_key(response)
        self.last_outcome = outcome
        self.counters[f"outcome_{outcome.value}"] += 1
        triggers = significance(ctx, refused=outcome is Outcome.REFUSED)
        applied = None
        if triggers:
            self.counters["triggers_fired"] += 1
            try:
                applied = self._synthesis.run(
                    location_id,
                    location_name,
                    action,
                    response,
                    ctx,
                    triggers,
                    first_visit=first_visit,
                    episode=episode,
                    turn=self.turn,
                    recent_actions=self._actions,
                    recent_reasoning=self._reasoning,
                )
            except StoreBusy as exc:  # its read refused (its write never raises it)
                self._refused(exc, f"turn {self.turn}'s synthesis")
            self._map_view.settle(self._pending.map_events)
            episode = self._episode or episode  # numbered by that write, if it was not
        self._visited.add(location_id)
        self._last_location = location_id
        self._actions.append((self.turn, action, response))
        self._pending.turns.append(
            TurnRecord(
                run_id=self.run_id,
                episode=episode,
                turn=self.turn,
                location_id=location_id,
                action=stored_action(action),  # cut as the map keeps it
                score_before=ctx.score_before,
                score_after=ctx.score_after,
                location_after=ctx.location_after,
                state_changed=not failed_by_state(ctx),
                outcome=outcome.value,
                died=ctx.died,
                triggers=joined_triggers(triggers),
                memory_tokens=(
                    memory_tokens if memory_tokens is not None else self.last_context_tokens
                ),
                overhead_us=(time.perf_counter() - started + self._context_seconds) * 1e6,
                created_at=now(),
            )
        )
        if self._synthesis.turn_ended():  # what waited was written: the lock is free again
            self._map_view.settle(self._pending.map_events)
        self.last_context_tokens = 0
        self._context_seconds = 0.0
        return applied
