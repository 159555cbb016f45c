"""`memstore map ...` and the exits line of `memstore show`, run in-process (made-up maps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memstore.cli as cli
from exporters.map_md import render_map_md
from exporters.written_mark import marked
from memstore.map_json import dump_map_state
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory
from tests.map_helpers import (
    ATTIC,
    BEHIND,
    FOREST_A,
    KITCHEN,
    LIVING,
    NAMES,
    WEIRD,
    WEST,
    map_event,
    record_sample,
)


def one_error(code: int, err: str) -> str:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memstore: error: "), err
    return lines[0]


@pytest.fixture
def db(db_path: Path) -> Path:
    with MemoryStore.open(db_path) as store:
        record_sample(store)
    return db_path


def stored_graph(db: Path) -> object:
    with MemoryStore.open(db, read_only=True) as store:
        return MapStore(store).graph()


# --- map export -----------------------------------------------------------------------------------


def test_map_export_writes_map_md_and_check_compares_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "game" / "Map.md"
    code, stdout, _ = run(capsys, "--db", str(db), "map", "export", "--out", str(out))
    assert code == 0
    assert f"wrote {out}: 9 rooms, 12 connections" in stdout
    assert out.read_text(encoding="utf-8") == marked(render_map_md(stored_graph(db)))  # type: ignore[arg-type]
    code, stdout, _ = run(capsys, "--db", str(db), "map", "export", "--out", str(out), "--check")
    assert code == 0 and f"{out} is up to date (9 rooms, 12 connections)" in stdout


def test_map_export_check_shows_the_diff_and_the_command_that_fixes_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    written = out.read_bytes()
    with MemoryStore.open(db) as store:
        MapStore(store).record([map_event(LIVING, "w", 200)])  # a new room off the map
    code, _, err = run(capsys, "map", "export", "--out", str(out), "--check", "--db", str(db))
    assert code == 1
    assert f"memstore: {out} differs from what the database would export:" in err
    assert '+  r200["room 200"]' in err
    assert f"run `memstore map export --db {db} --out {out}` to refresh it" in err
    assert out.read_bytes() == written  # --check writes nothing


def test_map_export_to_standard_output(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, stdout, err = run(capsys, "--db", str(db), "map", "export", "--out", "-")
    assert code == 0 and stdout == marked(render_map_md(stored_graph(db)))  # type: ignore[arg-type]
    assert f"database: {db}" in err
    code, _, err = run(capsys, "--db", str(db), "map", "export", "--out", "-", "--check")
    assert "--check compares files" in one_error(code, err)


def test_map_export_of_a_database_without_a_map(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path
) -> None:
    MemoryStore.open(db_path).close()
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db_path), "map", "export", "--out", str(out))[0] == 0
    assert out.read_text(encoding="utf-8") == marked("# Map\n\nNo rooms on the map yet.\n")


def test_map_commands_need_a_database(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--db", str(tmp_path / "none.db"), "map", "rooms")
    assert "no database at" in one_error(code, err)
    assert not (tmp_path / "none.db").exists()


# --- map_state.json ------------------------------------------------------------------------------


def test_export_json_then_import_json_round_trips(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    first, second, other = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "other.db"
    code, stdout, _ = run(capsys, "--db", str(db), "map", "export-json", str(first))
    assert code == 0 and f"wrote {first}: 9 rooms, 12 connections" in stdout
    code, stdout, err = run(capsys, "--db", str(other), "map", "import-json", str(first))
    assert code == 0 and err == ""
    assert f"imported {first}: 9 rooms, 12 connections" in stdout
    assert run(capsys, "--db", str(other), "map", "export-json", str(second))[0] == 0
    assert first.read_bytes() == second.read_bytes()
    assert stored_graph(other) == stored_graph(db)


def test_export_json_to_standard_output(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "map", "export-json", "-")
    assert code == 0 and stdout == dump_map_state(stored_graph(db))  # type: ignore[arg-type]


def test_import_json_reports_what_it_leaves_out_and_refuses_bad_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    peer = tmp_path / "map_state.json"
    data = {
        "rooms": {"15": {"id": 15, "name": "West of House", "exits": ["north"], "seen": 1}},
        "connections": {"15": {"north": 180}},
        "map_notes": "hello",
    }
    peer.write_text(json.dumps(data), encoding="utf-8")
    db = tmp_path / "peer.db"
    code, stdout, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert code == 0 and "imported" in stdout
    warnings = err.strip().splitlines()
    assert f'memstore: warning: {peer}: unknown key "map_notes", left out' in warnings
    assert f'memstore: warning: {peer}: unknown key "seen" in rooms, left out' in warnings
    data["connection_verifications"] = {"15_north": "many"}
    peer.write_text(json.dumps(data), encoding="utf-8")
    before = stored_graph(db)
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer), "--replace")
    line = one_error(code, err)
    assert f'{peer}: connection_verifications["15_north"] must be a whole number' in line
    assert line.endswith("nothing was imported")
    assert stored_graph(db) == before


def test_import_json_refuses_to_overwrite_a_map_without_replace(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    peer = tmp_path / "map_state.json"
    peer.write_text('{"rooms": {"1": {"id": 1, "name": "Somewhere"}}}', encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer))
    assert "already has a map (9 rooms, 12 connections)" in one_error(code, err)
    code, stdout, _ = run(capsys, "--db", str(db), "map", "import-json", str(peer), "--replace")
    assert code == 0
    assert "1 room, 0 connections (replaced a map of 9 rooms, 12 connections)" in stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff\xfe{", "is not UTF-8 text"), (b"{", "not JSON"), (b"[]", "must be an object")],
)
def test_import_json_of_an_unreadable_file_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, message: str
) -> None:
    peer = tmp_path / "map_state.json"
    peer.write_bytes(content)
    code, _, err = run(capsys, "--db", str(tmp_path / "x.db"), "map", "import-json", str(peer))
    assert message in one_error(code, err)
    code, _, err = run(capsys, "--db", str(tmp_path / "x.db"), "map", "import-json", "missing")
    assert "cannot read missing" in one_error(code, err)


# --- map route, map rooms -------------------------------------------------------------------------


def test_route_by_numbers_prints_actions_and_rooms(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", str(WEIRD), str(ATTIC))
    assert code == 0
    assert stdout.splitlines()[1:] == [
        f"route from {NAMES[WEIRD]} (99) to Attic (187): 3 actions",
        "1. out → Living Room (75)",
        "2. east → Kitchen (27)",
        "3. up → Attic (187)",
        "actions: out, east, up",
    ]


def test_route_by_names_ignores_case_and_spacing(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "living  ROOM", "attic")
    assert code == 0
    assert "route from Living Room (75) to Attic (187): 2 actions" in stdout
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "Kitchen", NAMES[WEIRD])
    assert code == 0 and "actions: west, climb ladder" in stdout


def test_route_takes_only_confident_exits(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    # the only way into the Kitchen is the window, which failed as often as it worked
    code, _, err = run(capsys, "--db", str(db), "map", "route", str(WEST), str(KITCHEN))
    line = one_error(code, err)
    assert "no route from West of House (64) to Kitchen (27)" in line
    assert "confidence above 0.5" in line
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", str(KITCHEN), "living room")
    assert code == 0 and "actions: west" in stdout


def test_a_name_several_rooms_share_is_an_error_listing_their_numbers(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, _, err = run(capsys, "--db", str(db), "map", "route", "forest", str(WEST))
    line = one_error(code, err)
    assert "'forest' matches 2 rooms on the map: 87, 88; give the number" in line
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", str(FOREST_A), "88")
    assert code == 0 and "actions: east" in stdout


def test_unknown_rooms_are_errors_with_the_closest_names(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, _, err = run(capsys, "--db", str(db), "map", "route", "Kitchn", str(WEST))
    assert "no room called 'Kitchn' on the map; closest: 'Kitchen'" in one_error(code, err)
    code, _, err = run(capsys, "--db", str(db), "map", "route", "5", str(WEST))
    assert "room 5 is not on the map" in one_error(code, err)


def test_a_route_to_where_you_are_needs_no_action(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "map", "route", "Attic", "#187")
    assert code == 0 and "already there, no action needed" in stdout


def test_rooms_lists_every_room_by_number(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, stdout, _ = run(capsys, "map", "rooms", "--db", str(db))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[1] == "9 rooms, 12 connections:"
    assert lines[2] == " 27  Kitchen: 2 exits (2 routed); 10 untried"
    assert f" {BEHIND}  Behind House: 1 exit (0 routed); pruned: west; 11 untried" in lines
    assert len(lines) == 2 + 9


def test_rooms_of_an_empty_map(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    MemoryStore.open(db_path).close()
    code, stdout, _ = run(capsys, "--db", str(db_path), "map", "rooms")
    assert code == 0 and "no rooms on the map yet" in stdout


def test_map_needs_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["map"])
    assert exited.value.code == 2


# --- show ----------------------------------------------------------------------------------------


def test_show_ends_with_the_exits_line_when_the_map_knows_the_room(
    capsys: pytest.CaptureFixture[str], db: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db) as store:
        store.add_memory(WEST, "West of House", mem("Mailbox here"))
    code, stdout, _ = run(capsys, "--db", str(db), "show", str(WEST))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[1] == "Location 64: West of House"
    assert "Mailbox here" in lines[2]
    assert lines[-1] == (
        "Exits: north → North of House (137); untried: south, east, northeast, northwest, "
        "southeast, southwest, up, down, in, out"
    )


def test_show_names_a_room_only_the_map_knows(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "show", str(BEHIND))
    assert code == 0
    assert stdout.splitlines()[1:] == [
        "Location 85: Behind House",
        "no memories at location 85",
        "Exits: Enter Window → Kitchen (27, 1/2 verified); untried: north, south, east, "
        "northeast, northwest, southeast, southwest, up, down, in, out",
    ]


def test_show_off_the_map_has_no_exits_line(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, stdout, _ = run(capsys, "--db", str(db), "show", "500")
    assert code == 0
    assert stdout.splitlines()[1:] == [
        "Location 500: (not in the database)",
        "no memories at location 500",
    ]


def test_show_respects_the_exits_line_setting(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.memstore]\nmap_exits_line = false\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = run(capsys, "--db", str(db), "show", str(WEST))
    assert code == 0 and "Exits:" not in stdout
