"""Review S6 C: schema changes and database administration.

Was: argparse took abbreviated options, so ``db downgrade base --allow`` dropped every
table and ``import --apply --prune --f`` deleted every memory the file left out, each
confirmed without the word the refusal names (F4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import MemoryStore
from memstore.cli import main
from tests.conftest import note


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["db", "downgrade", "base", "--allow"], "unrecognized arguments: --allow"),
        (["db", "downgrade", "base", "--allow-data"], "unrecognized arguments: --allow-data"),
        (["import", "Memories.md", "--apply", "--prune", "--f"], "unrecognized arguments: --f"),
        (["import", "Memories.md", "--apply", "--prune", "--forc"], "arguments: --forc"),
        (["--busy", "3", "stats"], "invalid choice: '3'"),
    ],
)
def test_an_abbreviated_option_is_a_usage_error_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    db = tmp_path / "m.db"
    with MemoryStore.open(db) as store:
        store.add_memory(64, "West of House", note("Mailbox"))
    (tmp_path / "Memories.md").write_text("# Location Memories\n")

    with pytest.raises(SystemExit) as ended:
        main(["--db", str(db), *[str(tmp_path / a) if a == "Memories.md" else a for a in argv]])

    assert ended.value.code == 2
    assert error in capsys.readouterr().err
    with MemoryStore.open(db) as store:
        assert [m.title for m in store.memories(64)] == ["Mailbox"]
