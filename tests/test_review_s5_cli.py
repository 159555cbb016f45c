"""Review S5 B (the README as a contract): the command line's findings.

F5. ``eval --json -`` and ``--markdown -`` wrote a file named ``-``, where elsewhere ``-``
    is standard output.
F10. ``metrics --run ''`` showed the latest run instead of refusing the empty id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import run


@pytest.mark.parametrize("option", ["--json", "--markdown", "--plot"])
def test_eval_refuses_standard_output_for_a_report_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        run(capsys, "eval", option, "-")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "the table is printed on standard output" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("run_id", ["", "  "])
def test_metrics_refuses_an_empty_run_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run_id: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        run(capsys, "--db", str(tmp_path / "m.db"), "metrics", "--run", run_id)
    assert stopped.value.code == 2
    assert "give a run id" in capsys.readouterr().err


def test_the_upgrade_advice_for_a_file_can_be_pasted_into_a_shell(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "my games"
    folder.mkdir()
    db = folder / "a.db"
    assert run(capsys, "--db", str(db), "db", "upgrade", "0006")[0] == 0
    code, _out, err = run(capsys, "--db", str(db), "stats")
    assert code == 1
    assert f"run `memstore --db '{db}' db upgrade`" in err, err


def edited_export(capsys: pytest.CaptureFixture[str], db: Path, out: Path) -> None:
    """``db`` with one memory, exported to ``out``, and its text edited there (not imported)."""
    from memstore.store import MemoryStore
    from tests.conftest import note

    with MemoryStore.open(db) as store:
        store.add_memory(5, "Kitchen", note("Stove", text="Hot."))
    assert run(capsys, "--db", str(db), "export", "--out", str(out))[0] == 0
    out.write_text(out.read_text(encoding="utf-8").replace("Hot.", "Cold."), encoding="utf-8")


def test_export_check_of_a_file_with_edits_not_imported_advises_importing_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # review S5 B F4: the advice was the refresh command, which then refused the file

    db, out = tmp_path / "d.db", tmp_path / "M.md"
    edited_export(capsys, db, out)
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out), "--check")
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert "import it first" in last and "to refresh it" not in last, last
    refresh = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert refresh[0] == 1 and "import it first" in refresh[2]


def test_export_writes_nothing_when_its_notes_cannot_be_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # review S5 B F6: Memories.md was written, then the notes failed (exit 1)
    db, out = tmp_path / "d.db", tmp_path / "M.md"
    notes = Path("/proc/memstore-notes.md")  # a folder no one can write in, root too
    assert run(capsys, "--db", str(db), "db", "upgrade")[0] == 0
    code, _out, err = run(
        capsys, "--db", str(db), "export", "--out", str(out), "--notes", str(notes)
    )
    assert code == 1 and "cannot write in /proc" in err, err
    assert not out.exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_database_s_own_side_file_is_not_opened_as_a_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    # review S5 B F13: `--db d.db-wal db upgrade` wrote a memstore database into the
    # write-ahead log of another live database (export --out refused the same path)
    from memstore.errors import NotAMemstoreDatabase
    from memstore.store import MemoryStore

    db = tmp_path / "d.db"
    MemoryStore.open(db).close()
    side = tmp_path / f"d.db{suffix}"
    existed = side.exists()
    with pytest.raises(NotAMemstoreDatabase, match=f"d.db{suffix} is a file SQLite keeps beside"):
        MemoryStore.open(side)
    code, _out, err = run(capsys, "--db", str(side), "db", "upgrade")
    assert code == 1 and "open d.db itself" in err, err
    assert side.exists() == existed


def test_a_database_named_like_a_side_file_of_a_file_that_is_no_database_opens(
    tmp_path: Path,
) -> None:
    # review S5 D F8: `notes-journal` was refused beside a shell script named `notes`
    from memstore.store import MemoryStore

    (tmp_path / "notes").write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    with MemoryStore.open(tmp_path / "notes-journal") as store:
        assert store.get_persistent_count() == 0


def test_the_import_advice_names_the_database_and_can_be_pasted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # review S5 D F9: "import it first (memstore import Memories.md --apply)" left out
    # --db: pasted, it imported into a new game_files/memories.db
    import shlex

    from memstore.store import MemoryStore

    folder = tmp_path / "my games"
    folder.mkdir()
    db, out = folder / "d.db", folder / "Memories file.md"
    edited_export(capsys, db, out)
    for extra in ((), ("--check",)):
        err = run(capsys, "--db", str(db), "export", "--out", str(out), *extra)[2]
        advice = err[err.index("import it first (") + len("import it first (") :]
        command = advice[: advice.index(")")]
        assert command == shlex.join(["memstore", "import", "--db", str(db), str(out), "--apply"])
    words = shlex.split(command)
    assert run(capsys, *words[1:])[0] == 0
    with MemoryStore.open(db) as store:
        assert store.memories(5)[0].text == "Cold."


def test_the_import_advice_never_prints_a_server_password_and_survives_a_leading_dash() -> None:
    # review S5 E F6: a PostgreSQL URL's password was printed in clear (the `database:`
    # line masks it); `--db=-x.db` gave advice that did not parse
    from types import SimpleNamespace

    from memstore.export_risk import import_advice

    plan = SimpleNamespace(problems=[], conflicts=[])
    url = "postgresql+psycopg://agent:s3cret@127.0.0.1:5432/zork"
    said = import_advice("M.md", plan, prune=False, force=False, cut=False, db_arg=url)
    assert "s3cret" not in said and "memstore import M.md --apply with the same --db" in said
    said = import_advice("M.md", plan, prune=False, force=False, cut=False, db_arg="-x.db")
    assert "(memstore import --db=-x.db M.md --apply)" in said


def test_the_import_advice_for_a_file_named_like_an_option_can_be_pasted() -> None:
    # review S5 F F4: `memstore import --db my.db -notes.md --apply` read -notes.md as an
    # option; with a server, "with the same --db" came between the flags
    import shlex
    from types import SimpleNamespace

    from memstore.export_risk import import_advice

    plan = SimpleNamespace(problems=[], conflicts=[object()])
    said = import_advice("-notes.md", plan, prune=True, force=False, cut=False, db_arg="my.db")
    command = said[said.index("(") + 1 : said.index(", to take")]
    assert shlex.split(command) == [
        "memstore", "import", "--db", "my.db", "--apply", "--prune", "--theirs", "--", "-notes.md"
    ]  # fmt: skip
    url = "postgresql+psycopg://agent:pw@h/zork"
    said = import_advice("M.md", plan, prune=False, force=False, cut=False, db_arg=url)
    assert "(memstore import M.md --apply --theirs with the same --db, to take the file" in said
