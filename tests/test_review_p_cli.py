"""Review P1: a new user of the command line, attacking it.

3. (HIGH) The import took a visit count of 2**63-1; the agent's next visit made SQLite
   store a float, and from then on no command could export, import or show the database.
4. map export-json wrote a count import-json refuses (2**31-1, then one more traversal).
2. ``demo --out .`` was an internal error with a Python repr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.cli import main
from memstore.map_graph import COUNT_MAX
from memstore.map_json import dump_map_state, import_map_state, parse_map_state
from memstore.map_store import MapStore
from memstore.models import INT64_MAX
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory
from tests.map_helpers import NORTH, WEST, map_event


def test_a_visit_past_the_largest_count_stays_at_it_and_the_database_stays_readable(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(2, "Temple", mem("Altar"))
    store.record_visit(2, "Temple", 1)
    text = render_memories_md(*store.export_snapshot())
    assert "**Visits:** 1 " in text
    imported = import_memories(
        store, text.replace("**Visits:** 1 ", f"**Visits:** {INT64_MAX} "), apply=True
    )
    assert imported.applied, imported.plan.summary()
    store.record_visit(2, "Temple", 1)  # past it: SQLite stored a REAL, PostgreSQL refused
    store.record_visit(2, "Temple of Doom", 1)  # (a visit under another name)
    entries, _base = store.export_snapshot()
    [entry] = [e for e in entries if e.location.id == 2]
    assert entry.location.visit_count == INT64_MAX
    assert "Temple of Doom" in render_memories_md(*store.export_snapshot())


def test_an_exit_taken_past_the_largest_count_exports_a_file_that_imports(
    store: MemoryStore,
) -> None:
    maps = MapStore(store)
    maps.record([map_event(WEST, "n", NORTH)])
    state = json.loads(dump_map_state(maps.graph()))
    state["connection_verifications"][f"{WEST}_north"] = COUNT_MAX
    import_map_state(maps, parse_map_state(json.dumps(state)), replace=True)
    maps.record([map_event(WEST, "n", NORTH, 2), map_event(WEST, "w", WEST, 3)])
    exported = dump_map_state(maps.graph())
    assert json.loads(exported)["connection_verifications"][f"{WEST}_north"] == COUNT_MAX
    import_map_state(maps, parse_map_state(exported), replace=True)  # refused past it


@pytest.mark.parametrize("out", [".", "./", "/"])
def test_demo_out_a_folder_is_a_one_line_usage_error(
    out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--db", str(tmp_path / "d.db"), "demo", "--episodes", "1", "--out", out])
    assert code == 1  # as `export --out .`
    err = capsys.readouterr().err
    assert "names a folder" in err and "internal error" not in err and "PosixPath" not in err
    assert not (tmp_path / "d.db").exists()


def test_a_database_path_that_is_not_utf8_opens(tmp_path: Path) -> None:
    # 7: SQLite's list of databases (its file column, the path) could not be decoded: every
    # command but `db` was an internal error
    import os

    db = tmp_path / os.fsdecode(b"dir\xff") / "x.db"
    db.parent.mkdir()
    with MemoryStore.open(db) as store:
        store.record_visit(64, "West of House", 1)
    assert main(["--db", str(db), "stats"]) == 0
    assert main(["--db", str(db), "show", "64"]) == 0
    assert main(["--db", str(db), "export", "--out", str(tmp_path / "M.md")]) == 0
