"""Review S5 A (the evaluation), findings 3 and 7."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.evaluation import run_eval
from memstore.metrics import percentile


@pytest.mark.parametrize(
    ("count", "fraction", "rank"),
    [(20, 0.95, 19), (100, 0.95, 95), (300, 0.95, 285), (600, 0.95, 570), (10, 0.5, 5)],
)
def test_percentile_is_the_nearest_rank(count: int, fraction: float, rank: int) -> None:
    # finding 7: round(p * n + 0.5) rounds x.5 to even, one rank too high when p * n is
    # an odd integer (p95 of 1..100 was 96)
    assert percentile([float(n) for n in range(1, count + 1)], fraction) == rank


def test_percentile_of_one_value_and_of_none() -> None:
    assert percentile([7.0], 0.95) == 7.0 and percentile([], 0.95) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.0) == 1.0 and percentile([3.0, 1.0], 1.0) == 3.0


def test_a_seed_given_twice_is_refused_before_anything_is_played(tmp_path: Path) -> None:
    # finding 3: the second "seed 1" reopened the first one's databases, so its memory-off
    # arm started with the first pass's memories
    with pytest.raises(ValueError, match=r"seed 1 is given twice"):
        run_eval(folder=tmp_path / "out", seeds=[1, 2, 1], episodes=1, moves=1)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
