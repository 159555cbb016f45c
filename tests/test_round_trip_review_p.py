"""Review D of the round trip (export, edit, import): a retitle skipped for a problem never
cuts an agent's supersession link; re-running the advised `import --apply --prune` of a
retitled successor finds nothing to do (SQLite reuses a deleted row's id); a move, or a
retitle of a superseded memory, is a problem without --prune, never a second copy;
memories under a malformed header are not counted as deletions; export's refusal counts a
retitle once and advises what imports it; a retitle is paired with the memory it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.test_round_trip_review_f import db as db  # a fixture: review F's database
from tests.test_round_trip_review_f import edit, exported


def with_door(db: Path, mem: MakeMemory) -> None:
    """An agent superseded 'Door shut' with 'Door open' (the last row stored)."""
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", mem("Door shut", text="Shut.", turns="5"))
        assert store.supersede_memory(
            64, "West of House", "Door shut", mem("Door open", text="Open.", turns="8")
        )


def stored(db: Path, location_id: int) -> list[tuple[str, str, str | None]]:
    """(title, status, successor) of every memory at the location, superseded ones too."""
    with MemoryStore.open(db, read_only=True) as store:
        return [
            (m.title, m.status.value, m.superseded_by)
            for m in store.memories(location_id, include_superseded=True)
        ]


def import_(capsys: pytest.CaptureFixture[str], db: Path, out: Path, *flags: str):
    return run(capsys, "--db", str(db), "import", str(out), *flags)


# --- D1: a skipped retitle of a successor keeps the agent's link ---------------------------


@pytest.mark.parametrize(
    ("flags", "other_problem", "applies"),
    [
        (("--apply", "--prune", "--skip-invalid"), True, True),
        (("--apply", "--skip-invalid"), True, True),
        (("--apply", "--skip-invalid"), False, True),
        (("--apply", "--prune"), True, False),
        (("--apply",), False, False),
    ],
    ids=["prune-skip-invalid", "skip-invalid", "skip-invalid-alone", "prune", "plain"],
)
def test_a_skipped_retitle_of_a_successor_never_cuts_the_agents_link(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    mem: MakeMemory,
    tmp_path: Path,
    flags: tuple[str, ...],
    other_problem: bool,
    applies: bool,
) -> None:
    with_door(db, mem)
    out = exported(capsys, db, tmp_path)
    edit(out, "] Door open**", "] Door opened**")
    edit(out, 'by "Door open"]', 'by "Door opened"]')
    if other_problem:
        edit(out, "**[NOTE - PERMANENT] Fact 5**", "**[BOGUS - PERMANENT] Fact 5**")

    code, printed, err = import_(capsys, db, out, *flags)

    assert code == (0 if applies else 1), err
    problem = next(line for line in printed.splitlines() if "'Door opened'" in line)
    assert "memory skipped" in problem
    assert "'Door shut' (superseded by it in the file) keeps its link to 'Door open'" in problem
    assert "status changed 0" in printed  # the link's change is left out with the retitle
    assert not any("no other memory there" in line for line in printed.splitlines())
    assert stored(db, 64)[-2:] == [
        ("Door shut", "SUPERSEDED", "Door open"),  # never cut
        ("Door open", "ACTIVE", None),
    ]
    with MemoryStore.open(db, read_only=True) as store:
        assert [m.title for m in store.history(64, "Door open")] == ["Door shut", "Door open"]


# --- D3: the advised import run again finds nothing to do ----------------------------------


@pytest.mark.parametrize("twins", [False, True], ids=["successor", "twin"])
def test_rerunning_the_prune_import_of_a_retitled_successor_finds_nothing_to_do(
    capsys: pytest.CaptureFixture[str], db: Path, mem: MakeMemory, tmp_path: Path, twins: bool
) -> None:
    if twins:  # superseded in the same turn by one of the same title
        with MemoryStore.open(db) as store:
            store.add_memory(64, "West of House", mem("Door", text="Shut.", turns="5"))
            assert store.supersede_memory(
                64, "West of House", "Door", mem("Door", text="Open.", turns="5")
            )
        header = "** *(Ep1, T5, +0)*\nOpen."
        old, new = (f"] Door{header}", 'by "Door"]'), (f"] Door opened{header}", "Door opened")
    else:
        with_door(db, mem)
        old, new = ("] Door open**", 'by "Door open"]'), ("] Door opened**", "Door opened")
    out = exported(capsys, db, tmp_path)
    edit(out, old[0], new[0])
    edit(out, old[1], f'by "{new[1]}"]')

    code, _printed, err = import_(capsys, db, out, "--apply", "--prune")
    assert code == 0, err
    assert stored(db, 64)[-2:] == [
        ("Door shut" if not twins else "Door", "SUPERSEDED", "Door opened"),
        ("Door opened", "ACTIVE", None),
    ]

    code, printed, err = import_(capsys, db, out, "-v")  # the same import again
    assert code == 0, err
    assert "conflicts" not in printed
    for count in ("added 0", "changed 0", "status changed 0", "would delete 0", "problems 0"):
        assert count in printed
    code, printed, err = import_(capsys, db, out, "--apply", "--theirs")
    assert code == 0, err
    assert "learned after the export" not in printed
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err  # replaced: nothing left to import


# --- D4: a move, or a retitle of a superseded memory, is one copy ---------------------------


@pytest.mark.parametrize("title", ["Sack on table", "Sack here"], ids=["moved", "moved-retitled"])
def test_a_move_of_an_unchanged_memory_is_a_problem_without_prune_never_a_second_copy(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, title: str
) -> None:
    out = exported(capsys, db, tmp_path)
    block = "**[NOTE - PERMANENT] Sack on table** *(Ep1, T5, +0)*\nBrown sack.\n\n"
    edit(out, block, "")
    mailbox = "**[NOTE - PERMANENT] Mailbox here**"
    edit(out, mailbox, f"{block.replace('Sack on table', title)}{mailbox}")

    code, printed, err = import_(capsys, db, out, "--apply")

    assert code == 1
    one_error_line(err, "1 problem(s)", "nothing was applied")
    problem = next(line for line in printed.splitlines() if "moved" in line)
    assert f"memory {title!r} at location 64" in problem
    assert "live memory 'Sack on table' of location 79 moved" in problem
    assert "--prune" in problem and "memory skipped" in problem
    code, printed, err = import_(capsys, db, out, "--apply", "--skip-invalid")
    assert code == 0, err
    assert [t for t, _s, _b in stored(db, 64)] == ["Mailbox here"]  # no second copy
    assert [t for t, _s, _b in stored(db, 79)] == ["Sack on table", "Bottle here"]

    code, _printed, err = import_(capsys, db, out, "--apply", "--prune")
    assert code == 0, err
    assert [t for t, _s, _b in stored(db, 64)] == ["Mailbox here", title]
    assert [t for t, _s, _b in stored(db, 79)] == ["Bottle here"]
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err


def test_a_retitle_of_a_superseded_memory_is_a_problem_without_prune_never_a_second_one(
    capsys: pytest.CaptureFixture[str], db: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    with_door(db, mem)
    out = exported(capsys, db, tmp_path)
    edit(out, "SUPERSEDED] Door shut**", "SUPERSEDED] Door closed**")

    code, printed, err = import_(capsys, db, out, "--apply")

    assert code == 1, err
    problem = next(line for line in printed.splitlines() if "'Door closed'" in line)
    assert "superseded memory 'Door shut'" in problem and "--prune" in problem
    with MemoryStore.open(db, read_only=True) as store:
        assert [m.title for m in store.history(64, "Door open")] == ["Door shut", "Door open"]

    code, _printed, err = import_(capsys, db, out, "--apply", "--prune")
    assert code == 0, err
    with MemoryStore.open(db, read_only=True) as store:
        assert [m.title for m in store.history(64, "Door open")] == ["Door closed", "Door open"]
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err


def test_a_turns_fix_of_a_superseded_memory_is_a_problem_without_prune_never_a_second_one(
    capsys: pytest.CaptureFixture[str], db: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    # was: exit 0 and two superseded 'Door shut' in the history (T5 and T4)
    with_door(db, mem)
    out = exported(capsys, db, tmp_path)
    edit(out, "SUPERSEDED] Door shut** *(Ep1, T5", "SUPERSEDED] Door shut** *(Ep1, T4")

    code, printed, err = import_(capsys, db, out, "--apply")

    assert code == 1, err
    problem = next(line for line in printed.splitlines() if "'Door shut' (Ep1, T4)" in line)
    assert "superseded memory with that title" in problem and "--prune" in problem
    with MemoryStore.open(db, read_only=True) as store:
        assert [(m.title, m.turns) for m in store.history(64, "Door open")] == [
            ("Door shut", "5"),
            ("Door open", "8"),
        ]
        assert [m.turns for m in store.memories(64, True) if m.title == "Door shut"] == ["5"]

    code, _printed, err = import_(capsys, db, out, "--apply", "--prune")
    assert code == 0, err
    with MemoryStore.open(db, read_only=True) as store:
        assert [(m.title, m.turns) for m in store.history(64, "Door open")] == [
            ("Door shut", "4"),
            ("Door open", "8"),
        ]
        assert [m.turns for m in store.memories(64, True) if m.title == "Door shut"] == ["4"]
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        # turns and text at once (was: exit 0, two superseded 'Door shut')
        (
            'SUPERSEDED] Door shut** *(Ep1, T5, +0)*\n[Superseded at T8 by "Door open"]\n~~Shut.~~',
            "SUPERSEDED] Door shut** *(Ep1, T4, +0)*\n"
            '[Superseded at T8 by "Door open"]\n~~Closed.~~',
            "turns and text",
        ),
        # made live with new turns (was: exit 0, 'Door shut' live and in the history)
        (
            "[NOTE - PERMANENT - SUPERSEDED] Door shut** *(Ep1, T5, +0)*\n"
            '[Superseded at T8 by "Door open"]\n~~Shut.~~',
            "[NOTE - PERMANENT] Door shut** *(Ep1, T4, +0)*\nShut.",
            "turns and status",
        ),
    ],
    ids=["turns-and-text", "made-live"],
)
def test_an_edit_of_a_memory_under_its_own_title_is_a_problem_without_prune(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    mem: MakeMemory,
    tmp_path: Path,
    old: str,
    new: str,
    changed: str,
) -> None:
    with_door(db, mem)
    out = exported(capsys, db, tmp_path)
    edit(out, old, new)
    before = stored(db, 64)

    code, printed, err = import_(capsys, db, out, "--apply")

    assert code == 1, err
    problem = next(line for line in printed.splitlines() if "'Door shut' (Ep1, T4)" in line)
    assert f"with its {changed} changed" in problem and "--prune" in problem, problem
    assert stored(db, 64) == before


# --- D6: a malformed header's memories are not deletions -----------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("## Location 79: Kitchen", "## Location -79: Kitchen"),
        ("Bottle here** *(Ep1, T6, +0)*", "Bottle here** (Ep1, T6, +0)"),
        ("Bottle here** *(Ep1, T6, +0)*", "Bottle here *(Ep1, T6, +0)*"),
    ],
    ids=["location", "memory", "memory-no-bold-end"],
)
def test_memories_under_a_malformed_header_are_not_counted_as_deletions(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, old: str, new: str
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, old, new)

    code, printed, _err = import_(capsys, db, out)

    assert code == 1
    assert "problems 1" in printed
    assert "would delete 0 " in printed, printed
    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 1
    line = one_error_line(err, "1 edit(s)", "1 with problems")
    assert "deleted" not in line and "--prune" not in line


# --- D7: export's refusal counts a retitle once and says what imports it ---------------------


def test_export_refusal_counts_a_retitle_once_and_advises_prune_alone(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, "] Sack on table**", "] Sack on the table**")

    code, _printed, err = run(capsys, "--db", str(db), "export", "--out", str(out))

    assert code == 1
    line = one_error_line(err, "holds 1 edit(s)", "1 retitled, moved or with new turns")
    assert "deleted" not in line and "with problems" not in line
    assert "fix its problems" not in line
    assert f"(memstore import --db {db} {out} --apply --prune)" in line
    code, _printed, err = import_(capsys, db, out, "--apply", "--prune")  # the advice works
    assert code == 0, err


def test_export_refusal_advises_force_when_the_prune_guard_needs_it(
    capsys: pytest.CaptureFixture[str], db_path: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(79, "Kitchen", mem("Sack on table", text="Brown sack.", turns="5"))
        store.add_memory(79, "Kitchen", mem("Bottle here", text="Glass bottle.", turns="6"))
    out = exported(capsys, db_path, tmp_path)
    edit(out, "] Sack on table**", "] Sack on the table**")

    code, _printed, err = run(capsys, "--db", str(db_path), "export", "--out", str(out))

    assert code == 1
    line = one_error_line(err, "holds 1 edit(s)")
    assert f"(memstore import --db {db_path} {out} --apply --prune --force)" in line
    code, _printed, err = import_(capsys, db_path, out, "--apply", "--prune", "--force")
    assert code == 0, err


# --- D8: of two memories with one text, a retitle is paired with its own -------------------


def test_retitles_of_two_memories_with_one_text_name_their_own_originals(
    capsys: pytest.CaptureFixture[str], db: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    with MemoryStore.open(db) as store:
        store.add_memory(79, "Kitchen", mem("Sack here", text="Brown sack.", turns="7"))
    out = exported(capsys, db, tmp_path)
    edit(out, "] Sack on table**", "] Sack 1**")
    edit(out, "] Sack here**", "] Sack 2**")

    _code, printed, _err = import_(capsys, db, out)

    lines = printed.splitlines()
    first = next(line for line in lines if "memory 'Sack 1'" in line)
    second = next(line for line in lines if "memory 'Sack 2'" in line)
    assert "live memory 'Sack on table' (the same text; Ep1, T5)" in first
    assert "live memory 'Sack here' (the same text; Ep1, T7)" in second
