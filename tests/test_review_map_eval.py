"""Review of `memstore map import-json` and `memstore eval`: huge counts, bad paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memstore.cli as cli


def one_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memstore: error: "), err
    return lines[0]


def _map_file(tmp_path: Path, verifications: int, failures: int = 0) -> Path:
    data = {
        "rooms": {
            "64": {"id": 64, "name": "West of House", "exits": ["north"]},
            "137": {"id": 137, "name": "North of House", "exits": []},
        },
        "connections": {"64": {"north": 137}},
        "connection_verifications": {"64_north": verifications},
        "exit_failure_counts": {"64_west": failures},
    }
    path = tmp_path / "map_state.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("verifications", "failures"), [(2**63 - 1, 0), (1, 2**63 - 1)])
def test_import_json_refuses_a_count_the_next_traversal_would_overflow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verifications: int, failures: int
) -> None:
    # SQLite turns 2**63 - 1 + 1 into a float: export-json then writes a count that
    # import-json refuses, so the map could no longer make the round trip
    path = _map_file(tmp_path, verifications, failures)
    db = str(tmp_path / "m.db")
    line = one_error(capsys, cli.main(["map", "import-json", str(path), "--db", db]))
    assert "must be at most" in line and "nothing was imported" in line


def test_import_json_keeps_a_large_but_safe_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _map_file(tmp_path, 2**31 - 1)
    db = str(tmp_path / "m.db")
    assert cli.main(["map", "import-json", str(path), "--db", db]) == 0
    out = tmp_path / "out.json"
    assert cli.main(["map", "export-json", str(out), "--db", db]) == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert exported["connection_verifications"]["64_north"] == 2**31 - 1


@pytest.mark.parametrize(
    "arguments",
    [
        ["--seeds", str(2**63 - 1)],  # was a MemoryError traceback building the seed list
        ["--episodes", str(2**63 - 1)],  # was a hang listing every episode's database
        ["--moves", str(2**63 - 1)],
    ],
)
def test_eval_refuses_counts_nobody_could_play(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["eval", "--no-progress", *arguments])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "must be at most" in err and "Traceback" not in err


def test_eval_db_that_is_a_file_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "memories.db"
    afile.write_bytes(b"keep me")
    code = cli.main(["eval", "--no-progress", "--db", str(afile)])
    line = one_error(capsys, code)
    assert "is a file" in line and "Errno" not in line
    assert afile.read_bytes() == b"keep me"


@pytest.mark.parametrize("option", ["--json", "--markdown", "--plot"])
def test_eval_checks_its_outputs_before_playing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the report was lost after the whole evaluation had been played
    import memstore.evaluation as evaluation

    def played(**_: object) -> None:
        raise AssertionError("played before checking the outputs")

    monkeypatch.setattr(evaluation, "run_eval", played)
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    code = cli.main(["eval", "--no-progress", option, str(afile / "r.out")])
    assert "afile" in one_error(capsys, code)
    code = cli.main(["eval", "--no-progress", option, str(tmp_path)])
    assert "is a folder" in one_error(capsys, code)


@pytest.mark.parametrize(
    "argv", [["map", "export-json", "{db}"], ["map", "export", "--out", "{db}"]]
)
def test_map_exports_never_write_over_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # `memstore map export-json memories.db --db memories.db` replaced the database with JSON
    path = _map_file(tmp_path, 2)
    db = tmp_path / "m.db"
    assert cli.main(["map", "import-json", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    code = cli.main([part.format(db=db) for part in argv] + ["--db", str(db)])
    assert "database's own file" in one_error(capsys, code)
    assert db.read_bytes() == before
    assert cli.main(["map", "rooms", "--db", str(db)]) == 0
