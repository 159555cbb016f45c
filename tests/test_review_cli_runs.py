"""What `memstore eval` and `memstore demo` refuse before they play: synthesis by a model
when no model is configured, and an output they could not write after playing (a folder
that cannot be written or created, two outputs naming one file, an output that is one of
the evaluation's databases). A refusal is one line, plays nothing and records nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memstore.demo import run_demo
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.fixtures.walkthrough import rom_or_skip
from tests.read_only_paths import read_only

#: how an output can be impossible to write: in a folder that cannot be written, or in a
#: missing folder that cannot be created there
PLACES = ("read-only folder", "missing folder in a read-only folder", "/proc", "/proc/missing")

Place = Callable[[str], Path]


@pytest.fixture(params=PLACES)
def unwritable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """``place(name)``: a path named ``name`` that no write can create (as root too)."""
    if request.param.startswith("/proc"):
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc on this machine")
        folder = Path("/proc") / ("missing" if request.param.endswith("missing") else "")
        yield lambda name: folder / name
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    inner = locked / "sub" if request.param.startswith("missing") else locked
    with read_only(locked):
        yield lambda name: inner / name


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model configured (nor a pyproject.toml that names one), outside the project."""
    monkeypatch.delenv("MEMSTORE_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(64, "West of House", 1)
        store.add_memory(64, "West of House", mem("Mailbox here", text="A small mailbox."))
    return db_path


def played_nothing(db: Path) -> bool:
    with MemoryStore.open(db, read_only=True) as store:
        return store.turn_records() == [] and store.decision_log() == []


def eval_args(*more: str) -> tuple[str, ...]:
    return ("eval", "--episodes", "1", "--moves", "3", "--seeds", "1", "--no-progress", *more)


# --- defect 8: --synthesis model with no model --------------------------------------------


def test_eval_synthesis_by_the_model_without_a_model_is_refused_before_playing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "evaldb"

    code, out, err = run(capsys, "--db", str(folder), *eval_args("--synthesis", "model"))

    assert code == 1
    one_error_line(err, "--synthesis model needs a model", "--model", "MEMSTORE_MODEL")
    assert out == ""  # not even the databases' folder: nothing was played
    assert not folder.exists()


def test_eval_synthesis_by_the_model_takes_the_model_from_the_model_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the explorer with --model is refused unless the model writes the memories: here it
    # gets past that check and stops at the next one (an output that is a device)
    code, _out, err = run(
        capsys, *eval_args("--synthesis", "model", "--model", "openai/x", "--json", "/dev/null")
    )

    assert code == 1
    one_error_line(err, "/dev/null", "character device")


# --- defect 9: an output that cannot be written, found before anything is played -----------


@pytest.mark.parametrize(("option", "name"), [("--json", "x.json"), ("--markdown", "x.md")])
def test_eval_refuses_an_output_it_cannot_write_before_playing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    unwritable: Place,
    option: str,
    name: str,
) -> None:
    folder, target = tmp_path / "evaldb", unwritable(name)

    code, out, err = run(capsys, "--db", str(folder), *eval_args(option, str(target)))

    assert code == 1
    one_error_line(err, str(target), "cannot ")
    assert out == ""  # no table: nothing was played
    assert not folder.exists()


def test_eval_refuses_a_plot_it_cannot_write_before_playing(
    capsys: pytest.CaptureFixture[str], unwritable: Place
) -> None:
    target = unwritable("x.png")

    code, out, err = run(capsys, *eval_args("--plot", str(target)))

    assert code == 1
    one_error_line(err, str(target), "cannot ")
    assert out == ""


def test_eval_refuses_a_database_folder_it_cannot_write_before_playing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "evaldb"
    folder.mkdir()
    with read_only(folder):
        code, out, err = run(capsys, "--db", str(folder), *eval_args())

    assert code == 1
    one_error_line(err, str(folder), "cannot write in")
    assert out == ""
    assert list(folder.iterdir()) == []


def test_eval_refuses_two_outputs_that_name_one_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "report.txt"

    code, out, err = run(capsys, *eval_args("--json", str(target), "--markdown", str(target)))

    assert code == 1
    one_error_line(err, "--json", "--markdown", "the same file")
    assert out == "" and not target.exists()


def test_eval_refuses_an_output_that_is_one_of_its_databases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "evaldb"
    target = folder / "explorer-seed1-memory.db"

    code, out, err = run(capsys, "--db", str(folder), *eval_args("--json", str(target)))

    assert code == 1
    one_error_line(err, str(target), "one of the evaluation's databases")
    assert out == "" and not folder.exists()


def test_demo_refuses_an_out_it_cannot_write_before_playing(
    capsys: pytest.CaptureFixture[str], db: Path, unwritable: Place
) -> None:
    before, target = db.read_bytes(), unwritable("Memories.md")

    code, out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3",
        "--out", str(target), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, str(target), "cannot ")
    assert out == ""
    assert db.read_bytes() == before
    assert played_nothing(db)


def test_demo_on_a_new_database_refuses_an_unwritable_out_without_creating_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, unwritable: Place
) -> None:
    db, target = tmp_path / "new.db", unwritable("Memories.md")

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3",
        "--out", str(target), "--no-progress",
    )  # fmt: skip

    assert code == 1
    one_error_line(err, str(target))
    assert not db.exists()


def test_demo_refuses_a_map_md_it_cannot_write_before_playing(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    # --out is a link in a read-only folder to a file elsewhere: Memories.md could be
    # written (through the link), the Map.md beside the link could not
    written, locked = tmp_path / "written", tmp_path / "locked"
    written.mkdir()
    locked.mkdir()
    (locked / "Memories.md").symlink_to(written / "Memories.md")
    with read_only(locked):
        code, out, err = run(
            capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3",
            "--out", str(locked / "Memories.md"), "--no-progress",
        )  # fmt: skip

    assert code == 1
    one_error_line(err, str(locked / "Map.md"), "cannot write in")
    assert out == ""
    assert list(written.iterdir()) == []
    assert played_nothing(db)


def test_demo_refuses_an_empty_out_instead_of_writing_the_default(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as refused:
        run(capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3", "--out", "")

    assert refused.value.code == 2
    assert "give a file path" in capsys.readouterr().err
    assert not (tmp_path / "game_files").exists()
    assert played_nothing(db)


def test_run_demo_refuses_an_out_it_cannot_write_before_playing(
    db: Path, unwritable: Place
) -> None:
    target = unwritable("Memories.md")
    with MemoryStore.open(db) as store:
        with pytest.raises(OSError, match="cannot "):
            run_demo(store, episodes=1, moves=3, out=target, progress=False)
    assert played_nothing(db)


def test_checking_an_output_leaves_nothing_behind(tmp_path: Path) -> None:
    from memstore.export_file import check_writable

    check_writable(tmp_path / "Memories.md")
    check_writable(tmp_path / "a" / "b" / "Memories.md")

    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_demo_still_exports_into_a_folder_it_creates(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    rom_or_skip()  # the demo plays the game
    out = tmp_path / "game" / "files" / "Memories.md"

    code, _out, err = run(
        capsys, "--db", str(db), "demo", "--episodes", "1", "--moves", "3",
        "--out", str(out), "--no-progress",
    )  # fmt: skip

    assert code == 0, err
    assert sorted(p.name for p in out.parent.iterdir()) == ["Map.md", "Memories.md"]
