"""Review K2: twins the 3-way merge told apart were paired again by what they say.

Twins are memories with one key (location, title, episode, turns). The merge knows which
database row each of its memories stands for; the plan paired a key's memories again by
content, so once an agent's write after the export made two twins say the same, the file's
change for one landed on the other: an agent's supersession link was dropped, ``--prune``
deleted the row the agent changed, a text edit went to the wrong row. The plan now takes
the merge's rows. Every test ends with ``memstore check``'s rules (the ``store`` fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.cli import main
from memstore.store import MemoryStore
from memstore.store_import import ImportOutcome, import_memories
from tests.conftest import MakeMemory

KITCHEN = (79, "Kitchen")


def exported(store: MemoryStore) -> str:
    return render_memories_md(*store.export_snapshot())


def run(store: MemoryStore, text: str, **options: object) -> ImportOutcome:
    dry = import_memories(store, text, apply=False, **options)  # type: ignore[arg-type]
    applied = import_memories(store, text, apply=True, **options)  # type: ignore[arg-type]
    assert dry.plan.summary() == applied.plan.summary(), "the dry run plans what --apply does"
    assert applied.applied, applied.refused
    again = import_memories(store, text, apply=False, **options)  # type: ignore[arg-type]
    assert not again.plan.has_changes, again.plan.summary()  # a re-run finds nothing to do
    return applied


def rows(store: MemoryStore) -> list[tuple[int, str, str, str, int | None, str | None]]:
    """(id, title, text, status, successor's id, invalidation reason) of every memory at
    the Kitchen, by row id."""
    with store.transaction(write=False) as conn:
        found = conn.exec_driver_sql(
            "SELECT m.id, m.title, m.text, m.status, l.superseded_by_id, l.reason "
            "FROM memories m LEFT JOIN memory_links l ON l.memory_id = m.id "
            "WHERE m.location_id = 79 ORDER BY m.id"
        )
        return [tuple(row) for row in found]  # type: ignore[misc]


def test_an_invalidation_of_one_twin_never_replaces_the_agent_s_supersession_of_the_other(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))  # 1
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
    )  # 2, a twin of 1
    text = exported(store).replace(
        '[Superseded at T4 by "Window"]', '[Invalidated at T9: "duplicate sighting"]'
    )
    # after the export an agent supersedes the live twin: its state is now the old one's
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="The window is open now.", turns="4")
    )  # 3
    run(store, text)
    assert rows(store) == [
        (1, "Window", "The window is ajar.", "SUPERSEDED", None, "duplicate sighting"),
        (2, "Window", "The window is ajar.", "SUPERSEDED", 3, None),  # was: None, the reason
        (3, "Window", "The window is open now.", "ACTIVE", None, None),
    ]


def test_prune_deletes_the_twin_the_reviewer_removed_never_the_one_an_agent_changed(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(*KITCHEN, mem("Leaflet", text="A leaflet.", turns="2"))  # 1
    assert store.invalidate_memory(79, "Leaflet", "gone", turn=3)
    store.add_memory(*KITCHEN, mem("Old note", text="On the table.", turns="1"))  # 2
    assert store.supersede_memory(
        *KITCHEN, "Old note", mem("Leaflet", text="A leaflet.", turns="2")
    )  # 3, a twin of 1
    for n in range(12):  # a deletion of one stays under the 10% guard
        store.add_memory(64, "West of House", mem(f"Fact {n}"))
    stale = (
        '**[NOTE - PERMANENT - SUPERSEDED] Leaflet** *(Ep1, T2, +0)*\n[Invalidated at T3: "gone"]'
    )
    text = exported(store)
    start = text.index(stale)
    text = text[:start] + text[text.index("\n\n", start) + 2 :]  # the reviewer deletes 1
    assert store.invalidate_memory(79, "Leaflet", "gone", turn=3)  # an agent retires 3
    outcome = run(store, text, prune=True)
    assert len(outcome.plan.missing) == 1
    assert rows(store) == [
        (2, "Old note", "On the table.", "SUPERSEDED", 3, None),  # was: moved onto row 1
        (3, "Leaflet", "A leaflet.", "SUPERSEDED", None, "gone"),  # was: deleted
    ]


def test_a_text_edit_of_one_twin_lands_on_that_row_and_a_re_run_finds_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(*KITCHEN, mem("Leaflet", text="A leaflet.", turns="2"))  # 1
    assert store.invalidate_memory(79, "Leaflet", "gone", turn=3)
    store.add_memory(*KITCHEN, mem("Leaflet", text="A leaflet.", turns="2"))  # 2, same key
    text = exported(store).replace("~~A leaflet.~~", "~~A leaflet (old copy).~~")
    assert store.invalidate_memory(79, "Leaflet", "gone", turn=3)  # an agent retires 2
    run(store, text)
    assert rows(store) == [
        (1, "Leaflet", "A leaflet (old copy).", "SUPERSEDED", None, "gone"),
        (2, "Leaflet", "A leaflet.", "SUPERSEDED", None, "gone"),  # was: the edit here
    ]


def test_a_turn_written_with_a_leading_zero_is_that_turn(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review K2 #4: T05 was another key than the stored T5: the reviewer's text edit was a
    # problem ("would replace" the memory), with --prune a deletion and a new row, and
    # every later import of the file a conflict with the import's own write
    store.add_memory(64, "West of House", mem("Mailbox", text="A small mailbox.", turns="5"))
    text = exported(store).replace("Mailbox** *(Ep1, T5,", "Mailbox** *(Ep1, T05,")
    assert "T05" in text
    text = text.replace("A small mailbox.", "A small white mailbox.")
    outcome = run(store, text)
    assert outcome.plan.problems == ()
    [memory] = store.memories(64)
    assert (memory.title, memory.turns, memory.text) == ("Mailbox", "5", "A small white mailbox.")
    assert [m.turns for m in store.memories(64, include_superseded=True)] == ["5"]  # one row


def test_an_import_that_only_lowers_visits_says_they_are_not_applied(
    db_path: Path, mem: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    # review K2 #5: "the database already matches the file", and the next export replaced
    # the reviewer's edit without a word
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West of House", mem("Mailbox"))
        for episode in (1, 2, 3):
            store.record_visit(64, "West of House", episode)
    out = db_path.parent / "Memories.md"
    assert main(["--db", str(db_path), "export", "--out", str(out)]) == 0
    text = out.read_text()
    lowered = text.replace(
        "**Visits:** 3 | **Episodes:** 1, 2, 3", "**Visits:** 1 | **Episodes:** 1"
    )
    assert lowered != text
    out.write_text(lowered)
    capsys.readouterr()
    assert main(["--db", str(db_path), "import", str(out), "--apply"]) == 0
    said = capsys.readouterr().out
    assert "already matches" not in said
    assert "more visits or episodes than the file lists at location(s) 64" in said
    assert "the database's are kept" in said
    capsys.readouterr()
    assert main(["--db", str(db_path), "import", str(out)]) == 0  # the dry run says it too
    assert "location(s) 64 (an agent's since the export" in capsys.readouterr().out


def test_an_edit_of_the_first_of_identical_twins_lands_on_the_first(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review L1 #1: the merge paired the file's twins with the export's by content, the
    # first identical row first: the invalidation written on the first of two identical
    # blocks went to the second, and the agent's link 2 -> 3 was lost
    for _ in range(3):  # 1 -> 2 -> 3, the same key and text
        if not store.supersede_memory(
            *KITCHEN, "Window", mem("Window", text="A small window.", turns="4")
        ):
            store.add_memory(*KITCHEN, mem("Window", text="A small window.", turns="4"))
    text = exported(store)
    link = '[Superseded at T4 by "Window"]'
    at = text.index(link)
    text = text[:at] + '[Invalidated at T9: "reviewer says no"]' + text[at + len(link) :]
    run(store, text)
    assert rows(store) == [
        (1, "Window", "A small window.", "SUPERSEDED", None, "reviewer says no"),
        (2, "Window", "A small window.", "SUPERSEDED", 3, None),
        (3, "Window", "A small window.", "ACTIVE", None, None),
    ]
    assert exported(store).split("\n## ")[1:] == text.split("\n## ")[1:]  # as reviewed


def test_a_twin_s_place_tells_it_apart_when_what_it_says_cannot(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review L1 #1 (t8b): the reviewer retitled the old twin and invalidated the live one;
    # as likely as each other, the first twin was taken: the old one was invalidated and
    # the live one the reviewer invalidated stayed live
    store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
    )
    text = exported(store).replace(
        "**[NOTE - PERMANENT - SUPERSEDED] Window**",
        "**[NOTE - PERMANENT - SUPERSEDED] Window (old)**",
    )
    live = "**[NOTE - PERMANENT] Window** *(Ep1, T4, +0)*\nThe window is ajar."
    assert live in text
    text = text.replace(
        live,
        "**[NOTE - PERMANENT - SUPERSEDED] Window** *(Ep1, T4, +0)*\n"
        '[Invalidated at T9: "reviewer says no"]\n~~The window is ajar.~~',
    )
    outcome = import_memories(store, text, apply=True, skip_invalid=True)
    assert outcome.applied
    assert [(r[0], r[3], r[5]) for r in rows(store)] == [
        (1, "SUPERSEDED", None),  # kept: the file's retitle of it is a problem, skipped
        (2, "SUPERSEDED", "reviewer says no"),  # was: still ACTIVE
    ]


def test_a_memory_superseded_by_its_own_title_that_only_its_predecessor_has_is_a_circle(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review L1 #2: Lamp T1 -> Lamp T2; the file marks T2 superseded by "Lamp": only its
    # own predecessor has that title, so no link could be made; it was "applied" with no
    # successor, and every later import of the file was a conflict with that write
    store.add_memory(64, "West of House", mem("Lamp", text="A lamp.", turns="1"))
    assert store.supersede_memory(
        64, "West of House", "Lamp", mem("Lamp", text="A brass lamp.", turns="2")
    )
    live = "**[NOTE - PERMANENT] Lamp** *(Ep1, T2, +0)*\nA brass lamp."
    text = exported(store)
    assert live in text
    text = text.replace(
        live,
        "**[NOTE - PERMANENT - SUPERSEDED] Lamp** *(Ep1, T2, +0)*\n"
        '[Superseded at T2 by "Lamp"]\n~~A brass lamp.~~',
    )
    outcome = import_memories(store, text, apply=True)
    assert not outcome.applied
    [problem] = outcome.plan.problems
    assert "go round in a circle ('Lamp' -> 'Lamp')" in problem.message
    assert [m.status.value for m in store.memories(64, include_superseded=True)] == [
        "SUPERSEDED",
        "ACTIVE",
    ]


def test_a_memory_added_above_identical_twins_does_not_move_an_edit_to_the_other(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review M: places counted from the section's start only: one memory added at the top
    # shifted the file's against the export's, and the edit of the second of two
    # identical superseded twins went to the first
    store.add_memory(*KITCHEN, mem("Other", text="x", turns="1"))
    for _ in range(3):  # 2 -> 3 -> 4, the same key and text
        if not store.supersede_memory(
            *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
        ):
            store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    text = exported(store)
    struck = "~~The window is ajar.~~"
    second = text.index(struck, text.index(struck) + 1)
    text = text[:second] + "~~The window is ajar (reviewed).~~" + text[second + len(struck) :]
    text = text.replace(
        "### Memories\n\n", "### Memories\n\n**[NOTE - PERMANENT] New** *(Ep1, T2)*\nNew.\n\n", 1
    )
    run(store, text)
    assert [(r[0], r[2]) for r in rows(store) if r[1] == "Window"] == [
        (2, "The window is ajar."),
        (3, "The window is ajar (reviewed)."),  # was: row 2
        (4, "The window is ajar."),
    ]


@pytest.mark.parametrize(
    ("edited", "elsewhere"),
    [
        (0, "below"),  # review N1: the edit of the first went to the second
        (0, "delete above"),
        (1, "above"),
        (1, "above and below"),  # review N2
        (1, "move below to above"),  # review N2
    ],
)
def test_an_edit_of_one_of_identical_twins_stays_on_it_whatever_changes_around_them(
    store: MemoryStore, mem: MakeMemory, edited: int, elsewhere: str
) -> None:
    # with as many twins in the file as stored, a twin's place among its key's tells them
    # apart; a memory added, deleted or moved around them shifts its place in the section
    store.add_memory(*KITCHEN, mem("Other", text="x", turns="1"))
    for _ in range(3):  # 2 -> 3 -> 4, the same key and text
        if not store.supersede_memory(
            *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
        ):
            store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    store.add_memory(*KITCHEN, mem("Bottom", text="y", turns="6"))
    for n in range(12):  # a deletion of one stays under the 10% guard
        store.add_memory(64, "West of House", mem(f"Fact {n}"))
    text = exported(store)
    struck = "~~The window is ajar.~~"
    at = text.index(struck)
    if edited:
        at = text.index(struck, at + 1)
    text = text[:at] + "~~The window is ajar (reviewed).~~" + text[at + len(struck) :]
    other = "**[NOTE - PERMANENT] Other** *(Ep1, T1, +0)*\nx\n\n"
    bottom = "**[NOTE - PERMANENT] Bottom** *(Ep1, T6, +0)*\ny\n"
    new = "**[NOTE - PERMANENT] New** *(Ep1, T2, +0)*\nNew.\n\n"
    assert other in text and bottom in text
    if "above" in elsewhere and "move" not in elsewhere and "delete" not in elsewhere:
        text = text.replace(other, new + other, 1)
    if "below" in elsewhere and "move" not in elsewhere:
        text = text.replace(bottom, bottom + "\n" + new.replace("New", "Newer"), 1)
    if elsewhere == "delete above":
        text = text.replace(other, "", 1)
    if elsewhere == "move below to above":
        text = text.replace("\n\n" + bottom, "\n", 1).replace(other, other + bottom + "\n", 1)
    run(store, text, prune=elsewhere == "delete above")
    windows = [(r[0], r[2]) for r in rows(store) if r[1] == "Window"]
    assert windows[edited] == (2 + edited, "The window is ajar (reviewed).")
    assert [w for n, w in enumerate(windows) if n != edited] == [
        (2 + n, "The window is ajar.") for n in range(3) if n != edited
    ]


def test_a_change_to_one_of_identical_twins_the_file_also_deleted_one_of_is_a_problem(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review O: ids 2 -> 3 -> 4 (live) say the same; the file deletes the first block and
    # invalidates the live one. "Deleted 2, invalidated 4" and "invalidated 3, deleted 4"
    # fit the file alike: id 3 was invalidated, silently, and an agent's supersession of
    # id 4 after the export was no conflict. Which row the change is for cannot be told.
    store.add_memory(*KITCHEN, mem("Other", text="x", turns="1"))
    for _ in range(3):
        if not store.supersede_memory(
            *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
        ):
            store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    text = exported(store)
    block = (
        '**[NOTE - PERMANENT - SUPERSEDED] Window** *(Ep1, T4, +0)*\n[Superseded at T4 by "Window"]'
        "\n~~The window is ajar.~~\n\n"
    )
    live = "**[NOTE - PERMANENT] Window** *(Ep1, T4, +0)*\nThe window is ajar.\n"
    assert block in text and live in text
    text = text.replace(block, "", 1).replace(
        live,
        "**[NOTE - PERMANENT - SUPERSEDED] Window** *(Ep1, T4, +0)*\n"
        '[Invalidated at T9: "broken"]\n~~The window is ajar.~~\n',
    )
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="The window is wide open.", turns="8")
    )  # an agent, after the export
    before = rows(store)
    outcome = import_memories(store, text, apply=True)
    assert not outcome.applied
    [problem] = outcome.plan.problems
    assert "which one cannot be told" in problem.message
    assert rows(store) == before
    skipped = import_memories(store, text, apply=True, skip_invalid=True)
    assert skipped.applied or not skipped.plan.has_changes
    assert rows(store) == before  # the rest of the file changes nothing


def test_a_twin_retitled_away_and_another_added_leave_the_other_twins_on_their_rows(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review O MEDIUM: ids 2 -> 3 -> 4 -> 5 (live) say the same. The file retitles the
    # first superseded block to "Pane", edits the third's text and adds a new superseded
    # "Window" at the end: as many twins as exported, so each was paired by its place among
    # its key's, and the import silently rewrote the rows (the new text on id 2, the edit
    # on id 3 and not id 4, "Pane" a new row). The section is now aligned whole with the
    # export: the edit lands on id 4, and the retitle is a problem asking for --prune.
    store.add_memory(*KITCHEN, mem("Other", text="x", turns="1"))
    store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    for _ in range(3):
        assert store.supersede_memory(
            *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
        )
    store.add_memory(*KITCHEN, mem("Bottom", text="y", turns="6"))
    text = exported(store)
    block = (
        '**[NOTE - PERMANENT - SUPERSEDED] Window** *(Ep1, T4, +0)*\n[Superseded at T4 by "Window"]'
        "\n~~The window is ajar.~~\n\n"
    )
    assert text.count(block) == 3
    first, third = text.index(block), text.rindex(block)
    text = (
        text[:first]
        + block.replace("] Window**", "] Pane**")
        + text[first + len(block) : third]
        + block.replace("ajar.~~", "ajar (reviewed).~~")
        + text[third + len(block) :]
    )
    text = text.replace("\n---", "\n" + block.replace("The window is ajar.", "Shut.") + "---")
    before = rows(store)
    outcome = import_memories(store, text, apply=True)
    assert not outcome.applied and rows(store) == before
    assert sorted(p.message.split(" at location")[0] for p in outcome.plan.problems) == [
        "memory 'Pane'",
        "memory 'Window' (Ep1, T4)",
    ]
    assert all("--prune" in p.message for p in outcome.plan.problems)
    run(store, text, prune=True, force=True)  # (one of six deleted: over --prune's 10%)
    after = {row[0]: row[1:3] for row in rows(store)}
    assert 2 not in after  # the retitled block's row, replaced by "Pane"
    assert after[3] == ("Window", "The window is ajar.")
    assert after[4] == ("Window", "The window is ajar (reviewed).")
    assert after[5] == ("Window", "The window is ajar.")
    assert sorted(after[n] for n in after if n > 6) == [
        ("Pane", "The window is ajar."),
        ("Window", "Shut."),
    ]


def test_the_sure_alignment_pairs_only_what_every_best_alignment_pairs() -> None:
    from memstore.md_rows import MemoryRow
    from memstore.models import Category, Persistence, Status
    from memstore.pairing import sure_alignment

    def row(title: str, text: str = "The window is ajar.") -> MemoryRow:
        return MemoryRow(
            Category.NOTE, title, text, 1, "4", None, Persistence.PERMANENT,
            Status.SUPERSEDED, "Window", 4, 1, None,
        )  # fmt: skip

    other, bottom, window = row("Other", "x"), row("Bottom", "y"), row("Window")
    base = [other, window, window, window, bottom]
    edited = row("Window", "The window is ajar (reviewed).")
    # the first twin retitled, the third edited, one added at the end
    file = [other, row("Pane"), window, edited, bottom, row("Window", "Shut.")]
    assert sure_alignment(file, base) == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}
    # one of identical twins deleted: which one cannot be told, so neither is sure
    assert sure_alignment([other, window, window, bottom], base) == {0: 0, 3: 4}
    # a memory moved to the top, past two others: no best alignment pairs it
    moved, kept = row("Window", "Moved."), row("Kept", "z")
    assert sure_alignment([moved, other, kept, bottom], [other, kept, moved, bottom]) == {
        1: 0,
        2: 1,
        3: 3,
    }
    # past one: two readings fit alike (the other moved down), and neither is sure
    assert sure_alignment([moved, other, bottom], [other, moved, bottom]) == {2: 2}


def blocks_of(text: str) -> tuple[str, list[str], str]:
    """The Kitchen section's memory blocks, and what comes before and after them."""
    head, rest = text.split("### Memories\n\n")
    body, tail = rest.split("\n---", 1)
    return head, body.strip("\n").split("\n\n"), tail


def joined(head: str, blocks: list[str], tail: str) -> str:
    return head + "### Memories\n\n" + "\n\n".join(blocks) + "\n\n\n---" + tail


def test_a_memory_that_only_shares_a_twin_s_text_never_takes_the_twin_s_row(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review T1 F4: "Zed" says what a superseded twin says; the file retitles Zed and moves
    # it to the top, and moves and edits the twin. The alignment paired the twin with Zed's
    # retitle, took it out of the twins' pool, and the twin's edit became delete + add
    store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))  # 1
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="A shutter bangs.", turns="4")
    )  # 2
    store.add_memory(*KITCHEN, mem("X", text="x text", turns="1"))
    store.add_memory(*KITCHEN, mem("Y", text="y text", turns="1"))
    store.add_memory(*KITCHEN, mem("Zed", text="The window is ajar.", turns="2"))  # 5
    head, blocks, tail = blocks_of(exported(store))
    twin = next(b for b in blocks if "] Window**" in b and "SUPERSEDED" in b)
    zed = next(b for b in blocks if "] Zed**" in b)
    blocks.remove(twin)
    blocks.remove(zed)
    blocks = [
        zed.replace("] Zed**", "] Ozone**"),
        *blocks,
        twin.replace("ajar.~~", "ajar (checked).~~"),
    ]
    run(store, joined(head, blocks, tail), prune=True, force=True)
    after = {row[0]: row[1:3] for row in rows(store)}
    assert after[1] == ("Window", "The window is ajar (checked).")  # edited in place
    assert after[2] == ("Window", "A shutter bangs.")


def test_a_chain_of_twins_retitled_whole_is_a_conflict_where_an_agent_changed_the_live_one(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review T1 F5: "Lamp" twins retitled "Brass lamp"; an agent supersedes the live Lamp
    # after the export. The first retitled block took the changed row: the conflict was on
    # the superseded block, and --ours added a live "Brass lamp" copy of what was retired
    store.add_memory(*KITCHEN, mem("Lamp", text="A brass lamp is here.", turns="4"))
    assert store.supersede_memory(
        *KITCHEN, "Lamp", mem("Lamp", text="A brass lamp is here.", turns="4")
    )
    text = (
        exported(store)
        .replace("] Lamp**", "] Brass lamp**")
        .replace('by "Lamp"', 'by "Brass lamp"')
    )
    assert store.supersede_memory(
        *KITCHEN, "Lamp", mem("Lamp", text="The thief took it.", turns="9")
    )
    outcome = import_memories(store, text, apply=False, prune=True, force=True)
    [conflict] = outcome.plan.conflicts
    assert conflict.title == "Brass lamp" and conflict.file.status.value == "ACTIVE"
    assert "superseded by 'Lamp' in the database" in str(conflict)


def test_a_live_twin_retitled_and_moved_with_its_predecessor_s_link_repointed_is_a_retitle(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review T1 F3: ids 2 -> 3 (live) say the same. The file retitles the live one "Lamp
    # window", moves it to the top and points id 2's link at the new title. The superseded
    # "Window" left in the file was paired with the live row by its place (what they say
    # tied): a spurious status change, and the retitle reported as an edit of the
    # superseded row. The same kind of end (superseded by a memory) now pairs it with id 2.
    store.add_memory(*KITCHEN, mem("Stove", text="The stove is cold.", turns="2"))
    store.add_memory(*KITCHEN, mem("Window", text="The window is ajar.", turns="4"))
    assert store.supersede_memory(
        *KITCHEN, "Window", mem("Window", text="The window is ajar.", turns="4")
    )
    text = exported(store)
    live = "**[NOTE - PERMANENT] Window** *(Ep1, T4, +0)*\nThe window is ajar.\n\n"
    stove = "**[NOTE - PERMANENT] Stove**"
    assert live in text and stove in text
    text = text.replace(live, "").replace(stove, live.replace("] Window", "] Lamp window") + stove)
    text = text.replace('by "Window"]', 'by "Lamp window"]')
    before = rows(store)
    outcome = import_memories(store, text, apply=True)
    assert not outcome.applied and rows(store) == before
    [problem] = outcome.plan.problems
    assert "an edit of the database's live memory 'Window'" in problem.message
    assert outcome.plan.summary().count("status changed 0") == 1
    run(store, text, prune=True, force=True)  # (one of three memories: over --prune's 10%)
    (stove, window, lamp) = rows(store)  # a retitle is a replacement: the new row, then
    assert stove == (1, "Stove", "The stove is cold.", "ACTIVE", None, None)
    assert lamp[1:] == ("Lamp window", "The window is ajar.", "ACTIVE", None, None)
    assert window == (2, "Window", "The window is ajar.", "SUPERSEDED", lamp[0], None)
