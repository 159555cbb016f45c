"""Review S6 B: the review round trip.

Was: a file imported again after a later reviewer reverted its edit undid that revert,
silently: the memory's text (or status) went back to the first file's, though a location's
name an import set was already kept against exactly this (F2). ``--theirs`` added a
memory deleted since the export again at each run (F1); a re-run of a ``--prune --theirs``
import deleted the retired memory a whole rewrite had kept (F3). An export replaced a file
made read-only to keep it (F5).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import MemoryStore
from memstore.cli import main
from memstore.md_store import export_memories_md
from memstore.store_import import import_memories
from tests.conftest import note

LOCKED = "The grating is locked."
OPEN = "The grating opens from above."


def test_a_file_imported_again_keeps_a_later_revert_of_its_text(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED))
        alice = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, alice, apply=True).applied
        bob = export_memories_md(store).replace(OPEN, LOCKED)  # Bob reverts Alice's edit
        assert import_memories(store, bob, apply=True).applied

        again = import_memories(store, alice, apply=True)  # Alice's file, once more

        assert [m.text for m in store.memories(80)] == [LOCKED]
        assert again.plan.conflicts == ()
        (warning,) = again.plan.warnings
        assert "'Grating': the file's text is one the database had since the export" in warning
        # an edit of a fresh export still sets it again
        carol = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, carol, apply=True).applied
        assert [m.text for m in store.memories(80)] == [OPEN]


LIVE = f"**[NOTE - PERMANENT] Grating** *(Ep1, T5, +0)*\n{LOCKED}\n"
INVALIDATED = (
    f"**[NOTE - PERMANENT - SUPERSEDED] Grating** *(Ep1, T5, +0)*\n"
    f'[Invalidated at T5: "wrong"]\n~~{LOCKED}~~\n'
)


def test_a_file_imported_again_keeps_a_later_revival(db_path: Path) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="5"))
        export = export_memories_md(store)
        assert LIVE in export
        alice = export.replace(LIVE, INVALIDATED)  # Alice invalidates it
        assert import_memories(store, alice, apply=True).applied
        assert store.memories(80) == []
        revived = export_memories_md(store)
        assert INVALIDATED in revived
        bob = revived.replace(INVALIDATED, LIVE)  # Bob brings it back
        assert import_memories(store, bob, apply=True, resolution="theirs").applied
        assert [m.title for m in store.memories(80)] == ["Grating"]

        again = import_memories(store, alice, apply=True)

        assert [m.title for m in store.memories(80)] == ["Grating"]  # still live
        assert "'Grating': the file's status" in again.plan.warnings[0]


def test_theirs_takes_a_deleted_memory_back_once_however_often_it_runs(db_path: Path) -> None:
    # F1: Bob deleted a memory (--prune), Alice's copy of the same export edited it: each
    # run of her `--theirs` import added another copy
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="1"))
        store.add_memory(80, "Clearing", note("Leaves", text="A pile of leaves.", turns="2"))
        store.invalidate_memory(80, "Grating", "it opens with the skeleton key", turn=9, episode=1)
        export = export_memories_md(store)
        block = export[export.index("**[NOTE - PERMANENT - SUPERSEDED] Grating") :]
        bob = export.replace(block[: block.index("\n\n") + 2], "")
        assert import_memories(store, bob, apply=True, prune=True, force=True).applied
        alice = export.replace(f"~~{LOCKED}~~", "~~The grating is locked from below.~~")

        runs = [import_memories(store, alice, apply=True, resolution="theirs") for _ in range(3)]

        assert [run.applied for run in runs] == [True, False, False]
        assert [len(run.plan.conflicts) for run in runs] == [1, 0, 0]
        assert [(m.title, m.status.value) for m in store.memories(80, include_superseded=True)] == [
            ("Leaves", "ACTIVE"),
            ("Grating", "SUPERSEDED"),
        ]


def test_a_re_run_keeps_the_retired_memory_a_whole_rewrite_kept(db_path: Path) -> None:
    # F3: the first `--prune --theirs` run kept the memory an agent invalidated, which the
    # file rewrote whole; the same command run again deleted it with the invalidation
    with MemoryStore.open(db_path) as store:
        for n in range(10):
            store.add_memory(80, "Clearing", note(f"m{n}", text=f"text {n}", turns=str(n + 1)))
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="20"))
        rewritten = export_memories_md(store).replace(
            f"**[NOTE - PERMANENT] Grating** *(Ep1, T20, +0)*\n{LOCKED}\n",
            "**[NOTE - PERMANENT] Grate needs key** *(Ep1, T20, +0)*\nUse the skeleton key.\n",
        )
        assert "Grate needs key" in rewritten
        store.invalidate_memory(80, "Grating", "opened it from below", turn=40, episode=2)

        runs = [
            import_memories(store, rewritten, apply=True, prune=True, resolution="theirs")
            for _ in range(2)
        ]

        assert [len(run.plan.conflicts) for run in runs] == [1, 0]
        assert [run.plan.missing for run in runs] == [(), ()]
        # (and says why it keeps it: by place only, a re-run cannot tell this from a file's
        # memory written before the agent retired that one: review S6 E F3)
        assert (
            "'Grating' (location 80) is kept, though the file dropped it"
            in (runs[1].plan.warnings[0])
        )
        (kept,) = [m for m in store.memories(80, include_superseded=True) if m.title == "Grating"]
        assert kept.invalidation_reason == "opened it from below"


def test_an_export_never_replaces_a_file_made_read_only_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # F5: `chmod 444` to keep a file as it is; the next export replaced it without a word
    db, out, map_md = tmp_path / "m.db", tmp_path / "Memories.md", tmp_path / "Map.md"
    with MemoryStore.open(db) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED))
    for argv in (["export", "--out", str(out)], ["map", "export", "--out", str(map_md)]):
        assert main(["--db", str(db), *argv]) == 0
    for path in (out, map_md):
        path.chmod(0o444)
    kept = {path: path.read_bytes() for path in (out, map_md)}
    with MemoryStore.open(db) as store:
        store.add_memory(80, "Clearing", note("Leaves", text="A pile of leaves."))
    capsys.readouterr()

    for argv, path in (
        (["export", "--out", str(out)], out),
        (["map", "export", "--out", str(map_md)], map_md),
    ):
        assert main(["--db", str(db), *argv]) == 1
        assert f"{path} is read-only (mode 444), made so to keep it as it is" in (
            capsys.readouterr().err
        )
        assert path.read_bytes() == kept[path]

    assert main(["--db", str(db), "export", "--out", str(out), "--force"]) == 0
    assert "Leaves" in out.read_text()


def test_the_demo_never_replaces_a_memories_md_made_read_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review S6 E F5: the demo replaced it (its mode 444 kept, so it looked untouched)
    out = tmp_path / "Memories.md"
    out.write_text("# Location Memories\n")
    out.chmod(0o444)

    code = main(["--db", str(tmp_path / "m.db"), "demo", "--episodes", "1", "--out", str(out)])

    assert code == 1
    assert f"{out} is read-only (mode 444)" in capsys.readouterr().err
    assert out.read_text() == "# Location Memories\n"


def test_an_export_never_replaces_a_file_holding_a_value_the_database_went_back_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review S6 E F1: Carol's copy of the export made the edit a later review took back; the
    # import keeps the database's (with a warning), and the export found nothing at risk
    db, out = tmp_path / "m.db", tmp_path / "Memories.md"
    with MemoryStore.open(db) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED))
        carol = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, carol, apply=True).applied  # Alice's, the same edit
        bob = export_memories_md(store).replace(OPEN, LOCKED)
        assert import_memories(store, bob, apply=True).applied
    out.write_text(carol)
    capsys.readouterr()

    assert main(["--db", str(db), "export", "--out", str(out)]) == 1

    error = capsys.readouterr().err
    assert "holds 1 value(s) the database had since the export and went back from" in error
    assert "import it first" not in error  # (it would do nothing: review S6 G F6)
    assert out.read_text() == carol


def test_a_third_value_in_the_database_is_still_a_conflict_theirs_may_take(db_path: Path) -> None:
    # review S6 E F6: A, then B imported, then C: a file of the first export saying B was
    # a warning (the database's C kept whatever the resolution), where any other value is a
    # conflict
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED))
        carol = export_memories_md(store).replace(LOCKED, OPEN)
        assert import_memories(store, carol, apply=True).applied
        rusted = export_memories_md(store).replace(OPEN, "The grating is rusted shut.")
        assert import_memories(store, rusted, apply=True).applied

        ours = import_memories(store, carol, apply=True)
        theirs = import_memories(store, carol, apply=True, resolution="theirs")

        assert (len(ours.plan.conflicts), ours.applied) == (1, False)
        assert theirs.applied and [m.text for m in store.memories(80)] == [OPEN]


def retired_grating(store: MemoryStore) -> str:
    """Twelve memories and Grating at the Clearing, the Forest's one: the export."""
    for n in range(12):
        store.add_memory(80, "Clearing", note(f"m{n}", text=f"text {n}", turns=str(n + 1)))
    store.add_memory(81, "Forest", note("f0", text="trees", turns="1"))
    store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="20"))
    return export_memories_md(store)


GRATING = f"**[NOTE - PERMANENT] Grating** *(Ep1, T20, +0)*\n{LOCKED}\n\n"


def test_a_re_run_keeps_the_retired_memory_a_move_kept(db_path: Path) -> None:
    # review S6 E F2: the file moved a memory an agent retired since; the first `--prune
    # --theirs` run kept it, the re-run looked at the same location only and deleted it
    with MemoryStore.open(db_path) as store:
        export = retired_grating(store)
        assert GRATING in export
        moved = export.replace(GRATING, "").replace(
            "trees\n", "trees\n\n" + GRATING.rstrip("\n") + "\n", 1
        )
        store.invalidate_memory(80, "Grating", "opened it from below", turn=40, episode=2)

        runs = [
            import_memories(store, moved, apply=True, prune=True, resolution="theirs")
            for _ in range(3)
        ]

        assert [run.plan.missing for run in runs] == [(), (), ()]
        kept = [m for m in store.memories(80, include_superseded=True) if m.title == "Grating"]
        assert [m.invalidation_reason for m in kept] == ["opened it from below"]


def test_a_prune_of_a_memory_retired_after_the_file_s_new_one_was_imported_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review S6 E F3, G F1: the file dropped Grating and added Leaves (imported without
    # --prune); an agent retired Grating. The re-run took Leaves for an edit of Grating by
    # place alone and kept Grating without a word: the dry run said "would delete 0", and
    # export replaced the file, losing the deletion. No import paired them: Leaves came
    # before the agent's change
    db, out = tmp_path / "m.db", tmp_path / "Memories.md"
    with MemoryStore.open(db) as store:
        export = retired_grating(store)
        leaves = "**[NOTE - PERMANENT] Leaves** *(Ep1, T21, +0)*\nA pile of leaves hides it.\n\n"
        edited = export.replace(GRATING, leaves)
        assert import_memories(store, edited, apply=True).applied  # Leaves; Grating "missing"
        store.invalidate_memory(80, "Grating", "opened it from below", turn=40, episode=2)
        dry = import_memories(store, edited, apply=False)
        assert [change.memory.title for change in dry.plan.missing] == ["Grating"]
    out.write_text(edited)
    assert main(["--db", str(db), "export", "--out", str(out)]) == 1
    assert out.read_text() == edited
    with MemoryStore.open(db) as store:
        pruned = import_memories(store, edited, apply=True, prune=True, resolution="theirs")

        (conflict,) = pruned.plan.conflicts
        assert "'Grating': removed in the file, changed in the database" in str(conflict)
        assert "Grating" not in [m.title for m in store.memories(80, include_superseded=True)]


def test_theirs_never_adds_a_second_copy_of_a_taken_back_memory_an_agent_retired(
    db_path: Path,
) -> None:
    # review S6 E F4: the row an earlier --theirs run took back was found only while exactly
    # unchanged: once an agent invalidated it, the next run added a live copy beside it
    with MemoryStore.open(db_path) as store:
        store.add_memory(80, "Clearing", note("Grating", text=LOCKED, turns="1"))
        store.add_memory(80, "Clearing", note("Leaves", text="A pile of leaves.", turns="2"))
        export = export_memories_md(store)
        block = export[export.index("**[NOTE - PERMANENT] Grating") :]
        bob = export.replace(block[: block.index("\n\n") + 2], "")
        assert import_memories(store, bob, apply=True, prune=True, force=True).applied
        alice = export.replace(LOCKED, "The grating is locked from below.")
        assert import_memories(store, alice, apply=True, resolution="theirs").applied
        store.invalidate_memory(80, "Grating", "opened it with the key", turn=30, episode=2)

        again = import_memories(store, alice, apply=True)

        (conflict,) = again.plan.conflicts
        assert "status" in conflict.fields and "deleted from the database" not in str(conflict)
        grating = [m for m in store.memories(80, include_superseded=True) if m.title == "Grating"]
        assert [m.invalidation_reason for m in grating] == ["opened it with the key"]


def test_a_re_run_pairs_two_moves_as_the_first_run_did(db_path: Path) -> None:
    # review S6 G F2: the file moved Key, and moved Lamp (retitled Lantern) with Key's text;
    # the re-run did not take Key first, saw two memories with Lamp's text, and deleted the
    # Lamp an agent had invalidated, which the first run kept
    with MemoryStore.open(db_path) as store:
        for n in range(12):
            store.add_memory(80, "Clearing", note(f"m{n}", text=f"text {n}", turns=str(n + 1)))
        store.add_memory(81, "Forest", note("f0", text="trees", turns="1"))
        store.add_memory(80, "Clearing", note("Key", text="It glints.", turns="20"))
        store.add_memory(80, "Clearing", note("Lamp", text="It glints.", turns="21"))
        export = export_memories_md(store)
        key = "**[NOTE - PERMANENT] Key** *(Ep1, T20, +0)*\nIt glints.\n\n"
        lamp = "**[NOTE - PERMANENT] Lamp** *(Ep1, T21, +0)*\nIt glints.\n\n"
        assert key in export and lamp in export
        lantern = lamp.replace("] Lamp**", "] Lantern**").rstrip("\n")
        moved = export.replace(key, "").replace(lamp, "")
        moved = moved.replace("trees\n", f"trees\n\n{key}{lantern}\n", 1)
        store.invalidate_memory(80, "Lamp", "it broke", turn=40, episode=2)

        runs = [
            import_memories(store, moved, apply=True, prune=True, resolution="theirs")
            for _ in range(3)
        ]

        # (run 1 deletes the Key the file moved, unchanged since: a move, with --prune)
        assert [[c.old.title for c in run.plan.missing] for run in runs] == [["Key"], [], []]
        lamps = [m for m in store.memories(80, include_superseded=True) if m.title == "Lamp"]
        assert [m.invalidation_reason for m in lamps] == ["it broke"]
        warning = "'Lamp' (location 80) is kept, though the file dropped it"
        assert [sum(warning in w for w in run.plan.warnings) for run in runs[1:]] == [1, 1]
        assert not any("'Key' (location 80) is kept" in w for w in runs[1].plan.warnings)


def test_a_re_run_of_a_pruned_retitle_says_nothing_is_kept(db_path: Path) -> None:
    # review S6 G F3: every re-run said the retitled memory, which the first run deleted,
    # "is kept, though the file dropped it"
    with MemoryStore.open(db_path) as store:
        export = retired_grating(store)
        edited = export.replace("] Grating**", "] Iron grating**")

        runs = [import_memories(store, edited, apply=True, prune=True) for _ in range(2)]

        assert runs[0].applied and not runs[1].applied
        assert runs[1].plan.warnings == ()
        assert "Grating" not in [m.title for m in store.memories(80, include_superseded=True)]


def test_a_memory_kept_for_a_tie_under_prune_is_said(db_path: Path) -> None:
    # review S6 G F4: A and B say the same at the same turn; the file dropped both and added
    # C saying it; an agent retired A. B was kept, unseen, without a word
    with MemoryStore.open(db_path) as store:
        for n in range(12):
            store.add_memory(80, "Clearing", note(f"m{n}", text=f"text {n}", turns=str(n + 1)))
        store.add_memory(80, "Clearing", note("A", text="It glints.", turns="20"))
        store.add_memory(80, "Clearing", note("B", text="It glints.", turns="20"))
        export = export_memories_md(store)
        a = "**[NOTE - PERMANENT] A** *(Ep1, T20, +0)*\nIt glints.\n\n"
        b = "**[NOTE - PERMANENT] B** *(Ep1, T20, +0)*\nIt glints.\n\n"
        c = "**[NOTE - PERMANENT] C** *(Ep1, T20, +0)*\nIt glints.\n\n"
        assert a in export and b in export
        edited = export.replace(a, "").replace(b, c)
        store.invalidate_memory(80, "A", "it broke", turn=40, episode=2)

        run = import_memories(store, edited, apply=True, prune=True, resolution="theirs")

        assert any(
            "'B' (location 80) is kept, though the file dropped it" in w
            for w in (run.plan.warnings)
        )


def test_an_apply_that_writes_nothing_says_why_where_the_file_still_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # review S6 I F1: "nothing to apply: the database already matches the file", for a
    # file that deletes memories, without --prune
    db, out = tmp_path / "m.db", tmp_path / "Memories.md"
    with MemoryStore.open(db) as store:
        export = retired_grating(store)
    out.write_text(export.replace(GRATING, ""))

    assert main(["--db", str(db), "import", str(out), "--apply"]) == 0

    said = capsys.readouterr().out
    assert "nothing to apply: the file deletes 1 memory(ies), which only --apply --prune" in said
    assert "already matches" not in said
