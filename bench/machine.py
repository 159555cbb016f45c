"""How fast this machine runs plain Python right now, to read the other figures against.

The machines here share their host: the same pure-Python loop has taken 500 ms in one
minute and 900 ms in the next. Every benchmark prints this reference before and after
its runs, so a figure can be compared across runs and machines.
"""

from __future__ import annotations

import time


def reference_loop_ms(iterations: int = 3_000_000) -> float:
    """Milliseconds for ``iterations`` integer additions in a Python loop (best of 3)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for number in range(iterations):
            total += number
        best = min(best, time.perf_counter() - started)
    return best * 1000


def describe(label: str) -> str:
    """A one-line report of the reference loop, for a benchmark's output."""
    return f"machine speed ({label}): pure-Python reference loop {reference_loop_ms():.0f} ms"
