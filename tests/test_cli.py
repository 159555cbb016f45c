"""The memstore command line, run in-process with memstore.cli.main (and once as a script)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command as alembic_command
from alembic.config import Config

import memstore.cli as cli
from exporters.base_line import split_base_line
from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory

ROOT = Path(__file__).resolve().parents[1]


def assert_one_error_line(code: int, err: str, *needles: str) -> None:
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memstore: error: "), err
    for needle in needles:
        assert needle in lines[0], err


def populate(store: MemoryStore, mem: MakeMemory) -> None:
    store.record_visit(15, "West of House", 1)
    store.record_visit(15, "West of House", 2)
    store.add_memory(15, "West of House", mem("Open window", category="SUCCESS", turns="23-24"))
    store.add_memory(15, "West of House", mem("Mailbox", persistence="core"))
    store.supersede_memory(
        15, "West of House", "Open window", mem("Window stays open", episode=2, turns="40-41")
    )
    store.invalidate_memory(15, "Mailbox", "it was a lie", turn=9)
    store.record_visit(33, "Troll Room", 2)
    store.add_memory(33, "Troll Room", mem("Troll", category="DANGER", score_change=-10))
    store.add_memory(33, "Troll Room", mem("Axe", category="DISCOVERY", text="one\ntwo"))


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        populate(store, mem)
    return db_path


def body(text: str) -> str:
    """A Memories.md without its export base (which names the database and its version)."""
    return split_base_line(text)[1]


def export(capsys: pytest.CaptureFixture[str], db: Path, out: Path) -> str:
    code, stdout, _err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0
    assert f"database: {db}" in stdout
    return out.read_text(encoding="utf-8")


# --- export -----------------------------------------------------------------------------------


def test_export_writes_the_file_and_check_compares_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sub" / "Memories.md"
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out), "--check")
    assert code == 1 and str(out) in err and "does not exist" in err
    assert not out.exists()  # --check never writes
    text = export(capsys, db, out)
    assert "## Location 15: West of House" in text
    code, stdout, err = run(capsys, "--db", str(db), "export", "--out", str(out), "--check")
    assert (code, err) == (0, "") and "up to date" in stdout
    out.write_text(text + "edited\n", encoding="utf-8")
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out), "--check")
    assert code == 1 and str(out) in err and "differs" in err
    assert out.read_text(encoding="utf-8") == text + "edited\n"


def test_export_check_shows_the_diff_and_the_command_that_fixes_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    text = export(capsys, db, out)
    out.write_text(text.replace("one\ntwo", "one\nthree"), encoding="utf-8")
    code, _out, err = run(capsys, "export", "--out", str(out), "--check", "--db", str(db))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"memstore: {out} differs from what the database would export:"
    assert "-three" in lines and "+two" in lines and "Traceback" not in err
    fix = f"memstore export --db {db} --out {out}"
    # the difference is a reviewer's edit, never imported: the command would refuse to
    # lose it, and the advice says so (review S5 B F4: it said "to refresh it")
    assert lines[-1].startswith(f"`{fix}` would refuse it: {out} holds 1 edit(s) that were")
    assert "import it first" in lines[-1]
    code, _out, err = run(capsys, *shlex.split(fix)[1:])
    assert code == 1 and "1 edit(s) that were not imported" in err
    assert run(capsys, *shlex.split(fix)[1:], "--force")[0] == 0  # forced, it does fix it
    code, stdout, err = run(capsys, "--db", str(db), "export", "--out", str(out), "--check")
    assert (code, err) == (0, "") and "up to date (2 locations, 5 memories)" in stdout


def test_export_counts_one_location_and_one_memory_in_the_singular(
    capsys: pytest.CaptureFixture[str], db_path: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(33, "Troll Room", mem("Troll"))
    out = tmp_path / "M.md"
    code, stdout, _err = run(capsys, "--db", str(db_path), "export", "--out", str(out))
    assert code == 0 and f"wrote {out}: 1 location, 1 memory" in stdout
    code, stdout, _err = run(capsys, "--db", str(db_path), "export", "--out", str(out), "--check")
    assert code == 0 and "is up to date (1 location, 1 memory)" in stdout


def test_export_is_atomic(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "Memories.md"
    out.write_text("# Location Memories\n", encoding="utf-8")  # an older (empty) export

    def broken_replace(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert_one_error_line(code, err, "No space left on device")
    assert out.read_text(encoding="utf-8") == "# Location Memories\n"
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("memories.db"))
    assert left == ["Memories.md"]  # no temporary file left behind


def test_write_atomically_keeps_permissions_and_leaves_no_temp_files(tmp_path: Path) -> None:
    from memstore.export_file import export_check, write_atomically

    target = tmp_path / "M.md"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o600)
    write_atomically(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["M.md"]
    assert export_check(target, "new\n") and not export_check(target, "new")
    assert not export_check(tmp_path / "missing.md", "")


# --- import -----------------------------------------------------------------------------------


def test_import_dry_run_writes_nothing(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    text = export(capsys, db, tmp_path / "M.md")
    edited = tmp_path / "edited.md"
    edited.write_text(text.replace("one\ntwo", "one\nthree"), encoding="utf-8")
    before = db.read_bytes()
    code, out, _err = run(capsys, "--db", str(db), "import", str(edited))
    assert code == 0 and "changed 1" in out and "dry run" in out
    assert export(capsys, db, tmp_path / "after.md") == text
    assert db.read_bytes() == before or export(capsys, db, tmp_path / "again.md") == text
    # nor does it create a database that does not exist
    fresh = tmp_path / "fresh.db"
    code, out, _err = run(capsys, "--db", str(fresh), "import", str(edited))
    assert code == 0 and "added 5" in out and not fresh.exists()


def test_import_apply_round_trip_is_byte_identical(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "M.md"
    text = export(capsys, db, out)
    assert '[Invalidated at T9: "it was a lie"]' in text
    assert 'by "Window stays open"]' in text
    copy = tmp_path / "copy.db"
    code, stdout, _err = run(capsys, "--db", str(copy), "import", str(out), "--apply")
    assert code == 0 and "added 5" in stdout and "applied" in stdout
    assert body(export(capsys, copy, tmp_path / "copy.md")) == body(text)
    code, stdout, _err = run(capsys, "--db", str(copy), "import", str(out), "--apply")
    assert code == 0 and "unchanged 5" in stdout and "nothing to apply" in stdout


CORRUPT_SECTION = (
    "\n## Location 50: Cellar\n**Visits:** 1 | **Episodes:** 1\n\n### Memories\n\n"
    "**[NOTE - PERMANENT] Dark** *(Ep1, T3)*\nIt is dark.\n\n"
    "**[NOTE - PERMANENT] Broken** *(Ep1, Tomorrow)*\nBad metadata.\n\n---\n"
    "\n## Locaton sixty: Garbage\n**Visits:** 1 | **Episodes:** 1\n\n### Memories\n\n"
    "**[NOTE - PERMANENT] Lost** *(Ep1, T3)*\nIn a broken section.\n\n---\n"
    "\n## Location 70: Attic\n**Visits:** 2 | **Episodes:** 3\n\n### Memories\n\n"
    "**[DISCOVERY - PERMANENT] Rope** *(Ep3, T1)*\nA rope.\n\n---\n"
)


def test_a_corrupted_file_is_refused_unless_skip_invalid(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    text = export(capsys, db, tmp_path / "M.md")
    corrupt = tmp_path / "corrupt.md"
    corrupt.write_text(text + CORRUPT_SECTION, encoding="utf-8")
    bad_memory_line = (text + CORRUPT_SECTION).splitlines().index(
        "**[NOTE - PERMANENT] Broken** *(Ep1, Tomorrow)*"
    ) + 1
    bad_header_line = (text + CORRUPT_SECTION).splitlines().index("## Locaton sixty: Garbage") + 1

    code, out, err = run(capsys, "--db", str(db), "import", str(corrupt), "--apply")
    assert_one_error_line(code, err, "2 problem(s)", "nothing was applied", "--skip-invalid")
    assert "problems 2" in out and f"line {bad_memory_line}:" in out
    assert export(capsys, db, tmp_path / "after.md") == text

    code, out, err = run(
        capsys, "--db", str(db), "import", str(corrupt), "--apply", "--skip-invalid"
    )
    assert code == 0 and err == ""
    assert f"line {bad_memory_line}: malformed metadata" in out
    assert f"line {bad_header_line}: malformed location header" in out
    assert "added 2" in out and "applied (the problems listed were skipped)" in out
    with MemoryStore.open(db) as store:
        assert [m.title for m in store.memories(50)] == ["Dark"]
        assert [m.title for m in store.memories(70)] == ["Rope"]
        assert [m.title for m in store.memories(15, include_superseded=True)] == [
            "Open window",
            "Mailbox",
            "Window stays open",
        ]


def test_prune_deletes_and_nothing_is_deleted_without_it(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    text = export(capsys, db, tmp_path / "M.md")
    smaller = tmp_path / "smaller.md"
    axe = "**[DISCOVERY - PERMANENT] Axe** *(Ep1, T5, +0)*\none\ntwo\n\n"
    assert axe in text
    smaller.write_text(text.replace(axe, ""), encoding="utf-8")
    code, out, _err = run(capsys, "--db", str(db), "import", str(smaller), "--apply")
    assert code == 0 and "would delete 1 (only with --prune)" in out
    assert export(capsys, db, tmp_path / "after.md") == text
    code, out, err = run(capsys, "--db", str(db), "import", str(smaller), "--apply", "--prune")
    assert code == 1 and "--prune would delete 1 of 5 persistent memories" in err
    assert "refused without --force" in err
    assert export(capsys, db, tmp_path / "after.md") == text
    code, out, _err = run(
        capsys, "--db", str(db), "import", str(smaller), "--apply", "--prune", "--force"
    )
    assert code == 0 and "would delete 1 (deleted with --prune)" in out and "applied" in out
    pruned = export(capsys, db, tmp_path / "pruned.md")
    assert body(pruned) == body(smaller.read_text(encoding="utf-8"))


def test_import_verbose_lists_the_changes(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    text = export(capsys, db, tmp_path / "M.md")
    edited = tmp_path / "edited.md"
    edited.write_text(text.replace("one\ntwo", "uno"), encoding="utf-8")
    code, out, _err = run(capsys, "--db", str(db), "import", str(edited), "-v")
    assert code == 0 and "changed: location 33 'Axe' (text)" in out


def test_import_lists_problems_in_line_order(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    # a reading problem late in the file (line 27) and a planning problem early (line 10)
    text = export(capsys, db, tmp_path / "M.md")
    edited = tmp_path / "edited.md"
    edited.write_text(
        text.replace('by "Window stays open"', 'by "Nowhere"').replace(
            "[DANGER - PERMANENT] Troll", "[PERIL - PERMANENT] Troll"
        ),
        encoding="utf-8",
    )
    code, out, _err = run(capsys, "--db", str(db), "import", str(edited))
    assert code == 1
    problems = [line.split(":")[0].strip() for line in out.splitlines() if line.startswith("  ")]
    assert problems == ["line 10", "line 27"]


# --- show, history, stats ----------------------------------------------------------------------


def test_show_prints_what_the_agent_sees(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, err = run(capsys, "--db", str(db), "show", "33")
    assert (code, err) == (0, "")
    with MemoryStore.open(db) as store:
        seen = store.get_location_memory(33)
    assert out == f"database: {db}\nLocation 33: Troll Room\n{seen}\n"
    code, out, _err = run(capsys, "--db", str(db), "show", "99")
    assert code == 0 and "no memories at location 99" in out


def test_show_rejects_a_non_integer_location(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:  # a usage error: argparse's exit code 2
        cli.main(["--db", str(db), "show", "abc"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.strip().splitlines()[-1] == (
        "memstore show: error: argument location: location must be an integer "
        "(the Z-machine location number), got 'abc'"
    )


def test_history_prints_the_chain_and_rejects_unknown_titles(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, _err = run(capsys, "--db", str(db), "history", "15", "Window stays open")
    assert code == 0
    assert "1. [SUPERSEDED] Open window" in out
    assert "superseded at Ep2, T41 by 'Window stays open'" in out
    assert "2. [ACTIVE] Window stays open" in out
    code, out, _err = run(capsys, "--db", str(db), "history", "15", "Mailbox")
    assert "invalidated at Ep1, T9: it was a lie" in out
    code, _out, err = run(capsys, "--db", str(db), "history", "15", "No such memory")
    assert_one_error_line(code, err, "no memory titled 'No such memory' at location 15")
    assert "closest" not in err  # nothing there looks like it


def test_history_counts_one_memory_in_the_singular(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, _err = run(capsys, "--db", str(db), "history", "33", "Troll")
    assert code == 0
    assert "history of 'Troll' at location 33 (1 memory, oldest first):" in out


def test_history_of_an_unknown_title_lists_the_closest_titles_there(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, err = run(capsys, "--db", str(db), "history", "15", "Window stay open")
    assert_one_error_line(
        code,
        err,
        "no memory titled 'Window stay open' at location 15",
        "closest titles there: 'Window stays open'",
    )
    assert "history of" not in out  # a near title is shown, never used
    code, out, err = run(capsys, "--db", str(db), "history", "15", "mailbox")
    assert_one_error_line(
        code, err, "no memory titled 'mailbox'", "closest titles there: 'Mailbox'"
    )
    assert "history of" not in out
    # only titles at that location are offered
    code, _out, err = run(capsys, "--db", str(db), "history", "33", "Window stays open")
    assert_one_error_line(code, err, "at location 33")
    assert "closest" not in err


def test_stats(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _err = run(capsys, "--db", str(db), "stats")
    assert code == 0
    assert f"database: {db}" in out
    assert "locations: 2" in out
    assert "live memories by tier: core 0, permanent 3, ephemeral 0" in out
    assert "memories by status: ACTIVE 3, TENTATIVE 0, SUPERSEDED 2" in out
    assert "DANGER 1" in out and "database size:" in out


def test_the_database_comes_from_memstore_db(
    capsys: pytest.CaptureFixture[str], db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTORE_DB", str(db))
    code, out, _err = run(capsys, "stats")
    assert code == 0 and f"database: {db}" in out


# --- errors -----------------------------------------------------------------------------------


def test_missing_files_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    code, _out, err = run(capsys, "--db", str(db), "import", str(tmp_path / "nope.md"))
    assert_one_error_line(code, err, "nope.md", "No such file")
    code, _out, err = run(capsys, "--db", str(db), "import", str(tmp_path))
    assert_one_error_line(code, err, "is a folder")
    missing_db = tmp_path / "missing.db"
    for argv in (
        ["show", "1"],
        ["stats"],
        ["export", "--out", str(tmp_path / "x.md")],
        ["history", "1", "x"],
    ):
        code, _out, err = run(capsys, "--db", str(missing_db), *argv)
        assert_one_error_line(code, err, "no database at", "missing.db")
    assert not missing_db.exists()
    binary = tmp_path / "binary.md"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _out, err = run(capsys, "--db", str(db), "import", str(binary))
    assert_one_error_line(code, err, "not UTF-8")


def test_export_to_a_folder_names_the_folder(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "reviews"
    folder.mkdir()
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(folder))
    assert_one_error_line(code, err, f"{folder}: is a folder, not a file")
    assert ".tmp" not in err
    assert list(folder.iterdir()) == [] and list(tmp_path.glob(".*.tmp")) == []


def test_a_read_error_without_a_file_name_still_names_the_file(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    # reading /proc/self/mem (a regular file to stat) fails with EIO, and no file name
    memories_md = Path("/proc/self/mem")
    if not memories_md.exists():
        pytest.skip("no /proc/self/mem here")
    code, _out, err = run(capsys, "--db", str(db), "import", str(memories_md))
    assert_one_error_line(code, err, f"cannot read {memories_md}: Input/output error")


def test_a_reader_that_goes_away_gets_no_broken_pipe_error(db: Path) -> None:
    # `memstore stats | head -1`, with the reader gone before stats prints anything
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "memstore.cli", "--db", str(db), "stats"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert finished.stderr == ""
    assert finished.returncode == 1


@pytest.mark.slow
@pytest.mark.parametrize("command", [["stats"], ["show", "1"], ["map", "route", "64", "137"]])
def test_a_closed_standard_output_is_one_line_and_nothing_is_done(
    db: Path, command: list[str]
) -> None:
    """`memstore ... >&-`: Python starts with no sys.stdout; the command must say so in
    one line (as `cat` does), not fail inside with an internal error."""
    before = db.read_bytes()
    finished = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "--db", str(db), *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 - the child's own stdout, closed
    )
    assert finished.returncode == 1
    assert finished.stderr == "memstore: error: standard output is closed; nothing was done\n"
    assert db.read_bytes() == before


def test_not_a_memstore_database(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text_file = tmp_path / "notes.db"
    text_file.write_text("hello\n", encoding="utf-8")
    code, _out, err = run(capsys, "--db", str(text_file), "stats")
    assert_one_error_line(code, err, "not a SQLite database")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    code, _out, err = run(capsys, "--db", str(other), "show", "1")
    assert_one_error_line(code, err, "not a memstore database")


def test_a_database_behind_the_head_revision(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = tmp_path / "old.db"
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", f"sqlite:///{old}")
    alembic_command.upgrade(config, "0001")
    code, _out, err = run(capsys, "--db", str(old), "stats")
    assert_one_error_line(code, err, "alembic upgrade head", "0001")


def test_a_locked_database(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    text = export(capsys, db, tmp_path / "M.md")
    edited = tmp_path / "edited.md"
    edited.write_text(text.replace("one\ntwo", "changed"), encoding="utf-8")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        code, _out, err = run(
            capsys, "--db", str(db), "--busy-timeout", "0.2", "import", str(edited), "--apply"
        )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert_one_error_line(code, err, "locked by another process", "nothing was written")
    assert export(capsys, db, tmp_path / "after.md") == text


def test_usage_errors_are_argparses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["history", "3"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no-such-command"])
    assert exit_info.value.code == 2
    capsys.readouterr()


# --- rom ----------------------------------------------------------------------------------------


def test_rom_check_and_fetch_report_errors_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.z3"
    wrong.write_bytes(b"not zork")
    code, _out, err = run(capsys, "rom", "check", "--path", str(wrong))
    assert_one_error_line(code, err, "is not Zork I release 119")
    dest = tmp_path / "roms" / "zork1.z3"
    code, _out, err = run(capsys, "rom", "fetch", "--dest", str(dest), "--url", wrong.as_uri())
    assert_one_error_line(code, err, "not Zork I release 119", "nothing was written")
    assert not dest.exists()


def test_rom_fetch_and_check_succeed_with_the_right_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstore import rom

    story = tmp_path / "source.z3"
    story.write_bytes(b"pretend story file")
    monkeypatch.setattr(rom, "ZORK1_SHA256", rom.sha256_of(b"pretend story file"))
    monkeypatch.setattr(
        rom.fetch_rom,
        "__kwdefaults__",
        {**rom.fetch_rom.__kwdefaults__, "expected_sha256": rom.ZORK1_SHA256},
    )
    monkeypatch.setattr(rom.verify_rom, "__defaults__", (rom.ZORK1_SHA256,))
    dest = tmp_path / "roms" / "zork1.z3"
    code, out, _err = run(capsys, "rom", "fetch", "--dest", str(dest), "--url", story.as_uri())
    assert code == 0 and str(dest) in out and dest.read_bytes() == b"pretend story file"
    code, out, _err = run(capsys, "rom", "check", "--path", str(dest))
    assert code == 0 and str(dest) in out


# --- the registry, start-up and the console script ---------------------------------------------


def test_a_new_subcommand_registers_without_touching_the_others(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--times", type=int, default=1)

    @cli.command("hello", help="say hello", configure=configure)
    def hello(args: argparse.Namespace, ctx: cli.Context) -> int:
        ctx.print("hello " * args.times)
        return 3

    code, out, _err = run(capsys, "hello", "--times", "2")
    assert code == 3 and out == "hello hello \n"
    assert list(cli.COMMANDS)[:7] == [
        "export",
        "import",
        "show",
        "history",
        "stats",
        "check",
        "rom",
    ]


def test_a_cli_module_in_the_package_is_discovered(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import memstore

    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))
    (tmp_path / "cli_zz_metrics_test.py").write_text(
        "from memstore.cli import command\n\n"
        "@command('zz-example', help='an example plugin')\n"
        "def metrics(args, ctx):\n"
        "    ctx.print('metrics for', ctx.db)\n"
        "    return 0\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(memstore, "__path__", [*memstore.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "memstore.cli_zz_metrics_test", raising=False)
    try:
        code, out, _err = run(capsys, "--db", "x.db", "zz-example")
    finally:
        sys.modules.pop("memstore.cli_zz_metrics_test", None)
    assert code == 0 and out == "metrics for x.db\n"


def test_show_and_export_do_not_import_litellm(db: Path, tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from memstore.cli import main\n"
        f"assert main(['--db', {str(db)!r}, 'show', '15']) == 0\n"
        f"assert main(['--db', {str(db)!r}, 'export', '--out', {str(tmp_path / 'M.md')!r}]) == 0\n"
        f"assert main(['--db', {str(db)!r}, 'stats']) == 0\n"
        "print('litellm loaded:', 'litellm' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "litellm loaded: False" in result.stdout


def test_the_console_script_runs(db: Path, tmp_path: Path) -> None:
    script = shutil.which("memstore", path=str(Path(sys.executable).parent))
    assert script is not None, "the memstore console script is not installed"
    env = {
        **os.environ,
        "MEMSTORE_DB": str(db),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [script, "export", "--out", str(tmp_path / "M.md")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "M.md").read_text(encoding="utf-8").startswith("# Location Memories")
    result = subprocess.run(
        [script, "show", "abc"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2  # a usage error
    assert result.stderr.startswith("usage: memstore show")
    assert "memstore show: error: argument location: location must be an integer" in result.stderr
    assert "Traceback" not in result.stderr
