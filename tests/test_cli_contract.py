"""The command line's contract: options where users type them, usage errors (exit 2, one
line), user errors (exit 1, one line, never SQL), internal errors (one line, the traceback
only with --debug), --version, and the `export --check` report (memstore.cli_diff)."""

from __future__ import annotations

import argparse
import importlib.metadata
import sqlite3
from collections.abc import Callable
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

import pytest
import sqlalchemy.exc

import memstore.cli as cli
from memstore.cli_diff import MAX_DIFF_LINES, check_report
from memstore.errors import StoreBusy
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory

BIGGEST_LOCATION = 2**63 - 1  # SQLite's largest integer


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run argv, expect argparse's exit 2 with usage and one error line; return that line."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert errors == [lines[-1]], err  # usage, then exactly one error line
    return errors[0]


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(15, "West of House", 1)
        store.add_memory(15, "West of House", mem("Mailbox"))
    return db_path


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A `probe` command that records the options it got (and can be told to raise)."""
    cli.build_parser()  # register memstore/cli_*.py's commands in the real registry first
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))
    seen: dict[str, Any] = {}

    @cli.command("probe", help="record the global options")
    def _probe(args: argparse.Namespace, ctx: cli.Context) -> int:
        seen.update(db=args.db, busy_timeout=args.busy_timeout, debug=args.debug)
        raise_it: Callable[[], None] | None = seen.get("raise")
        if raise_it is not None:
            raise_it()
        return 0

    return seen


# --- options where users type them -------------------------------------------------------------


def test_db_and_busy_timeout_work_before_or_after_the_subcommand(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any]
) -> None:
    assert run(capsys, "probe")[0] == 0
    assert (probe["db"], probe["busy_timeout"], probe["debug"]) == (None, 30.0, False)
    assert run(capsys, "--db", "a.db", "--busy-timeout", "5", "--debug", "probe")[0] == 0
    # the subcommand's copy of an option does not reset what was given before it
    assert (probe["db"], probe["busy_timeout"], probe["debug"]) == ("a.db", 5.0, True)
    assert run(capsys, "probe", "--db", "b.db", "--busy-timeout", "2", "--debug")[0] == 0
    assert (probe["db"], probe["busy_timeout"], probe["debug"]) == ("b.db", 2.0, True)
    assert run(capsys, "--db", "a.db", "probe", "--db", "c.db")[0] == 0
    assert probe["db"] == "c.db"  # the later one wins, as for any repeated option


def test_export_and_stats_take_db_after_the_subcommand(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    code, stdout, err = run(capsys, "export", "--db", str(db), "--out", str(out))
    assert code == 0, err
    assert f"database: {db}" in stdout and "## Location 15: West of House" in out.read_text()
    code, stdout, err = run(capsys, "stats", "--busy-timeout", "1", "--db", str(db))
    assert code == 0, err
    assert f"database: {db}" in stdout and "locations: 1" in stdout


# --- usage errors: exit 2, one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["demo", "--moves", "0"], "--moves"),
        (["demo", "--episodes", "0"], "--episodes"),
        (["demo", "--episodes", "-3"], "--episodes"),
        (["demo", "--moves", "397"], "396"),
        (["demo", "--moves", "many"], "--moves"),
        (["show", "--flagged", "0"], "--flagged"),
        (["show", "--flagged", "-1"], "--flagged"),
        (["show", "abc"], "'abc'"),
        (["show", "-5"], "negative"),
        (["show", str(2**63)], str(2**63)),
        (["show", str(10**30)], "location"),
        (["history", str(2**63), "Mailbox"], str(2**63)),
        (["history", "x1", "Mailbox"], "'x1'"),
        (["metrics", "--run", "abc", "--all-runs"], "not allowed with"),
        (["metrics", "--runs", "--all-runs"], "not allowed with"),
        (["--busy-timeout", "inf", "stats"], "'inf'"),
        (["stats", "--busy-timeout", "inf"], "'inf'"),
        (["--busy-timeout", "nan", "stats"], "'nan'"),
        (["--busy-timeout", "-1", "stats"], "'-1'"),
        (["stats", "--busy-timeout", "1e300"], "'1e300'"),
        (["--busy-timeout", "soon", "stats"], "'soon'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    line = usage_error(capsys, *argv)
    assert line.startswith("memstore"), line
    assert needle in line, line


def test_the_largest_sqlite_location_is_accepted(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, err = run(capsys, "--db", str(db), "show", str(BIGGEST_LOCATION))
    assert (code, err) == (0, "")
    assert f"no memories at location {BIGGEST_LOCATION}" in out


def test_the_demo_was_silently_defaulting_zero(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 0 used to mean "the default" (120 moves): now it is refused before anything is opened
    db = tmp_path / "never.db"
    usage_error(capsys, "--db", str(db), "demo", "--moves", "0", "--rom", str(tmp_path / "x"))
    assert not db.exists()


# --- the error contract ------------------------------------------------------------------------

SECRET = "hunter2-parameter"
STATEMENT = "INSERT INTO memories (title) VALUES (?)"


def sql_error() -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError(
        STATEMENT, (SECRET,), sqlite3.OperationalError("disk I/O error")
    )


def real_sqlite_error(tmp_path: Path, statement: str) -> sqlalchemy.exc.DBAPIError:
    """What SQLAlchemy raises for ``statement`` on a 3-page database (parameter: SECRET)."""
    engine = sqlalchemy.create_engine(f"sqlite:///{Path(mkdtemp(dir=tmp_path)) / 'small.db'}")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x BLOB, y TEXT)")
            conn.exec_driver_sql("PRAGMA max_page_count = 3")
            conn.exec_driver_sql(statement, (SECRET,))
    except sqlalchemy.exc.DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError(f"{statement} did not fail")


def internal_line(kind: str, message: str) -> str:
    return f"memstore: internal error: {kind}: {message} (run with --debug for the traceback)\n"


def test_an_unexpected_exception_is_one_internal_error_line(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)

    def boom() -> None:
        raise ValueError("a bad value\nover two lines")

    probe["raise"] = boom
    code, out, err = run(capsys, "probe")
    assert (code, out) == (1, "")
    assert err == internal_line("ValueError", "a bad value over two lines")


def test_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> None:
        raise TypeError("not a str")

    probe["raise"] = boom
    for argv, env in (
        (["--debug", "probe"], None),
        (["probe", "--debug"], None),
        (["probe"], "1"),
    ):
        if env is None:
            monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)
        else:
            monkeypatch.setenv("MEMSTORE_DEBUG", env)
        code, _out, err = run(capsys, *argv, traceback=True)
        assert code == 1
        assert "Traceback (most recent call last)" in err and "in boom" in err, argv
        assert err.strip().splitlines()[-1].startswith("memstore: internal error: TypeError")
    monkeypatch.setenv("MEMSTORE_DEBUG", "0")
    code, _out, err = run(capsys, "probe")
    assert code == 1 and "Traceback" not in err


def test_an_unmapped_sqlalchemy_error_never_shows_its_sql(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)

    def boom() -> None:
        raise sql_error()

    probe["raise"] = boom
    assert "[SQL:" in str(sql_error())  # what used to be printed
    code, _out, err = run(capsys, "probe")
    assert code == 1
    assert err == internal_line("OperationalError", "(sqlite3.OperationalError) disk I/O error")
    assert SECRET not in err and "INSERT" not in err and "sqlalche.me" not in err


def test_memstore_errors_stay_user_errors_without_sql(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any]
) -> None:
    def busy() -> None:
        raise StoreBusy(f"the database is locked: {sql_error()}")

    probe["raise"] = busy
    code, _out, err = run(capsys, "probe")
    assert code == 1
    assert err.startswith("memstore: error: the database is locked: ")
    assert err.count("\n") == 1 and "disk I/O error" in err
    assert SECRET not in err and "INSERT" not in err and "[SQL" not in err

    def missing() -> None:
        raise FileNotFoundError(2, "No such file or directory", "nowhere.md")

    probe["raise"] = missing
    code, _out, err = run(capsys, "probe")
    assert (code, err) == (1, "memstore: error: nowhere.md: No such file or directory\n")

    def cli_error() -> None:
        raise cli.CliError("give a location number")

    probe["raise"] = cli_error
    assert run(capsys, "probe")[1:] == ("", "memstore: error: give a location number\n")


def test_a_full_disk_is_a_user_error_and_a_bad_statement_a_bug(
    capsys: pytest.CaptureFixture[str],
    probe: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)
    full = real_sqlite_error(tmp_path, "INSERT INTO t VALUES (zeroblob(100000), ?)")

    def disk_full() -> None:
        raise full

    probe["raise"] = disk_full
    code, _out, err = run(capsys, "probe")
    assert (code, err) == (1, "memstore: error: database or disk is full (SQLITE_FULL)\n")
    bad = real_sqlite_error(tmp_path, "SELECT nope FROM t WHERE y = ?")

    def bad_statement() -> None:
        raise bad

    probe["raise"] = bad_statement
    code, _out, err = run(capsys, "probe")
    assert code == 1
    assert err == internal_line(
        "OperationalError", "(sqlite3.OperationalError) no such column: nope"
    )
    assert SECRET not in err and "SELECT" not in err


def test_a_long_internal_message_is_cut(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)

    def boom() -> None:
        raise RuntimeError("x" * 5000)

    probe["raise"] = boom
    code, _out, err = run(capsys, "probe")
    assert code == 1 and err.count("\n") == 1 and len(err) < 400
    assert "..." in err and err.endswith("(run with --debug for the traceback)\n")


def test_a_bad_configuration_is_a_user_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the library says ValueError (or pydantic's ValidationError); the user reads one line
    monkeypatch.chdir(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.memstore\n", encoding="utf-8")
    code, _out, err = run(capsys, "stats")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"memstore: error: cannot read [tool.memstore] from {pyproject}: ")
    pyproject.write_text('[tool.memstore]\nhistory_window = "many"\nsurprise = 1\n')
    code, _out, err = run(capsys, "stats")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("memstore: error: invalid memstore settings ")
    assert "history_window: Input should be a valid integer" in err
    assert "surprise: Extra inputs are not permitted" in err
    assert "pydantic.dev" not in err and "input_value" not in err


def test_an_empty_db_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--db" in usage_error(capsys, "stats", "--db", "")


def test_db_is_a_path_or_url_and_the_store_says_which_urls_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL URLs come next: the parser accepts any URL and the store decides (today
    # it refuses every URL but SQLite's with one line, exit code 1)
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "database path or URL" in " ".join(capsys.readouterr().out.split())
    for url in ("postgresql+psycopg://memstore@127.0.0.1:1/memstore", "mysql://u@127.0.0.1:1/m"):
        for argv in (["--db", url, "stats"], ["show", "1", "--db", url], ["--db", url, "export"]):
            code, out, err = run(capsys, *argv)
            assert code == 1 and err.count("\n") == 1, (argv, err)
            assert err.startswith("memstore: error: ") and "Traceback" not in err, err
            assert "usage:" not in err


class FakeServerError(Exception):
    """A DBAPI error as psycopg raises it: a message and the server's SQLSTATE."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class OperationalError(FakeServerError):
    """The driver's OperationalError (a connection that failed before any SQLSTATE)."""


def test_a_database_server_that_cannot_serve_is_a_user_error_and_a_bad_statement_a_bug(
    capsys: pytest.CaptureFixture[str], probe: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTORE_DEBUG", raising=False)
    cases = [
        (
            FakeServerError("terminating connection\nDETAIL: x", "57P01"),
            "error: terminating connection (SQLSTATE 57P01)",
        ),
        (
            FakeServerError("could not extend file: No space left", "53100"),
            "error: could not extend file: No space left (SQLSTATE 53100)",
        ),
        (
            OperationalError("connection failed: Connection refused", None),
            "error: connection failed: Connection refused",
        ),
        (FakeServerError('column "nope" does not exist', "42703"), "internal error: "),
    ]
    for orig, expected in cases:

        def boom(orig: Exception = orig) -> None:
            raise sqlalchemy.exc.OperationalError(STATEMENT, (SECRET,), orig)

        probe["raise"] = boom
        code, _out, err = run(capsys, "probe")
        assert code == 1 and err.count("\n") == 1, err
        assert err.startswith(f"memstore: {expected}"), err
        assert SECRET not in err and "INSERT" not in err and "DETAIL" not in err


# --- --version ---------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"memstore {importlib.metadata.version('memstore')}\n"


# --- export --check's report (memstore.cli_diff) -----------------------------------------------


def test_check_report_shows_a_unified_diff_and_the_command(tmp_path: Path) -> None:
    path = tmp_path / "Memories.md"
    path.write_text("# Location Memories\n\nold line\nsame\n", encoding="utf-8")
    report = check_report(path, "# Location Memories\n\nnew line\nsame\n", "my db.sqlite")
    lines = report.splitlines()
    assert lines[0] == f"{path} differs from what the database would export:"
    assert f"--- {path}" in lines and "+++ what the database would export" in lines
    assert "-old line" in lines and "+new line" in lines and " same" in lines
    assert lines[-1] == f"run `memstore export --db 'my db.sqlite' --out {path}` to refresh it"


def test_check_report_without_db_and_for_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.md"
    report = check_report(path, "# Location Memories\n", None)
    assert report.splitlines() == [
        f"{path} does not exist",
        f"run `memstore export --out {path}` to write it",
    ]


def test_check_report_shows_at_most_50_diff_lines(tmp_path: Path) -> None:
    path = tmp_path / "M.md"
    path.write_text("".join(f"old {n}\n" for n in range(200)), encoding="utf-8")
    report = check_report(path, "".join(f"new {n}\n" for n in range(200)), "x.db")
    lines = report.splitlines()
    diff = lines[1 : lines.index("... (353 more diff lines)")]
    assert len(diff) == MAX_DIFF_LINES == 50
    assert lines[-1] == f"run `memstore export --db x.db --out {path}` to refresh it"


def test_check_report_reads_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "M.md"
    path.write_bytes(b"caf\xe9\n")
    report = check_report(path, "cafe\n", None)
    assert "-caf\ufffd" in report.splitlines() and "+cafe" in report.splitlines()


def test_check_report_names_a_difference_in_line_endings_only(tmp_path: Path) -> None:
    path = tmp_path / "M.md"
    path.write_bytes(b"# Location Memories\r\n")
    report = check_report(
        path, "# Location Memories\n", None, export_args=["--out", "M.md", "--notes", path]
    )
    assert report.splitlines()[1:] == [
        "(the lines are the same; their endings or the last newline differ)",
        f"run `memstore export --out M.md --notes {path}` to refresh it",
    ]


def test_main_builds_its_parser_once_until_a_command_is_registered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse looks up a translation for every help string it is given: ~10 ms a parser
    built: list[argparse.ArgumentParser] = []
    real = cli.build_parser

    def counting() -> argparse.ArgumentParser:
        built.append(real())
        return built[-1]

    monkeypatch.setattr(cli, "build_parser", counting)
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))
    for _ in range(3):
        with pytest.raises(SystemExit):
            cli.main(["--version"])
    assert len(built) == 1
    assert capsys.readouterr().out.count("memstore ") == 3

    @cli.command("zz-registered-later", help="registered after the first parse")
    def later(_args: argparse.Namespace, ctx: cli.Context) -> int:
        ctx.print("ran")
        return 0

    assert cli.main(["--db", "x.db", "zz-registered-later"]) == 0
    assert len(built) == 2 and capsys.readouterr().out == "ran\n"
