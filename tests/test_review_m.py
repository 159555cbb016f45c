"""Review E, findings 3, 5, 6 and 7: the synthesis prompt's bound hides nothing it need not
and never a TENTATIVE memory first (#3); a full disk at open is StorageFull, not "not
SQLite" (#5); a database at base with tables of its own upgrades (#6); the import and
`memstore check` apply the location-name rule (#7)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memstore.sqlite_probe as sqlite_probe
from memstore.errors import NotAMemstoreDatabase, StorageFull, StoreBusy
from memstore.manager import SimpleMemoryManager
from memstore.models import LOCATION_NAME_MAX, Memory
from memstore.prompt import (
    MAX_LISTED_CHARS,
    MAX_PROMPT_CHARS,
    build_synthesis_messages,
    listed_handles,
    listed_memories,
)
from memstore.store import MemoryStore
from memstore.synthesis import number_memories, parse_synthesis_answer, resolve_decision
from memstore.triggers import ZMachineContext
from tests.cli_helpers import one_error_line, run
from tests.conftest import note

ROOM = 5


def fact(index: int, **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "category": "DISCOVERY",
        "title": f"fact {index}",
        "text": "short",
        "episode": 1,
        "turns": str(index + 2),
        "persistence": "permanent",
    }
    values.update(fields)
    return Memory(**values)


def long_fact(index: int, **fields: Any) -> Memory:
    return fact(index, text="w" * 5_000, **fields)


def answer(**fields: Any) -> Any:
    values: dict[str, Any] = {"should_remember": False, "reasoning": "r"}
    values.update(fields)
    return parse_synthesis_answer(json.dumps(values))


# --------------------------------------------------------------------------- 3


def test_m3_the_reviewers_case_lists_the_tentative_memory_and_confirms_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One TENTATIVE memory and 40 short facts (8.7k characters): all listed, and the
    model's superseding ACTIVE memory of the same title is stored."""
    store = MemoryStore.open(tmp_path / "m3.db")
    try:
        store.add_memory(
            ROOM, "Room", fact(-1, title="Door might need key", text="unclear", status="TENTATIVE")
        )
        for i in range(40):
            store.add_memory(ROOM, "Room", fact(i))
        seen: list[str] = []

        def llm(messages: list[dict[str, str]]) -> str:
            seen.append(messages[1]["content"])
            return json.dumps(
                {
                    "should_remember": True,
                    "category": "DISCOVERY",
                    "memory_title": "Door might need key",
                    "memory_text": "The door opens with the key (confirmed).",
                    "persistence": "permanent",
                    "status": "ACTIVE",
                    "supersedes_memory_titles": ["Door might need key"],
                    "reasoning": "confirmed",
                }
            )

        manager = SimpleMemoryManager(store, llm=llm, episode=1)
        context = ZMachineContext(
            location_before=ROOM, location_after=ROOM, score_before=0, score_after=5
        )
        manager.record_action_outcome(ROOM, "Room", "unlock door", "Unlocked.", context)
        manager.flush()
        assert len(seen) == 1
        assert "Door might need key" in seen[0] and "not shown" not in seen[0]
        assert manager.counters["hallucinated_references"] == 0
        assert manager.counters["duplicates_dropped"] == 0
        assert "do not exist" not in caplog.text
        rows = [(m.title, m.status.value) for m in store.memories(ROOM, include_superseded=True)]
        assert ("Door might need key", "SUPERSEDED") in rows
        assert ("Door might need key", "ACTIVE") in rows
    finally:
        store.close()


def test_m3_no_count_bounds_the_list_only_characters() -> None:
    existing = number_memories([fact(i) for i in range(150)])  # 40 was the old count bound
    listed, left_out = listed_memories(existing)
    assert (len(listed), left_out) == (150, 0)
    text = build_synthesis_messages(
        location_id=ROOM,
        location_name="Room",
        action="look",
        response="ok",
        ctx=ZMachineContext(location_before=ROOM, location_after=ROOM),
        existing=existing,
    )[1]["content"]
    assert "not shown" not in text and len(text) <= MAX_PROMPT_CHARS


def test_m3_past_the_character_bound_tentative_comes_right_after_danger() -> None:
    """Order: DANGER, TENTATIVE (oldest too), then CORE, PERMANENT, EPHEMERAL, newest
    first; SUPERSEDED last. Only characters end the list."""
    memories = [fact(0, title="maybe", status="TENTATIVE", text="w" * 5_000)]
    memories += [long_fact(i) for i in range(1, 40)]
    memories.append(long_fact(40, category="DANGER", title="troll"))
    existing = number_memories(memories)
    listed, left_out = listed_memories(existing)
    handles = [handle for handle, _ in listed]
    assert handles[0] == 1 and handles[-1] == 41  # the TENTATIVE one and the DANGER one
    assert left_out > 0 and 2 not in handles  # the oldest settled facts are left out
    assert handles[1:-1] == list(range(41 - len(handles) + 2, 41))
    assert left_out == 41 - len(handles)
    # as many as MAX_LISTED_CHARS holds: far more than one, far fewer than all
    assert MAX_LISTED_CHARS // 6_000 < len(handles) <= MAX_LISTED_CHARS // 1_000


def hidden_setup() -> tuple[Any, frozenset[int], int]:
    """A location whose prompt cannot list everything: the oldest facts are hidden."""
    existing = number_memories([long_fact(i) for i in range(60)])
    listed = listed_handles(existing)
    hidden = next(handle for handle in range(1, 61) if handle not in listed)
    return existing, listed, hidden


def test_m3_a_new_title_of_a_hidden_memory_supersedes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    existing, listed, hidden = hidden_setup()
    title = f"fact {hidden - 1}"
    decision = resolve_decision(
        answer(
            should_remember=True,
            category="DISCOVERY",
            memory_title=title,
            memory_text="settled now",
            persistence="permanent",
            status="ACTIVE",
        ),
        existing,
        False,
        listed,
    )
    assert decision.new_memory is not None and decision.new_memory.title == title
    assert decision.supersede_titles == (title,) and decision.unshown_superseded == (title,)
    assert not decision.duplicate_title and decision.hallucinated_references == ()
    # a shown memory's title without superseding it is still a dropped duplicate
    shown_title = f"fact {max(listed) - 1}"
    again = resolve_decision(
        answer(
            should_remember=True,
            category="DISCOVERY",
            memory_title=shown_title,
            memory_text="x",
            persistence="permanent",
        ),
        existing,
        False,
        listed,
    )
    assert again.duplicate_title and again.new_memory is None


def test_m3_a_new_ephemeral_title_of_a_hidden_permanent_memory_is_dropped_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    existing, listed, hidden = hidden_setup()
    title = f"fact {hidden - 1}"
    decision = resolve_decision(
        answer(
            should_remember=True,
            category="DISCOVERY",
            memory_title=title,
            memory_text="for now",
            persistence="ephemeral",
        ),
        existing,
        False,
        listed,
    )
    assert decision.new_memory is None and decision.duplicate_title
    assert decision.supersede_titles == ()
    assert f"dropped the new memory {title!r}" in caplog.text
    assert "not shown in the prompt" in caplog.text and "may not be superseded" in caplog.text


def test_m3_a_reference_to_a_hidden_memory_is_logged_as_not_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    existing, listed, hidden = hidden_setup()
    decision = resolve_decision(
        answer(invalidates=[hidden, "no such memory"], invalidation_reason="wrong"),
        existing,
        False,
        listed,
    )
    assert decision.invalidate_titles == ()
    assert decision.unshown_references == (hidden,)
    assert decision.hallucinated_references == ("no such memory",)
    assert "not shown in the prompt" in caplog.text and f"({hidden},)" in caplog.text


@pytest.mark.slow
def test_m3_a_walkthrough_game_lists_every_memory_as_before_the_bound(tmp_path: Path) -> None:
    """A normal game never reaches the bound: every prompt lists every memory, uncut (the
    reviewer's 382 prompts of two walkthrough episodes were identical to the pre-bound
    commit's; this is the check of that kind)."""
    from memstore.game import z_machine_context

    try:
        from tests.fixtures.walkthrough import get_zork1_walkthrough, new_game
    except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
        from fixtures.walkthrough import (  # type: ignore[no-redef]
            get_zork1_walkthrough,
            new_game,
        )

    prompts: list[str] = []

    def llm(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[1]["content"])
        return json.dumps(
            {
                "should_remember": True,
                "category": "DISCOVERY",
                "memory_title": f"note {len(prompts)}",
                "memory_text": "x " * 50,
                "persistence": "permanent",
                "reasoning": "r",
            }
        )

    with MemoryStore.open(tmp_path / "walk.db") as store:
        manager = SimpleMemoryManager(store, llm=llm, episode=1)
        game = new_game()
        try:
            here = game.reset()[1]
            for turn, action in enumerate(get_zork1_walkthrough()[:150], start=1):
                manager.add_reasoning(turn, f"try {action}", action)
                step = game.step(action)
                manager.record_action_outcome(
                    step.before.location_id,
                    step.before.location_name,
                    action,
                    step.response,
                    z_machine_context(step.before, step.after, step.response),
                )
                here = step.after
            assert here is not None
        finally:
            game.close()
        manager.flush()
    assert len(prompts) > 50
    for text in prompts:
        assert "not shown" not in text and "…" not in text


# --------------------------------------------------------------------------- 5


def disk_io_error() -> sqlite3.OperationalError:
    """What SQLite says when it cannot make the -shm file on a full disk."""
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = 4874  # type: ignore[attr-defined]
    error.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"  # type: ignore[attr-defined]
    return error


@pytest.fixture
def full_disk_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's read-only connection fails as on a full disk (every other is real)."""
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if kwargs.get("uri") and "mode=ro" in str(database):
            raise disk_io_error()
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite_probe.sqlite3, "connect", connect)


def sound_database(db_path: Path) -> bytes:
    with MemoryStore.open(db_path) as store:
        store.add_memory(64, "West of House", note("Mailbox here"))
    return db_path.read_bytes()


def test_m5_a_disk_io_error_at_open_is_storage_full_not_not_sqlite(
    db_path: Path, capsys: pytest.CaptureFixture[str], full_disk_probe: None
) -> None:
    before = sound_database(db_path)
    with pytest.raises(StorageFull, match="the disk is full or failing") as raised:
        MemoryStore.open(db_path)
    assert isinstance(raised.value, StoreBusy) and str(db_path) in str(raised.value)
    assert "SQLite" not in str(raised.value) and "\n" not in str(raised.value)
    for command in (["stats"], ["check"], ["show", "64"], ["db", "current"]):
        code, _out, err = run(capsys, "--db", str(db_path), *command)
        assert code == 1
        line = one_error_line(err, str(db_path), "the disk is full or failing")
        assert "not a SQLite" not in line and "cannot be read as SQLite" not in line
    assert db_path.read_bytes() == before
    assert not Path(f"{db_path}-shm").exists() and not Path(f"{db_path}-wal").exists()


def test_m5_other_unreadable_files_are_still_not_sqlite(db_path: Path) -> None:
    db_path.write_bytes(b"my shopping list\n" * 10)
    with pytest.raises(NotAMemstoreDatabase, match="not a SQLite database"):
        MemoryStore.open(db_path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 400 KiB tmpfs (root only; skipped where mount is not permitted)."""
    folder = tmp_path / "small"
    folder.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError as exc:
        pytest.skip(f"mount is not available: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mount is not permitted here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False, timeout=30)


@pytest.mark.slow
def test_m5_a_full_tmpfs_at_open_is_storage_full(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = small_disk / "d.db"
    before = sound_database(db)
    filler = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # fill the disk
        while os.write(filler, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(filler)
    with pytest.raises(StorageFull, match="the disk is full or failing"):
        MemoryStore.open(db)
    code, _out, err = run(capsys, "--db", str(db), "stats")
    assert code == 1
    one_error_line(err, str(db), "the disk is full or failing")
    assert db.read_bytes() == before
    os.remove(small_disk / "filler")  # room again: the database opens as it was
    with MemoryStore.open(db) as store:
        assert [m.title for m in store.memories(64)] == ["Mailbox here"]


# --------------------------------------------------------------------------- 6


def test_m6_a_database_at_base_beside_other_tables_is_refused_and_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every alembic project's version table looks the same: another application's
    database at its own base, with its own tables, must never be taken for a memstore
    database downgraded to base (review G: `db upgrade` added memstore's tables to it and
    stamped its version table 0010). A memstore database downgraded beside the user's own
    tables is refused the same way (one line, nothing touched)."""
    other = tmp_path / "invoices.db"
    with sqlite3.connect(other) as conn:
        conn.execute(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)")
    conn.close()
    before = other.read_bytes()
    for command in (["stats"], ["db", "upgrade"]):
        code, _out, err = run(capsys, "--db", str(other), *command)
        assert code == 1
        one_error_line(err, "not a memstore database", "invoices", "left untouched")
    assert other.read_bytes() == before


def test_m6_a_refusal_lists_tables_not_indexes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
        conn.execute("CREATE INDEX users_by_name ON users (name)")
    conn.close()
    code, _out, err = run(capsys, "--db", str(other), "stats")
    assert code == 1
    line = one_error_line(err, "not a memstore database", "(tables: users)")
    assert "sqlite_autoindex" not in line and "users_by_name" not in line


def test_m6_memstores_tables_with_alembic_version_emptied_are_still_damaged(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sound_database(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE my_runs (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM alembic_version")
    conn.close()
    code, _out, err = run(capsys, "--db", str(db_path), "db", "upgrade")
    assert code == 1
    one_error_line(err, "is damaged", "holds no revision")


# --------------------------------------------------------------------------- 7


def exported(capsys: pytest.CaptureFixture[str], db: Path, out: Path) -> str:
    code, _stdout, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0, err
    return out.read_text(encoding="utf-8")


def renamed_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> tuple[Path, Path]:
    """A Memories.md of a database with locations 64 and 99, location 99 renamed ``name``
    in the file, and a fresh database to import it into."""
    source = tmp_path / "source.db"
    with MemoryStore.open(source) as store:
        store.add_memory(64, "West of House", note("Mailbox here"))
        store.add_memory(99, "Cellar", note("Dark here"))
    text = exported(capsys, source, tmp_path / "M.md")
    assert "## Location 99: Cellar\n" in text
    edited = tmp_path / "edited.md"
    edited.write_text(text.replace("## Location 99: Cellar\n", f"## Location 99: {name}\n"))
    return edited, tmp_path / "fresh.db"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("Bad\x00Name", "holds a NUL character"),
        ("L" * 700, f"is 700 characters, more than the {LOCATION_NAME_MAX} allowed"),
    ],
)
def test_m7_an_unstorable_location_name_is_a_problem_of_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, reason: str
) -> None:
    edited, fresh = renamed_file(capsys, tmp_path, name)
    line = next(
        number
        for number, text in enumerate(edited.read_text().split("\n"), start=1)
        if text.startswith("## Location 99:")
    )
    code, out, err = run(capsys, "--db", str(fresh), "import", str(edited), "--apply")
    assert code == 1 and "nothing was applied" in err
    assert f"line {line}: location 99: its name {reason}" in out
    assert "the location and its memories skipped" in out
    code, out, err = run(
        capsys, "--db", str(fresh), "import", str(edited), "--apply", "--skip-invalid"
    )
    assert code == 0, err
    with MemoryStore.open(fresh) as store:
        assert [m.title for m in store.memories(64)] == ["Mailbox here"]
        assert store.memories(99) == []
    code, out, _err = run(capsys, "--db", str(fresh), "check")
    assert code == 0 and "ok" in out


def test_m7_an_older_database_with_a_long_name_imports_its_own_export(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name longer than the rule allows, stored by an older memstore: the database
    already holds it, so its own export imports back (and `check` is ok)."""
    long_name = "L" * 700
    with MemoryStore.open(db_path) as store:
        store.add_memory(99, "Cellar", note("Dark here"))
    with sqlite3.connect(db_path) as conn:  # as memstore before the rule wrote it
        conn.execute("UPDATE locations SET name = ? WHERE id = 99", (long_name,))
    conn.close()
    out_file = tmp_path / "M.md"
    assert f"## Location 99: {long_name}\n" in exported(capsys, db_path, out_file)
    code, out, err = run(capsys, "--db", str(db_path), "import", str(out_file), "--apply")
    assert code == 0, err
    assert "problems 0" in out
    code, out, _err = run(capsys, "--db", str(db_path), "check")
    assert code == 0 and "ok" in out


def test_m7_check_reports_a_stored_name_no_write_could_store(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryStore.open(db_path) as store:
        store.add_memory(99, "Cellar", note("Dark here"))
    with sqlite3.connect(db_path) as conn:  # as the import before the fix stored it
        conn.execute("UPDATE locations SET name = 'Bad' || char(0) || 'Name' WHERE id = 99")
    conn.close()
    code, out, err = run(capsys, "--db", str(db_path), "check")
    assert code == 1
    assert "location 99: its name holds a NUL character" in out + err
