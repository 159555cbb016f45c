"""Review D/C: the exports replace only a file of the kind they write and that loses nothing.

A. ``map export-json`` refuses a peer's newer map_state.json whose rooms and connections
   the database has but whose counts, destinations, failures or pruned exits it lacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.fixtures.walkthrough import rom_or_skip

Capsys = pytest.CaptureFixture[str]


def _peer(verified: int = 1, failures: dict[str, int] | None = None) -> dict[str, Any]:
    """A peer's map_state.json: three rooms, three connections."""
    return {
        "rooms": {
            "180": {"id": 180, "name": "West of House", "exits": ["north"]},
            "181": {"id": 181, "name": "North of House", "exits": ["south", "east"]},
            "182": {"id": 182, "name": "Behind House", "exits": []},
        },
        "connections": {"180": {"north": 181}, "181": {"south": 180, "east": 182}},
        "connection_verifications": {"180_north": verified, "181_south": 1, "181_east": 1},
        "exit_failure_counts": failures or {},
        "pruned_exits": {},
    }


def _empty_db(tmp_path: Path) -> Path:
    db = tmp_path / "empty.db"
    MemoryStore.open(db).close()
    return db


def _imported(capsys: Capsys, tmp_path: Path, data: dict[str, Any]) -> tuple[Path, Path]:
    db, target = tmp_path / "m.db", tmp_path / "map_state.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(target))
    assert code == 0, err
    return db, target


@pytest.mark.parametrize(
    ("newer", "needle"),
    [
        (_peer(verified=17), "1 connection seen more often"),
        (_peer(failures={"180_west": 9, "182_west": 3}), "2 failed exits"),
        ({**_peer(), "pruned_exits": {"182": ["west"]}}, "1 pruned exit"),
        (
            {**_peer(), "connections": {"180": {"north": 182}, "181": {"south": 180, "east": 182}}},
            "1 connection leading elsewhere",
        ),
    ],
    ids=["more-verifications", "failures", "pruned", "other-destination"],
)
def test_export_json_refuses_a_peer_map_newer_than_the_database_with_the_same_keys(
    capsys: Capsys, tmp_path: Path, newer: dict[str, Any], needle: str
) -> None:
    db, target = _imported(capsys, tmp_path, _peer())
    target.write_text(json.dumps(newer), encoding="utf-8")
    before = target.read_bytes()
    code, stdout, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 1 and "wrote" not in stdout
    one_error_line(err, str(target), needle, "--force")
    assert target.read_bytes() == before
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target), "--force")
    assert code == 0, err
    assert target.read_bytes() != before


def test_export_json_still_replaces_its_own_export_and_an_older_map(
    capsys: Capsys, tmp_path: Path
) -> None:
    db, target = _imported(capsys, tmp_path, _peer(verified=5, failures={"180_west": 2}))
    assert run(capsys, "--db", str(db), "map", "export-json", str(target))[0] == 0
    assert run(capsys, "--db", str(db), "map", "export-json", str(target))[0] == 0
    target.write_text(json.dumps(_peer(verified=2, failures={"180_west": 1})), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 0, err
    assert (
        json.loads(target.read_text(encoding="utf-8"))["connection_verifications"]["180_north"] == 5
    )


# --- D. `memstore export` replaces only an empty file or a Memories.md -----------------------


def test_memories_export_refuses_a_peer_map_state_json_unless_forced(
    capsys: Capsys, tmp_path: Path
) -> None:
    db, target = _empty_db(tmp_path), tmp_path / "peer_map_state.json"
    target.write_text(json.dumps(_peer(verified=17)), encoding="utf-8")
    before = target.read_bytes()
    code, stdout, err = run(capsys, "--db", str(db), "export", "--out", str(target))
    assert code == 1 and "wrote" not in stdout
    one_error_line(err, str(target), "is not a Memories.md", "--force")
    assert target.read_bytes() == before
    code, _, err = run(capsys, "--db", str(db), "export", "--out", str(target), "--force")
    assert code == 0, err
    assert target.read_text(encoding="utf-8").startswith("# Location Memories")


@pytest.mark.parametrize("content", ["", "\n  \n", "\ufeff"], ids=["empty", "blank", "bom"])
def test_memories_export_replaces_an_empty_file(
    capsys: Capsys, tmp_path: Path, content: str
) -> None:
    db, target = _empty_db(tmp_path), tmp_path / "Memories.md"
    target.write_text(content, encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "export", "--out", str(target))
    assert code == 0, err
    assert target.read_text(encoding="utf-8").startswith("# Location Memories")


# --- B, C. `map export` replaces only a Map.md memstore wrote (a BOM allowed) ------------------


def _map_db(capsys: Capsys, tmp_path: Path) -> Path:
    return _imported(capsys, tmp_path, _peer())[0]


def _map_export(capsys: Capsys, db: Path, target: Path, *more: str) -> tuple[int, str, str]:
    return run(capsys, "--db", str(db), "map", "export", "--out", str(target), *more)


@pytest.mark.parametrize(
    "notes",
    [
        "# Map\n\nMy own hand-drawn notes of Zork (two weeks of work):\n- troll east of cellar\n",
        "# Map\n\n3 rooms, 2 connections (2 routed), 0 pruned exits.\n\nmy notes, no graph\n",
        "# Map\n",
    ],
    ids=["notes", "summary-line-but-no-graph", "title-only"],
)
def test_map_export_refuses_hand_written_notes_titled_map_unless_forced(
    capsys: Capsys, tmp_path: Path, notes: str
) -> None:
    db = _map_db(capsys, tmp_path)
    target = tmp_path / "Map.md"
    target.write_text(notes, encoding="utf-8")
    code, stdout, err = _map_export(capsys, db, target)
    assert code == 1 and "wrote" not in stdout
    one_error_line(err, str(target), "is not a Map.md memstore wrote", "--force")
    assert target.read_text(encoding="utf-8") == notes
    code, _, err = _map_export(capsys, db, target, "--force")
    assert code == 0, err
    assert "```mermaid" in target.read_text(encoding="utf-8")


def test_map_export_replaces_its_own_older_map_md_an_empty_map_and_crlf(
    capsys: Capsys, tmp_path: Path
) -> None:
    empty_db, target = _empty_db(tmp_path), tmp_path / "Map.md"
    assert _map_export(capsys, empty_db, target)[0] == 0  # "No rooms on the map yet."
    db = _map_db(capsys, tmp_path)
    code, stdout, err = _map_export(capsys, db, target)
    assert code == 0, err
    assert "3 rooms" in stdout
    own = target.read_text(encoding="utf-8")
    target.write_bytes(own.replace("\n", "\r\n").encode("utf-8"))  # saved on Windows
    code, _, err = _map_export(capsys, db, target)
    assert code == 0, err
    assert target.read_text(encoding="utf-8") == own
    # an older memstore's Map.md (no written mark: exporters.written_mark) of another map
    older = own[: own.index("<!-- memstore-written")].replace("3 rooms", "2 rooms")
    target.write_bytes(older.replace("\n", "\r\n").encode("utf-8"))
    code, _, err = _map_export(capsys, db, target)
    assert code == 0, err
    assert target.read_text(encoding="utf-8") == own


def test_map_export_replaces_its_own_map_md_saved_with_a_byte_order_mark(
    capsys: Capsys, tmp_path: Path
) -> None:
    db, target = _map_db(capsys, tmp_path), tmp_path / "Map.md"
    assert _map_export(capsys, db, target)[0] == 0
    exported = target.read_bytes()
    target.write_bytes(b"\xef\xbb\xbf" + exported)
    code, _, err = _map_export(capsys, db, target)
    assert code == 0, err
    assert target.read_bytes() == exported


# --- E. an output under a symbolic link to nothing is refused before anything is played --------


def test_check_writable_refuses_a_folder_under_a_dangling_symlink(tmp_path: Path) -> None:
    from memstore.export_file import check_writable, write_atomically

    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "dir")
    target = tmp_path / "dangling" / "sub" / "Memories.md"
    for attempt in (check_writable, lambda p: write_atomically(p, "x\n")):
        with pytest.raises(NotADirectoryError, match="dangling is a symbolic link to nothing"):
            attempt(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--episodes", "1", "--moves", "5", "--out"],
        ["eval", "--episodes", "1", "--moves", "5", "--seeds", "1", "--no-progress", "--json"],
    ],
    ids=["demo", "eval"],
)
def test_demo_and_eval_refuse_an_output_under_a_dangling_symlink_before_playing(
    capsys: Capsys, tmp_path: Path, argv: list[str]
) -> None:
    (tmp_path / "dangling").symlink_to("/nonexistent/dir")
    out = tmp_path / "dangling" / "sub" / "out.md"
    db = tmp_path / "demo.db"
    code, _, err = run(capsys, "--db", str(db), *argv, str(out))
    assert code == 1
    one_error_line(err, f"{tmp_path / 'dangling'} is a symbolic link to nothing")
    assert not db.exists()  # nothing was played or recorded


# --- F. MapGraph's index by room follows every change to its tables ---------------------------


def test_map_graph_exits_follow_a_same_size_change_to_its_tables() -> None:
    from memstore.map_graph import MOVED, MapEvent, MapGraph

    graph = MapGraph()
    graph.apply(MapEvent(MOVED, 1, "A", "n", "north", "north", 2, "B", 1, 1))
    assert [e.command for e in graph.exits(1).exits] == ["north"]
    moved = graph.connections.pop((1, "north"))
    graph.connections[(3, "north")] = moved._replace(from_id=3)  # same size as before
    graph.rooms[3] = "C"
    assert graph.exits(1).exits == ()
    assert [e.command for e in graph.exits(3).exits] == ["north"]
    graph.connections = {}  # a table replaced whole
    assert graph.exits(3).exits == ()


# --- G. shown_text makes format characters visible and cuts whole clusters ----------------------


def test_shown_text_makes_bidi_controls_visible_and_keeps_joiners() -> None:
    from memstore.map_events import shown_text

    assert shown_text("Kitchen\u202e") == "Kitchen\ufffd"
    assert shown_text("a\u200bb\u2066c") == "a\ufffdb\ufffdc"
    family = "\U0001f468\u200d\U0001f469"
    assert shown_text(family) == family


@pytest.mark.parametrize(
    "tail",
    ["e\u0301", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1fa\U0001f1f8"],
    ids=["combining-mark", "zwj-sequence", "flag"],
)
def test_shown_text_cuts_before_the_whole_cluster(tail: str) -> None:
    from memstore.map_events import ELLIPSIS, SHOWN_MAX, shown_text

    for pad in range(SHOWN_MAX - len(tail) - 2, SHOWN_MAX + 1):
        shown = shown_text("A" * pad + tail + " and more")
        kept = shown.removesuffix(ELLIPSIS)
        assert len(shown) <= SHOWN_MAX
        assert kept.lstrip("A") in ("", tail, tail + " and", tail + " an", tail + " a"), shown


# --- round 3: --notes and the demo's Map.md follow the same rule ------------------------------


@pytest.mark.parametrize(
    "content",
    ["# Location Memories\n\n## Location 1: Room\n", '{"my": "peer data"}\n'],
    ids=["a reviewer's Memories.md", "a JSON file"],
)
def test_export_notes_replaces_only_a_notes_md_unless_forced(
    capsys: Capsys, tmp_path: Path, content: str
) -> None:
    db, target = _empty_db(tmp_path), tmp_path / "target.md"
    target.write_text(content, encoding="utf-8")
    out = tmp_path / "Memories.md"
    code, stdout, err = run(
        capsys, "--db", str(db), "export", "--out", str(out), "--notes", str(target)
    )
    assert code == 1 and "wrote" not in stdout
    one_error_line(err, str(target), "is not a Notes.md", "--force")
    assert target.read_text(encoding="utf-8") == content and not out.exists()
    code, _, err = run(
        capsys, "--db", str(db), "export", "--out", str(out), "--notes", str(target), "--force"
    )
    assert code == 0, err
    assert target.read_text(encoding="utf-8").startswith("# Agent Notes")
    code, _, err = run(  # its own Notes.md is replaced without --force
        capsys, "--db", str(db), "export", "--out", str(out), "--notes", str(target)
    )
    assert code == 0, err


@pytest.mark.slow
def test_demo_refuses_a_map_md_it_did_not_write_before_playing(
    capsys: Capsys, tmp_path: Path
) -> None:
    rom_or_skip()  # the demo plays the game
    out_folder = tmp_path / "out"
    out_folder.mkdir()
    notes = out_folder / "Map.md"
    notes.write_text("# Map\n\nMy own hand-drawn notes of Zork.\n", encoding="utf-8")
    db = tmp_path / "demo.db"
    argv = ["--db", str(db), "demo", "--episodes", "1", "--moves", "5", "--no-progress"]
    code, _, err = run(capsys, *argv, "--out", str(out_folder / "Memories.md"))
    assert code == 1
    one_error_line(err, str(notes), "is not a Map.md", "--force")
    assert notes.read_text(encoding="utf-8").startswith("# Map\n\nMy own")
    assert not db.exists()  # refused before anything was played or recorded
    code, _, err = run(capsys, *argv, "--out", str(out_folder / "Memories.md"), "--force")
    assert code == 0, err
    assert "rooms" in notes.read_text(encoding="utf-8")


def test_export_json_replaces_its_own_export_after_an_exit_changed_destination(
    capsys: Capsys, tmp_path: Path
) -> None:
    """Round 3: an exit that later led elsewhere (the map follows the latest destination,
    its count starting again) made the database's own earlier export look like a peer's
    newer map. A connection the file last saw before the database did holds nothing new."""
    from memstore.map_graph import MapEvent
    from memstore.map_store import MapStore

    db, target = tmp_path / "own.db", tmp_path / "map_state.json"

    def north(to_id: int, episode: int, turn: int) -> MapEvent:
        return MapEvent(
            "moved", 10, "Hall", "north", "north", "north", to_id, f"R{to_id}", episode, turn
        )

    with MemoryStore.open(db) as store:
        MapStore(store).record([north(20, 1, 1), north(20, 1, 5)])
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 0, err
    with MemoryStore.open(db) as store:
        MapStore(store).record([north(30, 2, 1)])
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 0, err
    assert json.loads(target.read_text(encoding="utf-8"))["connections"]["10"]["north"] == 30


def test_export_json_and_import_json_accept_a_map_state_json_with_a_bom(
    capsys: Capsys, tmp_path: Path
) -> None:
    db, target = _map_db(capsys, tmp_path), tmp_path / "bom.json"
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 0, err
    target.write_text("\ufeff" + target.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(target))
    assert code == 0, err
    target.write_text("\ufeff" + target.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = run(
        capsys, "--db", str(tmp_path / "fresh.db"), "map", "import-json", str(target)
    )
    assert code == 0, err
