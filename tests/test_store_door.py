"""Public write methods check their arguments at the door; rebuild_from_log is one
transaction that names the log row it could not apply."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.errors import RebuildFailed
from memstore.manager import rebuild_from_log
from memstore.store import MemoryStore
from tests.conftest import MakeMemory


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"episode": 0}, "episode"),
        ({"episode": -3}, "episode"),
        ({"episode": True}, "episode"),
        ({"turn": -1}, "turn"),
        ({"turn": 2**63}, "turn"),
        ({"episode": 2**63}, "episode"),
        ({"location_name": None}, "location_name"),
    ],
)
def test_apply_synthesis_refuses_bad_clock_values_and_writes_nothing(
    store: MemoryStore, mem: MakeMemory, fields: dict, message: str
) -> None:
    arguments = {"location_name": "Kitchen", "episode": 1, "turn": 3}
    arguments.update(fields)
    name = arguments.pop("location_name")
    with pytest.raises((ValueError, TypeError), match=message):
        store.apply_synthesis(79, name, new_memory=mem("Sack"), **arguments)  # type: ignore[arg-type]
    assert store.get_persistent_count() == 0 and store.decision_log() == []
    render_memories_md(*store.export_snapshot())  # every later export still works


def test_apply_synthesis_refuses_a_new_memory_that_is_already_superseded(
    store: MemoryStore, mem: MakeMemory
) -> None:
    with pytest.raises(ValueError, match="SUPERSEDED"):
        store.apply_synthesis(
            79, "Kitchen", new_memory=mem("Sack", status="SUPERSEDED"), episode=1, turn=3
        )
    assert store.get_persistent_count() == 0


def _source(tmp_path: Path, mem: MakeMemory) -> MemoryStore:
    source = MemoryStore.open(tmp_path / "source.db")
    for n in range(3):
        source.apply_synthesis(
            79,
            "Kitchen",
            new_memory=mem(f"Fact {n}", turns=str(n + 1)),
            episode=1,
            turn=n + 1,
            log={"triggers": "first_visit", "mode": "offline"},
        )
    return source


def test_rebuild_from_log_replays_everything(tmp_path: Path, mem: MakeMemory) -> None:
    with _source(tmp_path, mem) as source, MemoryStore.open(tmp_path / "t.db") as target:
        assert rebuild_from_log(source, target) == 3
        assert [m.title for m in target.memories(79)] == ["Fact 0", "Fact 1", "Fact 2"]


def test_rebuild_from_log_is_all_or_nothing_and_names_the_row(
    tmp_path: Path, mem: MakeMemory
) -> None:
    source = _source(tmp_path, mem)
    source.close()
    with sqlite3.connect(tmp_path / "source.db") as conn:  # a damaged third row
        (row_id, applied) = conn.execute(
            "SELECT id, applied FROM synthesis_decisions ORDER BY id LIMIT 1 OFFSET 2"
        ).fetchone()
        broken = json.loads(applied)
        broken["episode"] = 0
        conn.execute(
            "UPDATE synthesis_decisions SET applied = ? WHERE id = ?", (json.dumps(broken), row_id)
        )
    with (
        MemoryStore.open(tmp_path / "source.db") as source,
        MemoryStore.open(tmp_path / "target.db") as target,
    ):
        with pytest.raises(RebuildFailed, match=f"decision-log row {row_id}") as caught:
            rebuild_from_log(source, target)
        assert "nothing was written" in str(caught.value)
        assert target.get_persistent_count() == 0 and target.decision_log() == []


def test_supersede_memory_says_why_it_did_nothing(store: MemoryStore, mem: MakeMemory) -> None:
    from memstore import SupersedeOutcome

    store.add_memory(79, "Kitchen", mem("Table"))
    store.add_memory(79, "Kitchen", mem("Sack", turns="6"))
    missing = store.supersede_memory(79, "Kitchen", "Chair", mem("Chair moved"))
    forbidden = store.supersede_memory(79, "Kitchen", "Table", mem("T", persistence="ephemeral"))
    duplicate = store.supersede_memory(79, "Kitchen", "Table", mem("Sack", turns="7"))
    done = store.supersede_memory(79, "Kitchen", "Table", mem("Table moved", turns="8"))
    assert (missing, forbidden, duplicate, done) == (
        SupersedeOutcome.NOT_FOUND,
        SupersedeOutcome.FORBIDDEN_TRANSITION,
        SupersedeOutcome.DUPLICATE_TITLE,
        SupersedeOutcome.SUPERSEDED,
    )
    assert [bool(o) for o in (missing, forbidden, duplicate, done)] == [False, False, False, True]
    assert [m.title for m in store.memories(79)] == ["Sack", "Table moved"]


@pytest.mark.parametrize(
    ("column", "value"),
    [("episode", "abc"), ("turn_start", 1.5), ("score_change", "x"), ("category", "LORE")],
)
def test_a_damaged_row_is_one_error_that_points_at_memstore_check(
    tmp_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str], column: str, value: object
) -> None:
    import memstore.cli as cli

    db = tmp_path / "damaged.db"
    with MemoryStore.open(db) as store:
        store.add_memory(79, "Kitchen", mem("Sack"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(f"UPDATE memories SET {column} = ?", (value,))
    for argv in (
        ["export", "--out", str(tmp_path / "M.md")],
        ["history", "79", "Sack"],
    ):
        assert cli.main(["--db", str(db), *argv]) == 1
        _out, err = capsys.readouterr()
        assert err.startswith("memstore: error: a stored memory cannot be read"), err
        assert "memstore check" in err and err.count("\n") == 1
    assert cli.main(["--db", str(db), "check"]) == 1  # and check names it
    assert column in capsys.readouterr().out
