"""memstore eval's report without playing: the figures, the targets, the table, JSON and plot,
and the command's usage errors."""

from __future__ import annotations

import argparse
import builtins
import json
from pathlib import Path
from typing import Any

import pytest

import memstore.cli as cli
from memstore.cli_eval import PLOT_HINT, seeds_argument
from memstore.evaluation import (
    MEMORY,
    NO_MEMORY,
    ArmSummary,
    EpisodeResult,
    EvalReport,
    PlotUnavailable,
    plot_report,
    render_markdown,
    render_table,
    report_json,
)


def episode(arm: str, seed: int, number: int, **figures: Any) -> EpisodeResult:
    values: dict[str, Any] = {
        "seed": seed,
        "arm": arm,
        "episode": number,
        "turns": 100,
        "rooms": 10,
        "score": 10,
        "first_point_turn": 50,
        "deaths": 0,
        "game_over": False,
        "repeated_across": 0,
        "repeated_within": 0,
        "repeated_across_old": 0,
        "repeated_within_old": 0,
        "failed_turns": 20,
        "coverage_with_memory": 9,
        "coverage_visited": 10,
        "memory_tokens": [100, 200, 300],
        "overhead_us": [50.0, 60.0],
    }
    values.update(figures)
    return EpisodeResult(**values)


def report(**memory_figures: Any) -> EvalReport:
    """Two seeds, three episodes; the memory arm's later episodes get ``memory_figures``."""
    memory = [episode(MEMORY, s, 1) for s in (1, 2)]
    memory += [episode(MEMORY, s, n, **memory_figures) for s in (1, 2) for n in (2, 3)]
    none = [episode(NO_MEMORY, s, n, repeated_across=40 if n > 1 else 0) for s in (1, 2)
            for n in (1, 2, 3)]  # fmt: skip
    return EvalReport(
        "explorer",
        3,
        100,
        [1, 2],
        "no model",
        {MEMORY: ArmSummary(MEMORY, memory), NO_MEMORY: ArmSummary(NO_MEMORY, none)},
        seconds=1.5,
    )


def test_the_targets_are_judged_on_means_over_the_seeds() -> None:
    good = report(rooms=14, repeated_across=3)
    assert [t.met for t in good.targets()] == [True, True, True, True]
    # memory: (0 + 3 + 3) / 300 turns = 2% per seed; without: 80 / 300 = 26.7%
    assert good.targets()[1].measured == "2.0% vs 26.7%"
    assert good.targets()[3].measured == "rooms 14.0 vs 10.0, score 10.0 vs 10.0"
    bad = report(repeated_across=30, coverage_with_memory=5)
    assert [t.met for t in bad.targets()] == [False, False, False, False]
    assert bad.targets()[0].measured == "20.0%"
    assert bad.targets()[2].measured == "50%"


def test_the_table_shows_each_episode_of_each_arm_and_says_which_targets_are_not_met() -> None:
    table = render_table(report(repeated_across=30))
    lines = table.splitlines()
    assert lines[0].startswith("agent explorer, memories by the offline recorder, 3 episodes")
    assert "rooms" in lines[1] and "repeats across" in lines[1] and "coverage" in lines[1]
    rows = [line for line in lines if line.lstrip()[:1].isdigit()]
    assert len(rows) == 6 and sum("without memory" in row for row in rows) == 3
    assert "NOT MET: repeated failed actions with memory" in table
    assert "memory tokens per turn median 200, p95 300" in table
    assert "repeated failed actions with memory, across episodes, were: none" in table
    assert "memory overhead per turn median 55 us" in table and "played in 1.5 s" in table


def test_markdown_and_json_without_timing_are_the_same_every_run() -> None:
    first, again = report(rooms=12), report(rooms=12)
    again.seconds = 99.0
    assert render_markdown(first) == render_markdown(again)
    assert report_json(first, timing=False) == report_json(again, timing=False)
    assert "overhead" not in render_markdown(first)
    data = report_json(first)
    assert data["timing"]["seconds"] == 1.5
    assert data["arms"][MEMORY]["mean_by_episode"][1]["rooms"] == 12
    assert data["arms"][NO_MEMORY]["repeated_failed_across"] == pytest.approx(80 / 300, abs=1e-4)
    assert json.loads(json.dumps(data)) == data


def test_without_matplotlib_the_plot_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(PlotUnavailable, match=r"pip install 'memstore\[plot\]'"):
        plot_report(report(), tmp_path / "plot.png")
    assert "pip install 'memstore[plot]'" in PLOT_HINT


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_with_matplotlib_the_plot_is_a_small_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = plot_report(report(rooms=15), tmp_path / "plot.png")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) < 100_000


def test_seeds_are_a_count_or_a_list() -> None:
    assert seeds_argument("3") == [1, 2, 3]
    assert seeds_argument("7, 3,7") == [7, 3]
    for bad in ("0", "x", "1,x", "-1,2"):
        with pytest.raises(argparse.ArgumentTypeError):
            seeds_argument(bad)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["eval", "--agent", "llm"], "--agent llm needs a model"),
        (["eval", "--model", "openai/x"], "--model and --tools are for --agent llm"),
        (["eval", "--tools"], "--model and --tools are for --agent llm"),
    ],
)
def test_eval_usage_errors_are_one_line(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(arguments) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_eval_refuses_episodes_of_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["eval", "--episodes", "0"])
    assert caught.value.code == 2
    assert "must be 1 or more" in capsys.readouterr().err


def test_the_readme_shows_the_committed_report_table() -> None:
    root = Path(__file__).resolve().parents[1]
    committed = (root / "reports" / "eval_report.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = [line for line in committed.splitlines() if line.startswith("|")]
    assert len(table) == 12 and "\n".join(table) in readme
    assert "(reports/eval_report.png)" in readme


def test_refused_tool_calls_are_not_reported_as_failed_model_calls() -> None:
    """A review found the report saying "996 failed: too_many_tool_calls 996" of an agent
    whose every model call was answered: the tool calls past the limit were refused, and
    the answers used. The report keeps the two apart."""
    refused = report()
    refused.arms[MEMORY].llm.update(
        agent_calls=10,
        agent_failures={"too_many_tool_calls": 996, "tool_deadline": 2, "tool_refused": 1},
    )
    failed = report()
    failed.arms[MEMORY].llm.update(
        agent_calls=10, agent_failures={"timeout": 3, "tool_loop": 1, "tool_deadline": 2}
    )
    line = next(x for x in render_table(refused).splitlines() if "LLM calls: agent 10" in x)
    assert "agent 10 (no failures; 999 tool calls refused: too_many_tool_calls 996, " in line
    line = next(x for x in render_table(failed).splitlines() if "LLM calls: agent 10" in x)
    assert "agent 10 (4 failed: timeout 3, tool_loop 1; 2 tool calls refused: " in line
