"""Review B's findings on the agent loop, each reproduced (findings 1-5 and 9).

1. ``add_reasoning`` checked nothing: a None reasoning made every later LLM-mode turn
   raise, and a lone surrogate failed every synthesis as a ``provider_error``.
2. A full disk sent ``sqlite3.OperationalError`` into the loop and lost turn records.
3. ``z_machine_context`` coerced wrong types: ``True`` was room 1, ``"6"`` room 6.
4. str subclasses were used through their own methods (a ``(str, Enum)`` room name
   stored as ``Room.WOH``).
5. The spec-004 writes did not check ``location_name``.
9. The turn record kept a runaway action uncut; flagged content of only zero-width
   characters was stored.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import note

from memstore.cli_errors import error_line
from memstore.errors import MemstoreError, StorageFull
from memstore.flagged import FlaggedMemories
from memstore.manager import SimpleMemoryManager
from memstore.map_graph import ACTION_KEY_MAX
from memstore.map_store import MapStore
from memstore.memory_tools import MemoryToolkit
from memstore.models import LOCATION_NAME_MAX
from memstore.rows import SupersedeOutcome
from memstore.store import MemoryStore
from memstore.triggers import MAX_OBJECT_ID, ZMachineContext

WEST, NORTH_OF_HOUSE, KITCHEN = 64, 137, 79


def scored(score: int) -> ZMachineContext:
    """A turn that scored a point where it was taken (room 5): a trigger fires."""
    return ZMachineContext(
        location_before=5, location_after=5, score_before=score, score_after=score + 1
    )


class Prompts:
    """An LLM that keeps every prompt and answers a new permanent memory each call."""

    def __init__(self, text: str = "x") -> None:
        self.prompts: list[str] = []
        self.text = text

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.prompts.append("\n".join(m["content"] for m in messages))
        return json.dumps(
            {
                "should_remember": True,
                "category": "NOTE",
                "memory_title": f"Lesson {len(self.prompts)}",
                "memory_text": self.text,
                "persistence": "permanent",
                "reasoning": "r",
            }
        )


# --- 1. add_reasoning -------------------------------------------------------------------


@pytest.mark.parametrize("reasoning", [42, {"thought": "x"}, b"think"])
def test_add_reasoning_refuses_a_non_str_reasoning_at_once(
    store: MemoryStore, reasoning: Any
) -> None:
    llm = Prompts()
    manager = SimpleMemoryManager(store, llm=llm, episode=1)
    with pytest.raises(TypeError, match="^reasoning must be a str, got "):
        manager.add_reasoning(1, reasoning, "look")
    for k in range(4):  # nothing was kept: every later turn synthesises as usual
        assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(k))
    assert manager.get_status()["failures"] == {} and len(llm.prompts) == 4
    manager.close()
    assert len(store.turn_records(manager.run_id)) == 4


@pytest.mark.parametrize("reasoning", [None, "", "  \n"])
def test_a_missing_reasoning_is_spec_003_s_graceful_fallback(
    store: MemoryStore, reasoning: Any
) -> None:
    """Review E #4: an LLM agent's ``"reasoning": null`` is no caller mistake: the history
    window says "(No reasoning recorded)", and nothing raises."""
    llm = Prompts()
    manager = SimpleMemoryManager(store, llm=llm, episode=1)
    manager.add_reasoning(1, reasoning, "look")
    assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(0))
    assert "(No reasoning recorded)" in str(llm.prompts[-1])
    manager.close()


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ((1, "think", None), TypeError, "^action must be a str"),
        ((1, "think", 5), TypeError, "^action must be a str"),
        (("1", "think", "look"), TypeError, "^turn must be an int"),
        ((True, "think", "look"), TypeError, "^turn must be an int"),
        ((-1, "think", "look"), ValueError, "^turn must be an int from 0"),
    ],
)
def test_add_reasoning_refuses_a_wrong_turn_or_action_at_once(
    store: MemoryStore, arguments: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    manager = SimpleMemoryManager(store, llm=Prompts(), episode=1)
    with pytest.raises(error, match=match):
        manager.add_reasoning(*arguments)
    assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(0))
    assert manager.get_status()["failures"] == {}
    manager.close()


def test_a_reasoning_holding_a_nul_or_a_lone_surrogate_is_written_out(
    store: MemoryStore,
) -> None:
    """The prompt must be text any provider takes (UTF-8): such a reasoning once failed
    every synthesis of the history window as a ``provider_error``."""
    llm = Prompts()
    manager = SimpleMemoryManager(store, llm=llm, episode=1)
    manager.add_reasoning(1, "I think \ud800 north\x00", "nor\x00th")
    for k in range(3):
        assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(k))
    assert manager.get_status()["failures"] == {} and len(llm.prompts) == 3
    for prompt in llm.prompts:
        prompt.encode("utf-8")  # no lone surrogate left
        assert "\x00" not in prompt
        assert "I think \\ud800 north\\x00" in prompt and "nor\\x00th" in prompt
    manager.close()


# --- 2. a full disk -----------------------------------------------------------------------


@contextmanager
def disk_full(store: MemoryStore) -> Iterator[None]:
    """While the block runs, the store's database file cannot grow (SQLite then refuses a
    write that needs a new page: SQLITE_FULL, as on a full disk)."""
    driver = store._conn.connection.driver_connection  # noqa: SLF001
    (pages,) = driver.execute("PRAGMA page_count").fetchone()  # type: ignore[union-attr]
    driver.execute(f"PRAGMA max_page_count = {pages}")  # type: ignore[union-attr]
    try:
        yield
    finally:
        driver.execute("PRAGMA max_page_count = 1073741823")  # type: ignore[union-attr]


def test_a_full_disk_never_reaches_the_loop_and_the_turn_records_wait(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore.open(db_path, busy_timeout_s=1)
    manager = SimpleMemoryManager(store, llm=Prompts(text="x" * 5000), episode=1)
    toolkit = MemoryToolkit(store)
    assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(0))
    with disk_full(store):
        for k in range(1, 21):  # each would store a 5,000-character memory
            manager.record_action_outcome(5, "Room", f"a{k}", "resp", scored(k))
        assert manager.invalidate_memory(5, "Lesson 1", "because") is False
        assert manager.invalidate_memories(5, ["Lesson 1"], "because") == {"Lesson 1": False}
        assert manager.add_memory(5, "Room", note("By the API", text="y" * 5000)) is False
        superseded = manager.supersede_memory(5, "Room", "Lesson 1", note("Newer"))
        assert superseded is SupersedeOutcome.STORE_BUSY
        assert toolkit.add_memory("note " + "z" * 15_000, 5, 1, 5, "Room") is False
        with pytest.raises(StorageFull) as raised:  # asked to write: told why it cannot
            manager.flush()
        line = error_line(raised.value)  # as the command line prints it (memstore demo)
        assert line.startswith("error: database or disk is full (SQLITE_FULL)"), line
        assert "\n" not in line
        status = manager.get_status()
        assert status["store_full"] >= 1 and status["store_busy"] >= status["store_full"]
        assert status["syntheses_waiting"] >= 1 and status["turn"] == 21
        assert toolkit.failures["store_full"] == 1
    assert any("no room" in r.getMessage() for r in caplog.records)
    assert manager.flush() is True  # room again: what waited is written
    assert len(store.turn_records(manager.run_id)) == 21
    assert len(store.memories(5)) == 21
    manager.close()
    store.close()


def test_the_store_api_raises_memstores_one_line_error_for_a_full_disk(db_path: Path) -> None:
    """A direct store call raises StorageFull (a MemstoreError), never the driver's error;
    the command line prints it as it printed SQLITE_FULL before."""
    with MemoryStore.open(db_path) as store:
        assert store.add_memory(5, "Room", note("Before"))
        with disk_full(store), pytest.raises(StorageFull) as raised:
            for n in range(50):
                store.add_memory(5, "Room", note(f"Filler {n}", text="z" * 5000))
        assert isinstance(raised.value, MemstoreError)
        assert not isinstance(raised.value.__cause__, MemstoreError)
        line = error_line(raised.value)
        assert line.startswith("error: database or disk is full (SQLITE_FULL)") and "\n" not in line
        assert store.add_memory(5, "Room", note("After"))  # room again


def test_postgresqls_disk_full_and_io_error_are_the_same_memstore_error(
    db_path: Path,
) -> None:
    """The refusal mapping reads PostgreSQL's SQLSTATE too (disk_full 53100, io_error
    58030): no server is needed to check the mapping."""
    import psycopg.errors

    with MemoryStore.open(db_path) as store:
        full = psycopg.errors.DiskFull("could not extend file: No space left on device")
        refused = store.refusal(full, writing=True)
        assert isinstance(refused, StorageFull)
        assert "(SQLSTATE 53100)" in str(refused) and "\n" not in str(refused)
        assert isinstance(store.refusal(psycopg.errors.IoError("read failed")), StorageFull)
        assert store.refusal(psycopg.errors.UniqueViolation("dup")) is None  # a bug: as is


def test_a_refused_read_on_the_turns_path_is_counted_not_raised(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error while reading (StorageFull) on the per-turn path: no memory is shown
    or learned this turn, the turn is recorded, nothing raises."""
    manager = SimpleMemoryManager(store, llm=Prompts(), episode=1)

    def failing(*_args: Any, **_kwargs: Any) -> Any:
        raise StorageFull("disk I/O error (SQLITE_IOERR_READ): x.db has no room")

    monkeypatch.setattr(store, "get_location_memory", failing)
    monkeypatch.setattr(store, "memories", failing)
    assert manager.get_location_memory(5) == ""
    assert manager.record_action_outcome(5, "Room", "look", "A room.", scored(0)) is None
    monkeypatch.undo()
    assert manager.get_status()["store_full"] == 2
    manager.close()
    assert len(store.turn_records(manager.run_id)) == 1


# --- 3. a strict context --------------------------------------------------------------------

WRONG_CONTEXTS = [
    {"location_before": True},
    {"location_after": "6"},
    {"location_after": 6.0},
    {"location_after": -1},  # a location the store could never hold (was: a map room -1)
    {"location_before": -5},
    {"score_before": "0"},
    {"score_after": True},
    {"died": "yes"},
    {"died": 1},
    {"first_visit": 1},
    {"response_length": True},
    {"inventory_after": {-1}},
    {"inventory_after": {0}},
    {"inventory_after": {2**70}},
    {"inventory_after": {MAX_OBJECT_ID + 1}},
    {"inventory_before": {True}},
    {"inventory_before": {"7"}},
    {"item_names": {"7": "lamp"}},
]


@pytest.mark.parametrize("wrong", WRONG_CONTEXTS, ids=repr)
def test_a_context_value_of_the_wrong_type_is_refused_before_the_turn_counts(
    store: MemoryStore, wrong: dict[str, Any]
) -> None:
    base: dict[str, Any] = {
        "location_before": 5,
        "location_after": 5,
        "score_before": 0,
        "score_after": 0,
    }
    with pytest.raises(ValueError):
        ZMachineContext(**{**base, **wrong})
    manager = SimpleMemoryManager(store, episode=1)
    with pytest.raises(ValueError):  # spec 002's dict is read by the same rules
        manager.record_action_outcome(5, "R", "climb tree", "You climb.", {**base, **wrong})
    assert manager.turn == 0 and manager.counters["turns"] == 0
    manager.record_action_outcome(5, "R", "climb tree", "You climb.", base)
    manager.close()
    assert [r["location_after"] for r in store.turn_records(manager.run_id)] == [5]
    assert MapStore(store).exits(1).exits == ()  # no room 1 made up from True


def test_a_negative_location_is_refused_in_one_line_however_the_context_was_made(
    store: MemoryStore,
) -> None:
    # review J: model_copy skips the model's rule, and a dict's refusal was pydantic's
    # paragraph of four to seven lines
    made = ZMachineContext(location_before=5, location_after=5)
    manager = SimpleMemoryManager(store, episode=1)
    for context in (
        made.model_copy(update={"location_after": -1}),
        {"location_before": 5, "location_after": -3},
    ):
        with pytest.raises(ValueError, match="location_after") as refused:
            manager.record_action_outcome(5, "R", "go north", "You go.", context)
        assert "\n" not in str(refused.value)
    assert manager.turn == 0
    manager.close()
    assert MapStore(store).exits(5).exits == ()


def test_a_context_dict_may_give_its_inventories_as_lists(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    context = {
        "location_before": 7,
        "location_after": 7,
        "inventory_before": [5],
        "inventory_after": [5, MAX_OBJECT_ID],
    }
    manager.record_action_outcome(7, "Attic", "take all", "Taken.", context)
    assert manager.turn == 1 and manager.last_outcome is not None
    manager.close()


# --- 4. str subclasses -------------------------------------------------------------------------


class Room(str, enum.Enum):  # noqa: UP042 - the (str, Enum) of the review, not a StrEnum
    WOH = "West of House"
    NOH = "North of House"


class Cmd(str, enum.Enum):  # noqa: UP042
    NORTH = "north"


class Evil(str):
    """A str whose methods all lie."""

    def strip(self, *_args: Any) -> str:
        return Evil("EVIL")

    def split(self, *_args: Any, **_kwargs: Any) -> list[str]:
        return ["EVIL"]

    def lower(self) -> str:
        return Evil("evil")

    def __str__(self) -> str:
        return "EVIL-str"

    def __format__(self, _spec: str) -> str:
        return "EVIL-format"

    def replace(self, *_args: Any, **_kwargs: Any) -> str:
        return Evil("EVIL")


def every_text(store: MemoryStore) -> str:
    rows = [
        (m.title, m.text) for location in (WEST, NORTH_OF_HOUSE) for m in store.memories(location)
    ]
    return repr(rows)


def test_a_str_enum_room_name_and_action_are_stored_as_their_text(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    context = ZMachineContext(
        location_before=WEST,
        location_after=NORTH_OF_HOUSE,
        location_after_name=Room.NOH,
    )
    manager.record_action_outcome(
        WEST, Room.WOH, Cmd.NORTH, "North of House\nYou face the house.", context
    )
    manager.close()
    texts = every_text(store)
    assert "From West of House (64), 'north' leads to North of House (137)" in texts, texts
    assert "Room." not in texts and "Cmd." not in texts
    assert [(e.command, e.to_id) for e in MapStore(store).exits(WEST).exits] == [
        ("north", NORTH_OF_HOUSE)
    ]
    (record,) = store.turn_records(manager.run_id)
    assert type(record["action"]) is str and record["action"] == "north"


def test_a_str_subclass_is_read_as_its_text_never_through_its_methods(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    context = ZMachineContext(
        location_before=WEST, location_after=KITCHEN, location_after_name=Evil("Kitchen")
    )
    manager.record_action_outcome(
        WEST, Evil("West of House"), Evil("north"), Evil("You are in the kitchen."), context
    )
    manager.add_reasoning(2, Evil("go back"), Evil("south"))
    assert manager._reasoning[-1] == (2, "go back", "south")  # noqa: SLF001
    assert all(type(text) is str for text in manager._reasoning[-1][1:])  # noqa: SLF001
    assert manager.add_memory(WEST, Evil("West of House"), note("Mailbox"))
    assert manager.invalidate_memories(WEST, [Evil("Mailbox")], Evil("gone")) == {"Mailbox": True}
    manager.close()
    assert [(e.command, e.to_id) for e in MapStore(store).exits(WEST).exits] == [("north", KITCHEN)]
    texts = every_text(store) + repr(
        [m.title for m in store.memories(WEST, include_superseded=True)]
    )
    assert "EVIL" not in texts and "evil" not in texts, texts
    assert store.location(WEST).name == "West of House"  # type: ignore[union-attr]


def test_the_memory_tools_read_a_str_subclass_as_its_text(store: MemoryStore) -> None:
    toolkit = MemoryToolkit(store)
    assert toolkit.add_memory(
        Evil("The mailbox holds a leaflet"), 500, 1, WEST, Evil("West of House")
    )
    shown = toolkit.call_tool("get_location_memories", {"location": Evil("West of House")})
    assert "leaflet" in shown and "West of House" in shown, shown
    assert "EVIL" not in shown
    (memory,) = FlaggedMemories(store).top(5)
    assert (memory.content, memory.location_name) == (
        "The mailbox holds a leaflet",
        "West of House",
    )
    assert "leaflet" in toolkit.call_tool(Evil("get_top_memories"), Evil('{"limit": 3}'))


# --- 5. the spec-004 writes' location name ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "error"),
    [
        (12, TypeError),
        (None, TypeError),
        (["x"], TypeError),
        (3.5, TypeError),
        ("a\x00b", ValueError),
        ("a \ud800", ValueError),
        ("x" * (LOCATION_NAME_MAX + 1), ValueError),
    ],
    ids=["int", "None", "list", "float", "NUL", "surrogate", "too long"],
)
def test_add_and_supersede_check_the_location_name_as_a_turn_does(
    store: MemoryStore, name: Any, error: type[Exception]
) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    assert manager.add_memory(5, "Room", note("Old"))
    for call in (
        lambda: manager.add_memory(6, name, note("New")),
        lambda: manager.supersede_memory(5, name, "Old", note("Newer")),
        lambda: store.add_memory(6, name, note("New")),
        lambda: store.supersede_memory(5, name, "Old", note("Newer")),
        lambda: manager.record_action_outcome(5, name, "look", "A room.", scored(0)),
    ):
        with pytest.raises(error, match="^location_name ") as raised:
            call()
        assert "\n" not in str(raised.value)
    assert store.location(6) is None
    assert [m.title for m in store.memories(5)] == ["Old"] and manager.turn == 0
    assert manager.add_memory(6, "x" * LOCATION_NAME_MAX, note("At the bound"))
    manager.close()


def test_an_invalidation_title_that_is_not_a_str_is_a_type_error(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    assert manager.add_memory(5, "Room", note("Old"))
    for call in (
        lambda: manager.invalidate_memories(5, [["Old"]], "because"),
        lambda: store.invalidate_memories(5, [5], "because"),
        lambda: manager.supersede_memory(5, "Room", None, note("Newer")),
    ):
        with pytest.raises(TypeError):
            call()
    assert [m.title for m in store.memories(5)] == ["Old"]
    manager.close()


# --- 9. bounds ------------------------------------------------------------------------------------


def test_the_turn_record_keeps_the_action_cut_as_the_map_keeps_it(store: MemoryStore) -> None:
    manager = SimpleMemoryManager(store, episode=1)
    runaway = "look " + "x" * 50_000
    manager.record_action_outcome(5, "Room", runaway, "I don't know that word.", scored(0))
    manager.record_action_outcome(5, "Room", "look", "A room.", scored(1))
    manager.close()
    actions = [r["action"] for r in store.turn_records(manager.run_id)]
    assert len(actions[0]) <= ACTION_KEY_MAX and runaway.startswith(actions[0])
    assert actions[1] == "look"


@pytest.mark.parametrize("content", ["\u200b\u200b", "\u200b \ufeff\u2060", "\u00ad\u202e"])
def test_flagged_content_of_only_format_characters_is_ignored_as_empty(
    store: MemoryStore, content: str
) -> None:
    flagged = FlaggedMemories(store)
    assert flagged.add_flagged_memory(content, 500, 1, 5, "Room") is False
    assert flagged.count() == 0
    assert flagged.add_flagged_memory("Lamp\u200b here", 500, 1, 5, "Room") is True
    assert flagged.count() == 1
