"""Defects of the Memories.md review round trip (review B), each proved fixed here.

- D3: a reviewer's turns fix of a successor, imported with ``--prune``, no longer cuts the
  supersession link of the memory it superseded: the file still names the successor by
  its title, and the link is made again to the memory with that title after the import.
- D7: after ``import --apply --ours``, ``export`` refuses with advice that can work.
- D8: an editor's "strip trailing whitespace" changes no memory text or location name:
  the export ends no line with a space or a tab that belongs to the content.
- D10: the store refuses an episode its own export could not import (one rule).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError

from exporters import parse_memories_md, render_memories_md
from exporters.block_reader import read_body
from exporters.escaping import escape_text_lines, unescape_text_lines
from exporters.line_parser import read_line_by_line
from memstore.import_plan import MAX_EPISODE as IMPORT_MAX_EPISODE
from memstore.invariants import check_invariants
from memstore.models import INT64_MAX, MEMORY_RULES, LocationInfo, LocationMemories, Memory
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory
from tests.test_memories_md_roundtrip import any_memories, locations_of

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


def memories_of(text: str) -> list[Memory]:
    parsed = parse_memories_md(text)
    assert not parsed.problems, parsed.problems
    return [memory for entry in parsed.locations for memory in entry.memories]


def strip_trailing_whitespace(text: str) -> str:
    """What an editor's "strip trailing whitespace on save" does to a file."""
    return "\n".join(line.rstrip(" \t") for line in text.split("\n"))


# --- D3: a turns fix of a successor with --prune keeps the supersession link -----------------


def test_a_turns_fix_of_a_successor_imported_with_prune_keeps_its_predecessors_link(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Was: the reviewer changed A's turns T3 -> T4 (README: "dropped + added: use
    --prune"); the prune deleted the old A and cleared Z's link, and nothing made it again,
    though the file still says Z ``[Superseded at T3 by "A"]``: Z's history was just [Z]."""
    store.add_memory(64, "West", mem("Z", text="zeta", turns="1"))
    store.supersede_memory(64, "West", "Z", mem("A", text="alpha", turns="3"))
    for n in range(12):
        store.add_memory(64, "West", mem(f"F{n}", text="f", turns=str(20 + n)))
    text = exported(store)
    header = "**[NOTE - PERMANENT] A** *(Ep1, T3, +0)*"
    assert header in text and '[Superseded at T3 by "A"]' in text
    reviewed = text.replace(header, "**[NOTE - PERMANENT] A** *(Ep1, T4, +0)*")

    outcome = import_memories(store, reviewed, apply=True, prune=True)

    assert outcome.applied and not outcome.plan.problems, outcome.plan.problems
    assert [(m.title, m.turns) for m in store.history(64, "Z")] == [("Z", "1"), ("A", "4")]
    # a fresh export says what the reviewer's file says (the new A is stored last)
    assert set(memories_of(exported(store))) == set(memories_of(reviewed))
    again = import_memories(store, exported(store), apply=False)
    assert not again.plan.has_changes and not again.plan.problems


def test_a_turns_fix_of_a_successor_keeps_the_link_of_a_predecessor_edited_too(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The same fix, with the reviewer rewording the superseded memory in the same file:
    its text changes, and its link is made again all the same."""
    store.add_memory(64, "West", mem("Z", text="zeta", turns="1"))
    store.supersede_memory(64, "West", "Z", mem("A", text="alpha", turns="3"))
    for n in range(12):
        store.add_memory(64, "West", mem(f"F{n}", text="f", turns=str(20 + n)))
    text = exported(store)
    reviewed = text.replace(
        "**[NOTE - PERMANENT] A** *(Ep1, T3, +0)*", "**[NOTE - PERMANENT] A** *(Ep1, T4, +0)*"
    ).replace("~~zeta~~", "~~zeta, reworded~~")
    assert reviewed.count("T4, +0") == 1 and "reworded" in reviewed

    outcome = import_memories(store, reviewed, apply=True, prune=True)

    assert outcome.applied and not outcome.plan.problems, outcome.plan.problems
    history = store.history(64, "Z")
    assert [(m.title, m.turns, m.text) for m in history] == [
        ("Z", "1", "zeta, reworded"),
        ("A", "4", "alpha"),
    ]
    assert set(memories_of(exported(store))) == set(memories_of(reviewed))


def test_pruning_a_successor_whose_title_is_then_gone_is_a_problem_and_deletes_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """The re-link takes the title the file names only where a memory has it after the
    import. Where none would (the reviewer deleted the successor), the plan says so, and
    with a problem --prune deletes nothing: the link stays."""
    store.add_memory(64, "West", mem("Z", text="zeta", turns="1"))
    store.supersede_memory(64, "West", "Z", mem("A", text="alpha", turns="3"))
    for n in range(12):
        store.add_memory(64, "West", mem(f"F{n}", text="f", turns=str(20 + n)))
    text = exported(store)
    block = "**[NOTE - PERMANENT] A** *(Ep1, T3, +0)*\nalpha\n\n"
    assert block in text

    outcome = import_memories(
        store, text.replace(block, ""), apply=True, prune=True, skip_invalid=True
    )

    assert not outcome.applied
    assert ["superseded by 'A'" in problem.message for problem in outcome.plan.problems] == [True]
    assert [m.title for m in store.history(64, "Z")] == ["Z", "A"]


# --- D7: export after an import that kept the database's side --------------------------------


def test_export_after_an_import_with_ours_names_the_way_out(
    capsys: pytest.CaptureFixture[str], db_path: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    """Was: "import it first (memstore import FILE --apply) or pass --force": that import
    fails on the conflict, and after --ours the file still holds the edit it left out."""
    out = tmp_path / "Memories.md"
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West", mem("A", text="alpha", turns="1"))
        store.add_memory(64, "West", mem("B", text="beta", turns="2"))
    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(out))
    assert code == 0, err
    with MemoryStore.open(db_path) as store:
        store.invalidate_memory(64, "A", "agent proved it false", turn=4)
    text = out.read_text(encoding="utf-8")
    tentative = text.replace("**[NOTE - PERMANENT] A**", "**[NOTE - PERMANENT - TENTATIVE] A**")
    assert tentative != text
    out.write_text(tentative, encoding="utf-8")
    code, _out, err = run(capsys, "--db", str(db_path), "import", str(out), "--apply", "--ours")
    assert code == 0, err

    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(out))

    assert code == 1
    line = one_error_line(err, str(out), "1 in conflict", "--ours", "--theirs", "--force")
    command = f"memstore import --db {db_path} {out} --apply"
    assert f"({command})" not in line  # that command fails on a conflict
    assert f"({command} --theirs, to take the file's side" in line
    assert out.read_text(encoding="utf-8") == tentative
    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(out), "--force")
    assert code == 0, err


def test_export_over_a_file_with_problems_says_what_an_import_leaves_out(
    capsys: pytest.CaptureFixture[str], db_path: Path, mem: MakeMemory, tmp_path: Path
) -> None:
    out = tmp_path / "Memories.md"
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West", mem("A", text="alpha", turns="1"))
    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(out))
    assert code == 0, err
    out.write_text(
        out.read_text(encoding="utf-8").replace("(Ep1, T1, +0)", "(Ep1, T1x, +0)"),
        encoding="utf-8",
    )

    code, _out, err = run(capsys, "--db", str(db_path), "export", "--out", str(out))

    assert code == 1
    one_error_line(err, str(out), "with problems", "--skip-invalid", "--force")


# --- D8: trailing whitespace survives an editor that strips it --------------------------------


def test_stripping_trailing_whitespace_changes_no_memory_text_or_location_name(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Was: the text "Type:  \\nopen door  " came back as "Type:\\nopen door", imported as
    a reviewer's edit; a location name ending in a space was renamed the same way."""
    texts = ["Type:  \nopen door  ", " ", "\t", "tab\t", "a \n\n b \t", "ends in \\ "]
    store.record_visit(64, "West ", 1)
    store.record_visit(65, "  ", 1)
    for n, text in enumerate(texts):
        store.add_memory(64, "West ", mem(f"Code {n}", text=text, turns=str(n + 1)))
    store.add_memory(65, "  ", mem("Old", text="struck  \nthrough \t", turns="1"))
    store.invalidate_memory(65, "Old", "gone", turn=2)
    store.add_memory(65, "  ", mem("Edited", text="before", turns="3"))
    text = exported(store)
    stripped = strip_trailing_whitespace(text.replace("\nbefore\n", "\nafter\n"))

    plan = import_memories(store, stripped, apply=False).plan

    assert not plan.problems and not plan.conflicts and not plan.locations, plan.details()
    assert [(c.memory.title, c.fields) for c in plan.changed] == [("Edited", ("text",))]
    parsed = parse_memories_md(stripped)
    assert [entry.location.name for entry in parsed.locations] == ["West ", "  "]
    assert [m.text for m in parsed.locations[0].memories] == texts


def test_an_export_ends_no_line_in_a_space_or_tab() -> None:
    memory = Memory(
        category="NOTE", title="T ", text="a \nb\t", episode=1, turns="1", persistence="core"
    )
    entry = LocationMemories(location=LocationInfo(id=1, name="Room\t"), memories=(memory,))
    text = render_memories_md([entry])
    assert all(line == line.rstrip(" \t") for line in text.split("\n")), text
    assert parse_memories_md(text).locations == (entry,)


@pytest.mark.parametrize(
    "text", ["a ", "a\t", " ", "\t", "  ", "a \\", "a\\ ", "\\\\ ", "x  \n \ny\t", "~ ", "# "]
)
def test_text_lines_with_trailing_whitespace_round_trip(text: str) -> None:
    lines = escape_text_lines(text)
    assert all(line == line.rstrip(" \t") for line in lines), lines
    assert unescape_text_lines(lines) == text


_PROTECTED_END = re.compile(r"(?<!\\)((?:\\\\)*)\\([st])(~~)?\Z")


def _old_line(line: str) -> str:
    r"""``line`` as the exporter wrote it before trailing whitespace was protected: the
    ``\s`` or ``\t`` that ends it (after an even number of backslashes, maybe before the
    ``~~`` of a struck text) written as the raw space or tab, and a text line of that one
    character as ``\ `` or backslash-tab, as its first character was protected."""
    match = _PROTECTED_END.search(line)
    if match is None:
        return line
    raw = " " if match.group(2) == "s" else "\t"
    if match.start() == 0 and not match.group(1):
        raw = "\\" + raw  # the whole text line: a blank line, but for the old escape
    return line[: match.start()] + match.group(1) + raw + (match.group(3) or "")


def test_an_older_export_with_unescaped_trailing_spaces_reads_as_before() -> None:
    old = (
        "# Location Memories\n\n## Location 1: Room \n**Visits:** 0 | **Episodes:** none\n\n"
        "### Memories\n\n**[NOTE - CORE] T** *(Ep1, T1)*\nType:  \nopen door\t\n\n---\n"
    )
    parsed = parse_memories_md(old)
    assert not parsed.problems
    assert parsed.locations[0].location.name == "Room "
    assert parsed.locations[0].memories[0].text == "Type:  \nopen door\t"
    assert read_body(old)[:2] == read_line_by_line(old)


def test_a_hand_written_backslash_s_or_t_inside_a_line_is_kept_as_it_is() -> None:
    """Review round 5: ``\\s`` and ``\\t`` read as a space and a tab anywhere, so a
    hand-written ``C:\\temp`` or ``\\s+`` changed on import. memstore writes them only as
    a line's last character, and only there are they read so."""
    hand = (
        "# Location Memories\n\n## Location 1: Room\n**Visits:** 0 | **Episodes:** none\n\n"
        "### Memories\n\n**[NOTE - CORE] T** *(Ep1, T1)*\nSaved in C:\\temp, match \\s+ here\n"
        "and a space at the end:\\s\n\n---\n"
    )
    parsed = parse_memories_md(hand)
    assert not parsed.problems
    assert parsed.locations[0].memories[0].text == (
        "Saved in C:\\temp, match \\s+ here\nand a space at the end: "
    )
    assert read_body(hand)[:2] == read_line_by_line(hand)


@PROPERTY
@given(locations_of(any_memories()))
def test_a_file_stripped_of_trailing_whitespace_reads_as_exported(entries: Any) -> None:
    text = render_memories_md(entries)
    stripped = strip_trailing_whitespace(text)
    # nothing to strip but the space after the colon of an empty location name
    changed = set(text.split("\n")) - set(stripped.split("\n"))
    assert all(re.fullmatch("## Location [0-9]+: ", line) for line in changed), changed
    parsed = parse_memories_md(stripped)
    assert parsed.problems == ()
    assert render_memories_md(parsed.locations) == text


@PROPERTY
@given(locations_of(any_memories()))
def test_an_export_written_before_the_trailing_escape_reads_the_same(entries: Any) -> None:
    """Old files (trailing spaces and tabs written raw) still read as they did."""
    text = render_memories_md(entries)
    old = "\n".join(map(_old_line, text.split("\n")))
    parsed, old_parsed = parse_memories_md(text), parse_memories_md(old)
    assert old_parsed.problems == ()
    assert old_parsed.locations == parsed.locations
    assert read_body(old)[:2] == read_line_by_line(old)


# --- D10: the largest episode is one rule -----------------------------------------------------


def test_the_store_refuses_an_episode_its_own_export_could_not_import(
    store: MemoryStore, mem: MakeMemory
) -> None:
    """Was: add_memory took episode 2**63-1; its unedited export was then refused ("at
    most 9223372036854775806 ... memory skipped") and `memstore check` failed."""
    largest = MEMORY_RULES["episode"].maximum
    assert largest == IMPORT_MAX_EPISODE == INT64_MAX - 1
    assert MEMORY_RULES["superseded_at_episode"].maximum == largest
    with pytest.raises(ValidationError, match="episode"):
        mem("Too late", episode=INT64_MAX)
    with pytest.raises(ValueError, match="episode"):
        LocationInfo(id=1, name="Room", episodes=(INT64_MAX,))
    with pytest.raises(ValueError, match="episode"):
        store.record_visit(64, "West", INT64_MAX)
    assert store.add_memory(64, "West", mem("Last", episode=largest))
    assert store.add_memory(64, "West", mem("Gone", episode=largest, turns="6"))
    with pytest.raises(ValueError, match="episode"):
        store.invalidate_memory(64, "Gone", "why", turn=7, episode=INT64_MAX)
    assert store.invalidate_memory(64, "Gone", "why", turn=7, episode=largest)
    store.record_visit(64, "West", largest)

    outcome = import_memories(store, exported(store), apply=True)

    assert not outcome.plan.problems and not outcome.plan.has_changes, outcome.plan.problems
    with store.transaction(write=False) as conn:
        assert check_invariants(conn) == []
