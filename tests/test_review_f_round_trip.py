"""Review F: a new user's round trip on a real demo database, an agent writing between.

F2. A file deleting a memory an agent superseded since the export: export's refusal
    advised ``import --apply --prune``, which the import refused as a conflict (export
    planned without ``--prune``). It now advises the import that takes the file's side.
F3. ``import --prune -v`` of a file that only deletes listed none of what it deletes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.store import MemoryStore
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.test_round_trip_review_f import db as db  # a fixture: review F's database
from tests.test_round_trip_review_f import edit, exported, titles

BOTTLE = "**[NOTE - PERMANENT] Bottle here** *(Ep1, T6, +0)*\nGlass bottle.\n\n"


def test_export_advises_the_import_a_deletion_of_an_agent_s_changed_memory_takes(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, mem: MakeMemory
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, BOTTLE, "")
    with MemoryStore.open(db) as store:  # an agent, after the export
        assert store.supersede_memory(79, "Kitchen", "Bottle here", mem("Bottle gone"))
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    line = one_error_line(err, "1 in conflict with the database")
    assert code == 1 and f"memstore import --db {db} {out} --apply --prune --theirs" in line
    code, _out, err = run(
        capsys, "--db", str(db), "import", str(out), "--apply", "--prune", "--theirs"
    )
    assert code == 0, err
    assert "Bottle here" not in titles(db, 79)
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err


def test_verbose_lists_what_prune_deletes_when_the_file_only_deletes(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = exported(capsys, db, tmp_path)
    edit(out, BOTTLE, "")
    code, printed, err = run(capsys, "--db", str(db), "import", str(out), "--prune", "-v")
    assert code == 0, err
    assert "missing from the file: location 79 'Bottle here'" in printed
