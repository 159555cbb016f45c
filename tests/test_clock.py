"""memstore.rows.now: the time of a write, as ``datetime.isoformat`` writes it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstore import rows


@pytest.mark.parametrize(
    "ns",
    [
        1_764_000_000_000_000_000,  # a whole second
        1_764_000_000_999_999_999,  # its last microsecond
        1_764_000_001_000_001_000,  # the next second (its text made again)
        1_764_000_000_000_500_000,  # back in the first (a clock set back)
    ],
)
def test_now_is_what_isoformat_writes(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    monkeypatch.setattr(rows.time, "time_ns", lambda: ns)
    expected = datetime.fromtimestamp(ns // 1000 / 1_000_000, UTC)
    assert rows.now() == expected.isoformat(timespec="microseconds")


def test_now_is_the_time_now() -> None:
    before = datetime.now(UTC)
    stamp = datetime.fromisoformat(rows.now())
    assert before <= stamp <= datetime.now(UTC)
