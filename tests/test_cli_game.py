"""`memstore demo`, `memstore metrics`, and the flagged-memory options of export and show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memstore import cli
from memstore.flagged import FlaggedMemories
from memstore.store import MemoryStore
from tests.fixtures.walkthrough import rom_or_skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_demo_plays_offline_says_so_and_exports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rom = rom_or_skip()
    monkeypatch.delenv("MEMSTORE_MODEL", raising=False)
    db, out = tmp_path / "demo.db", tmp_path / "Memories.md"
    code, stdout, err = run(
        capsys,
        "--db",
        str(db),
        "demo",
        "--episodes",
        "2",
        "--moves",
        "30",
        "--rom",
        str(rom),
        "--out",
        str(out),
        "--no-progress",
    )
    assert code == 0, err
    assert "OFFLINE RECORDER" in stdout
    assert "played 2 episode(s) [1, 2], 60 turns" in stdout
    assert "coverage, episode 2:" in stdout
    assert out.read_text(encoding="utf-8").startswith("# Location Memories\n")
    demo_coverage = coverage_lines(stdout)
    code, stdout, err = run(capsys, "--db", str(db), "metrics")
    assert code == 0, err
    assert "turns: 60 in episodes [1, 2]" in stdout
    assert "repeated failed action rate:" in stdout and "within an episode:" in stdout
    first_metrics = stdout
    # the demo and the metrics count coverage alike
    assert coverage_lines(stdout) == demo_coverage and len(demo_coverage) == 2
    # the memory given to the agent is counted without the demo passing it in
    tokens = re.search(r"memory tokens given per turn: median (\d+), p95 (\d+)", stdout)
    assert tokens is not None and int(tokens.group(2)) > 0
    # a later run on the same database changes nothing about the first run's metrics
    (run_id,) = re.findall(r"^run: (\w+)$", first_metrics, re.MULTILINE)
    code, _stdout, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "60",
        "--rom", str(rom), "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    code, stdout, err = run(capsys, "--db", str(db), "metrics", "--run", run_id)
    assert code == 0, err
    assert stdout == first_metrics


def coverage_lines(report: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith("coverage, episode")]


def test_demo_with_a_missing_story_file_explains_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _out, err = run(
        capsys, "--db", str(tmp_path / "d.db"), "demo", "--rom", str(tmp_path / "nowhere.z3")
    )
    assert code == 1
    assert "memstore rom fetch" in err and "Traceback" not in err


def test_metrics_on_a_database_without_turns_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "empty.db"
    MemoryStore.open(db).close()
    code, _out, err = run(capsys, "--db", str(db), "metrics")
    assert code == 1 and "no turns recorded" in err


def test_export_notes_and_show_flagged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    with MemoryStore.open(db) as store:
        flagged = FlaggedMemories(store)
        assert flagged.add_flagged_memory("Lamp is in the living room", 900, 12, 5, "Living Room")
        assert flagged.add_flagged_memory(
            "Troll blocks the east passage", 700, 40, 152, "Troll Room"
        )
    notes = tmp_path / "Notes.md"
    code, _out, err = run(
        capsys,
        "--db",
        str(db),
        "export",
        "--out",
        str(tmp_path / "Memories.md"),
        "--notes",
        str(notes),
    )
    assert code == 0, err
    text = notes.read_text(encoding="utf-8")
    assert text.index("Lamp is in the living room") < text.index("Troll blocks")
    code, _out, _err = run(
        capsys,
        "--db",
        str(db),
        "export",
        "--out",
        str(tmp_path / "Memories.md"),
        "--notes",
        str(notes),
        "--check",
    )
    assert code == 0
    notes.write_text("stale\n", encoding="utf-8")
    code, _out, err = run(
        capsys,
        "--db",
        str(db),
        "export",
        "--out",
        str(tmp_path / "Memories.md"),
        "--notes",
        str(notes),
        "--check",
    )
    assert code == 1 and "Notes.md" in err
    code, out, _err = run(capsys, "--db", str(db), "show", "--flagged", "1")
    assert code == 0
    assert "Lamp is in the living room" in out and "Troll" not in out
