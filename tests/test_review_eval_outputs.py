"""`memstore eval --json F --markdown F --plot F` follows every export's one rule
(memstore.export_file.foreign_file): an existing output is replaced only when it is empty or
of the kind eval writes there (an eval report JSON, an eval markdown table, a PNG), else it
is refused before anything is played unless --force; and the plot is written atomically
(a hard link to the old plot keeps the old content).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memstore.eval_report as eval_report
from tests.cli_helpers import one_error_line, run

try:
    from tests.fixtures.walkthrough import rom_or_skip
except ImportError:  # pragma: no cover - run from inside tests/
    from fixtures.walkthrough import rom_or_skip  # type: ignore[no-redef]

FOREIGN = {
    "--json": '[project]\nname = "mything"\n',
    "--markdown": "# My README\n",
    "--plot": "my thesis draft\n",
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
OLD_PNG = PNG_SIGNATURE + b"an old plot"


def is_report_json(text: str) -> bool:
    return bool(eval_report.is_report_json(text))


def is_report_markdown(text: str) -> bool:
    return bool(eval_report.is_report_markdown(text))


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MEMSTORE_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


def eval_args(*more: str) -> list[str]:
    return ["eval", "--episodes", "1", "--moves", "3", "--seeds", "1", "--no-progress", *more]


def outputs(folder: Path) -> dict[str, Path]:
    return {"--json": folder / "r.json", "--markdown": folder / "r.md", "--plot": folder / "r.png"}


def as_args(files: dict[str, Path]) -> list[str]:
    return [part for option, path in files.items() for part in (option, str(path))]


# --- recognising what eval writes -----------------------------------------------------------


def test_the_recognisers_know_the_reports_own_shape() -> None:
    report = {
        "agent": "explorer",
        "model": "no model",
        "tools": False,
        "memories_written_by": "offline recorder",
        "episodes": 1,
        "moves": 3,
        "seeds": [1],
        "arms": {},
        "targets": [],
    }
    assert is_report_json(json.dumps(report, indent=2))
    assert not is_report_json('{"name": "mything", "version": "1.0"}')
    assert not is_report_json("[1, 2, 3]")
    assert not is_report_json('[project]\nname = "x"\n')
    table = (
        "**agent explorer, memories by the offline recorder, 1 episodes of at most 3 moves, "
        "seeds 1; figures are means over the seeds**\n\n| episode | arm | rooms |\n"
    )
    assert is_report_markdown(table)
    assert not is_report_markdown("# My README\n\n| episode | arm |\n")
    assert not is_report_markdown("**bold words**\n")


# --- refused before anything is played ------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "content"),
    [
        *FOREIGN.items(),
        ("--json", '{\n  "name": "mything",\n  "version": "1.0"\n}\n'),  # JSON, not a report
        ("--markdown", "**agent notes**\n\nmine\n"),
        ("--plot", "\ufeff\x89PNG but not quite"),
    ],
)
def test_eval_refuses_a_foreign_output_before_playing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, content: str
) -> None:
    target = tmp_path / "mine.txt"
    target.write_text(content, encoding="utf-8")
    folder = tmp_path / "evaldb"

    code, out, err = run(capsys, "--db", str(folder), *eval_args(option, str(target)))

    assert code == 1
    one_error_line(err, option, str(target), "give another file, or pass --force to overwrite it")
    assert out == ""  # not even the databases' folder: nothing was played
    assert not folder.exists() or not list(folder.iterdir())
    assert target.read_text(encoding="utf-8") == content


def test_eval_refuses_each_foreign_output_and_writes_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    files = outputs(tmp_path)
    files["--json"].write_text(json.dumps({"agent": "x"}), encoding="utf-8")  # no arms...
    files["--markdown"].touch()  # empty: may be replaced
    files["--plot"].write_bytes(OLD_PNG)  # a PNG: may be replaced
    folder = tmp_path / "evaldb"

    code, out, err = run(capsys, "--db", str(folder), *eval_args(*as_args(files)))

    assert code == 1
    one_error_line(err, "--json", str(files["--json"]), "--force")
    assert out == ""
    assert not folder.exists() or not list(folder.iterdir())
    assert files["--markdown"].read_bytes() == b""
    assert files["--plot"].read_bytes() == OLD_PNG


# --- playing: the eval's own outputs, --force, the atomic plot --------------------------------


@pytest.mark.slow
def test_eval_replaces_its_own_outputs_and_empty_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rom = str(rom_or_skip())
    files = outputs(tmp_path)
    files["--json"].write_text("\n", encoding="utf-8")
    files["--markdown"].touch()
    files["--plot"].touch()

    for _run in range(2):  # empty files, then the first run's outputs
        code, out, err = run(capsys, *eval_args("--rom", rom, *as_args(files)))
        assert code == 0, err
        assert out.count("wrote ") == 3
        assert is_report_json(files["--json"].read_text(encoding="utf-8"))
        assert is_report_markdown(files["--markdown"].read_text(encoding="utf-8"))
        assert files["--plot"].read_bytes().startswith(PNG_SIGNATURE)

    # a table an editor saved with a byte order mark is still the eval's
    files["--markdown"].write_text("\ufeff" + files["--markdown"].read_text("utf-8"), "utf-8")
    code, _out, err = run(capsys, *eval_args("--rom", rom, *as_args(files)))
    assert code == 0, err


@pytest.mark.slow
def test_eval_force_overwrites_foreign_outputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rom = str(rom_or_skip())
    files = outputs(tmp_path)
    for option, path in files.items():
        path.write_text(FOREIGN[option], encoding="utf-8")

    code, out, err = run(capsys, *eval_args("--rom", rom, "--force", *as_args(files)))

    assert code == 0, err
    assert out.count("wrote ") == 3
    assert is_report_json(files["--json"].read_text(encoding="utf-8"))
    assert is_report_markdown(files["--markdown"].read_text(encoding="utf-8"))
    assert files["--plot"].read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.slow
def test_eval_writes_the_plot_atomically(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rom = str(rom_or_skip())
    plot, link = tmp_path / "plot.png", tmp_path / "old.png"
    plot.write_bytes(OLD_PNG)
    link.hardlink_to(plot)

    code, out, err = run(capsys, *eval_args("--rom", rom, "--plot", str(plot)))

    assert code == 0, err
    assert f"wrote {plot}" in out
    assert link.read_bytes() == OLD_PNG  # the other name keeps the old plot
    new = plot.read_bytes()
    assert new.startswith(PNG_SIGNATURE) and new != OLD_PNG
    assert plot.stat().st_ino != link.stat().st_ino
    assert "hard link" in err  # said once, as a warning
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
