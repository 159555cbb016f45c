"""`memstore demo`, `memstore metrics`, and the flagged-memory options of export and show."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from memstore.flagged import FlaggedMemories
from memstore.store import Bookkeeping, MemoryStore, decision_row
from tests.cli_helpers import run
from tests.fixtures.walkthrough import rom_or_skip


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
    # both runs are listed, the first with its two episodes, the second with the third
    code, stdout, err = run(capsys, "--db", str(db), "metrics", "--runs")
    assert code == 0, err
    rows = [line.split() for line in stdout.splitlines()[2:4]]
    assert [rows[0][0], *rows[0][3:]] == [run_id, "1-2", "60", "offline"]
    assert rows[1][3:] == ["3", "60", "offline"] and rows[1][0] != run_id


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


# --- usage errors, metrics --runs --------------------------------------------------------------


def test_the_moves_ceiling_is_the_walkthroughs_length() -> None:
    from memstore.cli_game import WALKTHROUGH_MOVES
    from memstore.game import zork1_walkthrough

    assert WALKTHROUGH_MOVES == len(zork1_walkthrough())


def turn(run_id: str, episode: int, number: int, when: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "episode": episode,
        "turn": number,
        "location_id": 15,
        "action": "look",
        "score_before": 0,
        "score_after": 0,
        "location_after": 15,
        "state_changed": 0,
        "died": 0,
        "triggers": "",
        "memory_tokens": 0,
        "overhead_us": 10.0,
        "created_at": when,
    }


def decision(episode: int, mode: str, model: str | None) -> dict[str, Any]:
    return decision_row(
        {"mode": mode, "model": model, "triggers": "new_location"},
        episode=episode,
        turn=1,
        location_id=15,
        location_name="West of House",
    )


def two_runs() -> Bookkeeping:
    """Run aaa (offline, episodes 1-2, 3 turns), then run bbb (an LLM, episode 3, 2 turns)."""
    return Bookkeeping(
        turns=[
            turn("aaa", 1, 1, "2026-11-20T09:15:02.000001+00:00"),
            turn("aaa", 1, 2, "2026-11-20T09:15:03.000001+00:00"),
            turn("aaa", 2, 1, "2026-11-20T09:16:00.000001+00:00"),
            turn("bbb", 3, 1, "2026-11-21T18:00:59.500000+00:00"),
            turn("bbb", 3, 2, "2026-11-21T18:01:00.000000+00:00"),
        ],
        decisions=[
            decision(1, "offline", "offline"),
            decision(2, "offline", "offline"),
            decision(3, "llm", "gpt-4o-mini"),
        ],
    )


def test_summarize_runs_counts_episodes_turns_and_mode() -> None:
    from memstore.metrics import RunSummary, summarize_runs

    bookkeeping = two_runs()
    summaries = summarize_runs(bookkeeping.turns, bookkeeping.decisions)
    assert summaries == [
        RunSummary("aaa", "2026-11-20T09:15:02.000001+00:00", (1, 2), 3, "offline"),
        RunSummary("bbb", "2026-11-21T18:00:59.500000+00:00", (3,), 2, "llm (gpt-4o-mini)"),
    ]
    # a run whose episodes logged no decision, or decisions of two kinds
    mixed = [*bookkeeping.decisions, decision(3, "offline", "offline")]
    assert summarize_runs(bookkeeping.turns, mixed)[1].mode == "mixed"
    assert summarize_runs(bookkeeping.turns, [])[0].mode == "unknown"


def test_metrics_runs_lists_every_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with MemoryStore.open(db) as store:
        store.write_bookkeeping(two_runs())
    code, out, err = run(capsys, "--db", str(db), "metrics", "--runs")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"database: {db}"
    assert lines[1].split() == ["run", "started", "(UTC)", "episodes", "turns", "mode"]
    assert lines[2].split() == ["aaa", "2026-11-20", "09:15:02", "1-2", "3", "offline"]
    assert lines[3].split() == ["bbb", "2026-11-21", "18:00:59", "3", "2", "llm", "(gpt-4o-mini)"]
    assert lines[4] == "2 runs; `memstore metrics` shows the last, `--run ID` another"
    code, out, err = run(capsys, "--db", str(db), "metrics", "--run", "aaa")
    assert code == 0 and "turns: 3 in episodes [1, 2]" in out


def test_metrics_runs_on_a_database_without_turns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "empty.db"
    MemoryStore.open(db).close()
    code, _out, err = run(capsys, "--db", str(db), "metrics", "--runs")
    assert code == 1 and "no turns recorded" in err
