"""Review S6 A: agent code written against the spec, called as the spec calls it.

Was: spec 001's ``MemoryToolkit.add_memory(content=, importance=, turn_number=, location=,
score=, moves=)`` and ``get_tools()`` raised (F1); an importance or a content from the
model that memstore could not take raised ValueError into the game loop (F2); spec 004's
orchestrator's ``location_id=None`` and a Jericho inventory of ZObjects or names raised
(F3); spec 002/004's ``supersedes_memory_titles``, ``invalidate_memory_titles`` and
``MemoryStatus`` were missing (F4); spec 004's lifecycle ``reset()`` and the ``state`` /
``metrics`` of ``get_status()`` were missing (F5); in a busy stretch the manager refused
ephemeral memories, which need no lock on the file (F7); every toolkit add of a busy
stretch waited the whole busy timeout (F8); the spec's settings under ``[tool.zorkgpt]``
were ignored (F9); ``supersede_memory(...) == False`` was never true (F11).
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import memstore
from memstore import MemoryStore, MemorySynthesisResponse, SimpleMemoryManager, Status
from memstore.config import ConfigWarning, load_config
from memstore.errors import StoreBusy
from memstore.lock_probe import WriteGate
from memstore.memory_tools import MemoryToolkit
from memstore.rows import SupersedeOutcome
from memstore.spec_context import context_from_mapping
from memstore.triggers import Trigger
from tests.conftest import note

SPEC_CONTEXT = {
    "first_visit": True, "score_delta": 0, "location_changed": False,
    "inventory_changed": False, "died": False, "response_length": 55,
}  # fmt: skip


@contextmanager
def write_lock_held(db_path: Path) -> Iterator[None]:
    """Another connection holds the file's write lock while the block runs."""
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


class ZObject:
    """What Jericho's ``get_inventory_structured()`` gives: an object number and a name."""

    def __init__(self, num: int, name: str) -> None:
        self.num = num
        self.name = name


def test_spec_001_s_game_loop_call_and_get_tools_work(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)

        added = toolkit.add_memory(
            content="Mailbox at West of House contains a leaflet",
            importance=300,
            turn_number=5,
            location="West of House",
            score=0,
            moves=5,
        )

        assert added is True
        (stored,) = toolkit.memories.top(5)
        assert (stored.turn, stored.location_name, stored.location_id) == (5, "West of House", None)
        assert [tool.__name__ for tool in toolkit.get_tools()] == [
            "get_top_memories", "query_memories", "get_location_memories", "get_route",
        ]  # fmt: skip
        with pytest.raises(TypeError, match="both turn and turn_number"):
            toolkit.add_memory("x", 5, 1, turn_number=1, location="Here")
        with pytest.raises(TypeError, match="needs location_name"):
            toolkit.add_memory("x", 5, 1)


@pytest.mark.parametrize(
    ("importance", "stored"),
    [(0, 1), (1500, 1000), (-5, 1), (750.0, 750), (499.6, 500), ("300", 300), (2**70, 1000)],
)
def test_a_model_s_importance_out_of_range_is_kept_within_it_and_counted(
    db_path: Path, importance: object, stored: int
) -> None:
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)

        assert toolkit.add_memory("The troll has an axe", importance, 1, 152, "Troll Room")  # type: ignore[arg-type]

        (memory,) = toolkit.memories.top(5)
        assert memory.importance == stored
        clamped = not isinstance(importance, str) and not 1 <= importance <= 1000  # type: ignore[operator]
        assert toolkit.failures["importance_clamped"] == int(clamped)


@pytest.mark.parametrize(
    ("content", "importance", "counter"),
    [
        ("A note", None, "importance_refused"),
        ("A note", float("nan"), "importance_refused"),
        ("A note", True, "importance_refused"),
        ("A note", "high", "importance_refused"),
        ("x" * 20_001, 10, "content_refused"),
        (12345, 10, "content_refused"),
    ],
)
def test_a_model_value_memstore_cannot_take_is_counted_never_raised(
    db_path: Path, caplog: pytest.LogCaptureFixture, content: object, importance: object,
    counter: str,
) -> None:  # fmt: skip
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)

        with caplog.at_level(logging.WARNING, logger="memstore"):
            added = toolkit.add_memory(content, importance, 1, 152, "Troll Room")  # type: ignore[arg-type]

        assert added is False
        assert toolkit.failures[counter] == 1
        assert toolkit.get_memory_count() == 0
        assert f"not stored ({counter})" in caplog.text


def test_a_nul_in_the_model_s_note_is_written_out_and_stored(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)

        assert toolkit.add_memory("a\x00b", 10, 1, 152, "Troll Room")

        (memory,) = toolkit.memories.top(5)
        assert memory.content == "a\\x00b"


def test_no_location_is_a_counted_turn_and_an_empty_read(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)

        result = manager.record_action_outcome(
            location_id=None,
            location_name="Unknown",
            action="look",
            response="It is pitch black. You are likely to be eaten by a grue.",
            z_machine_context=SPEC_CONTEXT,
        )

        assert result is None
        assert manager.get_location_memory(None) == ""
        status = manager.get_status()
        assert (status["turns_without_location"], status["turn"]) == (1, 1)
        manager.record_action_outcome(64, "West of House", "look", "You are here.", SPEC_CONTEXT)
        assert manager.get_status()["turn"] == 2


def test_a_jericho_inventory_of_zobjects_is_read_as_object_numbers_and_names() -> None:
    ctx, ignored = context_from_mapping(
        {
            "location_before": 64, "location_after": 64,
            "inventory_before": [ZObject(5, "brass lantern")],
            "inventory_after": [ZObject(5, "brass lantern"), ZObject(9, "leaflet")],
        }
    )  # fmt: skip

    assert ignored == ()
    assert ctx.items_gained == {9}
    assert ctx.item_names == {5: "brass lantern", 9: "leaflet"}


def test_an_inventory_of_names_says_only_whether_it_changed() -> None:
    place = {"location_before": 64, "location_after": 64}
    changed, _ = context_from_mapping(
        {**place, "inventory_before": [], "inventory_after": ["leaflet"]}
    )
    same, _ = context_from_mapping(
        {**place, "inventory_before": ["leaflet"], "inventory_after": ["leaflet"]}
    )

    assert changed.inventory_changed and changed.reported == {Trigger.INVENTORY_CHANGED}
    assert not same.inventory_changed
    with pytest.raises(ValueError, match="one inventory as names and the other as object"):
        context_from_mapping({**place, "inventory_before": [4], "inventory_after": ["leaflet"]})
    with pytest.raises(ValueError, match="gives inventory_after but not inventory_before"):
        context_from_mapping({**place, "inventory_after": ["leaflet"]})


def test_the_manager_takes_a_turn_with_a_jericho_inventory(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)
        context = {
            "score_before": 0, "score_after": 0, "location_before": 64, "location_after": 64,
            "inventory_before": [], "inventory_after": ["leaflet"], "died": False,
        }  # fmt: skip

        manager.record_action_outcome(64, "West of House", "take leaflet", "Taken.", context)

        assert manager.get_status()["triggers_fired"] == 1


def test_spec_names_of_the_synthesis_answer_and_the_status_read_back() -> None:
    answer = MemorySynthesisResponse(
        should_remember=False,
        invalidate_memory_titles={"Old memory"},
        invalidation_reason="Proven false",
    )

    assert answer.invalidate_memory_titles == {"Old memory"}
    assert answer.supersedes_memory_titles == set()
    assert memstore.MemoryStatus is Status and memstore.MemoryStatusType is Status
    assert memstore.MemoryStatus.SUPERSEDED == "SUPERSEDED"


def test_spec_004_s_lifecycle_reset_and_status_shape(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)
        manager.add_memory(64, "West of House", note("Dropped sword here", "ephemeral"))
        manager.record_action_outcome(64, "West of House", "look", "You are here.", SPEC_CONTEXT)

        status = manager.get_status()
        manager.reset()

        assert manager.get_ephemeral_count() == 0
        assert status["state"] == {
            "mode": status["mode"], "model": status["model"], "episode": status["episode"],
            "turn": 1,
        }  # fmt: skip
        assert status["metrics"]["turns_seen"] == 1
        assert "type" not in status["metrics"] and "turn" not in status["metrics"]


def test_an_ephemeral_memory_is_written_at_once_in_a_busy_stretch(db_path: Path) -> None:
    # F7: in a busy stretch the manager refused every write, ephemeral ones too, which take
    # no lock on the file (spec 002: "never touch disk")
    with MemoryStore.open(db_path, busy_timeout_s=0.2) as store:
        manager = SimpleMemoryManager(store)
        manager.add_memory(64, "West of House", note("Sword here", "ephemeral"))
        with write_lock_held(db_path):
            assert not manager.add_memory(64, "West of House", note("On disk", "permanent"))
            started = time.monotonic()

            added = manager.add_memory(64, "West of House", note("Dropped sword", "ephemeral"))
            replaced = manager.supersede_memory(
                64, "West of House", "Sword here", note("Sword gone", "ephemeral")
            )

            assert (added, bool(replaced)) == (True, True)
            assert time.monotonic() - started < 0.2  # neither waited for the lock
            assert manager.get_status()["store_busy"] == 1
        assert [m.title for m in store.memories(64)] == ["Dropped sword", "Sword gone"]
        manager.close()


def test_a_toolkit_add_waits_for_a_held_lock_once_per_busy_stretch(db_path: Path) -> None:
    # F8: every add of a busy stretch waited the whole busy timeout (30 s by default, each
    # turn of spec 001's loop)
    with MemoryStore.open(db_path, busy_timeout_s=0.3) as store:
        toolkit = MemoryToolkit(store)
        with write_lock_held(db_path):
            waits = []
            for n in range(3):
                started = time.monotonic()
                assert not toolkit.add_memory(f"note {n} about the lamp", 5, n, 64, "West")
                waits.append(time.monotonic() - started)

        assert waits[0] >= 0.3 and max(waits[1:]) < 0.1
        assert toolkit.failures["store_busy"] == 3
        assert toolkit.add_memory("the lamp is back", 5, 4, 64, "West")  # the lock is free
        assert toolkit.add_memory("and so is the sword", 5, 5, 64, "West")


def test_a_write_refused_though_the_probe_saw_no_lock_backs_off_on_a_clock() -> None:
    now = [100.0]

    class Probe:
        def free(self) -> bool:
            return True

        def close(self) -> None:
            pass

    gate = WriteGate(None, clock=lambda: now[0])  # type: ignore[arg-type]
    gate.probe = Probe()  # type: ignore[assignment]
    busy = StoreBusy("locked")

    gate.refused(busy)  # the first refusal: the probe decides
    assert gate.may_write()
    gate.refused(busy)  # refused though the probe said free: 1 s, then 2 s
    assert not gate.may_write()
    now[0] += 1.0
    assert gate.may_write()
    gate.refused(busy)
    now[0] += 1.5
    assert not gate.may_write()
    now[0] += 0.5
    assert gate.may_write()
    gate.written()
    assert gate.may_write() and gate.kind is None


def test_the_spec_s_settings_under_tool_zorkgpt_are_read(tmp_path: Path) -> None:
    # F9: [tool.zorkgpt.memory_sampling] and [tool.zorkgpt.memory] were ignored silently
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[tool.zorkgpt.memory_sampling]\nmemory_history_window = 6\n"
        "[tool.zorkgpt.memory]\nshow_persistence_markers = false\n"
    )
    config = load_config(pyproject)
    assert (config.history_window, config.show_persistence_markers) == (6, False)

    pyproject.write_text(
        "[tool.zorkgpt.memory_sampling]\nmemory_history_window = 6\n"
        "[tool.memstore]\nhistory_window = 4\n"
    )
    assert load_config(pyproject).history_window == 4  # memstore's own key wins


@pytest.mark.parametrize(("window", "used"), [(0, 3), (-2, 3), (1000, 50)])
def test_the_spec_s_window_outside_its_bounds_warns_and_goes_on(
    tmp_path: Path, window: int, used: int
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[tool.zorkgpt.memory_sampling]\nmemory_history_window = {window}\n")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = load_config(pyproject)

    said = [str(warning.message) for warning in caught if warning.category is ConfigWarning]
    assert f"memory_history_window = {window} is outside 1-50: {used} is used" in said[0]
    # (and memstore's own advice above 10 for the 50 it goes on with)
    assert said[1:] == (
        []
        if used <= 10
        else [f"history_window = {used} may use excessive context; recommended 3-8, at most 10"]
    )

    assert config.history_window == used


def test_a_supersede_outcome_compares_with_the_spec_s_booleans(db_path: Path) -> None:
    # F11: `supersede_memory(...) == False` was never true: the outcome is a str enum
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)
        manager.add_memory(10, "Room", note("Mailbox has leaflet"))

        old = "Mailbox has leaflet"
        refused = manager.supersede_memory(10, "Room", old, note("x", "ephemeral"))
        missing = manager.supersede_memory(10, "Room", "No such memory", note("y"))
        done = manager.supersede_memory(10, "Room", old, note("Leaflet taken"))

    assert (refused == False, missing == False, done == True) == (True, True, True)  # noqa: E712
    assert (refused != True, done != False, done == False) == (True, True, False)  # noqa: E712
    assert done == SupersedeOutcome.SUPERSEDED and done == "superseded"
    assert {done: "kept"}[SupersedeOutcome.SUPERSEDED] == "kept"


@pytest.mark.parametrize("content", ["a" * 19_000 + "\x00" * 999, "b" * 19_990 + "\ud800" * 9])
def test_a_note_its_escapes_take_past_the_limit_is_refused_never_raised(
    db_path: Path, content: str
) -> None:
    # review S6 F F1: the length was checked before NULs and lone surrogates were written
    # out (4 and 6 characters each): the store raised ValueError into the game loop
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)

        assert toolkit.add_memory(content, 5, 1, 64, "West of House") is False

        assert toolkit.failures["content_refused"] == 1


def test_a_supersession_of_a_waiting_ephemeral_memory_is_not_done_rather_than_not_found(
    db_path: Path,
) -> None:
    # review S6 F F4: in a busy stretch an ephemeral supersession went to the store at once,
    # ahead of the waiting synthesis that made the memory it names: NOT_FOUND, final
    learned = {"should_remember": True, "category": "NOTE", "memory_title": "Sword here",
               "memory_text": "Learned.", "persistence": "ephemeral", "reasoning": "t"}  # fmt: skip
    answers: list[dict[str, object]] = []

    def model(_messages: object) -> str:
        return json.dumps(answers.pop(0) if answers else {"should_remember": False})

    with MemoryStore.open(db_path, busy_timeout_s=0.2) as store:
        manager = SimpleMemoryManager(store, llm=model)
        manager.record_action_outcome(64, "West of House", "look", "You are here.", SPEC_CONTEXT)
        with write_lock_held(db_path):
            assert not manager.add_memory(64, "West of House", note("On disk"))  # the stretch
            answers.append(learned)
            manager.record_action_outcome(
                64, "West of House", "drop sword", "Dropped.", {**SPEC_CONTEXT, "score_delta": 1}
            )
            outcome = manager.supersede_memory(
                64, "West of House", "Sword here", note("Sword gone", "ephemeral")
            )

        assert outcome is SupersedeOutcome.STORE_BUSY
        assert manager.flush()
        done = manager.supersede_memory(
            64, "West of House", "Sword here", note("Sword gone", "ephemeral")
        )
        assert done is SupersedeOutcome.SUPERSEDED
        manager.close()


def test_an_ephemeral_memory_of_an_unnumbered_episode_waits_for_its_number(db_path: Path) -> None:
    # review S6 F F5: written at once, it kept the provisional number, never to be stored
    with MemoryStore.open(db_path, busy_timeout_s=0.2) as store:
        manager = SimpleMemoryManager(store)
        with write_lock_held(db_path):
            assert not manager.add_memory(64, "West of House", note("On disk"))  # the stretch
            manager.reset_episode()
            provisional = manager.episode
            added = manager.add_memory(
                64, "West of House", note("Dropped here", "ephemeral", episode=provisional)
            )

        assert added is False
        assert manager.flush() and manager.episode != provisional
        assert all(m.episode != provisional for m in store.memories(64))
        manager.close()


@pytest.mark.parametrize("seed", range(5))
def test_flagged_stats_in_sql_are_the_spec_s_summary(db_path: Path, seed: int) -> None:
    # review S6 J F3: the stats built a model of every note at every get_status (220 ms at
    # 20,000); they are aggregated in SQL now, and must say what the spec's loop said
    rng = random.Random(seed)
    names = ["West of House", "west  of house", "Kitchen", "KITCHEN", "Attic"]
    with MemoryStore.open(db_path) as store:
        toolkit = MemoryToolkit(store)
        for n in range(rng.randint(1, 60)):
            location_id = rng.choice([None, None, 64, 79, 180])
            name = rng.choice(names)
            toolkit.memories.add_flagged_memory(
                f"note {n} {rng.random()}", rng.randint(1, 1000), n, location_id, name
            )
        notes = sorted(toolkit.memories.all(), key=lambda m: m.id)
        counts: dict[object, int] = {}
        labels: dict[object, str] = {}
        for m in notes:
            key = (
                m.location_id
                if m.location_id is not None
                else " ".join(m.location_name.lower().split())
            )
            counts[key] = counts.get(key, 0) + 1
            labels.setdefault(key, m.location_label)

        stats = toolkit.get_summary_stats()

    assert stats["total_memories"] == len(notes)
    assert stats["avg_importance"] == pytest.approx(sum(m.importance for m in notes) / len(notes))
    assert stats["locations_covered"] == len(counts)
    assert stats["top_location"] == labels[max(counts, key=counts.__getitem__)]


def test_the_spec_004_writes_are_counted_and_a_forbidden_one_said(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # review S6 J F1, F2: get_status() counted only the syntheses' writes, and a forbidden
    # supersession was refused without the warning spec 004 asks for
    with MemoryStore.open(db_path) as store:
        manager = SimpleMemoryManager(store)
        manager.add_memory(64, "West of House", note("Mailbox here"))
        manager.add_memory(64, "West of House", note("Leaflet here"))
        manager.add_memory(64, "West of House", note("Mailbox here"))  # (a duplicate: False)
        manager.supersede_memory(64, "West of House", "Mailbox here", note("Mailbox open"))
        with caplog.at_level(logging.WARNING, logger="memstore"):
            manager.supersede_memory(
                64, "West of House", "Leaflet here", note("Leaflet gone", "ephemeral")
            )
        manager.invalidate_memories(64, ["Leaflet here", "No such memory"], "taken")

        status = manager.get_status()

        assert (status["memories_written"], status["supersessions"]) == (3, 1)
        assert (status["forbidden_transitions"], status["invalidations"]) == (1, 1)
        assert "supersede_memory 'Leaflet here' at 64: not done" in caplog.text
        assert "(the new memory is ephemeral)" in caplog.text
        manager.close()


def test_memstore_s_own_window_overrides_the_spec_s_without_a_word(tmp_path: Path) -> None:
    # review S6 K F3: the spec's window out of bounds warned "3 is used" though
    # [tool.memstore]'s own history_window was used
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[tool.zorkgpt.memory_sampling]\nmemory_history_window = 0\n"
        "[tool.memstore]\nhistory_window = 4\n"
    )

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = load_config(pyproject)

    assert config.history_window == 4
