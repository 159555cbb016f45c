"""The store's public API, in the spec's words, including every rejected case."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from memstore.config import MemstoreConfig
from memstore.errors import ReadOnlyDatabase
from memstore.models import Memory, Status
from memstore.store import MemoryStore
from tests.conftest import MakeMemory

KITCHEN, LIVING_ROOM, TROLL_ROOM = 8, 5, 152


def persistent_titles_on_disk(db_path: Path) -> list[str]:
    with sqlite3.connect(db_path) as conn:
        return [row[0] for row in conn.execute("SELECT title FROM memories ORDER BY id")]


# --- routing by persistence ---------------------------------------------------------------


def test_core_and_permanent_memories_are_written_to_the_database_file(
    store: MemoryStore, mem: MakeMemory, db_path: Path
) -> None:
    assert store.add_memory(LIVING_ROOM, "Living Room", mem("Sword spawns here", "core"))
    assert store.add_memory(LIVING_ROOM, "Living Room", mem("Rug can be moved"))
    assert persistent_titles_on_disk(db_path) == ["Sword spawns here", "Rug can be moved"]
    assert store.get_persistent_count(LIVING_ROOM) == 2
    assert store.get_ephemeral_count(LIVING_ROOM) == 0


def test_ephemeral_memory_never_reaches_the_database_file(
    store: MemoryStore, mem: MakeMemory, db_path: Path
) -> None:
    assert store.add_memory(KITCHEN, "Kitchen", mem("Dropped sword here", "ephemeral"))
    assert store.get_ephemeral_count(KITCHEN) == 1
    assert store.get_persistent_count(KITCHEN) == 0
    assert persistent_titles_on_disk(db_path) == []
    on_disk = b"".join(p.read_bytes() for p in db_path.parent.glob("memories.db*"))
    assert b"Dropped sword here" not in on_disk


def test_ephemeral_memory_is_gone_after_reset_episode(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(KITCHEN, "Kitchen", mem("Glass bottle here", "core"))
    store.add_memory(KITCHEN, "Kitchen", mem("Dropped sword here", "ephemeral"))
    assert "Dropped sword here" in store.get_location_memory(KITCHEN)
    assert store.reset_episode() == 1
    assert store.get_ephemeral_count() == 0
    assert store.get_persistent_count(KITCHEN) == 1
    assert "Dropped sword here" not in store.get_location_memory(KITCHEN)


def test_ephemeral_tier_is_per_store_and_persistent_tier_is_shared(
    db_path: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path) as first:
        first.add_memory(KITCHEN, "Kitchen", mem("Left lamp on table", "ephemeral"))
        first.add_memory(KITCHEN, "Kitchen", mem("Chimney too narrow"))
        with MemoryStore.open(db_path) as second:
            assert second.get_ephemeral_count() == 0
            assert second.get_persistent_count(KITCHEN) == 1
    with MemoryStore.open(db_path) as reopened:
        assert reopened.get_ephemeral_count() == 0
        assert [m.title for m in reopened.memories(KITCHEN)] == ["Chimney too narrow"]


def test_memory_breakdown_counts_live_memories_by_persistence(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(9, "Room", mem("Room has mailbox", "core"))
    store.add_memory(9, "Room", mem("Mailbox has leaflet"))
    store.add_memory(9, "Room", mem("Dropped sword here", "ephemeral"))
    store.add_memory(9, "Room", mem("Wrong idea"))
    store.invalidate_memory(9, "Wrong idea", "proven false")
    assert store.get_memory_breakdown(9) == {"core": 1, "permanent": 1, "ephemeral": 1}
    assert store.get_persistent_count() == 2
    assert store.get_memory_breakdown(10) == {"core": 0, "permanent": 0, "ephemeral": 0}


# --- de-duplication -----------------------------------------------------------------------


def test_same_title_at_same_location_is_rejected_in_either_tier(
    store: MemoryStore, mem: MakeMemory
) -> None:
    assert store.add_memory(15, "West of House", mem("Take or break window"))
    assert not store.add_memory(15, "West of House", mem("Take or break window", text="again"))
    assert not store.add_memory(15, "West of House", mem("Take or break window", "ephemeral"))
    assert store.add_memory(16, "Elsewhere", mem("Take or break window"))
    assert store.add_memory(15, "West of House", mem("Take or break window twice"))
    assert store.get_persistent_count(15) == 2


def test_title_of_a_superseded_memory_can_be_used_again(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(15, "West of House", mem("Open door"))
    assert store.invalidate_memory(15, "Open door", "door is painted on")
    assert store.add_memory(15, "West of House", mem("Open door", text="It really opens."))
    assert [m.status for m in store.memories(15, include_superseded=True)] == [
        Status.SUPERSEDED,
        Status.ACTIVE,
    ]


# --- supersession -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("ephemeral", "ephemeral"),
        ("ephemeral", "permanent"),
        ("ephemeral", "core"),
        ("permanent", "permanent"),
        ("core", "core"),
        ("core", "permanent"),
    ],
)
def test_allowed_persistence_transitions(
    store: MemoryStore, mem: MakeMemory, old: str, new: str
) -> None:
    store.add_memory(LIVING_ROOM, "Living Room", mem("Old view", old))
    assert store.supersede_memory(LIVING_ROOM, "Living Room", "Old view", mem("New view", new))
    live = store.memories(LIVING_ROOM)
    assert [(m.title, m.persistence.value) for m in live] == [("New view", new)]
    everything = store.memories(LIVING_ROOM, include_superseded=True)
    old_memory = next(m for m in everything if m.title == "Old view")
    assert old_memory.status is Status.SUPERSEDED
    assert old_memory.superseded_by == "New view"
    assert old_memory.superseded_at_turn == 5


@pytest.mark.parametrize("old", ["core", "permanent"])
def test_persistent_memory_cannot_be_superseded_by_an_ephemeral_one(
    store: MemoryStore, mem: MakeMemory, old: str
) -> None:
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll attacks on sight", old))
    assert not store.supersede_memory(
        TROLL_ROOM,
        "Troll Room",
        "Troll attacks on sight",
        mem("Dropped sword near troll", "ephemeral"),
    )
    assert [m.status for m in store.memories(TROLL_ROOM, include_superseded=True)] == [
        Status.ACTIVE
    ]
    assert store.get_ephemeral_count() == 0


def test_ephemeral_upgrade_survives_reset_episode(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(KITCHEN, "Kitchen", mem("Dropped lamp here", "ephemeral"))
    assert store.supersede_memory(
        KITCHEN, "Kitchen", "Dropped lamp here", mem("Lamp on table opens secret door")
    )
    assert [m.title for m in store.history(KITCHEN, "Lamp on table opens secret door")] == [
        "Dropped lamp here",
        "Lamp on table opens secret door",
    ]
    store.reset_episode()
    assert [m.title for m in store.memories(KITCHEN)] == ["Lamp on table opens secret door"]


def test_supersession_matches_titles_exactly(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(20, "Hall", mem("Open door with key"))
    assert not store.supersede_memory(20, "Hall", "Open door", mem("Door opens"))
    assert not store.supersede_memory(20, "Hall", "open door with key", mem("Door opens"))
    assert [m.status for m in store.memories(20, include_superseded=True)] == [Status.ACTIVE]
    store.add_memory(20, "Hall", mem("Open door"))
    assert store.supersede_memory(20, "Hall", "Open door", mem("Door opens"))
    statuses = {m.title: m.status for m in store.memories(20, include_superseded=True)}
    assert statuses == {
        "Open door with key": Status.ACTIVE,
        "Open door": Status.SUPERSEDED,
        "Door opens": Status.ACTIVE,
    }


def test_supersede_unknown_title_changes_nothing(store: MemoryStore, mem: MakeMemory) -> None:
    assert not store.supersede_memory(20, "Hall", "Never stored", mem("New"))
    assert store.get_persistent_count() == 0


def test_supersede_into_a_title_that_is_already_live_is_rejected(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(20, "Hall", mem("A"))
    store.add_memory(20, "Hall", mem("B"))
    assert not store.supersede_memory(20, "Hall", "A", mem("B"))
    assert [m.status for m in store.memories(20, include_superseded=True)] == [Status.ACTIVE] * 2


def test_supersede_may_keep_the_same_title(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(20, "Hall", mem("Door", text="locked"))
    assert store.supersede_memory(20, "Hall", "Door", mem("Door", text="opens with brass key"))
    assert [m.text for m in store.memories(20)] == ["opens with brass key"]
    assert [m.text for m in store.history(20, "Door")] == ["locked", "opens with brass key"]


def test_supersession_and_new_memory_are_one_transaction(
    store: MemoryStore, mem: MakeMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll accepts lunch gift", status="TENTATIVE"))

    def broken_link(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(MemoryStore, "_link", staticmethod(broken_link))
    with pytest.raises(RuntimeError, match="disk full"):
        store.supersede_memory(
            TROLL_ROOM,
            "Troll Room",
            "Troll accepts lunch gift",
            mem("Troll attacks after gift", category="DANGER"),
        )
    monkeypatch.undo()
    assert [(m.title, m.status) for m in store.memories(TROLL_ROOM, include_superseded=True)] == [
        ("Troll accepts lunch gift", Status.TENTATIVE)
    ]


def test_history_follows_a_chain_of_supersessions(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll accepts lunch gift", turns="12"))
    store.supersede_memory(
        TROLL_ROOM,
        "Troll Room",
        "Troll accepts lunch gift",
        mem("Troll attacks after gift", turns="13"),
    )
    store.supersede_memory(
        TROLL_ROOM,
        "Troll Room",
        "Troll attacks after gift",
        mem("Troll must be fought with sword", turns="20-22"),
    )
    for title in ("Troll accepts lunch gift", "Troll must be fought with sword"):
        chain = store.history(TROLL_ROOM, title)
        assert [m.title for m in chain] == [
            "Troll accepts lunch gift",
            "Troll attacks after gift",
            "Troll must be fought with sword",
        ]
    assert [m.superseded_at_turn for m in chain] == [13, 22, None]
    assert store.history(TROLL_ROOM, "No such memory") == []


# --- invalidation -------------------------------------------------------------------------


def test_invalidate_memory_marks_it_superseded_with_reason(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll is friendly", status="TENTATIVE"))
    assert store.invalidate_memory(
        TROLL_ROOM, "Troll is friendly", "Proven false by death", turn=25
    )
    (memory,) = store.memories(TROLL_ROOM, include_superseded=True)
    assert memory.status is Status.SUPERSEDED
    assert memory.invalidation_reason == "Proven false by death"
    assert memory.superseded_by is None
    assert memory.superseded_at_turn == 25
    assert store.get_location_memory(TROLL_ROOM) == ""


def test_invalidate_memories_in_a_batch(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll is friendly"))
    store.add_memory(TROLL_ROOM, "Troll Room", mem("Troll accepts gifts", "ephemeral"))
    results = store.invalidate_memories(
        TROLL_ROOM,
        ["Troll is friendly", "Troll accepts gifts", "Never stored"],
        "Both proven false by troll attack",
    )
    assert results == {
        "Troll is friendly": True,
        "Troll accepts gifts": True,
        "Never stored": False,
    }
    assert store.get_persistent_count(TROLL_ROOM) == 0
    assert store.get_ephemeral_count(TROLL_ROOM) == 0


def test_invalidation_uses_the_current_turn_by_default(store: MemoryStore, mem: MakeMemory) -> None:
    store.add_memory(3, "Room", mem("Door is unlocked"))
    store.current_episode, store.current_turn = 2, 35
    store.invalidate_memory(3, "Door is unlocked", "Door was locked")
    (memory,) = store.memories(3, include_superseded=True)
    assert (memory.superseded_at_episode, memory.superseded_at_turn) == (2, 35)


def test_an_invalidation_is_never_dated_before_the_memory_it_ends(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # a memory of episode 3 added while the store's clock still says episode 1
    store.current_episode, store.current_turn = 1, 7
    store.add_memory(3, "Room", mem("Door is unlocked", episode=3))
    store.invalidate_memory(3, "Door is unlocked", "Door was locked")
    (memory,) = store.memories(3, include_superseded=True)
    assert (memory.superseded_at_episode, memory.superseded_at_turn) == (3, 7)


@pytest.mark.parametrize("reason", ["", "   ", None])
def test_invalidation_without_a_reason_is_rejected(
    store: MemoryStore, mem: MakeMemory, reason: object
) -> None:
    store.add_memory(3, "Room", mem("Door is unlocked"))
    with pytest.raises(ValueError, match="non-empty reason"):
        store.invalidate_memory(3, "Door is unlocked", reason)  # type: ignore[arg-type]
    assert store.get_persistent_count(3) == 1


def test_invalidate_unknown_or_already_superseded_title_returns_false(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(3, "Room", mem("Door is unlocked"))
    assert store.invalidate_memory(3, "Door is unlocked", "locked")
    assert not store.invalidate_memory(3, "Door is unlocked", "again")
    assert not store.invalidate_memory(3, "Door", "prefix only")


# --- wrong types and values ------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["15", True, 15.0, None])
def test_location_id_must_be_an_int(store: MemoryStore, mem: MakeMemory, bad_id: object) -> None:
    with pytest.raises(TypeError, match="location_id must be an int"):
        store.add_memory(bad_id, "West of House", mem("Mailbox"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="location_id must be an int"):
        store.get_location_memory(bad_id)  # type: ignore[arg-type]
    assert store.get_persistent_count() == 0


def test_add_memory_requires_a_memory_object(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match="memstore.Memory"):
        store.add_memory(1, "Room", {"title": "dict"})  # type: ignore[arg-type]


def test_new_memory_cannot_be_added_superseded(store: MemoryStore, mem: MakeMemory) -> None:
    with pytest.raises(ValueError, match="cannot be SUPERSEDED"):
        store.add_memory(1, "Room", mem("Stale", status="SUPERSEDED"))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("category", "VICTORY", "category"),
        ("status", "MAYBE", "status"),
        ("persistence", "forever", "persistence"),
        ("turns", "T5", "turns must look like"),
        ("turns", "5\n", "turns must look like"),  # Memories.md could not write it back
        ("turns", "\u0663", "turns must look like"),  # ARABIC-INDIC DIGIT THREE
        ("turns", "9-3", "ends before it starts"),
        ("episode", 0, "episode"),
        ("title", "  ", "title must not be blank"),
        ("title", "\x00 note", "title must not be blank"),  # blank to SQLite's length()
    ],
)
def test_invalid_memory_fields_are_rejected_by_pydantic(
    mem: MakeMemory, field: str, value: object, message: str
) -> None:
    fields = {"title": "Something", field: value}
    with pytest.raises(ValidationError, match=message):
        mem(**fields)


@pytest.mark.parametrize("reason", [" ", "\x00", " \x00gone"])
def test_an_invalidation_reason_blank_to_the_database_is_rejected(
    store: MemoryStore, mem: MakeMemory, reason: str
) -> None:
    # SQLite's length() stops at the first NUL: its CHECK would refuse these at the insert
    with pytest.raises(ValidationError, match="invalidation reason must not be blank"):
        mem(status="SUPERSEDED", invalidation_reason=reason)
    store.add_memory(3, "Room", mem("Door is unlocked"))
    with pytest.raises(ValueError, match="non-empty reason"):
        store.invalidate_memory(3, "Door is unlocked", reason)
    assert store.get_persistent_count(3) == 1


def test_a_nul_after_the_first_character_is_stored_as_it_is(
    store: MemoryStore, mem: MakeMemory
) -> None:
    if store.target.is_server:  # PostgreSQL's text cannot hold NUL: refused, in one line
        with pytest.raises(ValueError, match=r"cannot store the NUL character .*nothing"):
            store.add_memory(3, "Room", mem("Door\x00 is unlocked"))
        assert store.memories(3, include_superseded=True) == []
        return
    store.add_memory(3, "Room", mem("Door\x00 is unlocked"))
    assert store.invalidate_memory(3, "Door\x00 is unlocked", "gone\x00")
    (memory,) = store.memories(3, include_superseded=True)
    assert (memory.title, memory.invalidation_reason) == ("Door\x00 is unlocked", "gone\x00")


def test_persistence_is_required(mem: MakeMemory) -> None:
    with pytest.raises(ValidationError, match="persistence"):
        Memory(category="NOTE", title="t", text="x", episode=1, turns="1")


# --- what the agent sees ----------------------------------------------------------------------


def test_location_memory_lists_persistent_then_ephemeral_then_tentative(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(5, "Living Room", mem("Dropped lamp here", "ephemeral"))
    store.add_memory(5, "Living Room", mem("Troll might accept gifts", status="TENTATIVE"))
    store.add_memory(5, "Living Room", mem("Sword spawns here", "core", category="DISCOVERY"))
    store.add_memory(5, "Living Room", mem("Rug hides trap door"))
    store.add_memory(5, "Living Room", mem("Old idea"))
    store.invalidate_memory(5, "Old idea", "wrong")
    assert store.get_location_memory(5).splitlines() == [
        "[DISCOVERY] Sword spawns here: What we learned: Sword spawns here. [spawn]",
        "[NOTE] Rug hides trap door: What we learned: Rug hides trap door.",
        "[NOTE] Dropped lamp here: What we learned: Dropped lamp here. [session]",
        "",
        "⚠️  TENTATIVE MEMORIES (unconfirmed, may be invalidated):",
        "  [NOTE] Troll might accept gifts: What we learned: Troll might accept gifts.",
    ]


def test_persistence_markers_can_be_turned_off(db_path: Path, mem: MakeMemory) -> None:
    config = MemstoreConfig(show_persistence_markers=False)
    with MemoryStore.open(db_path, config=config) as store:
        store.add_memory(5, "Living Room", mem("Sword spawns here", "core"))
        assert (
            store.get_location_memory(5)
            == "[NOTE] Sword spawns here: What we learned: Sword spawns here."
        )


def test_unknown_location_gives_empty_memory(store: MemoryStore) -> None:
    assert store.get_location_memory(999) == ""


def test_token_budget_keeps_danger_and_core_and_says_what_was_left_out(
    db_path: Path, mem: MakeMemory
) -> None:
    from memstore.tokens import count_tokens

    config = MemstoreConfig(token_budget=60)
    with MemoryStore.open(db_path, config=config) as store:
        for i in range(6):
            store.add_memory(7, "Cellar", mem(f"Ordinary fact {i}", text="word " * 8))
        store.add_memory(7, "Cellar", mem("Grue eats you in the dark", category="DANGER"))
        store.add_memory(7, "Cellar", mem("Trap door above", "core"))
        shown = store.get_location_memory(7)
    assert count_tokens(shown) <= 60
    assert "Grue eats you in the dark" in shown
    assert "Trap door above" in shown
    last = shown.splitlines()[-1]
    assert last.startswith("(") and last.endswith("more memories not shown)")
    hidden = int(last[1:].split()[0])
    assert hidden == 8 - (len(shown.splitlines()) - 1)


def test_cached_view_sees_writes_from_another_connection(db_path: Path, mem: MakeMemory) -> None:
    with MemoryStore.open(db_path) as reader, MemoryStore.open(db_path) as writer:
        assert reader.get_location_memory(9) == ""
        assert reader.memories(9) == []
        writer.add_memory(9, "Clearing", mem("Grating in the leaves"))
        assert "Grating in the leaves" in reader.get_location_memory(9)
        assert [m.title for m in reader.memories(9)] == ["Grating in the leaves"]
        writer.invalidate_memory(9, "Grating in the leaves", "it was a pile of leaves")
        assert reader.get_location_memory(9) == ""
        assert reader.memories(9) == []


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), "5", True])
def test_an_answer_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    tmp_path: Path, seconds: object
) -> None:
    with pytest.raises(ValueError, match="answer_timeout_s must be a finite number of seconds"):
        MemoryStore.open(tmp_path / "m.db", answer_timeout_s=seconds)  # type: ignore[arg-type]
    assert not (tmp_path / "m.db").exists()


def test_a_read_only_store_refuses_every_write_the_session_tier_included(
    tmp_path: Path, mem: MakeMemory
) -> None:
    """Was: on SQLite a read-only store wrote ephemeral memories (its attached in-memory
    tier) while refusing every other write."""
    path = tmp_path / "m.db"
    with MemoryStore.open(path) as store:
        assert store.add_memory(5, "Cellar", mem(title="Trap door"))
    with MemoryStore.open(path, read_only=True) as reader:
        assert reader.tiers == ("persistent", "ephemeral")  # SQLite attaches it all the same
        with pytest.raises(ReadOnlyDatabase, match="opened read-only; nothing was written"):
            reader.add_memory(5, "Cellar", mem(title="Lamp", persistence="ephemeral"))
        with pytest.raises(ReadOnlyDatabase, match="opened read-only"):
            reader.reset_episode()
        with pytest.raises(ReadOnlyDatabase, match="opened read-only"):
            reader.supersede_memory(5, "Cellar", "Trap door", mem(title="Open door"))
        assert [m.title for m in reader.memories(5)] == ["Trap door"]
        assert reader.get_ephemeral_count() == 0
