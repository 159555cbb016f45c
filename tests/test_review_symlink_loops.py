"""An output path that is a loop of symbolic links is one line, not an internal error.

Review round 4 found ``export --out LOOP`` (and ``map export``) raising pathlib's
RuntimeError("Symlink loop ...") from the check that an output is not the database.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import one_error_line, run


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--out", "{loop}"],
        ["export", "--notes", "{loop}"],
        ["map", "export", "--out", "{loop}"],
        ["map", "export-json", "{loop}"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith("{")),
)
def test_an_output_that_is_a_loop_of_symbolic_links_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loop: Path, argv: list[str]
) -> None:
    db = tmp_path / "memories.db"
    run(capsys, "--db", str(db), "db", "upgrade")
    code, _out, err = run(capsys, "--db", str(db), *[a.format(loop=loop) for a in argv])
    assert code == 1
    one_error_line(err, str(loop), "loop of symbolic links")


def test_an_eval_output_that_is_a_loop_of_symbolic_links_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loop: Path
) -> None:
    argv = ["--db", str(tmp_path / "eval"), "eval", "--episodes", "1", "--moves", "1"]
    code, _out, err = run(capsys, *argv, "--json", str(loop), "--no-progress")
    assert code == 1
    one_error_line(err, str(loop), "loop of symbolic links")
