"""memstore eval on the real game (slow): the committed example report is reproduced, the
command writes its table, JSON and plot, and the LLM agent runs against the fake server."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

import memstore.cli as cli
from memstore.config import MemstoreConfig
from memstore.evaluation import render_markdown, report_json, run_eval
from tests.fake_openai_server import FakeOpenAIServer, FakeReply

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"


def test_the_committed_example_report_is_reproduced(tmp_path: Path) -> None:
    """`memstore eval --agent explorer --episodes 5 --moves 200 --seeds 3` (README)."""
    committed = json.loads((REPORTS / "eval_report.json").read_text(encoding="utf-8"))
    report = run_eval(
        agent="explorer", episodes=5, moves=200, seeds=[1, 2, 3], folder=tmp_path, rom=rom_or_skip()
    )
    timing = committed.pop("timing")
    assert set(timing) == {"seconds", "overhead_us_per_turn"}
    assert report_json(report, timing=False) == committed
    assert render_markdown(report) == (REPORTS / "eval_report.md").read_text(encoding="utf-8")
    assert report.seconds < 300  # "runs offline in minutes"


def test_the_eval_command_writes_its_table_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rom = str(rom_or_skip())
    folder, out = tmp_path / "dbs", tmp_path / "out"
    arguments = ["eval", "--episodes", "2", "--moves", "30", "--seeds", "1", "--rom", rom]
    arguments += ["--db", str(folder), "--no-progress", "--json", str(out / "r.json")]
    arguments += ["--markdown", str(out / "r.md"), "--plot", str(out / "r.png")]
    assert cli.main(arguments) == 0
    printed = capsys.readouterr().out
    assert f"databases: {folder}" in printed and "with memory" in printed
    assert "repeated failed actions with memory, across episodes" in printed
    data = json.loads((out / "r.json").read_text(encoding="utf-8"))
    assert data["episodes"] == 2 and data["seeds"] == [1]
    assert len(data["arms"]["memory"]["episodes"]) == 2
    assert (out / "r.md").read_text(encoding="utf-8").startswith("**agent explorer")
    assert sorted(p.name for p in folder.iterdir()) == [
        "explorer-seed1-memory.db",
        "explorer-seed1-nomemory-ep1.db",
        "explorer-seed1-nomemory-ep2.db",
    ]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "pip install 'memstore[plot]'" in printed
    else:
        assert (out / "r.png").read_bytes().startswith(b"\x89PNG")
    # the same folder again: an evaluation starts from empty databases
    assert cli.main(arguments) == 1
    assert "already exists" in capsys.readouterr().err


def test_without_matplotlib_the_command_still_prints_the_table_and_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    arguments = ["eval", "--episodes", "1", "--moves", "5", "--seeds", "1", "--no-progress"]
    arguments += ["--rom", str(rom_or_skip()), "--plot", str(tmp_path / "p.png")]
    assert cli.main(arguments) == 0
    printed = capsys.readouterr().out
    assert "without memory" in printed
    assert "the plot needs matplotlib: pip install 'memstore[plot]'" in printed
    assert not (tmp_path / "p.png").exists()


def test_memstore_eval_with_the_llm_agent_against_the_fake_server(tmp_path: Path) -> None:
    rom = rom_or_skip()
    with FakeOpenAIServer() as server:
        run_llm_eval(server, rom, tmp_path)


def run_llm_eval(server: FakeOpenAIServer, rom: Path, tmp_path: Path) -> None:
    # 2 arms x 2 episodes x 3 moves = 12 turns: 8 scripted answers, then HTTP 500s
    server.enqueue(*[FakeReply(content=a) for a in ["open mailbox", "north", "east"] * 2])
    server.enqueue(FakeReply(content="take leaflet"), FakeReply(content="xyzzy"))
    report = run_eval(
        agent="llm",
        episodes=2,
        moves=3,
        seeds=[1],
        folder=tmp_path,
        config=MemstoreConfig(
            model="openai/fake-model", api_base=server.api_base, api_key="test", num_retries=0
        ),
        rom=rom,
    )
    data = report_json(report)
    assert data["agent"] == "llm" and data["model"] == "openai/fake-model"
    assert data["memories_written_by"] == "offline recorder"
    calls = [data["arms"][arm]["llm"] for arm in ("memory", "no_memory")]
    assert sum(c["agent_calls"] for c in calls) == 12
    assert sum(sum(c["agent_failures"].values()) for c in calls) == 4
    assert all(c["synthesis_calls"] == 0 for c in calls)
    assert len(server.requests) == 12
