"""`memstore check` lists every stored row that `memstore export` refuses, one line per row
with its id and the problem the model's rule table (memstore.models.MEMORY_RULES, through
memstore.md_rows) finds, so a user told "run `memstore check`" by export learns which row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import run
from tests.conftest import MakeMemory

#: (a statement that damages row 2 around memstore's constraints, what check must name)
DAMAGES = [
    ("UPDATE memories SET episode = 0 WHERE id = 2", "episode"),
    ("UPDATE memories SET turn_start = -5 WHERE id = 2", "turn_start"),
    ("UPDATE memories SET title = '' WHERE id = 2", "title"),
    ("UPDATE memories SET title = '   ' WHERE id = 2", "title"),
    ("UPDATE memories SET turn_start = 9, turn_end = 3 WHERE id = 2", "turn"),
    ("UPDATE memories SET score_change = 1.5 WHERE id = 2", "score_change"),
    ("UPDATE memories SET category = 'LORE' WHERE id = 2", "category"),
    ("UPDATE memories SET text = printf('%.20001c', 'x') WHERE id = 2", "text"),
    # pydantic would read these as the right member (it folds the case): the rows are not
    # what memstore writes, and an export once left such a row out without a word
    ("UPDATE memories SET persistence = 'EPHEMERAL' WHERE id = 2", "persistence"),
    ("UPDATE memories SET persistence = 'Permanent' WHERE id = 2", "persistence"),
    ("UPDATE memories SET category = 'note' WHERE id = 2", "category"),
    ("UPDATE memories SET status = 'active' WHERE id = 2", "status"),
]


def _damaged(db: Path, mem: MakeMemory, *statements: str) -> None:
    with MemoryStore.open(db) as store:
        for n in range(3):
            store.add_memory(79, "Kitchen", mem(f"Fact {n}", turns=str(n + 1)))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for statement in statements:
            conn.execute(statement)


def _row_lines(out: str, row_id: int) -> list[str]:
    return [line for line in out.splitlines() if f"memory {row_id} " in line]


@pytest.mark.parametrize(("statement", "named"), DAMAGES)
def test_check_names_every_row_that_export_refuses(
    db_path: Path,
    mem: MakeMemory,
    capsys: pytest.CaptureFixture[str],
    statement: str,
    named: str,
) -> None:
    _damaged(db_path, mem, statement)
    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", "-")
    assert code == 1 and "memstore check" in err, err  # export refuses the row

    code, out, err = run(capsys, "--db", str(db_path), "check")

    assert code == 1 and "problem" in err
    lines = _row_lines(out, 2)
    assert len(lines) == 1, out  # one line for the row, with its id and what is wrong
    assert named in lines[0], lines
    assert "'Fact 1'" in lines[0] or "title" in statement, lines
    assert not _row_lines(out, 1) and not _row_lines(out, 3)


def test_check_lists_each_damaged_row_once(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tester's reproduction: episode 0, turn_start -5, an empty title, three rows."""
    _damaged(
        db_path,
        mem,
        "UPDATE memories SET episode = 0 WHERE id = 1",
        "UPDATE memories SET turn_start = -5 WHERE id = 2",
        "UPDATE memories SET title = '' WHERE id = 3",
    )

    code, out, err = run(capsys, "--db", str(db_path), "check")

    assert code == 1 and "3 problem(s)" in err, (out, err)
    assert [len(_row_lines(out, n)) for n in (1, 2, 3)] == [1, 1, 1], out
    assert "episode" in _row_lines(out, 1)[0]
    assert "turn" in _row_lines(out, 2)[0]
    assert "title" in _row_lines(out, 3)[0]


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("UPDATE locations SET visit_count = -1 WHERE id = 79", "visit_count"),
        # an episode the file's reader refuses: export would write what import cannot read
        ("INSERT INTO location_episodes (location_id, episode) VALUES (79, 0)", "episodes"),
    ],
)
def test_check_names_a_location_that_export_refuses(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str], statement: str, named: str
) -> None:
    _damaged(db_path, mem, statement)

    code, out, _err = run(capsys, "--db", str(db_path), "check")

    assert code == 1
    assert any("location 79" in line and named in line for line in out.splitlines()), out
    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", "-")
    assert code == 1 and "memstore check" in err, err


def test_check_says_ok_for_a_database_export_reads(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    _damaged(db_path, mem)
    assert run(capsys, "--db", str(db_path), "export", "--out", "-")[0] == 0

    code, out, _err = run(capsys, "--db", str(db_path), "check")

    assert code == 0 and out.strip().endswith("sound"), out


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE memories SET persistence = 'EPHEMERAL' WHERE id = 2",
        "INSERT INTO location_episodes (location_id, episode) VALUES (79, 1.5)",
    ],
)
def test_what_show_says_of_a_damaged_row_is_one_line(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str], statement: str
) -> None:
    _damaged(db_path, mem, statement)
    code, _out, err = run(capsys, "--db", str(db_path), "show", "79")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith("memstore: error: ") and "memstore check" in line, err
