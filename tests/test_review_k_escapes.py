"""Review K2 #6: control and format characters went into Memories.md as they are.

A NUL made git take the file for binary ("Binary files differ": the review showed no
diff); ESC and the bidirectional overrides act on the terminal that shows the diff. They
are written as ``\\xHH`` / ``\\uHHHH`` escapes now, and read back exactly.
"""

from __future__ import annotations

import re

import pytest

from exporters import render_memories_md
from exporters.escaping import unescape
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory

HIDDEN = "\x00\x07\x1b\x7f\x85\u061c\u200e\u200f\u202a\u202e\u2066\u2069"


def test_a_memory_s_hidden_characters_are_written_as_escapes_and_read_back(
    db_path: object, mem: MakeMemory
) -> None:
    with MemoryStore.open(db_path) as store:  # type: ignore[arg-type]
        text = "Before" + HIDDEN + "after."
        store.add_memory(3, "Kit\x1bchen", mem("Lamp\u202e", text=text))
        assert store.invalidate_memory(3, "Lamp\u202e", "gone\x00 for good", turn=9)
        exported = render_memories_md(*store.export_snapshot())
        assert re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e]", exported) is None
        assert "\\x00" in exported and "\\x1b" in exported and "\\u202e" in exported
        outcome = import_memories(store, exported, apply=True)
        assert outcome.plan.problems == () and not outcome.plan.has_changes  # the same rows
        [memory] = store.memories(3, include_superseded=True)
        assert (memory.title, memory.text, memory.invalidation_reason) == (
            "Lamp\u202e",
            text,
            "gone\x00 for good",
        )


@pytest.mark.parametrize("written", ["C:\\x64", "\\x41", "\\u0041", "\\xZZ", "\\u202"])
def test_an_escape_of_a_shown_character_is_kept_as_it_is(written: str) -> None:
    # only the characters written as escapes are read back from one: a hand-written
    # ``C:\x64`` (or any other) stays as it always was
    assert unescape(written) == written


def test_a_reason_written_as_only_a_nul_escape_is_refused_saying_so(
    db_path: object, mem: MakeMemory
) -> None:
    # review N LOW: ``\x00`` alone was refused as "must not be blank", and a reviewer who
    # wrote something saw no reason why
    with MemoryStore.open(db_path) as store:  # type: ignore[arg-type]
        store.add_memory(3, "Kitchen", mem("Lamp"))
        assert store.invalidate_memory(3, "Lamp", "gone for good", turn=9)
        exported = render_memories_md(*store.export_snapshot())
        assert exported.count("gone for good") == 1
        outcome = import_memories(store, exported.replace("gone for good", "\\x00"), apply=True)
        [problem] = outcome.plan.problems
        assert "blank before its first NUL character (\\x00)" in str(problem)
        assert store.memories(3, include_superseded=True)[0].invalidation_reason == "gone for good"
