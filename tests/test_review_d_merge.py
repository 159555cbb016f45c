"""Review D: a fuzzer of twins and agent writes against the import.

F2. With ``--prune --force``, a file that makes an old "Stove" live again and retitles
    the live "Stove" raised SQLite's IntegrityError (one live memory per title) out of
    ``import``: the old one became live before the prune deleted the live one. Deletions
    now come before any memory takes the title they free. (F1, a copy added on every run
    of ``--skip-invalid``, is in test_review_b_round_trip.py.)
F3. In a chain "Stove" by "Window" by a live "Window" twin, a file that points the
    superseded "Window" at "Stove" closed a circle between rows (the "Stove" row linked
    to that very "Window"), which the check of titles cannot see: the import kept it
    superseded with no successor, said nothing, and every later run reported a conflict
    with its own write. The "Stove" row's link now moves to the live twin, which is the
    same title (what the file says), and the file's link is made.
"""

from __future__ import annotations

import pytest

from memstore.md_store import export_memories_md
from memstore.merge import Resolution
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory


@pytest.mark.parametrize("twins", [True, False])
def test_prune_frees_a_title_before_an_old_memory_takes_it_again(
    store: MemoryStore, mem: MakeMemory, twins: bool
) -> None:
    store.add_memory(79, "Kitchen", mem("Stove", text="The stove is cold.", turns="2"))
    if twins:  # a later "Stove" with the same key
        store.supersede_memory(79, "Kitchen", "Stove", mem("Stove", text="A lamp.", turns="2"))
        struck = '[Superseded at T2 by "Stove"]\n~~The stove is cold.~~'
    else:
        store.invalidate_memory(79, "Stove", "gone", turn=3, episode=1)
        store.add_memory(79, "Kitchen", mem("Stove", text="A lamp.", turns="4"))
        struck = '[Invalidated at T3: "gone"]\n~~The stove is cold.~~'
    text = export_memories_md(store)
    turns = "T2" if twins else "T4"
    text = (
        text.replace("PERMANENT - SUPERSEDED] Stove", "PERMANENT] Stove")
        .replace(struck, "The stove is cold.")
        .replace(
            f"PERMANENT] Stove** *(Ep1, {turns}, +0)*\nA lamp.",
            f"PERMANENT] Trapdoor** *(Ep1, {turns}, +0)*\nA lamp.",
        )
    )
    outcome = import_memories(store, text, apply=True, prune=True, force=True)
    assert outcome.applied and not outcome.plan.problems
    assert sorted((m.title, m.text, m.status.value) for m in store.memories(79, True)) == [
        ("Stove", "The stove is cold.", "ACTIVE"),
        ("Trapdoor", "A lamp.", "ACTIVE"),
    ]


def test_a_store_made_from_a_path_says_to_open_it(tmp_path: object) -> None:
    # review E (outside its range): MemoryStore("/path.db") raised AttributeError
    with pytest.raises(TypeError, match=r"MemoryStore\.open\("):
        MemoryStore(str(tmp_path))  # type: ignore[arg-type]


@pytest.mark.parametrize("order", ["stored", "swapped", "stove edited"])
def test_a_link_between_twins_that_would_close_a_circle_is_made_by_moving_the_other(
    store: MemoryStore, mem: MakeMemory, order: str
) -> None:
    store.add_memory(5, "Kitchen", mem("Stove", text="The stove is hot.", turns="1"))
    store.supersede_memory(5, "Kitchen", "Stove", mem("Window", text="Ajar.", turns="2"))
    store.supersede_memory(5, "Kitchen", "Window", mem("Window", text="Open.", turns="3"))
    text = export_memories_md(store)
    stove, ajar = text.index("] Stove**"), text.index("~~Ajar.~~")
    assert stove < ajar
    reviewed = text[:ajar].replace(
        '[Superseded at T3 by "Window"]', '[Superseded at T3 by "Stove"]'
    )
    reviewed += text[ajar:]
    if order == "swapped":  # the superseded "Window" block first (the file's order is free)
        start = text.index("**[NOTE - PERMANENT - SUPERSEDED] Window")
        block = reviewed[start : reviewed.index("\n\n", start) + 2]
        reviewed = reviewed.replace(block, "")
        at = reviewed.index("**[NOTE - PERMANENT - SUPERSEDED] Stove")
        reviewed = reviewed[:at] + block + reviewed[at:]
    stove_text = "The stove is hot."
    if order == "stove edited":  # (the "Stove" changed by the import itself: still moved)
        stove_text = "The stove is very hot."
        reviewed = reviewed.replace("~~The stove is hot.~~", f"~~{stove_text}~~")
    outcome = import_memories(store, reviewed, apply=True)
    assert outcome.applied and not outcome.plan.problems
    exported = export_memories_md(store)
    assert '[Superseded at T3 by "Stove"]\n~~Ajar.~~' in exported
    assert f'[Superseded at T2 by "Window"]\n~~{stove_text}~~' in exported
    again = import_memories(store, reviewed, apply=False).plan
    assert not again.conflicts and not again.has_changes, again.summary()
    with store.transaction(write=False) as conn:
        links = dict(
            conn.exec_driver_sql(
                "SELECT m.title || ':' || m.text, s.title || ':' || s.text FROM memory_links l "
                "JOIN memories m ON m.id = l.memory_id JOIN memories s ON s.id = l.superseded_by_id"
            ).fetchall()
        )
    assert links == {
        f"Stove:{stove_text}": "Window:Open.",
        "Window:Ajar.": f"Stove:{stove_text}",
    }


def test_a_circle_broken_at_a_twin_further_along_the_chain_is_made(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review H F1: "Stove" by "Lamp" by "Window", a live "Lamp" twin; the file points the
    # "Window" at "Stove": the way out is the "Stove" row's link, moved to the live "Lamp"
    store.add_memory(79, "Kitchen", mem("Stove", text="The stove is cold.", turns="1"))
    store.supersede_memory(79, "Kitchen", "Stove", mem("Lamp", text="A lamp.", turns="2"))
    store.supersede_memory(79, "Kitchen", "Lamp", mem("Window", text="Ajar.", turns="3"))
    store.add_memory(79, "Kitchen", mem("Lamp", text="The lamp is lit.", turns="5"))
    store.invalidate_memory(79, "Window", "gone", turn=6)
    text = export_memories_md(store).replace(
        '[Invalidated at T6: "gone"]', '[Superseded at T6 by "Stove"]'
    )
    outcome = import_memories(store, text, apply=True)
    assert outcome.applied and not outcome.plan.problems
    assert export_memories_md(store).split("\n", 2)[2] == text.split("\n", 2)[2]
    again = import_memories(store, text, apply=False).plan
    assert not again.conflicts and not again.has_changes, again.summary()


def test_a_link_an_agent_wrote_since_the_export_is_never_moved(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review H F2: under --theirs the agent's "Stove" -> its new "Window" link was moved to
    # an older "Window" invalidated before the agent wrote
    store.add_memory(79, "Kitchen", mem("Stove", text="The stove is cold.", turns="2"))
    store.add_memory(79, "Kitchen", mem("Window", text="Ajar.", turns="4"))
    store.invalidate_memory(79, "Window", "gone", turn=5)
    text = export_memories_md(store)
    store.supersede_memory(79, "Kitchen", "Stove", mem("Window", text="Shut.", turns="4"))
    with store.transaction(write=False) as conn:
        before = conn.exec_driver_sql("SELECT memory_id, superseded_by_id FROM memory_links")
        agents = {row[0]: row[1] for row in before}
    block = (
        "**[NOTE - PERMANENT - SUPERSEDED] Window** *(Ep1, T4, +0)*\n"
        '[Superseded at T6 by "Stove"]\n~~Shut.~~\n\n'
    )
    at = text.index("---\n")
    outcome = import_memories(
        store, text[:at] + block + text[at:], apply=True, resolution=Resolution.THEIRS
    )
    assert outcome.applied
    with store.transaction(write=False) as conn:
        found = conn.exec_driver_sql("SELECT memory_id, superseded_by_id FROM memory_links")
        after = dict(found.fetchall())
    assert {m: after[m] for m in agents} == agents


def test_skip_invalid_skips_the_file_s_memory_that_closes_a_circle_of_titles(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review I F1: --skip-invalid stored "Case B" superseded with no successor (the chain
    # then had no live memory), and every later run conflicted with that write
    store.add_memory(75, "Living Room", mem("Case A", text="a", turns="200"))
    store.supersede_memory(75, "Living Room", "Case A", mem("Case B", text="b", turns="201"))
    store.add_memory(75, "Living Room", mem("Other", text="c", turns="202"))
    text = export_memories_md(store)
    reviewed = text.replace(
        "**[NOTE - PERMANENT] Case B** *(Ep1, T201, +0)*\nb",
        "**[NOTE - PERMANENT - SUPERSEDED] Case B** *(Ep1, T201, +0)*\n"
        '[Superseded at T202 by "Case A"]\n~~b~~',
    ).replace("\nc\n", "\nc, edited\n")
    assert reviewed.count('by "Case A"') == 1 and "c, edited" in reviewed
    plan = import_memories(store, reviewed, apply=False).plan
    [problem] = plan.problems
    assert "go round in a circle" in problem.message
    assert "with --skip-invalid the file's memories that close it are skipped" in problem.message
    outcome = import_memories(store, reviewed, apply=True, skip_invalid=True)
    assert outcome.applied
    assert [(m.title, m.status.value) for m in store.memories(75)] == [
        ("Case B", "ACTIVE"),
        ("Other", "ACTIVE"),
    ]
    assert store.memories(75)[1].text == "c, edited"
    again = import_memories(store, reviewed, apply=False, skip_invalid=True)
    assert not again.plan.conflicts and not again.plan.has_changes, again.plan.summary()


def test_a_deleted_successor_s_problem_says_how_to_end_the_chain(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review I F3: with --prune the problem said "with --skip-invalid it is imported with
    # no successor", but --skip-invalid deletes nothing and the stored link stays
    store.add_memory(7, "Cellar", mem("Knife", text="A knife.", turns="3"))
    store.supersede_memory(7, "Cellar", "Knife", mem("Knife vs troll", text="No.", turns="4"))
    text = export_memories_md(store)
    gone = "**[NOTE - PERMANENT] Knife vs troll** *(Ep1, T4, +0)*\nNo.\n\n"
    assert gone in text
    reviewed = text.replace(gone, "")
    [problem] = import_memories(store, reviewed, apply=False, prune=True).plan.problems
    assert "with --skip-invalid nothing is deleted, and a link the database has stays" in (
        problem.message
    )
    assert "write its reference line with no successor (as '[Superseded at T5]'" in problem.message
    outcome = import_memories(store, reviewed, apply=True, prune=True, skip_invalid=True)
    assert [m.title for m in store.memories(7)] == ["Knife vs troll"]  # as it said
    ended = reviewed.replace('[Superseded at T4 by "Knife vs troll"]', "[Superseded at T4]")
    outcome = import_memories(store, ended, apply=True, prune=True, force=True)  # (1 of 2)
    assert outcome.applied and store.memories(7) == []
    again = import_memories(store, ended, apply=False, prune=True).plan
    assert not again.has_changes and not again.missing and not again.problems


def test_a_memory_linked_to_one_a_circle_leaves_out_is_skipped_too(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # review J J1: the file adds "Case A" by "Case B", marks "Case B" by "Case A" (a circle)
    # and "Case D" by "Case A": --skip-invalid left "Case A" out but stored "Case D"
    # superseded with no successor, said nothing of it, and no later run settled
    store.add_memory(75, "Living Room", mem("Case B", text="b", turns="201"))
    store.add_memory(75, "Living Room", mem("Case D", text="d", turns="203"))
    text = export_memories_md(store)

    def superseded(title: str, text: str, turn: str, by: str) -> str:
        return (
            f"**[NOTE - PERMANENT - SUPERSEDED] {title}** *(Ep1, T{turn}, +0)*\n"
            f'[Superseded at T205 by "{by}"]\n~~{text}~~'
        )

    reviewed = text.replace(
        "**[NOTE - PERMANENT] Case B** *(Ep1, T201, +0)*\nb",
        superseded("Case A", "a", "200", "Case B")
        + "\n\n"
        + superseded("Case B", "b", "201", "Case A"),
    ).replace(
        "**[NOTE - PERMANENT] Case D** *(Ep1, T203, +0)*\nd",
        superseded("Case D", "d", "203", "Case A"),
    )
    problems = [p.message for p in import_memories(store, reviewed, apply=False).plan.problems]
    assert len(problems) == 2 and "go round in a circle" in problems[0]
    assert problems[1].startswith("memory 'Case D' at location 75 is superseded by 'Case A'")
    for resolution in (None, Resolution.THEIRS):
        outcome = import_memories(
            store, reviewed, apply=True, skip_invalid=True, resolution=resolution
        )
        assert not outcome.plan.has_changes and not outcome.plan.conflicts
        assert [(m.title, m.status.value) for m in store.memories(75)] == [
            ("Case B", "ACTIVE"),
            ("Case D", "ACTIVE"),
        ]


@pytest.mark.parametrize("based", [True, False])
def test_a_circle_through_a_title_only_the_database_has_is_a_problem(
    store: MemoryStore, mem: MakeMemory, based: bool
) -> None:
    # review H F4: the reviewer deleted "Stove" (superseded by "Lamp") and pointed the live
    # "Lamp" back at "Stove". The check of titles took "Stove", which only the database
    # still has, for an end: the import stored "Lamp" superseded with no successor, said
    # nothing, and every later run reported a conflict with that write
    store.add_memory(5, "Kitchen", mem("Stove", text="The stove is hot.", turns="1"))
    store.supersede_memory(5, "Kitchen", "Stove", mem("Lamp", text="A lamp.", turns="2"))
    store.add_memory(5, "Kitchen", mem("Other", text="c", turns="3"))
    text = export_memories_md(store)
    stove = text.index("**[NOTE - PERMANENT - SUPERSEDED] Stove")
    reviewed = text[:stove] + text[text.index("**[NOTE - PERMANENT] Lamp") :]
    reviewed = reviewed.replace(
        "**[NOTE - PERMANENT] Lamp** *(Ep1, T2, +0)*\nA lamp.",
        "**[NOTE - PERMANENT - SUPERSEDED] Lamp** *(Ep1, T2, +0)*\n"
        '[Superseded at T4 by "Stove"]\n~~A lamp.~~',
    ).replace("\nc\n", "\nc, edited\n")
    assert "] Stove**" not in reviewed and 'by "Stove"' in reviewed
    if not based:
        lines = reviewed.splitlines(keepends=True)  # the base line gone: 2-way
        reviewed = "".join(line for line in lines if not line.startswith("<!-- memstore-base:"))
        assert "memstore-base" not in reviewed
    [problem] = import_memories(store, reviewed, apply=False).plan.problems
    assert "go round in a circle ('Lamp' -> 'Stove' -> 'Lamp')" in problem.message, problem
    assert problem.line == reviewed.splitlines().index('[Superseded at T4 by "Stove"]') + 1
    outcome = import_memories(store, reviewed, apply=True, skip_invalid=True)
    assert outcome.applied
    assert [(m.title, m.status.value) for m in store.memories(5, True)] == [
        ("Stove", "SUPERSEDED"),
        ("Lamp", "ACTIVE"),
        ("Other", "ACTIVE"),
    ]
    assert store.memories(5)[1].text == "c, edited"
    again = import_memories(store, reviewed, apply=False, skip_invalid=True).plan
    assert not again.conflicts and not again.has_changes, again.summary()
