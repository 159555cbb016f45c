"""How plainly the command line speaks about its configuration and its inputs (review C:
3, 4, 5, 11-15, 19; review A: 2): every bad input is one line (exit 2 for a usage error,
1 for a refusal), never an internal error or a traceback; nothing is built or waited for
without a bound; a refused database file is left as it was found.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memstore.cli as cli
from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.fixtures.walkthrough import rom_or_skip

#: a user name no machine has: ``~NOBODY/x.db`` cannot be expanded
NOBODY = "memstore-no-such-user-4711"


@pytest.fixture(autouse=True)
def _outside_the_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test in a folder of its own, with no pyproject.toml above it but its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("memstore.config.find_pyproject", _nearest_in(tmp_path))


def _nearest_in(root: Path) -> Any:
    """``find_pyproject``, stopping at ``root`` (the test's folder): a pyproject.toml above
    the temporary folder must not decide a test."""
    from memstore import config

    real = config.find_pyproject

    def find(start: Path | None = None) -> Path | None:
        found = real(start)
        return found if found is not None and found.is_relative_to(root) else None

    return find


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(64, "West of House", 1)
        store.add_memory(64, "West of House", mem("Mailbox here", text="A small mailbox."))
    return db_path


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a usage error (exit code 2), after argparse's usage."""
    with pytest.raises(SystemExit) as caught:
        cli.main(list(argv))
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("usage: ") and lines[-1].startswith("memstore "), err
    assert ": error: " in lines[-1], err
    return lines[-1]


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))


# --- C3: seeds x episodes is bounded before any database is listed --------------------------


def test_eval_refuses_more_episodes_in_all_than_it_could_play(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 11 seeds of 10,000 episodes: each is allowed alone, the product is not
    folder = tmp_path / "big"
    line = usage_error(
        capsys, "eval", "--seeds", "11", "--episodes", "10000", "--moves", "1",
        "--db", str(folder), "--rom", str(tmp_path / "no.z3"), "--no-progress",
    )  # fmt: skip
    assert "seeds x episodes" in line and "100,000" in line and "110,000" in line
    assert not folder.exists()
    # in either order, and with a list of seeds
    seeds = ",".join(str(n) for n in range(1, 12))
    line = usage_error(capsys, "eval", "--episodes", "10000", "--seeds", seeds)
    assert "seeds x episodes" in line


def test_run_eval_refuses_more_episodes_in_all_before_listing_its_databases(
    tmp_path: Path,
) -> None:
    from memstore.evaluation import run_eval

    with pytest.raises(ValueError, match="at most 100,000"):
        run_eval(seeds=range(1, 12), episodes=10_000, moves=1, folder=tmp_path / "big",
                 rom=tmp_path / "no.z3")  # fmt: skip
    assert not (tmp_path / "big").exists()


def test_the_command_line_and_the_library_share_the_bound() -> None:
    from memstore.cli_eval import MAX_EPISODES_IN_ALL as cli_bound
    from memstore.evaluation import MAX_EPISODES_IN_ALL

    assert cli_bound == MAX_EPISODES_IN_ALL


@pytest.mark.slow
def test_the_reviewers_eval_of_ten_thousand_by_ten_thousand_is_a_quick_usage_error(
    tmp_path: Path,
) -> None:
    """Was: 100 million paths listed up front, a MemoryError after 45 s at 2.9 GB."""
    import resource

    def at_most_one_gigabyte() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    finished = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "eval", "--seeds", "10000", "--episodes",
         "10000", "--moves", "1", "--db", str(tmp_path / "big"), "--no-progress"],
        capture_output=True, text=True, timeout=120, preexec_fn=at_most_one_gigabyte,
        cwd=tmp_path,
    )  # fmt: skip
    assert finished.returncode == 2, finished.stderr
    assert "seeds x episodes" in finished.stderr and "Traceback" not in finished.stderr
    assert not (tmp_path / "big").exists()


# --- A2: two evaluations never share one --db folder ------------------------------------------


LOCK_NAME = "memstore-eval.lock"


def eval_argv(folder: Path, *more: str) -> list[str]:
    rom = str(rom_or_skip())
    return ["eval", "--db", str(folder), "--rom", rom, "--no-progress", *more]


def test_eval_refuses_a_folder_another_evaluation_is_using(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "dbs"
    folder.mkdir()
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"4242\n")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running evaluation holds it
        code, _out, err = run(capsys, *eval_argv(folder, "--episodes", "1", "--moves", "1",
                                                 "--seeds", "1"))  # fmt: skip
    finally:
        os.close(fd)
    assert code == 1
    line = one_error_line(err, str(folder), "another evaluation", "4242")
    assert "wait for it" in line
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]  # no database made


@pytest.mark.slow
def test_a_second_evaluation_started_while_the_first_plays_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: both runs checked that no database was there, then both played into the same
    databases; both exited 0 with wrong figures."""
    from memstore import evaluation

    folder, rom = tmp_path / "shared", rom_or_skip()
    settings = {"episodes": 2, "moves": 20, "seeds": [1], "rom": rom}
    solo = evaluation.run_eval(folder=tmp_path / "solo", **settings)  # type: ignore[arg-type]
    real_play = evaluation._play_arm
    second: dict[str, Any] = {}

    def play_arm(*args: Any) -> Any:
        if not second:  # the first run checked its folder and is about to play: start another
            second["code"] = cli.main(eval_argv(folder, "--episodes", "2", "--moves", "20",
                                                "--seeds", "1"))  # fmt: skip
            second["err"] = capsys.readouterr().err
        return real_play(*args)

    monkeypatch.setattr(evaluation, "_play_arm", play_arm)
    first = evaluation.run_eval(folder=folder, **settings)  # type: ignore[arg-type]
    assert second["code"] == 1
    one_error_line(second["err"], "another evaluation", str(folder))
    timeless = {"timing": False}
    assert evaluation.report_json(first, **timeless) == evaluation.report_json(solo, **timeless)
    assert not (folder / LOCK_NAME).exists()  # released and removed when the run ends


@pytest.mark.slow
def test_what_a_stopped_evaluation_leaves_behind_blocks_nothing_but_its_databases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "dbs"
    folder.mkdir()
    (folder / LOCK_NAME).write_text("999999\n", encoding="utf-8")  # a killed run's lock file
    argv = eval_argv(folder, "--episodes", "1", "--moves", "3", "--seeds", "1")
    code, _out, err = run(capsys, *argv)
    assert code == 0, err
    assert not (folder / LOCK_NAME).exists()
    # its databases are still there: the next run says which and how to clear them
    code, _out, err = run(capsys, *argv)
    assert code == 1
    line = one_error_line(err, "already exists", "remove")
    assert "explorer-seed*-*.db" in line


# --- C4: a schema whose text is not UTF-8 ------------------------------------------------------


def corrupt_schema(path: Path) -> None:
    """A memstore database whose schema text for ``memories`` ends in bytes that are not
    UTF-8: SQLite's "malformed database schema ... near ..." quotes them, and Python's
    sqlite3 cannot decode its own error message."""
    MemoryStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema = ON")
    bad = b"CREATE TABLE memories (x) \xff\xfe".hex()
    conn.execute(f"UPDATE sqlite_master SET sql = CAST(X'{bad}' AS TEXT) WHERE name = 'memories'")
    conn.commit()
    conn.close()
    assert side_files(path) == []


@pytest.mark.parametrize(
    "command",
    [["stats"], ["check"], ["show", "64"], ["export", "--out", "x.md"], ["db", "current"],
     ["metrics"], ["map", "rooms"], ["import", "x.md"]],
)  # fmt: skip
def test_a_schema_that_is_not_utf8_is_one_line_and_the_file_is_left_as_it_was(
    capsys: pytest.CaptureFixture[str], db_path: Path, command: list[str]
) -> None:
    corrupt_schema(db_path)
    Path("x.md").write_text("", encoding="utf-8")
    before = db_path.read_bytes()
    code, _out, err = run(capsys, "--db", str(db_path), *command)
    assert code == 1
    one_error_line(err, str(db_path), "cannot be read as SQLite", "malformed", "left untouched")
    assert db_path.read_bytes() == before
    assert side_files(db_path) == []


def test_the_library_refuses_it_too(db_path: Path) -> None:
    from memstore.errors import NotAMemstoreDatabase

    corrupt_schema(db_path)
    with pytest.raises(NotAMemstoreDatabase, match="malformed"):
        MemoryStore.open(db_path)
    assert side_files(db_path) == []


def test_a_refused_file_gets_no_wal_or_shm_beside_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    # a truncated memstore database, and another application's healthy WAL database
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(db.read_bytes()[: 40 * 1024])
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    for path, needle in ((truncated, "cannot be read as SQLite"), (other, "not a memstore")):
        assert side_files(path) == []
        code, _out, err = run(capsys, "--db", str(path), "stats")
        assert code == 1
        one_error_line(err, needle)
        assert side_files(path) == []


def test_side_files_that_were_there_before_are_left(db: Path) -> None:
    from memstore.connection import check_existing, resolve_target

    with MemoryStore.open(db):  # an open store keeps its -wal and -shm
        assert side_files(db) == [f"{db.name}-shm", f"{db.name}-wal"]
        assert check_existing(resolve_target(db)) is False
        assert side_files(db) == [f"{db.name}-shm", f"{db.name}-wal"]


# --- C5: --version into a closed pipe or a full device ----------------------------------------


@pytest.fixture
def stdout_to(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    opened: list[Any] = []

    def replace(stream: Any) -> None:
        opened.append(stream)
        monkeypatch.setattr(sys, "stdout", stream)

    yield replace
    for stream in opened:
        try:
            stream.close()
        except OSError:
            pass


def version(capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    return caught.value.code, capsys.readouterr().err


def test_version_into_a_closed_pipe_says_nothing_and_exits_1(
    capsys: pytest.CaptureFixture[str], stdout_to: Any
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `memstore --version | true`: the reader is gone
    stdout_to(os.fdopen(write_end, "w"))
    code, err = version(capsys)
    assert code == 1 and err == ""


def test_version_into_a_full_device_is_one_error_line(
    capsys: pytest.CaptureFixture[str], stdout_to: Any
) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    stdout_to(open("/dev/full", "w", encoding="utf-8"))  # noqa: SIM115 - closed by the fixture
    code, err = version(capsys)
    assert code == 1
    one_error_line(err, "No space left on device")


def test_version_with_standard_output_closed_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", None)  # `memstore --version >&-`
    code, err = version(capsys)
    assert code == 1
    assert err == "memstore: error: standard output is closed; nothing was done\n"


def test_version_still_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("memstore ") and out.count("\n") == 1


@pytest.mark.slow
def test_version_piped_to_a_reader_that_is_gone_prints_no_traceback() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "memstore.cli", "--version"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert finished.stderr == "" and finished.returncode == 1


# --- C11: a --db whose ~user cannot be expanded -----------------------------------------------


@pytest.mark.parametrize(
    "given", [f"~{NOBODY}/x.db", f"sqlite:///~{NOBODY}/x.db"], ids=["path", "url"]
)
@pytest.mark.parametrize("command", [["stats"], ["db", "current"], ["db", "upgrade"]])
def test_a_home_folder_that_cannot_be_found_is_one_line(
    capsys: pytest.CaptureFixture[str], given: str, command: list[str]
) -> None:
    code, _out, err = run(capsys, "--db", given, *command)
    assert code == 1
    one_error_line(err, f"~{NOBODY}", "home folder")


def test_the_library_says_the_same(tmp_path: Path) -> None:
    from memstore.connection import resolve_target
    from memstore.errors import UnsupportedDatabase

    with pytest.raises(UnsupportedDatabase, match=f"~{NOBODY}"):
        resolve_target(f"~{NOBODY}/x.db")
    with pytest.raises(UnsupportedDatabase, match=f"~{NOBODY}"):
        MemoryStore.open(f"~{NOBODY}/x.db")


def test_a_loop_of_symbolic_links_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, _out, err = run(capsys, "--db", str(tmp_path / "a"), "stats")
    assert code == 1
    one_error_line(err, str(tmp_path / "a"), "loop")


# --- C12: a pyproject.toml memstore cannot read -----------------------------------------------


def test_a_pyproject_whose_tool_is_not_a_table_holds_no_memstore_settings(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    Path("pyproject.toml").write_text("tool = 3\n", encoding="utf-8")
    code, out, err = run(capsys, "--db", str(db), "stats")
    assert code == 0 and err == "", err
    assert "memories" in out


def test_a_memstore_setting_that_is_not_a_table_is_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    pyproject = Path("pyproject.toml").resolve()
    pyproject.write_text("[tool]\nmemstore = 3\n", encoding="utf-8")
    code, _out, err = run(capsys, "--db", str(db), "stats")
    assert code == 1
    one_error_line(err, str(pyproject), "[tool.memstore]", "must be a table")


def test_a_pyproject_with_memstore_settings_that_is_not_utf8_is_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    pyproject = Path("pyproject.toml").resolve()
    pyproject.write_bytes(b'[tool.memstore]\nmodel = "caf\xe9"\n')
    code, _out, err = run(capsys, "--db", str(db), "stats")
    assert code == 1
    one_error_line(err, f"cannot read [tool.memstore] from {pyproject}", "not UTF-8")


@pytest.mark.parametrize(
    "content", [b"\xff\xfe", b"[project\nname = 'other'\n", b"[tool.black]\nx = \xff\n"]
)
def test_an_unrelated_pyproject_memstore_cannot_read_blocks_no_command(
    capsys: pytest.CaptureFixture[str], db: Path, content: bytes
) -> None:
    """Another project's broken pyproject.toml (no "memstore" anywhere in it) can hold no
    memstore settings: memstore reads none from it rather than refuse every command."""
    Path("pyproject.toml").write_bytes(content)
    code, _out, err = run(capsys, "--db", str(db), "stats")
    assert code == 0 and err == "", err


# --- C13: a blank database setting ------------------------------------------------------------


@pytest.mark.parametrize("command", [["stats"], ["db", "upgrade"], ["db", "current"]])
def test_a_blank_memstore_db_is_one_line_and_makes_no_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    command: list[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("MEMSTORE_DB", "  ")
    code, _out, err = run(capsys, *command)
    assert code == 1
    one_error_line(err, "MEMSTORE_DB is blank")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ['""', '"   "'])
def test_a_blank_db_in_the_pyproject_is_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    pyproject = Path("pyproject.toml").resolve()
    pyproject.write_text(f"[tool.memstore]\ndb = {value}\n", encoding="utf-8")
    code, _out, err = run(capsys, "stats")
    assert code == 1
    one_error_line(err, str(pyproject), "db is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_the_library_refuses_a_blank_database_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from memstore.config import DEFAULT_DB, MemstoreConfig, load_config

    with pytest.raises(ValueError, match="empty"):
        MemstoreConfig(db=" ")
    monkeypatch.setenv("MEMSTORE_DB", "\t")
    with pytest.raises(ValueError, match="MEMSTORE_DB"):
        load_config()
    monkeypatch.setenv("MEMSTORE_DB", "")  # set to nothing: as if unset, as before
    assert load_config().db == DEFAULT_DB


# --- C14: the history_window warning ----------------------------------------------------------

WINDOW_WARNING = "history_window = 20 may use excessive context; recommended 3-8, at most 10"


def test_the_history_window_warning_is_one_plain_line(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    Path("pyproject.toml").write_text("[tool.memstore]\nhistory_window = 20\n", encoding="utf-8")
    code, out, err = run(capsys, "--db", str(db), "stats")
    assert code == 0 and "memories" in out
    assert err == f"memstore: warning: {WINDOW_WARNING}\n"


def test_library_users_see_the_warning_at_their_own_line(
    monkeypatch: pytest.MonkeyPatch, db: Path
) -> None:
    from memstore.config import ConfigWarning, MemstoreConfig, load_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        MemstoreConfig(history_window=20)
        load_config(history_window=20)
        MemoryStore.open(db, config=MemstoreConfig(history_window=20)).close()
    assert [str(w.message) for w in caught] == [WINDOW_WARNING] * 3
    assert all(issubclass(w.category, ConfigWarning) for w in caught)
    assert issubclass(ConfigWarning, UserWarning)
    assert {w.filename for w in caught} == {__file__}


# --- C15: demo --out - --------------------------------------------------------------------------


def test_demo_refuses_standard_output_as_its_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = usage_error(
        capsys, "--db", "x.db", "demo", "--episodes", "1", "--moves", "5", "--out", "-"
    )
    assert "--out" in line and "standard output" in line and "memstore export" in line
    assert list(tmp_path.iterdir()) == []  # no file named -, no database, no Map.md


# --- C19: eval --help tells the truth about --db -----------------------------------------------


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as caught:
        cli.main([*argv, "--help"])
    assert caught.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_eval_help_says_db_is_a_folder_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "eval")
    assert "--db FOLDER" in text
    assert "$MEMSTORE_DB" not in text and "game_files/memories.db" not in text
    assert "PATH_OR_URL" not in text
    assert "MEMSTORE_DB and [tool.memstore] db are not read" in text
    # every other command keeps the database's own help
    text = _help(capsys, "stats")
    assert "--db PATH_OR_URL" in text and "$MEMSTORE_DB" in text


@pytest.mark.parametrize("key", ["model", "query_model", "api_base", "api_key"])
def test_a_blank_setting_in_the_pyproject_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """Review round 5: a blank ``model`` in [tool.memstore] ran the manager in LLM mode
    with the model '   ' (the same value in MEMSTORE_MODEL is refused)."""
    Path("pyproject.toml").write_text(f'[tool.memstore]\n{key} = "   "\n', encoding="utf-8")
    code, _out, err = run(capsys, "--db", "x.db", "stats")
    assert code == 1
    one_error_line(err, key, "blank")
