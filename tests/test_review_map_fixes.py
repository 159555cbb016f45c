"""Review of `memstore map` on the command line: the exports replace only what they wrote,
and names and actions reach Map.md and the terminal one line, bounded, with no control
character; hostile map_state.json files are refused naming their key, never an internal
error."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import pytest

from memstore.map_events import ACTION_KEY_MAX, ELLIPSIS, SHOWN_MAX
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.map_helpers import LIVING, map_event, record_sample

Capsys = pytest.CaptureFixture[str]

#: the map of a peer: what `map_state.json` holds when it was never imported here
PEER_MAP = {
    "rooms": {"15": {"id": 15, "name": "West of House"}, "180": {"id": 180, "name": "North"}},
    "connections": {"15": {"north": 180}, "180": {"south": 15}},
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memories.db"
    with MemoryStore.open(path) as store:
        record_sample(store)
    return path


def _import(capsys: Capsys, db: Path, data: Mapping[str, object], tmp_path: Path) -> None:
    peer = tmp_path / "in.json"
    peer.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer), "--replace")
    assert code == 0, err


def _export_argv(command: str, target: Path) -> list[str]:
    return (
        ["map", "export", "--out", str(target)]
        if command == "export"
        else [
            "map",
            "export-json",
            str(target),
        ]
    )


def _other_database(tmp_path: Path) -> Path:
    other = tmp_path / "other.db"
    with MemoryStore.open(other) as store:
        record_sample(store)
    return other


# --- 1. the map exports never write over a file they did not write -----------------------------


@pytest.mark.parametrize("command", ["export", "export-json"])
@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (_other_database, "is a SQLite database"),
        (lambda tmp: tmp / "README.md", "README.md"),
        (lambda tmp: tmp / "peer.json", "peer.json"),
    ],
    ids=["another-memstore-database", "a-text-file", "a-peer-map-never-imported"],
)
def test_map_exports_refuse_a_file_they_did_not_write_unless_forced(
    capsys: Capsys, db: Path, tmp_path: Path, command: str, make: object, needle: str
) -> None:
    target = make(tmp_path)  # type: ignore[operator]
    if target.name == "README.md":
        target.write_text("# memstore\n\nHow to use it.\n", encoding="utf-8")
    elif target.suffix == ".json":
        target.write_text(json.dumps(PEER_MAP, indent=2), encoding="utf-8")
    before = target.read_bytes()
    code, stdout, err = run(capsys, "--db", str(db), *_export_argv(command, target))
    assert code == 1 and "wrote" not in stdout
    line = one_error_line(err, needle, "--force")
    assert "internal error" not in line
    assert target.read_bytes() == before  # untouched
    code, stdout, err = run(capsys, "--db", str(db), *_export_argv(command, target), "--force")
    assert code == 0, err
    assert f"wrote {target}: 9 rooms, 12 connections" in stdout
    assert target.read_bytes() != before


def test_a_refused_database_stays_a_working_database(
    capsys: Capsys, db: Path, tmp_path: Path
) -> None:
    victim = _other_database(tmp_path)
    for argv in (_export_argv("export", victim), _export_argv("export-json", victim)):
        code, _, err = run(capsys, "--db", str(db), *argv)
        one_error_line(err, f"{victim} is a SQLite database", "--force")
        assert code == 1
    code, stdout, _ = run(capsys, "--db", str(victim), "map", "rooms")
    assert code == 0 and "9 rooms, 12 connections:" in stdout


@pytest.mark.parametrize("command", ["export", "export-json"])
def test_map_exports_replace_their_own_file_and_an_empty_one(
    capsys: Capsys, db: Path, tmp_path: Path, command: str
) -> None:
    target = tmp_path / ("Map.md" if command == "export" else "map_state.json")
    target.write_bytes(b"")  # an empty file: nothing to lose
    assert run(capsys, "--db", str(db), *_export_argv(command, target))[0] == 0
    first = target.read_bytes()
    with MemoryStore.open(db) as store:  # the map grows: a new room
        MapStore(store).record([map_event(LIVING, "w", 200)])
    code, stdout, err = run(capsys, "--db", str(db), *_export_argv(command, target))
    assert code == 0, err
    assert "10 rooms, 13 connections" in stdout
    assert target.read_bytes() != first


def test_export_json_replaces_a_peer_map_this_database_has_imported(
    capsys: Capsys, tmp_path: Path
) -> None:
    db, peer = tmp_path / "m.db", tmp_path / "map_state.json"
    peer.write_text(json.dumps(PEER_MAP), encoding="utf-8")
    assert run(capsys, "--db", str(db), "map", "import-json", str(peer))[0] == 0
    code, stdout, err = run(capsys, "--db", str(db), "map", "export-json", str(peer))
    assert code == 0, err
    assert json.loads(peer.read_text(encoding="utf-8"))["connections"] == {
        "15": {"north": 180},
        "180": {"south": 15},
    }


def test_export_json_names_what_a_peer_map_would_lose(
    capsys: Capsys, db: Path, tmp_path: Path
) -> None:
    peer = tmp_path / "map_state.json"
    peer.write_text(json.dumps(PEER_MAP), encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "export-json", str(peer))
    assert code == 1
    one_error_line(err, "2 rooms and 2 connections", "does not have", "--force")


def test_map_export_check_still_compares_any_file(capsys: Capsys, db: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# memstore\n", encoding="utf-8")
    code, _, err = run(capsys, "--db", str(db), "map", "export", "--out", str(readme), "--check")
    assert code == 1 and "differs from what the database would export" in err
    assert readme.read_text(encoding="utf-8") == "# memstore\n"


# --- 2. long names and actions are bounded in what the map stores and shows ---------------------

LONG_ACTION = "climb " + "very " * 20_000 + "tall tree"
LONG_NAME = "Up a Tree " + "very " * 50_000


def _longest_line(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_a_long_action_and_name_are_bounded_in_map_md_and_the_text_output(
    capsys: Capsys, tmp_path: Path
) -> None:
    db = tmp_path / "long.db"
    data = {
        "rooms": {"1": {"name": "Forest Path"}, "2": {"name": LONG_NAME}},
        "connections": {"1": {LONG_ACTION: 2}, "2": {"down": 1}},
    }
    _import(capsys, db, data, tmp_path)
    with MemoryStore.open(db, read_only=True) as store:
        graph = MapStore(store).graph()
    (connection,) = [c for c in graph.connections.values() if c.from_id == 1]
    assert len(connection.action) <= ACTION_KEY_MAX
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    text = out.read_text(encoding="utf-8")
    assert _longest_line(text) < 2 * SHOWN_MAX + 100  # the label line: name and number
    assert f"very very{ELLIPSIS}" in text
    for argv in (["map", "rooms"], ["map", "route", "1", "2"], ["map", "route", "2", "1"]):
        code, stdout, err = run(capsys, "--db", str(db), *argv)
        assert code == 0, err
        assert _longest_line(stdout) < 4 * SHOWN_MAX, argv
        assert ELLIPSIS in stdout


def test_a_route_refusal_naming_a_long_room_is_one_short_line(
    capsys: Capsys, tmp_path: Path
) -> None:
    db = tmp_path / "long.db"
    data = {"rooms": {"1": {"name": LONG_NAME}, "2": {"name": "Clearing"}}, "connections": {}}
    _import(capsys, db, data, tmp_path)
    code, _, err = run(capsys, "--db", str(db), "map", "route", "1", "2")
    assert code == 1
    assert len(one_error_line(err, "no route from", ELLIPSIS)) < 3 * SHOWN_MAX + 100
    code, _, err = run(capsys, "--db", str(db), "map", "route", "Up a Tree", "2")
    assert len(one_error_line(err, "no room called")) < 3 * SHOWN_MAX + 100


# --- 3. hostile map_state.json files: a refusal naming the key, never an internal error --------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (json.dumps({"rooms": {"1" * 5000: {"name": "x"}}}), "is not a location number"),
        (
            '{"rooms": {"1": {"name": "a"}, "2": {"name": "b"}}, '
            '"connections": {"1": {"\\u0000": 2}}}',
            'connections["1"]["\\u0000"] holds a NUL character',
        ),
        ('{"rooms": {"1": {"name": "Cellar\\u0000"}}}', 'rooms["1"]["name"] holds a NUL'),
        ('{"rooms": {"1": {"name": "a\\ud800"}}}', 'rooms["1"]["name"] is not valid Unicode'),
        (
            '{"rooms": {"1": {"name": "a"}, "2": {"name": "b"}}, '
            '"connections": {"1": {"jump\\udc00": 2}}}',
            'connections["1"]["jump\\udc00"] is not valid Unicode',
        ),
    ],
    ids=["room-key-of-5000-digits", "nul-exit", "nul-name", "surrogate-name", "surrogate-exit"],
)
def test_import_json_refuses_a_hostile_file_naming_the_key(
    capsys: Capsys, db: Path, tmp_path: Path, text: str, needle: str
) -> None:
    peer = tmp_path / "hostile.json"
    peer.write_text(text, encoding="utf-8")
    before = db.read_bytes()
    code, _, err = run(capsys, "--db", str(db), "map", "import-json", str(peer), "--replace")
    assert code == 1
    line = one_error_line(err, needle, "nothing was imported")
    assert "internal error" not in line and len(line) < 400
    assert db.read_bytes() == before


# --- 5. control characters never reach Map.md or the terminal -----------------------------------

CONTROL = "Red\x1b[2J\x1b[31m Room\x07\x7f\x9b"


def _no_control_characters(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]
    assert not bad, bad


def test_control_characters_in_names_and_actions_are_made_visible(
    capsys: Capsys, tmp_path: Path
) -> None:
    db = tmp_path / "ctrl.db"
    data = {
        "rooms": {"1": {"name": "Cellar\x01"}, "2": {"name": CONTROL}},
        "connections": {"1": {"jump\x1b[2J": 2}, "2": {"south": 1}},
    }
    _import(capsys, db, data, tmp_path)
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    text = out.read_text(encoding="utf-8")
    _no_control_characters(text)
    assert "Red␛#91;2J␛#91;31m Room␇␡\ufffd (2)" in text  # Mermaid, its entities
    assert "jump␛" in text
    for argv in (["map", "rooms"], ["map", "route", "1", "2"], ["map", "route", "2", "1"]):
        code, stdout, err = run(capsys, "--db", str(db), *argv)
        assert code == 0, err
        _no_control_characters(stdout + err)
        assert "␛" in stdout
    code, stdout, err = run(capsys, "--db", str(db), "show", "1")
    assert code == 0, err
    _no_control_characters(stdout)
    assert "Cellar␁" in stdout


def test_a_nul_in_a_name_stored_by_an_older_version_is_shown_not_written(
    capsys: Capsys, db: Path, tmp_path: Path
) -> None:
    with sqlite3.connect(db) as conn:  # what an older memstore let in on SQLite
        conn.execute("UPDATE map_rooms SET name = 'Cellar' || char(0) WHERE id = ?", (LIVING,))
    conn.close()
    out = tmp_path / "Map.md"
    assert run(capsys, "--db", str(db), "map", "export", "--out", str(out))[0] == 0
    data = out.read_bytes()
    assert b"\x00" not in data and "Cellar␀".encode() in data
    code, stdout, _ = run(capsys, "--db", str(db), "map", "rooms")
    assert code == 0 and "\x00" not in stdout and f"{LIVING}  Cellar␀:" in stdout
