"""Review C, findings 5 and 8.

5. `memstore eval` printed "met" for what it had not measured: "at most half of the
   memory-off arm" met at 0.0% vs 0.0% (nothing to halve), and every target judged on a
   run of 1 to 3 turns an episode (`--episodes 2 --moves 1`, `--episodes 3 --moves 3`,
   coverage "met" on one room). Now a target is judged only on its minimum sample
   (memstore.eval_results.MIN_ARM_TURNS and the rest, on every seed), "at most half" not
   when the memory-off arm repeated nothing; the JSON says ``"met": null`` with
   ``not_judged``, and such a run exits 0 (nothing failed), as a run too short in episodes.
8. ``answer_timeout_s`` did not bound a reconnect: the connect timeout was a fixed 10 s, so
   with ``answer_timeout_s=1`` a call on a server that accepts connections but never
   answers waited 10 s. Now the connect timeout is derived from the answer timeout
   (pg_connection.connect_timeout_s: whole seconds, at least libpq's 2 s, at most 10 s).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_cluster import PgCluster

from memstore.errors import DatabaseUnavailable
from memstore.eval_results import (
    MIN_ARM_TURNS,
    MIN_COVERAGE_ROOMS,
    MIN_EPISODE_TURNS,
    MIN_MEMORY_OFF_REPEATS,
    MIN_REPEAT_OPPORTUNITIES,
)
from memstore.evaluation import (
    MEMORY,
    NO_MEMORY,
    ArmSummary,
    EvalReport,
    render_markdown,
    render_table,
    report_json,
)
from memstore.pg_connection import CONNECT_TIMEOUT_S, connect_timeout_s
from memstore.store import MemoryStore
from tests.answer_watch_helpers import (
    MARGIN_S,
    _start_cluster,
    backend_pid,
    one_line_memstore_error,
    start,
    stopped,
)
from tests.cli_helpers import run
from tests.pg_attack_helpers import note
from tests.test_evaluation import episode

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]


# =============================================================================================
# 5. eval: no verdict on what was not measured
# =============================================================================================


def three_episodes(
    memory: list[dict[str, Any]], without: list[dict[str, Any]], seeds: tuple[int, ...] = (1, 2)
) -> EvalReport:
    """An explorer report of 3 episodes an arm and seed, episode n of each arm with the
    figures ``memory[n - 1]`` / ``without[n - 1]`` (tests.test_evaluation.episode's others:
    100 turns, 20 failed, 10 rooms)."""
    arms = {}
    for arm, figures in ((MEMORY, memory), (NO_MEMORY, without)):
        played = [episode(arm, s, n, **f) for s in seeds for n, f in enumerate(figures, 1)]
        arms[arm] = ArmSummary(arm, played)
    return EvalReport("explorer", 3, 100, list(seeds), "no model", arms)


#: memory helps: the memory-off arm repeats 40 failures in each of episodes 2 and 3, the
#: memory arm 3 (2.0% of its 300 turns, 26.7% without), and sees 14 rooms in episode 3
HELPED = [{}, {"repeated_across": 3}, {"repeated_across": 3, "rooms": 14}]
BASELINE = [{}, {"repeated_across": 40}, {"repeated_across": 40}]


def verdicts(found: EvalReport) -> list[bool | None]:
    return [t.met for t in found.targets()]


def test_eval_judges_a_run_of_the_minimum_sample() -> None:
    """The sample of tests.test_evaluation's report: every target judged, as before."""
    assert verdicts(three_episodes(HELPED, BASELINE)) == [True, True, True, True]


def test_eval_at_most_half_is_not_judged_when_the_memory_off_arm_repeated_nothing() -> None:
    """Was: met at 0.0% vs 0.0% (0 <= 0 / 2). Nothing to halve: not judged, and why."""
    nothing = [{}, {}, {"rooms": 14}]
    found = three_episodes(nothing, nothing)
    halve = found.targets()[1]
    assert halve.met is None
    assert "the memory-off arm repeated no failed action" in halve.not_judged
    assert "nothing to halve" in halve.not_judged
    assert halve.measured == "0.0% vs 0.0%"
    assert found.targets()[0].met is True  # below 5% is measured: 300 turns, 40 failed
    assert found.targets_not_played() == []  # no failure of the model's: exit 0
    data = report_json(found)["targets"][1]
    assert data["met"] is None and "nothing to halve" in data["not_judged"]
    line = "not judged: ... and at most half of the memory-off arm (the memory-off arm repeated"
    assert line in render_table(found)
    assert "- not judged: ... and at most half" in render_markdown(found)
    assert "met: ... and at most half" not in render_table(found).replace("not judged:", "")


def test_eval_at_most_half_needs_enough_memory_off_repeats() -> None:
    """Some repeats without memory, fewer than the minimum on one seed: not judged."""
    enough = [{}, {"repeated_across": MIN_MEMORY_OFF_REPEATS}, {}]
    assert verdicts(three_episodes(HELPED, enough))[1] is not None  # judged: at the minimum
    few = [{}, {"repeated_across": MIN_MEMORY_OFF_REPEATS - 1}, {}]
    found = three_episodes(HELPED, few)
    assert verdicts(found) == [True, None, True, True]
    reason = found.targets()[1].not_judged
    assert (
        f"needs at least {MIN_MEMORY_OFF_REPEATS} repeated failed actions without memory" in reason
    )
    assert f"(the fewest: {MIN_MEMORY_OFF_REPEATS - 1}, seed 1)" in reason


def test_eval_repeat_targets_need_the_minimum_turns_of_each_arm_on_every_seed() -> None:
    """MIN_ARM_TURNS over an arm's episodes, on every seed: at it judged, below not."""
    last = MIN_ARM_TURNS - 2 * 25  # episodes of 25, 25 and the rest
    at = [{"turns": 25}, {"turns": 25, "repeated_across": 0}, {"turns": last, "rooms": 14}]
    below = [dict(f) for f in at]
    below[0]["turns"] = 24
    assert verdicts(three_episodes(at, BASELINE))[:2] == [True, True]
    found = three_episodes(below, BASELINE)
    assert verdicts(found) == [None, None, True, True]  # episode 3: enough turns
    reason = found.targets()[0].not_judged
    assert f"needs at least {MIN_ARM_TURNS} turns of each arm it reads on every seed" in reason
    assert f"the fewest: {MIN_ARM_TURNS - 1} with memory, seed 1" in reason
    without = three_episodes(HELPED, [dict(f, turns=30) for f in BASELINE])
    assert verdicts(without) == [True, None, True, None]  # the memory-off arm's turns
    assert "90 without memory, seed 1" in without.targets()[1].not_judged


def test_eval_repeat_targets_need_repeat_opportunities() -> None:
    """A memory arm that failed fewer than MIN_REPEAT_OPPORTUNITIES times before its last
    episode had next to nothing to repeat: its 0% is not judged."""
    enough = [{"failed_turns": MIN_REPEAT_OPPORTUNITIES}, {"failed_turns": 0}, {"rooms": 14}]
    assert verdicts(three_episodes(enough, BASELINE)) == [True, True, True, True]
    few = [{"failed_turns": MIN_REPEAT_OPPORTUNITIES - 1}, {"failed_turns": 0}, {"rooms": 14}]
    found = three_episodes(few, BASELINE)
    assert verdicts(found) == [None, None, True, True]
    assert "failed turns with memory before the last episode" in found.targets()[0].not_judged


def test_eval_by_episode_3_needs_the_minimum_episode_and_rooms() -> None:
    """Was: coverage "met" on the one room of a one-turn episode 3."""
    short = [{}, {"repeated_across": 3}, {"turns": MIN_EPISODE_TURNS - 1, "rooms": 14}]
    found = three_episodes(short, BASELINE, seeds=(1,))
    assert verdicts(found)[2:] == [None, None]
    assert f"(the fewest: {MIN_EPISODE_TURNS - 1} with memory, seed 1)" in (
        found.targets()[2].not_judged
    )
    enough = [{}, {"repeated_across": 3}, {"turns": MIN_EPISODE_TURNS, "rooms": 14}]
    assert verdicts(three_episodes(enough, BASELINE, seeds=(1,)))[2:] == [True, True]
    rooms = MIN_COVERAGE_ROOMS - 1
    one_room = [{}, {}, {"coverage_visited": rooms, "coverage_with_memory": rooms, "rooms": 14}]
    found = three_episodes(one_room, BASELINE)
    assert verdicts(found)[2] is None
    assert f"needs at least {MIN_COVERAGE_ROOMS} rooms visited in episode 3 with memory" in (
        found.targets()[2].not_judged
    )


def eval_run(tmp_path: Path, *more: str) -> list[str]:
    return ["eval", "--seeds", "1", "--no-progress", "--rom", str(rom_or_skip()),
            "--db", str(tmp_path / "dbs"), "--json", str(tmp_path / "r.json"), *more]  # fmt: skip


@pytest.mark.slow
def test_eval_of_one_move_judges_nothing_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The review's `eval --episodes 2 --moves 1 --seeds 1`: was "met" twice, rc 0."""
    code, out, err = run(capsys, *eval_run(tmp_path, "--episodes", "2", "--moves", "1"))
    assert code == 0, err  # a run too short judges nothing: nothing failed
    lines = [line for line in out.splitlines() if "measured:" in line]
    assert len(lines) == 4 and all(line.startswith("not judged: ") for line in lines), out
    assert "nothing to halve" in lines[1] and "(measured: 0.0% vs 0.0%)" not in out
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [t["met"] for t in data["targets"]] == [None, None, None, None]
    assert "nothing to halve" in data["targets"][1]["not_judged"]
    assert f"needs at least {MIN_ARM_TURNS} turns" in data["targets"][0]["not_judged"]


@pytest.mark.slow
def test_eval_of_three_moves_an_episode_judges_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The review's `--episodes 3 --moves 3` (both repeat targets were "met") and
    `--episodes 3 --moves 1` (coverage "met" on one room)."""
    for moves in ("3", "1"):
        code, out, err = run(
            capsys, *eval_run(tmp_path / moves, "--episodes", "3", "--moves", moves)
        )
        assert code == 0, err
        lines = [line for line in out.splitlines() if "measured:" in line]
        assert len(lines) == 4 and all(line.startswith("not judged: ") for line in lines), out
        data = json.loads((tmp_path / moves / "r.json").read_text(encoding="utf-8"))
        assert [t["met"] for t in data["targets"]] == [None, None, None, None]
        assert f"needs at least {MIN_ARM_TURNS} turns" in data["targets"][0]["not_judged"]
        assert "rooms visited in episode 3 with memory" in data["targets"][2]["not_judged"]
        assert f"{MIN_EPISODE_TURNS} turns of episode 3" in data["targets"][3]["not_judged"]


# =============================================================================================
# 8. the answer timeout bounds a reconnect too
# =============================================================================================


def test_postgres_connect_timeout_follows_the_answer_timeout() -> None:
    """libpq's connect_timeout is whole seconds, 2 at least; capped at the old 10 s."""
    assert connect_timeout_s(1) == 2  # libpq's least
    assert connect_timeout_s(0.1) == 2
    assert connect_timeout_s(3.9) == 3  # never longer than the answer timeout past 2 s
    assert connect_timeout_s(4) == 4
    assert connect_timeout_s(65) == CONNECT_TIMEOUT_S == 10  # the default answer timeout


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port whose listener accepts TCP connections (the kernel completes them) and never
    answers: a PostgreSQL server stopped, swapped out, or behind a network dropping data."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.mark.slow  # it waits for connect timeouts
@pytest.mark.parametrize("answer_timeout_s", [1.0, 3.0])
def test_postgres_open_of_a_server_that_never_answers_gives_up_within_the_answer_timeout(
    silent_server: int, answer_timeout_s: float
) -> None:
    """Was: 10 s whatever answer_timeout_s said (the fixed CONNECT_TIMEOUT_S)."""
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://agent@127.0.0.1:{silent_server}/zork"
    bound = connect_timeout_s(answer_timeout_s)  # 2 s (libpq's least), 3 s
    began = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match="connection timeout expired") as caught:
        MemoryStore.open(url, answer_timeout_s=answer_timeout_s)
    took = time.monotonic() - began
    assert bound - 0.5 <= took < bound + 2.0, took
    assert "\n" not in str(caught.value)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[PgCluster]:
    """A cluster of this test's own, which it may stop (SIGSTOP, always continued)."""
    started = _start_cluster(tmp_path)
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.slow
def test_postgres_calls_on_a_stopped_server_end_within_the_answer_timeout(
    own_cluster: PgCluster,
) -> None:
    """The review's repro: answer_timeout_s=1, every server process stopped. The first call
    is cut off by the answer watch after 1 s; each next one connects again and gave up
    after 10 s: now after 2 s (libpq's least connect timeout), then connects again once
    the server runs."""
    url = own_cluster.create_database("stalled")
    store = MemoryStore.open(url, answer_timeout_s=1, busy_timeout_s=0.5)
    try:
        store.add_memory(1, "Here", note("Before"))
        postmaster = int((own_cluster.data / "postmaster.pid").read_text().split()[0])
        with stopped(postmaster, backend_pid(store)):
            first = start(lambda: store.get_location_memory(1))
            assert first.finished.wait(1 + MARGIN_S)
            one_line_memstore_error(first.error)
            for _call in range(2):  # each connects again: the connect timeout bounds it
                again = start(lambda: store.memories(1))
                assert again.finished.wait(CONNECT_TIMEOUT_S + MARGIN_S)
                one_line_memstore_error(again.error)
                assert "connection timeout expired" in str(again.error)
                assert again.seconds < connect_timeout_s(1) + 1.5, again.seconds  # was 10 s
        assert [m.title for m in store.memories(1)] == ["Before"]  # connects again
    finally:
        store.close()
