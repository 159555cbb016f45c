"""A reviewer's export -> edit -> import loop against writers in other processes (issue 13).

Writers (tests/review_writer.py, separate processes) add, supersede and invalidate
memories through the public API and log every acknowledged write. Meanwhile this process
exports Memories.md, edits it as a reviewer would (changes texts, drops a memory, adds one
by hand, invalidates one) and imports it with ``apply=True``. Whatever the interleaving,
no acknowledged write may be reverted, the reviewer's non-conflicting edits must land,
conflicts are only ever where both sides changed the same thing, and the database keeps
its rules. Then the two-step race (export; another process supersedes X; import) with
and without the export's base line.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from exporters import parse_memories_md, render_memories_md
from memstore import cli
from memstore.errors import StoreBusy
from memstore.invariants import check_invariants
from memstore.merge import Resolution
from memstore.models import Category, Memory, Persistence, Status
from memstore.store import MemoryStore
from memstore.store_import import ImportOutcome, import_memories

WRITER = Path(__file__).with_name("review_writer.py")
ROOT = Path(__file__).resolve().parents[1]

REVIEWER_LOCATIONS = (1, 2, 3)
WRITER_LOCATIONS = {"wa": (101, 102), "wb": (111, 112), "wc": (121, 122)}
WRITER_SECONDS = 7.0
WRITER_MAX_OPS = 600


# --- helpers ---------------------------------------------------------------------------------


def note(title: str, text: str, turn: int = 5) -> Memory:
    return Memory(
        category=Category.NOTE,
        title=title,
        text=text,
        episode=1,
        turns=str(turn),
        persistence=Persistence.PERMANENT,
    )


def invariants(store: MemoryStore) -> list[str]:
    with store.transaction(write=False) as conn:
        return check_invariants(conn, sqlite_checks=True)


def by_title(store: MemoryStore, location_id: int) -> dict[str, Memory]:
    found: dict[str, Memory] = {}
    for memory in store.memories(location_id, include_superseded=True):
        assert memory.title not in found, f"two memories titled {memory.title!r} at {location_id}"
        found[memory.title] = memory
    return found


def export_text(store: MemoryStore) -> str:
    locations, base = store.export_snapshot()
    return render_memories_md(locations, base)


def export_with_cli(db: Path, out: Path) -> str:
    assert cli.main(["--db", str(db), "export", "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def import_retrying(store: MemoryStore, text: str, **options: Any) -> ImportOutcome:
    for _attempt in range(20):
        try:
            return import_memories(store, text, apply=True, **options)
        except StoreBusy:
            time.sleep(0.05)
    raise AssertionError("the import stayed StoreBusy 20 times")


def run_other_process(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(WRITER), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --- editing the text of Memories.md, as a reviewer does in an editor ------------------------


def _header(lines: list[str], title: str) -> int:
    hits = [
        i for i, line in enumerate(lines) if line.startswith("**[") and f"] {title}** *(" in line
    ]
    assert len(hits) == 1, f"{title!r}: {len(hits)} headers"
    return hits[0]


def edit_text(text: str, title: str, new_text: str) -> str:
    """Change a live memory's text (the line under its header)."""
    lines = text.split("\n")
    i = _header(lines, title)
    assert "SUPERSEDED" not in lines[i]
    lines[i + 1] = new_text
    return "\n".join(lines)


def drop_memory(text: str, title: str) -> str:
    """Delete a live memory's block (header, text, blank line)."""
    lines = text.split("\n")
    i = _header(lines, title)
    assert "SUPERSEDED" not in lines[i] and lines[i + 2] == ""
    del lines[i : i + 3]
    return "\n".join(lines)


def add_memory_by_hand(text: str, location_id: int, title: str, body: str, turn: int) -> str:
    """Type a new memory at the end of a location's section."""
    lines = text.split("\n")
    start = next(
        i for i, line in enumerate(lines) if line.startswith(f"## Location {location_id}:")
    )
    end = lines.index("---", start)
    lines[end:end] = [f"**[NOTE - PERMANENT] {title}** *(Ep1, T{turn})*", body, ""]
    return "\n".join(lines)


def invalidate_in_file(text: str, title: str, reason: str, turn: int) -> str:
    """Mark a live memory invalidated, as the exporter writes an invalidated one."""
    lines = text.split("\n")
    i = _header(lines, title)
    head = lines[i]
    assert head.startswith("**[NOTE - PERMANENT] ")
    lines[i] = head.replace("**[NOTE - PERMANENT] ", "**[NOTE - PERMANENT - SUPERSEDED] ", 1)
    lines[i + 1 : i + 2] = [f'[Invalidated at T{turn}: "{reason}"]', f"~~{lines[i + 1]}~~"]
    return "\n".join(lines)


def strip_base_line(text: str) -> str:
    lines = text.split("\n")
    assert lines[1].startswith("<!-- memstore-base: ")
    return "\n".join(lines[:1] + lines[2:])


def file_memories(text: str) -> dict[tuple[int, str], Memory]:
    parsed = parse_memories_md(text)
    assert parsed.problems == (), parsed.problems
    return {
        (entry.location.id, memory.title): memory
        for entry in parsed.locations
        for memory in entry.memories
    }


# --- 1. the concurrent editor loop -----------------------------------------------------------


def start_writers(db: Path, logs: Path) -> dict[str, subprocess.Popen[str]]:
    writers = {}
    for seed, (name, locations) in enumerate(WRITER_LOCATIONS.items()):
        log = logs / f"{name}.jsonl"
        log.touch()
        writers[name] = subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                "loop",
                str(db),
                name,
                str(log),
                str(WRITER_SECONDS),
                str(WRITER_MAX_OPS),
                str(1000 + seed),
                *map(str, locations),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
    return writers


def test_reviewer_loop_against_three_writer_processes_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memories.db"
    rng = random.Random(13)
    store = MemoryStore.open(db, busy_timeout_s=10)
    # the reviewer's own memories: at locations no writer ever touches
    expected_text: dict[tuple[int, str], str] = {}
    for location_id in REVIEWER_LOCATIONS:
        for k in range(5):
            title = f"rv L{location_id} #{k}"
            assert store.add_memory(
                location_id, f"Room {location_id}", note(title, f"{title} original")
            )
            expected_text[(location_id, title)] = f"{title} original"
    expected_gone: set[tuple[int, str]] = set()  # dropped from the file and pruned
    reviewer_invalidated: dict[tuple[int, str], str] = {}  # writer memories, applied
    stats = {"rounds": 0, "applied": 0, "refused": 0, "conflicts": 0, "pruned": 0}
    unexpected_conflicts: list[str] = []

    writers = start_writers(db, tmp_path)
    started = time.monotonic()
    try:
        round_number = 0
        while round_number < 6 or any(w.poll() is None for w in writers.values()):
            assert time.monotonic() - started < 30, "the reviewer loop ran past 30 s"
            round_number += 1
            if round_number % 2:
                text = export_text(store)
            else:
                text = export_with_cli(db, tmp_path / "Memories.md")
            assert text.split("\n")[1].startswith("<!-- memstore-base: ")
            in_file = file_memories(text)
            rv_live = [
                key
                for key, memory in in_file.items()
                if key[0] in REVIEWER_LOCATIONS and memory.status is not Status.SUPERSEDED
            ]
            w_live = [
                key
                for key, memory in in_file.items()
                if key[0] not in REVIEWER_LOCATIONS and memory.status is not Status.SUPERSEDED
            ]
            rng.shuffle(rv_live)
            rng.shuffle(w_live)

            # the reviewer's edits: texts, one memory dropped, one typed in, one invalidated
            edits: dict[tuple[int, str], str] = {}
            for key in rv_live[:2] + w_live[:2]:
                edits[key] = f"{key[1]} reviewed in round {round_number}"
                text = edit_text(text, key[1], edits[key])
            dropped = rv_live[2] if len(rv_live) > 6 else None
            if dropped is not None:
                text = drop_memory(text, dropped[1])
            hand = (REVIEWER_LOCATIONS[round_number % 3], f"rv hand r{round_number}")
            text = add_memory_by_hand(text, hand[0], hand[1], f"typed in round {round_number}", 9)
            invalidated = w_live[2] if len(w_live) > 2 else None
            reason = f"reviewer: stale in round {round_number}"
            if invalidated is not None:
                text = invalidate_in_file(text, invalidated[1], reason, 30)
            edited = file_memories(text)  # the edits read back as meant
            assert all(edited[key].text == value for key, value in edits.items())
            assert hand in edited and dropped not in edited
            if invalidated is not None:
                assert edited[invalidated].invalidation_reason == reason

            time.sleep(rng.uniform(0.05, 0.25))  # the writers move on meanwhile
            resolution = Resolution.OURS if round_number % 3 == 0 else None
            prune = round_number % 4 == 0
            outcome = import_retrying(store, text, resolution=resolution, prune=prune)
            stats["rounds"] += 1
            conflicts = outcome.plan.conflicts
            stats["conflicts"] += len(conflicts)
            for conflict in conflicts:  # only the memory both sides' status changed
                if (conflict.location_id, conflict.title) != invalidated:
                    unexpected_conflicts.append(f"round {round_number}: {conflict}")
            assert outcome.plan.problems == (), outcome.plan.problems
            if outcome.refused is not None:
                assert resolution is None and conflicts, outcome.refused
                stats["refused"] += 1
                continue
            assert outcome.applied, "a round with edits applied nothing"
            stats["applied"] += 1
            expected_text.update(edits)
            expected_text[hand] = f"typed in round {round_number}"
            if dropped is not None and prune:
                stats["pruned"] += 1
                expected_gone.add(dropped)
                del expected_text[dropped]
            if invalidated is not None and not conflicts:
                reviewer_invalidated[invalidated] = reason
            # right after the import: the reviewer's edits are in the database
            for (location_id, title), value in edits.items():
                assert by_title(store, location_id)[title].text == value
            hand_now = by_title(store, hand[0]).get(hand[1])
            assert hand_now is not None and hand_now.status is Status.ACTIVE
            if dropped is not None:
                assert (dropped[1] in by_title(store, dropped[0])) is not prune
    finally:
        outputs = {}
        for name, writer in writers.items():
            try:
                out, err = writer.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                writer.kill()
                out, err = writer.communicate()
            outputs[name] = (writer.returncode, out, err)
    for name, (code, _out, err) in outputs.items():
        assert code == 0, f"writer {name} failed: {err}"
    writer_counts = {name: json.loads(out) for name, (_c, out, _e) in outputs.items()}

    # every acknowledged write is there: nothing reverted
    acks = [
        json.loads(line)
        for name in WRITER_LOCATIONS
        for line in (tmp_path / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    reverted: list[str] = []
    now = {
        location_id: by_title(store, location_id)
        for locations in WRITER_LOCATIONS.values()
        for location_id in locations
    }
    for ack in acks:
        here = now[ack["location"]]
        memory = here.get(ack["title"])
        if memory is None:
            reverted.append(f"{ack}: the memory is gone")
        elif ack["kind"] == "supersede":
            successor = here.get(ack["successor"])
            chain = [m.title for m in store.history(ack["location"], ack["successor"])]
            if memory.status is not Status.SUPERSEDED or memory.superseded_by != ack["successor"]:
                reverted.append(f"{ack}: now {memory.status} by {memory.superseded_by!r}")
            elif successor is None:
                reverted.append(f"{ack}: the successor is gone")
            elif ack["title"] not in chain or chain.index(ack["title"]) > chain.index(
                ack["successor"]
            ):
                reverted.append(f"{ack}: history is {chain}")
        elif ack["kind"] == "invalidate":
            if (
                memory.status is not Status.SUPERSEDED
                or memory.invalidation_reason != ack["reason"]
            ):
                reverted.append(
                    f"{ack}: now {memory.status}, reason {memory.invalidation_reason!r}"
                )
    # the reviewer's applied edits are there too
    lost_edits: list[str] = []
    for (location_id, title), value in expected_text.items():
        memory = by_title(store, location_id).get(title)
        if memory is None or memory.text != value:
            lost_edits.append(f"{location_id} {title!r}: {memory.text if memory else None!r}")
    for location_id, title in expected_gone:
        if title in by_title(store, location_id):
            lost_edits.append(f"{location_id} {title!r} was pruned but is there")
    for (location_id, title), reason in reviewer_invalidated.items():
        memory = now[location_id][title]
        if memory.invalidation_reason != reason:
            lost_edits.append(f"{location_id} {title!r}: {memory.status} {memory.superseded_by}")
    broken = invariants(store)
    store.close()

    summary = f"{stats}, writers {writer_counts}, {len(acks)} acknowledged writes"
    print(summary, f"reviewer invalidations applied: {len(reviewer_invalidated)}")
    assert len(acks) > 50, summary
    assert stats["applied"] >= 3, summary
    assert reverted == [], f"{len(reverted)} acknowledged writes reverted; {summary}"
    assert unexpected_conflicts == [], summary
    assert lost_edits == [], summary
    assert broken == [], summary


# --- 2-4. the two-step race: export, another process writes, import ---------------------------

X, X_TEXT = "Trapdoor bars the way", "The trapdoor slams shut behind you."
X2, X2_TEXT = "Trapdoor opens from below", "Push it from the cellar side."
Y, Y_TEXT = "Cellar is dark", "Bring a light."


@pytest.fixture
def race(tmp_path: Path) -> Any:
    db = tmp_path / "memories.db"
    store = MemoryStore.open(db)
    assert store.add_memory(10, "Cellar", note(X, X_TEXT, 3))
    assert store.add_memory(10, "Cellar", note(Y, Y_TEXT, 4))
    assert store.add_memory(11, "East of Chasm", note("Chasm", "A deep chasm.", 6))
    yield db, store
    try:
        assert invariants(store) == []
    finally:
        store.close()


def other_process_supersedes_x(db: Path) -> None:
    assert run_other_process("supersede", str(db), "10", X, X2, X2_TEXT) == "ack"


def assert_supersession_stands(store: MemoryStore) -> None:
    here = by_title(store, 10)
    assert here[X].status is Status.SUPERSEDED and here[X].superseded_by == X2
    assert here[X2].status is Status.ACTIVE and here[X2].text == X2_TEXT
    assert [m.title for m in store.history(10, X2)] == [X, X2]


def assert_successor_still_writable(store: MemoryStore) -> None:
    """No stale or duplicate link left behind (UNIQUE constraint memory_links.memory_id)."""
    assert store.supersede_memory(10, "Cellar", X2, note("Trapdoor is nailed", "Nailed.", 50))
    assert store.invalidate_memory(10, "Trapdoor is nailed", "it was a dream", turn=51)
    assert [m.title for m in store.history(10, X)] == [X, X2, "Trapdoor is nailed"]
    assert invariants(store) == []


@pytest.mark.parametrize("via", ["api", "cli"])
@pytest.mark.parametrize("edit", ["nothing", "another memory"])
def test_import_after_another_process_superseded_x_keeps_the_supersession(
    race: Any, tmp_path: Path, edit: str, via: str
) -> None:
    db, store = race
    text = export_text(store)
    if edit == "another memory":
        text = edit_text(text, Y, "Bring a lamp; the grue is near.")
    other_process_supersedes_x(db)
    if via == "api":
        outcome = import_memories(store, text, apply=True)
        assert outcome.refused is None and outcome.plan.conflicts == ()
        assert outcome.applied is (edit != "nothing")
    else:
        path = tmp_path / "Memories.md"
        path.write_text(text, encoding="utf-8")
        assert cli.main(["--db", str(db), "import", str(path), "--apply"]) == 0
    assert_supersession_stands(store)
    expected_y = Y_TEXT if edit == "nothing" else "Bring a lamp; the grue is near."
    assert by_title(store, 10)[Y].text == expected_y
    assert invariants(store) == []
    assert_successor_still_writable(store)


def test_import_after_another_process_invalidated_x_keeps_the_invalidation(race: Any) -> None:
    db, store = race
    text = edit_text(export_text(store), Y, "Bring a lamp.")
    assert run_other_process("invalidate", str(db), "10", X, "the trapdoor was open") == "ack"
    outcome = import_memories(store, text, apply=True)
    assert outcome.applied and outcome.plan.conflicts == ()
    here = by_title(store, 10)
    assert here[X].status is Status.SUPERSEDED
    assert here[X].invalidation_reason == "the trapdoor was open"
    assert here[Y].text == "Bring a lamp."
    assert invariants(store) == []


def test_text_edited_in_the_file_while_another_process_superseded_x_merges_both(
    race: Any,
) -> None:
    """Text changed only in the file, status only in the database: a field-level merge
    (no conflict): the superseded X gets the reviewer's text, the supersession stands."""
    db, store = race
    text = edit_text(export_text(store), X, "The trapdoor is barred from above.")
    other_process_supersedes_x(db)
    outcome = import_memories(store, text, apply=True)
    assert outcome.plan.conflicts == (), [str(c) for c in outcome.plan.conflicts]
    assert outcome.refused is None and outcome.applied
    assert by_title(store, 10)[X].text == "The trapdoor is barred from above."
    assert_supersession_stands(store)
    assert invariants(store) == []
    assert_successor_still_writable(store)


@pytest.mark.parametrize("resolution", [None, Resolution.OURS])
def test_status_changed_in_both_is_a_conflict_and_ours_keeps_the_databases(
    race: Any, resolution: Resolution | None
) -> None:
    db, store = race
    text = edit_text(export_text(store), X, "The trapdoor is barred from above.")
    text = invalidate_in_file(text, X, "reviewer: no trapdoor here", 3)
    other_process_supersedes_x(db)
    outcome = import_memories(store, text, apply=True, resolution=resolution)
    assert [(c.location_id, c.title) for c in outcome.plan.conflicts] == [(10, X)]
    if resolution is None:
        assert not outcome.applied and outcome.refused is not None
        assert by_title(store, 10)[X].text == X_TEXT
    else:
        assert outcome.applied  # the text (file only) applied, the status (both) the database's
        assert by_title(store, 10)[X].text == "The trapdoor is barred from above."
    assert_supersession_stands(store)
    assert_successor_still_writable(store)


@pytest.mark.parametrize("resolution", [None, Resolution.OURS, Resolution.SKIP])
def test_a_file_without_base_never_moves_x_back_to_active(
    race: Any, resolution: Resolution | None
) -> None:
    db, store = race
    text = strip_base_line(edit_text(export_text(store), Y, "Bring a lamp."))
    other_process_supersedes_x(db)
    outcome = import_memories(store, text, apply=True, resolution=resolution)
    assert outcome.base is None and outcome.plan.warnings
    assert [(c.location_id, c.title) for c in outcome.plan.conflicts] == [(10, X)]
    if resolution is None:
        assert not outcome.applied and outcome.refused is not None
        assert by_title(store, 10)[Y].text == Y_TEXT
    else:
        assert outcome.applied and by_title(store, 10)[Y].text == "Bring a lamp."
    assert_supersession_stands(store)
    assert invariants(store) == []
    assert_successor_still_writable(store)


def test_a_file_without_base_moves_x_back_only_with_theirs(race: Any) -> None:
    db, store = race
    text = strip_base_line(export_text(store))
    other_process_supersedes_x(db)
    outcome = import_memories(store, text, apply=True, resolution=Resolution.THEIRS)
    assert [(c.location_id, c.title) for c in outcome.plan.conflicts] == [(10, X)]
    assert outcome.applied
    here = by_title(store, 10)
    assert here[X].status is Status.ACTIVE and here[X].superseded_by is None
    assert here[X2].status is Status.ACTIVE  # learned after the file: kept
    assert invariants(store) == []
    # X has no link left behind: it can be superseded again
    assert store.supersede_memory(10, "Cellar", X, note("Trapdoor rusted shut", "Rust.", 60))
    assert store.invalidate_memory(10, X2, "not any more", turn=61)
    assert invariants(store) == []


def supersede_in_file(text: str, title: str, successor: str, turn: int) -> str:
    """Mark a live memory superseded by ``successor``, as the exporter writes one."""
    lines = text.split("\n")
    i = _header(lines, title)
    head = lines[i]
    assert head.startswith("**[NOTE - PERMANENT] ")
    lines[i] = head.replace("**[NOTE - PERMANENT] ", "**[NOTE - PERMANENT - SUPERSEDED] ", 1)
    lines[i + 1 : i + 2] = [f'[Superseded at T{turn} by "{successor}"]', f"~~{lines[i + 1]}~~"]
    return "\n".join(lines)


@pytest.mark.parametrize("resolution", [Resolution.OURS, Resolution.THEIRS])
def test_the_reviewer_and_another_process_supersede_x_differently(
    race: Any, resolution: Resolution
) -> None:
    """Both sides replaced X, by different successors: a conflict; --ours keeps the other
    process's link, --theirs the file's; both successors stay, and stay writable."""
    db, store = race
    text = supersede_in_file(export_text(store), X, "Trapdoor per review", 8)
    text = add_memory_by_hand(text, 10, "Trapdoor per review", "Reviewed.", 8)
    assert file_memories(text)[(10, X)].superseded_by == "Trapdoor per review"
    other_process_supersedes_x(db)
    outcome = import_memories(store, text, apply=True)
    assert [(c.location_id, c.title) for c in outcome.plan.conflicts] == [(10, X)]
    assert not outcome.applied and outcome.refused is not None
    assert_supersession_stands(store)
    outcome = import_memories(store, text, apply=True, resolution=resolution)
    assert outcome.applied and invariants(store) == []
    here = by_title(store, 10)
    winner = X2 if resolution is Resolution.OURS else "Trapdoor per review"
    assert here[X].status is Status.SUPERSEDED and here[X].superseded_by == winner
    assert here[X2].status is Status.ACTIVE and here[X2].text == X2_TEXT
    assert here["Trapdoor per review"].status is Status.ACTIVE
    assert [m.title for m in store.history(10, winner)] == [X, winner]
    assert store.supersede_memory(10, "Cellar", X2, note("Trapdoor is nailed", "Nailed.", 50))
    assert store.invalidate_memory(10, "Trapdoor per review", "never mind", turn=51)
    assert invariants(store) == []
