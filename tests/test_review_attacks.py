"""An adversarial review of the review round trip (issue 13) and the hardening (issue 14).

Each test reproduces a defect found by attacking memstore as a new user and as a hostile
input source would: a hand-edited Memories.md, export targets that are not plain files, the
command line's numbers, `memstore check` on a damaged database, `memstore db current`.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import memstore.cli as cli
from exporters import parse_memories_md, render_memories_md
from memstore.errors import MemstoreError
from memstore.export_file import NotARegularFile, export_check, write_atomically
from memstore.invariants import check_invariants
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.cli_helpers import run
from tests.conftest import MakeMemory
from tests.read_only_paths import read_only

MAX_SQLITE = 2**63 - 1


@pytest.fixture
def filled(store: MemoryStore, mem: MakeMemory) -> MemoryStore:
    for n in range(4):
        store.add_memory(15, "West of House", mem(f"Fact {n}", turns=str(n + 1)))
    return store


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


# --- episode numbers that leave no room for the next episode ----------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("**Episodes:** none", f"**Episodes:** {MAX_SQLITE}"),
        (
            "What we learned: Fact 3.",
            "What we learned: Fact 3.\n\n"
            f"**[NOTE - PERMANENT] New** *(Ep{MAX_SQLITE}, T2, +0)*\nNew.",
        ),
    ],
)
def test_an_episode_at_sqlites_largest_integer_is_a_problem_not_a_poisoned_database(
    filled: MemoryStore, old: str, new: str
) -> None:
    """Was: the import stored episode 2**63 - 1; the next allocate_episode overflowed to a
    REAL in store_meta, and the agent's next add_memory raised OverflowError."""
    text = exported(filled).replace(old, new, 1)
    outcome = import_memories(filled, text, apply=True, skip_invalid=True)
    assert any(str(MAX_SQLITE) in str(problem) for problem in outcome.plan.problems)
    episode = filled.allocate_episode()
    assert isinstance(episode, int) and episode < MAX_SQLITE


def test_allocate_episode_refuses_to_overflow(db_path: Path, mem: MakeMemory) -> None:
    """An episode stored at the largest integer (written around the API, which refuses it
    now: models.MAX_EPISODE): the next one cannot be numbered. That is one MemstoreError,
    not a REAL in store_meta; and `memstore check` names the episode (the row the export
    cannot read, and the number it leaves no room after)."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("Far future"))
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE memories SET episode = ?", (MAX_SQLITE,))
    raw.close()
    with MemoryStore.open(db_path) as store:
        with pytest.raises(MemstoreError, match="episode"):
            store.allocate_episode()
        with store.transaction(write=False) as conn:
            kind = conn.exec_driver_sql("SELECT typeof(last_episode) FROM store_meta").scalar()
            problems = check_invariants(conn, sqlite_checks=True)
    assert kind == "integer"
    assert len(problems) == 2, problems
    assert "memory 1" in problems[0] and "episode" in problems[0]
    assert str(MAX_SQLITE) in problems[1]


# --- memstore check on rows the store cannot read ----------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE memories SET turn_start = 1.5 WHERE id = 1",
        "UPDATE memories SET score_change = 'x' WHERE id = 1",
        "UPDATE locations SET visit_count = 1e300",
        "UPDATE memory_links SET turn = 'soon'",
        "UPDATE store_meta SET last_episode = 9.3e18",
        "UPDATE memories SET title = 'T' || printf('%.600c', 'x') WHERE id = 1",
    ],
)
def test_check_finds_rows_that_export_cannot_read(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str], statement: str
) -> None:
    """Was: `memstore check` said ok while `memstore export` failed on the same row."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("Fact"))
        store.invalidate_memory(15, "Fact", "wrong", turn=3)
    with sqlite3.connect(db_path) as conn:
        conn.execute(statement)
    code, out, err = run(capsys, "--db", str(db_path), "check")
    assert code == 1, out
    assert "problem" in err


def test_check_passes_a_sound_database(filled: MemoryStore) -> None:
    with filled.transaction(write=False) as conn:
        assert check_invariants(conn, sqlite_checks=True) == []


# --- the base line where an editor moved it -------------------------------------------------


def test_a_blank_line_inserted_above_the_base_line_keeps_the_3_way_merge(
    filled: MemoryStore, mem: MakeMemory
) -> None:
    """Markdown formatters put a blank line under a heading. Was: the base was lost (the
    import went 2-way with a warning) and the line was a problem, 'text outside any memory'."""
    text = exported(filled)
    title, rest = text.split("\n", 1)
    moved = f"{title}\n\n{rest}"
    assert parse_memories_md(moved).base == parse_memories_md(text).base
    filled.supersede_memory(15, "West of House", "Fact 1", mem("Fact 1 again", turns="9"))
    outcome = import_memories(
        filled, moved.replace("What we learned: Fact 2.", "Edited."), apply=True
    )
    assert outcome.applied and outcome.base is not None
    assert not outcome.plan.problems and not outcome.plan.warnings
    assert [m.status.value for m in filled.memories(15, True) if m.title == "Fact 1"] == [
        "SUPERSEDED"
    ]


def test_a_base_line_elsewhere_is_named_as_such(filled: MemoryStore) -> None:
    text = exported(filled)
    title, base, rest = text.split("\n", 2)
    moved = f"{title}\n{rest}\n{base}\n"
    problems = [str(p) for p in parse_memories_md(moved).problems]
    assert len(problems) == 1 and "memstore-base" in problems[0], problems


@pytest.mark.parametrize("rows", ["DEADBEEF", "zz", ""])
def test_a_malformed_base_line_in_its_place_is_named_malformed(
    filled: MemoryStore, rows: str
) -> None:
    text = exported(filled)
    title, base, rest = text.split("\n", 2)
    damaged = re.sub(r"rows=[0-9a-f]{8}", f"rows={rows}", base)
    assert damaged != base
    problems = [str(p) for p in parse_memories_md(f"{title}\n{damaged}\n{rest}").problems]
    assert len(problems) == 1 and "line 2: the export base line is not one" in problems[0]
    assert "counts only under the title" not in problems[0]


def test_problem_lines_follow_a_base_line_under_a_blank_line(filled: MemoryStore) -> None:
    text = exported(filled).replace("*(Ep1, T2, +0)*", "*(Ep1, T2-1, +0)*")
    title, rest = text.split("\n", 1)
    lines = f"{title}\n\n{rest}".split("\n")
    (problem,) = parse_memories_md("\n".join(lines)).problems
    assert "T2-1" in lines[problem.line - 1]


# --- export targets -------------------------------------------------------------------------


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
def test_out_dev_stdout_on_a_pipe_is_refused_and_check_does_not_hang(
    db_path: Path, mem: MakeMemory
) -> None:
    """Was: `memstore export --out /dev/stdout | less` failed naming a temporary file in
    /proc/PID/fd, and `export --check --out /dev/stdout | cat` blocked forever."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("Fact"))
    command = [sys.executable, "-m", "memstore.cli", "--db", str(db_path), "export"]
    for extra in ([], ["--check"]):
        done = subprocess.run(
            [*command, "--out", "/dev/stdout", *extra],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[1],
        )
        assert done.returncode == 1, done
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("memstore: error: /dev/stdout") and "FIFO" in line, line
        assert ".tmp" not in line


def test_write_atomically_refuses_a_proc_fd_link_to_a_pipe(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        target = f"/proc/self/fd/{write}"
        with pytest.raises(NotARegularFile):
            write_atomically(target, "x")
        with pytest.raises(NotARegularFile):
            export_check(target, "x")
    finally:
        os.close(read)
        os.close(write)


def test_an_unwritable_folder_names_the_target_not_a_temporary_file(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("Fact"))
    folder = tmp_path / "locked"
    folder.mkdir()
    with read_only(folder):
        code, _out, err = run(
            capsys, "--db", str(db_path), "export", "--out", str(folder / "Memories.md")
        )
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(f"memstore: error: {folder / 'Memories.md'}: "), line
    assert ".tmp" not in line


def test_an_empty_out_is_a_usage_error(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    """Was: 'memstore: error: .: is a folder, not a file'."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--db", str(db_path), "export", "--out", ""])
    assert exit_.value.code == 2
    assert "--out" in capsys.readouterr().err


# --- the command line's numbers -------------------------------------------------------------


def test_show_flagged_with_a_huge_count_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], filled: MemoryStore, db_path: Path
) -> None:
    """Was: 'memstore: internal error: OverflowError: Python int too large to convert to
    SQLite INTEGER'."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--db", str(db_path), "show", "--flagged", "9" * 30])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "--flagged" in err


# --- memstore db current --------------------------------------------------------------------


def test_db_current_does_not_create_a_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Was: `memstore --db new.db db current` created an empty new.db and said 'base'."""
    missing = tmp_path / "new.db"
    code, _out, err = run(capsys, "--db", str(missing), "db", "current")
    assert code == 1 and "no database" in err
    assert not missing.exists()


def test_db_current_reads_a_database_in_a_read_only_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, mem: MakeMemory
) -> None:
    """Was: 'unable to open database file (SQLITE_CANTOPEN)', naming no file."""
    from memstore.connection import HEAD_REVISION

    folder = tmp_path / "ro"
    db = folder / "memories.db"
    with MemoryStore.open(db) as store:
        store.add_memory(15, "West of House", mem("Fact"))
    with read_only(folder):
        code, out, err = run(capsys, "--db", str(db), "db", "current")
    assert code == 0, err
    assert HEAD_REVISION in out and str(db) in out


def test_db_current_still_names_an_old_revision_and_refuses_a_foreign_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    code, _out, err = run(capsys, "--db", str(other), "db", "current")
    assert code == 1 and "not a memstore database" in err


def test_an_immutable_target_names_the_target_not_a_temporary_file(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    """Was: 'memstore: error: /path/.Memories.md.z440zr1d.tmp: Operation not permitted'."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("Fact"))
    target = tmp_path / "Memories.md"
    old = "# Location Memories\n"  # an older export: a file the export may replace
    target.write_text(old, encoding="utf-8")
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr (permission bits do not stop a rename)")
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode:
        pytest.skip("no immutable flag here")
    try:
        code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(target))
    finally:
        subprocess.run(["chattr", "-i", str(target)], capture_output=True)
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(f"memstore: error: {target}: "), line
    assert ".tmp" not in line
    assert target.read_text(encoding="utf-8") == old
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


# --- importing into a database that does not exist yet ---------------------------------------


def test_a_dry_run_into_a_new_database_does_not_name_an_in_memory_one(
    capsys: pytest.CaptureFixture[str], filled: MemoryStore, tmp_path: Path
) -> None:
    """Was: 'the file was exported from another database (...), not in-memory database
    (<a random id>)' - the dry run planned against a scratch database and named it."""
    file = tmp_path / "Memories.md"
    file.write_text(exported(filled), encoding="utf-8")
    new = tmp_path / "new.db"
    code, out, err = run(capsys, "--db", str(new), "import", str(file))
    assert code == 0, err
    assert "in-memory" not in out and "is new" in out
    code, out, err = run(capsys, "--db", str(new), "import", str(file), "--apply")
    assert code == 0, err
    assert "in-memory" not in out and "is new" in out and "applied" in out


# --- history on a damaged chain -------------------------------------------------------------


def test_history_of_a_memory_in_a_cycle_does_not_say_it_is_not_there(
    capsys: pytest.CaptureFixture[str], db_path: Path, mem: MakeMemory
) -> None:
    """Was: "no memory titled 'A' at location 15; closest titles there: 'A', ..." for a
    memory whose links (hand-edited with sqlite3) go round in a circle."""
    with MemoryStore.open(db_path) as store:
        store.add_memory(15, "West of House", mem("A"))
        store.add_memory(15, "West of House", mem("B", turns="6"))
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE memories SET status = 'SUPERSEDED'")
        conn.execute(
            "INSERT INTO memory_links (memory_id, superseded_by_id, episode, turn, created_at) "
            "VALUES (1, 2, 1, 6, 'x'), (2, 1, 1, 6, 'x')"
        )
    code, _out, err = run(capsys, "--db", str(db_path), "history", "15", "A")
    assert code == 1
    assert "no memory titled" not in err and "memstore check" in err
    code, out, _err = run(capsys, "--db", str(db_path), "check")
    assert code == 1 and "cycle" in out


# --- a title used twice in one chain is not a circle -----------------------------------------


def test_an_unedited_export_with_a_title_reused_in_a_chain_imports(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Was: 'supersession references ... go round in a circle ('Troll blocks' -> 'Troll
    gone' -> 'Troll blocks')', and the whole (unedited) file refused: the chain ends on the
    second, invalidated 'Troll blocks'."""
    store.add_memory(15, "West of House", mem("Troll blocks", turns="1"))
    store.supersede_memory(15, "West of House", "Troll blocks", mem("Troll gone", turns="2"))
    store.supersede_memory(15, "West of House", "Troll gone", mem("Troll blocks", turns="3"))
    store.invalidate_memory(15, "Troll blocks", "the troll is dead", turn=4)
    text = exported(store)
    outcome = import_memories(store, text, apply=True)
    assert outcome.plan.ok, outcome.plan.problems
    edited = text.replace("What we learned: Troll gone.", "It fled.")
    outcome = import_memories(store, edited, apply=True)
    assert outcome.applied and outcome.plan.ok
    assert exported(store) != text


def test_a_missing_successor_is_not_reported_as_a_circle_too(store: MemoryStore) -> None:
    text = (
        "# Location Memories\n\n## Location 5: Cave\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n"
        "**[NOTE - PERMANENT - SUPERSEDED] A** *(Ep1, T1, +0)*\n"
        '[Superseded at T2 by "Nowhere"]\n~~a~~\n\n'
        "---\n"
    )
    problems = [p.message for p in import_memories(store, text, apply=False).plan.problems]
    assert len(problems) == 1 and "circle" not in problems[0], problems


def block(title: str, successor: str, turn: int) -> str:
    """A superseded memory's block in Memories.md, superseded by ``successor``."""
    return (
        f"**[NOTE - PERMANENT - SUPERSEDED] {title}** *(Ep1, T{turn}, +0)*\n"
        f'[Superseded at T{turn + 1} by "{successor}"]\n~~x~~\n\n'
    )


LEAD_IN = (
    "memory 'A' at location 5 is superseded by 'C', but no other memory there in the file or "
    "the database has that title: with --skip-invalid it is skipped, kept as the database has it"
)


def test_a_real_circle_behind_a_lead_in_is_reported_once(store: MemoryStore) -> None:
    text = (
        "# Location Memories\n\n## Location 5: Cave\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n" + block("A", "B", 1) + block("B", "C", 2) + block("C", "B", 3) + "---\n"
    )
    problems = [p.message for p in import_memories(store, text, apply=False).plan.problems]
    circles = [p for p in problems if "circle" in p]
    assert len(circles) == 1 and "'A'" not in circles[0], problems
    # (and the lead-in, whose successor --skip-invalid would not add: review J J1)
    assert problems[1:] == [LEAD_IN.replace("by 'C'", "by 'B'")]


def test_a_lead_in_that_joins_a_circle_after_it_was_found_adds_no_second_report(
    store: MemoryStore,
) -> None:
    # was: the circle again, from where the lead-in joins it ('C' -> 'B' -> 'C')
    text = (
        "# Location Memories\n\n## Location 5: Cave\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n" + block("B", "C", 1) + block("C", "B", 2) + block("A", "C", 3) + "---\n"
    )
    problems = [p.message for p in import_memories(store, text, apply=False).plan.problems]
    assert problems == [
        "supersession references at location 5 go round in a circle ('B' -> 'C' -> 'B'): no "
        "memory ends it (with --skip-invalid the file's memories that close it are skipped, "
        "kept as the database has them)",
        LEAD_IN,
    ]


def test_a_long_circle_is_named_by_its_first_titles_in_one_short_line(
    store: MemoryStore,
) -> None:
    # review J: a 50,000-memory circle was one problem line of 789,055 characters
    titles = [f"Fact {n}" for n in range(30)]
    blocks = "".join(
        block(title, titles[(n + 1) % len(titles)], n + 1) for n, title in enumerate(titles)
    )
    text = (
        "# Location Memories\n\n## Location 5: Cave\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n" + blocks + "---\n"
    )
    (problem,) = [p.message for p in import_memories(store, text, apply=False).plan.problems]
    assert "'Fact 0' -> 'Fact 1'" in problem and "(30 titles in all)" in problem
    assert "'Fact 29'" not in problem and len(problem) < 400
