"""Importing Memories.md: the plan (memstore.importing) and applying it (memstore.store_import)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters import parse_memories_md, render_memories_md
from memstore.importing import ChangeKind, ImportPlan, plan_import
from memstore.models import (
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
    blank_for_sqlite,
)
from memstore.store import MemoryStore
from memstore.store_import import ImportConflict, apply_import
from tests.conftest import MakeMemory


def populate(store: MemoryStore, mem: MakeMemory) -> None:
    """A database with every kind of memory and link the file format can carry."""
    store.record_visit(15, "West of House", 1)
    store.record_visit(15, "West of House", 2)
    store.record_visit(15, "West of House", 2)
    store.add_memory(15, "West of House", mem("Open window", category="SUCCESS", turns="23-24"))
    store.add_memory(15, "West of House", mem("Mailbox", persistence="core", score_change=None))
    store.supersede_memory(
        15,
        "West of House",
        "Open window",
        mem("Window stays open", episode=2, turns="40-41", score_change=5),
    )
    store.invalidate_memory(15, "Mailbox", 'the "leaflet" was a lie', turn=9)
    store.add_memory(
        15,
        "West of House",
        mem("Guess *maybe*", status="TENTATIVE", text="line one\nline [two] ~~\n\n# not a heading"),
    )
    # a chain through one title: Troll -> Troll -> Troll
    store.add_memory(33, "Troll Room", mem("Troll", category="DANGER", score_change=-10))
    store.supersede_memory(33, "Troll Room", "Troll", mem("Troll", episode=2, turns="7"))
    store.supersede_memory(33, "Troll Room", "Troll", mem("Troll", episode=3, turns="2"))
    store.record_visit(40, "Kitchen", 3)  # a location without memories
    store.add_memory(41, "Attic", mem("Rope", category="DISCOVERY", text=""))


def export_text(store: MemoryStore) -> str:
    return render_memories_md(store.export_locations())


def plan_for(store: MemoryStore, text: str, *, prune: bool = False) -> ImportPlan:
    parsed = parse_memories_md(text)
    return plan_import(
        store.export_locations(), parsed.locations, parsed.problems, source=text, prune=prune
    )


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# --- the plan ---------------------------------------------------------------------------------


def test_plan_of_a_file_into_an_empty_database_adds_everything(
    store: MemoryStore, mem: MakeMemory, tmp_path: Path
) -> None:
    populate(store, mem)
    text = export_text(store)
    with MemoryStore.open(tmp_path / "empty.db") as empty:
        plan = plan_for(empty, text)
    assert plan.ok
    assert len(plan.added) == 8 and not plan.changed and not plan.missing
    assert sorted(c.location_id for c in plan.locations if c.is_new) == [15, 33, 40, 41]
    summary = plan.summary()
    assert "added 8" in summary and "problems 0" in summary
    assert "would delete 0" in summary


def test_plan_of_the_databases_own_export_changes_nothing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    populate(store, mem)
    plan = plan_for(store, export_text(store))
    assert plan.ok and not plan.has_changes
    assert len(plan.unchanged) == 8


def test_plan_classifies_changed_status_changed_and_missing(
    store: MemoryStore, mem: MakeMemory
) -> None:
    populate(store, mem)
    text = export_text(store)
    text = edit(text, "line one", "line uno")  # text changed
    text = edit(
        text,
        "[DANGER - PERMANENT - SUPERSEDED] Troll** *(Ep1, T5, -10)*",
        "[DANGER - PERMANENT - SUPERSEDED] Troll** *(Ep1, T5, -12)*",
    )  # score
    text = edit(text, "[NOTE - PERMANENT - TENTATIVE] Guess", "[NOTE - PERMANENT] Guess")
    text = edit(text, '"the \\"leaflet\\" was a lie"', '"it was a lie"')  # reason: status
    text = edit(text, "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*\n\n", "")  # missing
    text = edit(
        text, "## Location 40: Kitchen\n**Visits:** 1", "## Location 40: Big Kitchen\n**Visits:** 7"
    )
    plan = plan_for(store, text)
    assert plan.ok, plan.problems
    kinds = {(c.location_id, c.memory.title, c.memory.episode): c for c in plan.memories}
    guess = kinds[(15, "Guess *maybe*", 1)]
    assert guess.kind is ChangeKind.CHANGED
    assert set(guess.fields) == {"text", "status"}
    assert kinds[(33, "Troll", 1)].kind is ChangeKind.CHANGED
    assert kinds[(33, "Troll", 1)].fields == ("score_change",)
    mailbox = kinds[(15, "Mailbox", 1)]
    assert mailbox.kind is ChangeKind.STATUS_CHANGED
    assert mailbox.fields == ("invalidation_reason",)
    assert [c.memory.title for c in plan.missing] == ["Rope"]
    kitchen = next(c for c in plan.locations if c.location_id == 40)
    assert (kitchen.name, kitchen.visit_count) == ("Big Kitchen", 7)
    assert "name 'Kitchen' -> 'Big Kitchen'" in kitchen.describe()
    summary = plan.summary()
    assert "changed 2" in summary and "status changed 1" in summary
    assert "would delete 1 (only with --prune)" in summary
    assert "Rope" in plan.details()


def test_visits_never_go_down_and_episodes_are_merged(store: MemoryStore, mem: MakeMemory) -> None:
    populate(store, mem)
    text = edit(
        export_text(store),
        "**Visits:** 3 | **Episodes:** 1, 2",
        "**Visits:** 1 | **Episodes:** 2, 5",
    )
    plan = plan_for(store, text)
    change = next(c for c in plan.locations if c.location_id == 15)
    assert change.visit_count == 3 and change.episodes == (1, 2, 5)
    apply_import(store, plan, prune=False)
    info = store.location(15)
    assert info is not None and info.visit_count == 3 and info.episodes == (1, 2, 5)


def test_two_live_memories_with_one_title_are_a_problem_with_a_line_number(
    store: MemoryStore,
) -> None:
    text = (
        "# Location Memories\n\n## Location 7: Cellar\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n"
        "**[NOTE - PERMANENT] Dark** *(Ep1, T3)*\nIt is dark.\n\n"
        "**[NOTE - PERMANENT] Dark** *(Ep1, T4)*\nStill dark.\n\n"
        "**[NOTE - PERMANENT] Grue** *(Ep1, T5)*\nBeware.\n\n---\n"
    )
    plan = plan_for(store, text)
    assert [p.line for p in plan.problems] == [11]
    assert "non-superseded memories titled 'Dark'" in plan.problems[0].message
    assert [c.memory.title for c in plan.added] == ["Grue"]  # the duplicates are left out
    assert "line 11: location 7 has 2" in plan.summary()


def test_an_ephemeral_memory_is_a_problem(store: MemoryStore, mem: MakeMemory) -> None:
    incoming = [
        LocationMemories(
            location=LocationInfo(id=3, name="Room"),
            memories=(mem("Spawned", persistence="ephemeral"), mem("Kept")),
        )
    ]
    plan = plan_import([], incoming, [])
    assert len(plan.problems) == 1 and "EPHEMERAL" in plan.problems[0].message
    assert [c.memory.title for c in plan.added] == ["Kept"]


def test_the_parsers_problems_are_kept_with_their_lines(store: MemoryStore) -> None:
    text = (
        "# Location Memories\n\n## Location 7: Cellar\n\n### Memories\n\n"
        "**[BOGUS - PERMANENT] Dark** *(Ep1, T3)*\nIt is dark.\n\n---\n"
    )
    plan = plan_for(store, text)
    assert [p.line for p in plan.problems] == [7]
    assert str(plan.problems[0]).startswith("line 7: unknown category")


def test_a_new_live_memory_may_not_take_the_title_of_one_missing_from_the_file(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(7, "Cellar", mem("Dark", turns="3"))
    text = edit(export_text(store), "*(Ep1, T3, +0)*", "*(Ep1, T4, +0)*")
    plan = plan_for(store, text)
    assert len(plan.problems) == 1 and "use --prune" in plan.problems[0].message
    assert plan.problems[0].line == 8
    assert not plan.added
    pruning = plan_for(store, text, prune=True)
    assert pruning.ok and len(pruning.added) == 1 and len(pruning.missing) == 1
    apply_import(store, pruning, prune=True)
    assert [m.turns for m in store.memories(7, include_superseded=True)] == ["4"]


# --- applying ---------------------------------------------------------------------------------


def test_round_trip_through_an_empty_database_is_byte_identical(
    store: MemoryStore, mem: MakeMemory, tmp_path: Path
) -> None:
    populate(store, mem)
    text = export_text(store)
    assert '[Invalidated at T9: "the \\"leaflet\\" was a lie"]' in text
    assert '[Superseded at Ep2, T41 by "Window stays open"]' in text
    with MemoryStore.open(tmp_path / "copy.db") as copy:
        apply_import(copy, plan_for(copy, text), prune=False)
        assert export_text(copy) == text
        # the links are real rows: the chain is walkable
        chain = copy.history(15, "Window stays open")
        assert [m.title for m in chain] == ["Open window", "Window stays open"]
        assert copy.get_location_memory(15) == store.get_location_memory(15)
        # importing again changes nothing
        assert not plan_for(copy, text).has_changes


def test_apply_updates_fields_statuses_and_links(store: MemoryStore, mem: MakeMemory) -> None:
    populate(store, mem)
    text = export_text(store)
    text = edit(text, "[NOTE - PERMANENT] Window stays open", "[NOTE - CORE] Window stays open")
    text = edit(
        text,
        "**[NOTE - PERMANENT - TENTATIVE] Guess \\*maybe\\*** *(Ep1, T5, +0)*\n",
        "**[NOTE - PERMANENT - SUPERSEDED] Guess \\*maybe\\*** *(Ep1, T5, +0)*\n"
        '[Superseded at T50 by "Window stays open"]\n',
    )
    text = edit(text, "line one", "~~line one")
    text = edit(text, "# not a heading", "# not a heading~~")
    text = edit(
        text,
        "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*\n",
        "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*\n\n"
        "**[FAILURE - PERMANENT] Ladder** *(Ep4, T1-3, -1)*\nToo short.\n",
    )
    plan = plan_for(store, text)
    assert plan.ok, plan.problems
    apply_import(store, plan, prune=False)
    assert export_text(store) == text
    chain = store.history(15, "Guess *maybe*")
    assert [m.title for m in chain][-1] == "Window stays open"
    assert [m.title for m in store.memories(41)] == ["Rope", "Ladder"]


CELLAR = "# Location Memories\n\n## Location 7: Cellar\n**Visits:** 1 | **Episodes:** 1\n\n"
DANGLING = (
    CELLAR + "### Memories\n\n"
    "**[NOTE - PERMANENT - SUPERSEDED] Dark** *(Ep1, T3)*\n"
    '[Superseded at T9 by "Nowhere"]\n~~It is dark.~~\n\n---\n'
)


def test_a_successor_title_no_memory_has_is_a_problem_at_its_reference_line(
    store: MemoryStore,
) -> None:
    plan = plan_for(store, DANGLING)
    assert [p.line for p in plan.problems] == [9]
    assert "superseded by 'Nowhere'" in plan.problems[0].message
    assert "with --skip-invalid it is skipped, kept as the database has it" in (
        plan.problems[0].message
    )
    assert plan.added == ()  # (review J J1: stored with no successor, it never settled)


def test_a_superseded_memory_whose_successor_is_gone_is_skipped(store: MemoryStore) -> None:
    # was: stored superseded with no successor (its link's turn kept), and every later
    # run reported a conflict with that write (review J J1)
    plan = plan_for(store, DANGLING)
    assert not plan.ok  # applied only with --skip-invalid
    apply_import(store, plan, prune=False)
    assert store.memories(7, include_superseded=True) == []
    assert not plan_for(store, DANGLING).has_changes


def test_a_memory_superseded_by_its_own_title_alone_is_a_problem(store: MemoryStore) -> None:
    plan = plan_for(store, edit(DANGLING, '"Nowhere"', '"Dark"'))
    assert [p.line for p in plan.problems] == [9]


def test_a_successor_only_in_the_database_is_no_problem_unless_pruned(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(7, "Cellar", mem("Lamp", turns="9"))
    plan = plan_for(store, edit(DANGLING, '"Nowhere"', '"Lamp"'))
    assert plan.ok, plan.problems
    apply_import(store, plan, prune=False)
    assert [m.title for m in store.history(7, "Dark")] == ["Dark", "Lamp"]
    pruning = plan_for(store, edit(DANGLING, '"Nowhere"', '"Lamp"'), prune=True)
    assert [p.line for p in pruning.problems] == [9]


def test_a_successor_title_no_memory_has_refuses_apply_unless_skip_invalid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import memstore.cli as cli

    path = tmp_path / "M.md"
    path.write_text(DANGLING, encoding="utf-8")
    db = str(tmp_path / "m.db")
    assert cli.main(["--db", db, "import", str(path), "--apply"]) == 1
    out, err = capsys.readouterr()
    assert "line 9: memory 'Dark'" in out and "1 problem(s)" in err
    assert cli.main(["--db", db, "import", str(path), "--apply", "--skip-invalid"]) == 0
    assert "applied (the problems listed were skipped)" in capsys.readouterr().out


def test_history_after_import_follows_the_successor_the_link_was_made_to(
    store: MemoryStore, mem: MakeMemory, tmp_path: Path
) -> None:
    # X is superseded by Y (T2), which is invalidated; two later memories are titled Y too
    store.add_memory(7, "Cellar", mem("X", turns="1"))
    store.supersede_memory(7, "Cellar", "X", mem("Y", turns="2"))
    store.invalidate_memory(7, "Y", "wrong", turn=3)
    store.add_memory(7, "Cellar", mem("Y", turns="4"))
    store.supersede_memory(7, "Cellar", "Y", mem("Z", turns="5"))
    store.add_memory(7, "Cellar", mem("Y", turns="6-7"))
    text = export_text(store)
    with MemoryStore.open(tmp_path / "copy.db") as copy:
        plan = plan_for(copy, text)
        assert plan.ok, plan.problems
        apply_import(copy, plan, prune=False)
        assert export_text(copy) == text
        for title in ("X", "Y", "Z"):
            assert copy.history(7, title) == store.history(7, title)
        assert [m.turns for m in copy.history(7, "X")] == ["1", "2"]


def test_without_prune_nothing_is_deleted(store: MemoryStore, mem: MakeMemory) -> None:
    populate(store, mem)
    before = export_text(store)
    plan = plan_for(store, "# Location Memories\n")
    assert len(plan.missing) == 8
    apply_import(store, plan, prune=False)
    assert export_text(store) == before


def test_prune_deletes_missing_memories_but_not_locations(
    store: MemoryStore, mem: MakeMemory
) -> None:
    populate(store, mem)
    text = edit(export_text(store), "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*\n\n", "")
    apply_import(store, plan_for(store, text, prune=True), prune=True)
    assert store.memories(41, include_superseded=True) == []
    assert store.location(41) is not None
    assert export_text(store) == text


def test_prune_deletes_nothing_when_the_file_has_problems(
    store: MemoryStore, mem: MakeMemory
) -> None:
    populate(store, mem)
    exported = export_text(store)
    text = edit(
        exported,
        "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*",
        "**[DISCOVERY - PERMANENT] Rope** *(garbage)*",
    )
    plan = plan_for(store, text, prune=True)
    assert not plan.ok and plan.missing == ()  # still in the file, skipped: not a deletion
    # Rope removed from the file, and a problem elsewhere
    text = edit(exported, "**[DISCOVERY - PERMANENT] Rope** *(Ep1, T5, +0)*", "")
    text = edit(text, "## Location 15", "#### stray heading\n\n## Location 15")
    plan = plan_for(store, text, prune=True)
    assert not plan.ok and len(plan.missing) == 1
    assert "not deleted: the file has problems" in plan.summary(prune=True)
    apply_import(store, plan, prune=True)
    assert [m.title for m in store.memories(41)] == ["Rope"]


def test_apply_is_one_transaction(
    store: MemoryStore, mem: MakeMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstore.import_apply as import_apply

    populate(store, mem)
    before = export_text(store)
    text = edit(before, "line one", "line uno")
    text = edit(text, "## Location 40: Kitchen", "## Location 40: Scullery")
    text += "\n## Location 99: New\n**Visits:** 1 | **Episodes:** 1\n\n### Memories\n\n"
    text += "**[NOTE - PERMANENT] Fresh** *(Ep1, T1)*\nNew.\n\n---\n"
    plan = plan_for(store, text)
    assert len(plan.added) == 1 and len(plan.changed) == 1

    def explode(*_args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(import_apply, "write_links", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        apply_import(store, plan, prune=False)
    assert export_text(store) == before
    assert store.location(99) is None


def test_a_plan_made_before_the_database_changed_is_refused(
    store: MemoryStore, mem: MakeMemory
) -> None:
    populate(store, mem)
    text = edit(export_text(store), "line one", "line uno")
    plan = plan_for(store, text)
    store.invalidate_memory(15, "Guess *maybe*", "changed meanwhile")
    with store._write() as conn:  # someone deletes the memory the plan wants to update
        conn.exec_driver_sql("DELETE FROM memories WHERE title = 'Guess *maybe*'")
    before = export_text(store)
    with pytest.raises(ImportConflict, match="run the import again"):
        apply_import(store, plan, prune=False)
    assert export_text(store) == before


def test_memories_with_the_same_identity_are_matched_in_order(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(7, "Cellar", mem("Dark", turns="3", text="first"))
    store.supersede_memory(7, "Cellar", "Dark", mem("Dark", turns="3", text="second"))
    text = export_text(store)
    plan = plan_for(store, text)
    assert plan.ok and not plan.has_changes and len(plan.unchanged) == 2
    changed = edit(text, "second", "third")
    plan = plan_for(store, changed)
    assert [c.occurrence for c in plan.changed] == [1]
    apply_import(store, plan, prune=False)
    assert [m.text for m in store.memories(7, include_superseded=True)] == ["first", "third"]


def test_a_file_whose_successors_would_form_a_cycle_gets_no_cycle(
    store: MemoryStore,
) -> None:
    text = (
        "# Location Memories\n\n## Location 7: Cellar\n**Visits:** 1 | **Episodes:** 1\n\n"
        "### Memories\n\n"
        "**[NOTE - PERMANENT - SUPERSEDED] Dark** *(Ep1, T3)*\n"
        '[Superseded at T4 by "Dark"]\n~~One.~~\n\n'
        "**[NOTE - PERMANENT - SUPERSEDED] Dark** *(Ep1, T4)*\n"
        '[Superseded at T5 by "Dark"]\n~~Two.~~\n\n---\n'
    )
    plan = plan_for(store, text)
    [problem] = plan.problems
    assert "go round in a circle ('Dark' -> 'Dark')" in problem.message
    # applied as --skip-invalid applies it: the memories that close the circle are skipped
    # (review I F1: one was stored superseded with no successor, never settling)
    apply_import(store, plan, prune=False)
    assert store.history(7, "Dark") == [] and store.memories(7) == []


def test_memory_model_round_trips_in_plan_objects(mem: MakeMemory) -> None:
    memory: Memory = mem("X")
    plan = plan_import(
        [], [LocationMemories(location=LocationInfo(id=1, name="R"), memories=(memory,))]
    )
    (change,) = plan.added
    assert change.new == memory and change.old is None and change.key.title == "X"


# --- property: any representable file survives import -> export byte for byte ----------------

TITLES = st.sampled_from(["Troll", "Lamp", 'The "sword" *glows*', "Trap [door]", "Ω"])
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
#: a location name the store can hold (models.check_location_name: no NUL, which the import
#: refuses as every write does, since PostgreSQL cannot store it)
NAMES = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"),
    max_size=30,
)


def not_blank(reason: str) -> bool:
    # the model's rule ("\x00" once got through to SQLite's CHECK: an IntegrityError)
    return not blank_for_sqlite(reason)


@st.composite
def location_memories(draw: st.DrawFn, location_id: int) -> LocationMemories:
    count = draw(st.integers(0, 6))
    titles = [draw(TITLES) for _ in range(count)]
    memories = []
    live: set[str] = set()
    for n, title in enumerate(titles):
        status = draw(st.sampled_from(list(Status)))
        if status is not Status.SUPERSEDED and title in live:
            status = Status.SUPERSEDED
        fields: dict = {}
        if status is Status.SUPERSEDED:
            others = titles[n + 1 :]  # as in the store: a successor is newer
            kind = draw(st.sampled_from(["none", "reason"] + (["successor"] if others else [])))
            if kind != "none":
                fields["superseded_at_turn"] = draw(st.integers(0, 500))
                fields["superseded_at_episode"] = draw(st.integers(1, 9))
            if kind == "reason":
                fields["invalidation_reason"] = draw(WORDS.filter(not_blank))
            elif kind == "successor":
                fields["superseded_by"] = draw(st.sampled_from(others))
        else:
            live.add(title)
        start = draw(st.integers(0, 300))
        turns = draw(st.sampled_from([str(start), f"{start}-{start + 3}"]))
        memories.append(
            Memory(
                category=draw(st.sampled_from(list(Category))),
                title=title,
                text=draw(WORDS),
                episode=draw(st.integers(1, 9)),
                turns=turns,
                score_change=draw(st.one_of(st.none(), st.integers(-50, 50))),
                persistence=draw(st.sampled_from([Persistence.CORE, Persistence.PERMANENT])),
                status=status,
                **fields,
            )
        )
    return LocationMemories(
        location=LocationInfo(
            id=location_id,
            name=draw(NAMES),
            visit_count=draw(st.integers(0, 20)),
            episodes=tuple(draw(st.sets(st.integers(1, 9), max_size=3))),
        ),
        memories=tuple(memories),
    )


@st.composite
def databases(draw: st.DrawFn) -> list[LocationMemories]:
    ids = draw(st.sets(st.integers(0, 300), max_size=4))
    return [draw(location_memories(location_id)) for location_id in sorted(ids)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=databases())
def test_any_representable_file_imports_into_an_empty_database_losslessly(
    entries: list[LocationMemories],
) -> None:
    text = render_memories_md(entries)
    with MemoryStore.open("sqlite://") as empty:
        plan = plan_for(empty, text)
        assert plan.ok, plan.problems
        apply_import(empty, plan, prune=False)
        assert export_text(empty) == text
        assert not plan_for(empty, text).has_changes
        for entry in entries:  # the links form chains, never cycles: history loses nothing
            for title in {m.title for m in entry.memories}:
                chain = empty.history(entry.location.id, title)
                expected = sum(1 for m in entry.memories if m.title == title)
                assert sum(1 for m in chain if m.title == title) == expected


@pytest.mark.parametrize("extra", [-496, -495, -468, -467, 20])
def test_links_to_more_successor_titles_than_one_statement_asks_for_are_all_made(
    store: MemoryStore, mem: MakeMemory, extra: int
) -> None:
    """The successors' rows are read by title, TITLES_AT_ONCE titles a statement (a
    statement of 4, 32 or 500 places): 520 distinct successor titles take two statements,
    4, 5, 32 and 33 one statement each, and every link is made."""
    from memstore.import_links import TITLES_AT_ONCE
    from memstore.store_import import import_memories

    count = TITLES_AT_ONCE + extra
    memories = []
    for n in range(count):
        memories.append(mem(f"New {n:03}", turns="9"))
        memories.append(
            mem(
                f"Old {n:03}",
                status="SUPERSEDED",
                superseded_by=f"New {n:03}",
                superseded_at_turn=9,
                superseded_at_episode=1,
            )
        )
    location = LocationMemories(
        location=LocationInfo(id=64, name="West of House", visit_count=1, episodes=(1,)),
        memories=tuple(memories),
    )
    outcome = import_memories(store, render_memories_md([location]), apply=True)
    assert outcome.applied and len(outcome.plan.added) == 2 * count
    for n in sorted(
        {0, min(TITLES_AT_ONCE - 1, count - 1), min(TITLES_AT_ONCE, count - 1), count - 1}
    ):
        assert [m.title for m in store.history(64, f"New {n:03}")] == [
            f"Old {n:03}",
            f"New {n:03}",
        ]
