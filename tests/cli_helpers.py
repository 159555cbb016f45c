"""Running the command line in-process, as the CLI tests do: one home for the helpers."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

import memstore.cli as cli


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, traceback: bool = False
) -> tuple[int, str, str]:
    """``memstore ARGV`` in this process: (exit code, stdout, stderr); never a traceback
    unless ``traceback`` (``--debug`` asked for one)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert traceback or "Traceback" not in err
    return code, out, err


def one_error_line(err: str, *needles: str) -> str:
    """The one ``memstore: error: ...`` line of ``err``, holding every needle."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memstore: error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


@pytest.fixture
def never_blocks() -> Iterator[None]:
    """Fail the test (instead of hanging it) if something blocks, as opening a FIFO does."""

    def give_up(_signum: int, _frame: object) -> None:
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
