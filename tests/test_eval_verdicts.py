"""memstore eval's verdicts on its targets: a target is judged only on play it is about.

A review found `memstore eval --agent llm` whose every model call failed exiting 0 with
the targets "met", for play the explorer did (the LLM agent falls back to the explorer on
each failed call); the coverage target, which the spec sets "by Episode 3", judged "by
episode 1"; and "at most half of the memory-off arm" met at 0.0% vs 0.0% with one episode,
where nothing can be repeated "across episodes". Now:

* the model playing no turn of an arm (for some seed: every call failed or gave no
  command) is said plainly, no target using that arm's figures is judged ("not judged:"
  and why), the report is still written, and the command exits 1, as `memstore demo` does;
* a target whose precondition the run cannot meet (at least 2 episodes "across episodes",
  3 episodes "by episode 3") is not judged either, and says why (exit 0: nothing failed);
* some failed calls change nothing but the "LLM calls:" line and the model's share of the
  commands ("the model chose 58 of 60 commands").

Round 2 of the review found the model playing 1 turn of 60 per arm (episodes 2 and 3 all
the explorer's) judged "met" on all four targets and exit 0, and the exit-1 error line
blaming the other arm's failures. Now a target is judged only when the model chose more
than half of the commands of every episode it reads (each arm it uses, each seed), and the
error line gives each arm's own failures.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memstore.config import MemstoreConfig
from memstore.eval_report import model_failure
from memstore.evaluation import (
    MEMORY,
    NO_MEMORY,
    ArmSummary,
    EpisodeResult,
    EvalReport,
    render_markdown,
    render_table,
    report_json,
    run_eval,
)
from tests.cli_helpers import run

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]


def episode(arm: str, seed: int, number: int, **figures: Any) -> EpisodeResult:
    values: dict[str, Any] = {
        "seed": seed, "arm": arm, "episode": number, "turns": 100, "rooms": 5, "score": 0,
        "first_point_turn": None, "deaths": 0, "game_over": False, "repeated_across": 0,
        "repeated_within": 0, "repeated_across_old": 0, "repeated_within_old": 0,
        "failed_turns": 20, "coverage_with_memory": 5, "coverage_visited": 5,
    }  # fmt: skip
    values.update(figures)
    return EpisodeResult(**values)


def report(
    episodes: int,
    *,
    agent: str = "llm",
    seeds: tuple[int, ...] = (1,),
    model_turns: dict[tuple[str, int], int | list[int]] | None = None,
) -> EvalReport:
    """Both arms, ``episodes`` each per seed; for the LLM agent, the model played every
    turn (100 an episode: a sample large enough to judge, eval_results.MIN_ARM_TURNS) but
    those ``model_turns`` gives per (arm, seed): one number for every episode, or a list
    (one per episode)."""
    arms = {}
    for arm in (MEMORY, NO_MEMORY):
        played = []
        for seed in seeds:
            turns: list[int | None] = [None] * episodes
            if agent == "llm":
                given = (model_turns or {}).get((arm, seed), 100)
                turns = list(given) if isinstance(given, list) else [given] * episodes
            rooms = 8 if arm == MEMORY else 5  # from episode 2: memory helps
            played += [
                episode(
                    arm,
                    seed,
                    n,
                    model_turns=turns[n - 1],
                    rooms=rooms if n > 1 else 5,
                    repeated_across=0 if arm == MEMORY or n == 1 else 40,
                )  # fmt: skip
                for n in range(1, episodes + 1)
            ]
        arms[arm] = ArmSummary(arm, played)
    model = "openai/fake" if agent == "llm" else "no model"
    return EvalReport(agent, episodes, 10, list(seeds), model, arms)


def verdicts(found: EvalReport) -> list[bool | None]:
    return [t.met for t in found.targets()]


# --- the model played no turn of an arm --------------------------------------------------------


def not_played(found: EvalReport) -> list[tuple[str, int, int]]:
    return [(e.arm, e.seed, e.episode) for e in found.model_did_not_play()]


def test_an_arm_the_model_never_played_judges_no_target_on_it() -> None:
    failed = report(3, model_turns={(MEMORY, 1): 0, (NO_MEMORY, 1): 0})
    assert not_played(failed) == [(arm, 1, n) for arm in (MEMORY, NO_MEMORY) for n in (1, 2, 3)]
    assert verdicts(failed) == [None, None, None, None]
    for target in failed.targets():
        assert "the model chose at most half of the commands of episodes 1 (0 of 100)" \
            in target.not_judged  # fmt: skip
    table = render_table(failed)
    assert "met:" not in table.replace("not judged:", "") and "NOT MET" not in table
    assert table.count("not judged: ") == 4
    assert "the model (openai/fake) chose at most half of the commands of episodes 1 (0 of 100), " \
        "2 (0 of 100), 3 (0 of 100) with memory (seed 1); episodes 1 (0 of 100), 2 (0 of 100), " \
        "3 (0 of 100) without memory (seed 1): the explorer" in table  # fmt: skip
    assert table.count("the model chose 0 of 300 commands") == 2  # each arm's line
    data = report_json(failed)
    assert [t["met"] for t in data["targets"]] == [None, None, None, None]
    assert all("the model chose at most half" in t["not_judged"] for t in data["targets"])
    assert data["model_did_not_play"][0] == {
        "arm": "memory", "seed": 1, "episode": 1, "model_turns": 0, "turns": 100
    }  # fmt: skip
    assert len(data["model_did_not_play"]) == 6
    assert data["model_commands"] == {
        "memory": {"model": 0, "commands": 300},
        "no_memory": {"model": 0, "commands": 300},
    }
    assert json.loads(json.dumps(data)) == data
    assert "- not judged: " in render_markdown(failed)


def test_one_seed_the_model_never_played_is_enough() -> None:
    """Seed 2's memory arm was the explorer's: its means over the seeds mix that in."""
    half = report(3, seeds=(1, 2), model_turns={(MEMORY, 2): 0})
    assert not_played(half) == [(MEMORY, 2, 1), (MEMORY, 2, 2), (MEMORY, 2, 3)]
    assert verdicts(half) == [None, None, None, None]  # every target uses the memory arm


def test_only_the_targets_using_the_arm_the_model_never_played_are_not_judged() -> None:
    """The memory-only targets are judged on the memory arm, which the model played."""
    found = report(3, model_turns={(NO_MEMORY, 1): 0})
    met = verdicts(found)
    assert met[1] is None and met[3] is None  # they compare with the memory-off arm
    assert met[0] is True and met[2] is True  # memory only: judged
    assert "without memory (seed 1)" in found.targets()[1].not_judged
    assert "with memory" not in found.targets()[1].not_judged.replace("without memory", "")


def test_some_failed_calls_keep_the_verdicts() -> None:
    """The model chose most commands of every episode (90 and 60 of 100): judged."""
    partial = report(3, seeds=(1, 2), model_turns={(MEMORY, 1): 90, (NO_MEMORY, 2): 60})
    assert partial.model_did_not_play() == []
    assert verdicts(partial) == verdicts(report(3, seeds=(1, 2))) == [True, True, True, True]
    table = render_table(partial)
    assert "not judged" not in table
    assert "the model chose 570 of 600 commands" in table  # memory: 270 + 300
    assert "the model chose 480 of 600 commands" in table  # without: 300 + 180
    assert report_json(partial)["model_did_not_play"] == []  # an LLM report says it: none
    assert model_failure(partial) is None


def test_the_explorer_report_is_unchanged_by_the_verdicts() -> None:
    """Every target judged: the JSON has the shape the committed example report has."""
    data = report_json(report(3, agent="explorer"))
    assert "model_did_not_play" not in data and "model_commands" not in data
    assert "model_never_played" not in data
    assert "the model chose" not in render_table(report(3, agent="explorer"))
    assert all(set(t) == {"target", "met", "measured"} for t in data["targets"])
    assert all("model_turns" not in e for e in data["arms"]["memory"]["episodes"])


# --- what the run cannot show -----------------------------------------------------------------


def test_one_episode_judges_nothing_across_episodes_nor_by_episode_3() -> None:
    one = report(1, agent="explorer")
    assert verdicts(one) == [None, None, None, None]
    reasons = [t.not_judged for t in one.targets()]
    assert "needs at least 2 episodes" in reasons[0] and "this run played 1" in reasons[0]
    assert "needs at least 2 episodes" in reasons[1]
    assert "needs 3 episodes" in reasons[2] and "this run played 1" in reasons[2]
    assert "needs 3 episodes" in reasons[3]
    names = [t.name for t in one.targets()]
    assert "by episode 3" in names[2] and "by episode 3" in names[3]  # never "by episode 1"
    table = render_table(one)
    assert "location coverage >= 80% by episode 3 (with memory): not judged" not in table
    assert "not judged: location coverage >= 80% by episode 3 (with memory) (needs 3 " in table


def test_two_episodes_judge_the_repeats_but_not_by_episode_3() -> None:
    assert verdicts(report(2, agent="explorer")) == [True, True, None, None]
    assert verdicts(report(3, agent="explorer")) == [True, True, True, True]


def test_a_run_too_short_for_a_target_is_no_failure_of_the_model() -> None:
    """The model played every episode: targets unjudged for the run's length only exit 0."""
    short_run = report(2)
    assert verdicts(short_run) == [True, True, None, None]
    assert short_run.targets_not_played() == [] and model_failure(short_run) is None
    assert model_failure(report(1)) is None


def test_the_reasons_are_given_once_each() -> None:
    """Both the model and the episodes: the two reasons, the model's first."""
    both = report(1, model_turns={(MEMORY, 1): 0, (NO_MEMORY, 1): 0})
    reason = both.targets()[2].not_judged
    assert reason.index("the model chose at most half") < reason.index("needs 3 episodes")


# --- the model chose some commands, not the episodes a target reads (review round 2) ----------


def test_a_model_that_played_one_turn_of_episode_1_judges_nothing() -> None:
    """The review's finding 1: model turns [1, 0, 0] in each arm, all four were "met"."""
    walked = report(3, model_turns={(MEMORY, 1): [1, 0, 0], (NO_MEMORY, 1): [1, 0, 0]})
    assert verdicts(walked) == [None, None, None, None]
    coverage = walked.targets()[2].not_judged
    assert "episodes 1 (1 of 100), 2 (0 of 100), 3 (0 of 100) with memory (seed 1)" in coverage
    rooms = walked.targets()[3].not_judged  # without memory, episode 3 only is read
    assert "; episode 3 (0 of 100) without memory (seed 1)" in rooms
    assert "the model chose 1 of 300 commands" in render_table(walked)
    failure = model_failure(walked)
    assert failure is not None and "episodes 1 (1 of 100)" in failure


def test_the_model_must_choose_more_than_half_of_an_episode() -> None:
    half = report(3, model_turns={(MEMORY, 1): [100, 100, 50]})
    assert verdicts(half) == [None, None, None, None]
    assert "episode 3 (50 of 100) with memory (seed 1)" in half.targets()[2].not_judged
    most = report(3, model_turns={(MEMORY, 1): [100, 100, 51], (NO_MEMORY, 1): [51, 51, 51]})
    assert verdicts(most) == [True, True, True, True]
    one_in_many = report(3, model_turns={(MEMORY, 1): [100, 100, 1]})
    assert verdicts(one_in_many) == [None, None, None, None]


def test_each_target_reads_the_episodes_its_figures_come_from() -> None:
    """Repeats across episodes: every episode of the arms it uses (the rate is over all
    their turns); by episode 3: episodes 1 to 3 with memory (what they wrote is there in
    episode 3), episode 3 only without memory (a fresh database each episode)."""
    without_first = report(3, model_turns={(NO_MEMORY, 1): [0, 100, 100]})
    assert verdicts(without_first) == [True, None, True, True]
    with_first = report(3, model_turns={(MEMORY, 1): [0, 100, 100]})
    assert verdicts(with_first) == [None, None, None, None]
    fourth = report(4, model_turns={(MEMORY, 1): [100, 100, 100, 0]})
    assert verdicts(fourth) == [None, None, True, True]  # episode 4: not by episode 3


def test_the_error_line_names_the_failures_of_the_arm_the_model_did_not_play() -> None:
    """The review's finding 5: the other arm's failures were added in and its last
    failure quoted as "the last"."""
    found = report(3, model_turns={(MEMORY, 1): 0, (NO_MEMORY, 1): 90})
    found.arms[MEMORY].llm["agent_failures"] = {"timeout": 30}
    found.arms[MEMORY].llm["agent_last_failure"] = "timeout: Timeout after 30 s"
    found.arms[NO_MEMORY].llm["agent_failures"] = {"malformed": 3}
    found.arms[NO_MEMORY].llm["agent_last_failure"] = "malformed: not one short game command"
    failure = model_failure(found)
    assert failure is not None
    assert "timeout 30" in failure and "the last: timeout: Timeout after 30 s" in failure
    assert "malformed" not in failure and "without memory" not in failure
    both = report(3, model_turns={(MEMORY, 1): 0, (NO_MEMORY, 1): 0})
    both.arms[MEMORY].llm.update(found.arms[MEMORY].llm)
    both.arms[NO_MEMORY].llm.update(found.arms[NO_MEMORY].llm)
    line = model_failure(both)
    assert line is not None
    assert "with memory: timeout 30, the last: timeout: Timeout after 30 s" in line
    assert "without memory: malformed 3, the last: malformed: not one short game command" in line


# --- the command ------------------------------------------------------------------------------


class FailingModel:
    """A model whose every call raises, as an unreachable provider's."""

    def __init__(self, config: Any, **_: Any) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], **_: Any) -> Any:
        self.calls += 1
        raise ConnectionError("connection refused")


class AnsweringModel:
    """A model that answers every call with a move."""

    def __init__(self, config: Any, **_: Any) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], **_: Any) -> Any:
        self.calls += 1
        move = ("north", "north", "east", "south", "west", "west", "south", "east")[self.calls % 8]
        message = SimpleNamespace(content=move, tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


class WalkingModel:
    """A model that answers "north" to its first call of each agent, then fails."""

    def __init__(self, config: Any, **_: Any) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], **_: Any) -> Any:
        self.calls += 1
        if self.calls > 1:
            raise ConnectionError("connection refused")
        message = SimpleNamespace(content="north", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def llm_eval(tmp_path: Path, *more: str) -> list[str]:
    out = tmp_path / "out"
    return ["eval", "--agent", "llm", "--model", "openai/fake", "--seeds", "1", "--no-progress",
            "--rom", str(rom_or_skip()), "--db", str(tmp_path / "dbs"), "--json",
            str(out / "r.json"), "--markdown", str(out / "r.md"), *more]  # fmt: skip


@pytest.mark.slow
def test_eval_whose_every_model_call_failed_says_so_judges_nothing_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's reproduction: `--episodes 1 --moves 3`, every call failing."""
    monkeypatch.setattr("memstore.llm.LiteLLMCompletion", FailingModel)
    code, out, err = run(capsys, *llm_eval(tmp_path, "--episodes", "1", "--moves", "3"))
    assert code == 1
    assert "LLM calls: agent 3 (3 failed: provider_error 3)" in out
    target_lines = [line for line in out.splitlines() if "measured:" in line]
    assert len(target_lines) == 4
    assert all(line.startswith("not judged: ") for line in target_lines), out
    assert "episode 1 (0 of 3) with memory (seed 1); episode 1 (0 of 3) without memory " \
        "(seed 1)" in out  # fmt: skip
    assert out.count("the model chose 0 of 3 commands") == 2
    assert f"wrote {tmp_path / 'out' / 'r.json'}" in out  # the report is still written
    error = err.strip().splitlines()[-1]
    assert error.startswith("memstore: error: the model (openai/fake) chose at most half")
    assert "provider_error" in error and "ConnectionError: connection refused" in error
    data = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert [t["met"] for t in data["targets"]] == [None, None, None, None]
    assert [e["model_turns"] for e in data["arms"]["memory"]["episodes"]] == [0]
    markdown = (tmp_path / "out" / "r.md").read_text(encoding="utf-8")
    assert "- not judged: " in markdown and "- met: " not in markdown


@pytest.mark.slow
def test_eval_whose_model_played_one_turn_of_episode_1_judges_nothing_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's finding 1 (round 2): this test asserted exit 0 and 4 verdicts for model
    turns [1, 0, 0], the explorer's play of episodes 2 and 3 judged as the model's. (An
    evaluation now stops once the model failed MODEL_FAILURES_IN_A_ROW turns in a row,
    test_review_s5_eval.py; lifted here, to judge a run that ends.)"""
    monkeypatch.setattr("memstore.llm.LiteLLMCompletion", WalkingModel)
    monkeypatch.setattr("memstore.evaluation.MODEL_FAILURES_IN_A_ROW", 1_000)
    code, out, err = run(capsys, *llm_eval(tmp_path, "--episodes", "3", "--moves", "20"))
    assert code == 1
    assert "LLM calls: agent 60 (59 failed: provider_error 59)" in out  # visible, as before
    assert out.count("the model chose 1 of 60 commands") == 2
    target_lines = [line for line in out.splitlines() if "measured:" in line]
    assert len(target_lines) == 4
    assert all(line.startswith("not judged: ") for line in target_lines), out
    assert "episodes 1 (1 of 20), 2 (0 of 20), 3 (0 of 20) with memory (seed 1)" in out
    error = err.strip().splitlines()[-1]
    assert error.startswith("memstore: error: the model (openai/fake) chose at most half")
    data = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert [t["met"] for t in data["targets"]] == [None, None, None, None]
    assert [e["model_turns"] for e in data["arms"]["memory"]["episodes"]] == [1, 0, 0]
    assert len(data["model_did_not_play"]) == 6


@pytest.mark.slow
def test_eval_whose_model_played_every_turn_judges_the_targets_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was `--moves 4`: 12 turns an arm were judged; a run is now judged from its minimum
    sample on (eval_results.MIN_ARM_TURNS and the rest: 50 turns an episode here)."""
    monkeypatch.setattr("memstore.llm.LiteLLMCompletion", AnsweringModel)
    code, out, err = run(capsys, *llm_eval(tmp_path, "--episodes", "3", "--moves", "50"))
    assert code == 0, err
    assert "not judged" not in out and "chose at most half" not in out
    assert out.count("the model chose 150 of 150 commands") == 2
    assert sum(line.startswith(("met: ", "NOT MET: ")) for line in out.splitlines()) == 4
    data = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert data["model_did_not_play"] == []
    assert [e["model_turns"] for e in data["arms"]["memory"]["episodes"]] == [50, 50, 50]


@pytest.mark.slow
def test_run_eval_counts_the_turns_the_model_played(tmp_path: Path) -> None:
    config = MemstoreConfig(model="openai/fake")
    found = run_eval(agent="llm", episodes=2, moves=2, seeds=[1], folder=tmp_path / "a",
                     config=config, rom=rom_or_skip(), agent_llm=FailingModel(config))  # fmt: skip
    assert [e.model_turns for e in found.arms[MEMORY].episodes] == [0, 0]
    assert not_played(found) == [(arm, 1, n) for arm in (MEMORY, NO_MEMORY) for n in (1, 2)]
    explorer = run_eval(agent="explorer", episodes=1, moves=2, seeds=[1], folder=tmp_path / "b",
                        rom=rom_or_skip())  # fmt: skip
    assert [e.model_turns for e in explorer.arms[MEMORY].episodes] == [None]
    assert explorer.model_did_not_play() == []


# --- the synthesis model wrote no memory ------------------------------------------------------


def synthesised(calls: int, failed: int) -> EvalReport:
    """The explorer's report, the memories asked of a synthesis model: ``failed`` of its
    ``calls`` with memory failed."""
    found = report(3, agent="explorer")
    found.synthesis = "openai/fake"
    found.arms[MEMORY].llm.update(
        {"synthesis_calls": calls, "synthesis_failures": {"timeout": failed} if failed else {}}
    )
    return found


def test_a_synthesis_model_whose_every_call_failed_judges_nothing() -> None:
    """Was: ``--synthesis model`` with every call failing wrote no memory, yet the targets
    were judged (and "met") on a memory arm that had none, exit 0."""
    found = synthesised(calls=12, failed=12)
    assert verdicts(found) == [None, None, None, None]
    reason = "every synthesis call of openai/fake with memory failed (timeout 12)"
    assert all(reason in (t.not_judged or "") for t in found.targets())
    assert found.synthesis_failed() is not None and found.targets_not_played() == []


def test_a_synthesis_model_that_wrote_some_memories_keeps_the_verdicts() -> None:
    assert None not in verdicts(synthesised(calls=12, failed=11))
    assert synthesised(calls=0, failed=0).synthesis_failed() is None  # nothing asked
    assert report(3, agent="explorer").synthesis_failed() is None  # the offline recorder


def test_eval_exits_1_when_the_synthesis_model_wrote_no_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = synthesised(calls=4, failed=4)
    monkeypatch.setattr("memstore.evaluation.run_eval", lambda **_kwargs: found)
    code, _out, err = run(
        capsys, "eval", "--synthesis", "model", "--model", "openai/fake", "--no-progress",
        "--rom", str(rom_or_skip()), "--db", str(tmp_path / "dbs"),
    )  # fmt: skip
    assert code == 1
    assert "every synthesis call of openai/fake with memory failed" in err
    assert "no target was judged" in err
