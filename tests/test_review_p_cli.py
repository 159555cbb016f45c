"""Review P1: a new user of the command line, attacking it.

3. (HIGH) The import took a visit count of 2**63-1; the agent's next visit made SQLite
   store a float, and from then on no command could export, import or show the database.
4. map export-json wrote a count import-json refuses (2**31-1, then one more traversal).
2. ``demo --out .`` was an internal error with a Python repr.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporters import render_memories_md
from memstore.cli import main
from memstore.errors import StorageFull, StoreBusy
from memstore.map_graph import COUNT_MAX
from memstore.map_json import dump_map_state, import_map_state, parse_map_state
from memstore.map_store import MapStore
from memstore.models import INT64_MAX
from memstore.store import MemoryStore
from memstore.store_import import import_memories
from tests.conftest import MakeMemory
from tests.map_helpers import NORTH, WEST, map_event


def test_a_visit_past_the_largest_count_stays_at_it_and_the_database_stays_readable(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(2, "Temple", mem("Altar"))
    store.record_visit(2, "Temple", 1)
    text = render_memories_md(*store.export_snapshot())
    assert "**Visits:** 1 " in text
    imported = import_memories(
        store, text.replace("**Visits:** 1 ", f"**Visits:** {INT64_MAX} "), apply=True
    )
    assert imported.applied, imported.plan.summary()
    store.record_visit(2, "Temple", 1)  # past it: SQLite stored a REAL, PostgreSQL refused
    store.record_visit(2, "Temple of Doom", 1)  # (a visit under another name)
    entries, _base = store.export_snapshot()
    [entry] = [e for e in entries if e.location.id == 2]
    assert entry.location.visit_count == INT64_MAX
    assert "Temple of Doom" in render_memories_md(*store.export_snapshot())


def test_an_exit_taken_past_the_largest_count_exports_a_file_that_imports(
    store: MemoryStore,
) -> None:
    maps = MapStore(store)
    maps.record([map_event(WEST, "n", NORTH)])
    state = json.loads(dump_map_state(maps.graph()))
    state["connection_verifications"][f"{WEST}_north"] = COUNT_MAX
    import_map_state(maps, parse_map_state(json.dumps(state)), replace=True)
    maps.record([map_event(WEST, "n", NORTH, 2), map_event(WEST, "w", WEST, 3)])
    exported = dump_map_state(maps.graph())
    assert json.loads(exported)["connection_verifications"][f"{WEST}_north"] == COUNT_MAX
    import_map_state(maps, parse_map_state(exported), replace=True)  # refused past it


@pytest.mark.parametrize("out", [".", "./", "/"])
def test_demo_out_a_folder_is_a_one_line_usage_error(
    out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--db", str(tmp_path / "d.db"), "demo", "--episodes", "1", "--out", out])
    assert code == 1  # as `export --out .`
    err = capsys.readouterr().err
    assert "names a folder" in err and "internal error" not in err and "PosixPath" not in err
    assert not (tmp_path / "d.db").exists()


def test_a_database_path_that_is_not_utf8_opens(tmp_path: Path) -> None:
    # 7: SQLite's list of databases (its file column, the path) could not be decoded: every
    # command but `db` was an internal error
    import os

    db = tmp_path / os.fsdecode(b"dir\xff") / "x.db"
    db.parent.mkdir()
    with MemoryStore.open(db) as store:
        store.record_visit(64, "West of House", 1)
    assert main(["--db", str(db), "stats"]) == 0
    assert main(["--db", str(db), "show", "64"]) == 0
    assert main(["--db", str(db), "export", "--out", str(tmp_path / "M.md")]) == 0


def test_a_read_only_folder_s_database_with_commits_in_its_wal_is_refused_not_read_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6: with no -shm and a folder that cannot be written, the file was opened immutable:
    # the commits still in its -wal were left out, and export and check said nothing
    import shutil
    import sqlite3

    from memstore import sqlite_probe

    db = tmp_path / "live" / "m.db"
    db.parent.mkdir()
    with MemoryStore.open(db) as store:
        store.record_visit(64, "West of House", 1)
    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO locations (id, name, visit_count) VALUES (2, 'Temple', 1)")
        writer.commit()  # in the -wal only
        copy = tmp_path / "restored"
        copy.mkdir()
        for name in ("m.db", "m.db-wal"):  # restored without the transient -shm
            shutil.copy(db.parent / name, copy / name)
    finally:
        writer.close()
    monkeypatch.setattr(sqlite_probe, "folder_writable", lambda _path: False)
    assert main(["--db", str(copy / "m.db"), "stats"]) == 1
    err = capsys.readouterr().err
    assert "m.db-wal holds commits that cannot be read here" in err and err.count("\n") == 1


def test_prune_with_problems_asks_no_force_for_deletions_it_will_not_make(
    store: MemoryStore, mem: MakeMemory
) -> None:
    # 8: "--prune would delete 3 of 4 ...; refused without --force", and with --force it
    # deleted nothing (a file with problems prunes nothing)
    for title in ("Altar", "Bell", "Book", "Candles"):
        store.add_memory(2, "Temple", mem(title))
    text = render_memories_md(*store.export_snapshot())
    cut = text[: text.index("**[NOTE - PERMANENT] Bell**")] + "**[BOGUS] Broken**\nx\n"
    outcome = import_memories(store, cut, apply=True, prune=True, skip_invalid=True)
    assert outcome.plan.problems and outcome.refused is None
    assert len(store.memories(2)) == 4


def test_demo_episodes_are_bounded_like_eval_s(tmp_path: Path) -> None:
    # 10: --episodes 999999999999 played until killed (1,560 episodes, 221 MB in 60 s)
    with pytest.raises(SystemExit) as raised:
        main(["--db", str(tmp_path / "d.db"), "demo", "--episodes", "999999999999"])
    assert raised.value.code == 2 and not (tmp_path / "d.db").exists()


@contextlib.contextmanager
def lock_held(db_path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holds the writers' lock on a new database while the block runs."""
    MemoryStore.open(db_path).close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        holder.close()


def test_ctrl_c_ends_a_wait_for_another_process_s_write_lock_at_once(
    db_path: Path, mem: MakeMemory
) -> None:
    # 1: SQLite waited inside its C code for the whole busy timeout (here 20 s); Python ran
    # the Ctrl-C only when it ended
    with lock_held(db_path) as holder, MemoryStore.open(db_path, busy_timeout_s=20) as store:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            store.add_memory(64, "West of House", mem("Mailbox"))
        waited = time.monotonic() - started
        timer.join()
        assert waited < 2, waited  # (within a slice of SLICE_MS after the Ctrl-C)
        holder.execute("ROLLBACK")
        assert store.add_memory(64, "West of House", mem("Mailbox"))  # still usable


def test_a_write_lock_held_past_the_busy_timeout_is_still_refused_at_its_end(
    db_path: Path, mem: MakeMemory
) -> None:
    with lock_held(db_path), MemoryStore.open(db_path, busy_timeout_s=0.35) as store:
        started = time.monotonic()
        with pytest.raises(StoreBusy):
            store.add_memory(64, "West of House", mem("Mailbox"))
        assert 0.3 < time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["downgrade", "-20", "--allow-data-loss"], "there are not 20 revision(s) below"),
        (["upgrade", "+1"], "there are not 1 revision(s) above"),
        (["downgrade", "0005:0003", "--allow-data-loss"], "give one revision"),
        (["upgrade", "xyz"], "unknown revision 'xyz'"),
    ],
)
def test_a_revision_alembic_cannot_go_to_is_said_in_memstore_s_words(
    args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 9: alembic's own words ("Relative revision -20 didn't produce 20 migrations")
    db = tmp_path / "m.db"
    MemoryStore.open(db).close()
    capsys.readouterr()
    assert main(["--db", str(db), "db", *args]) == 1
    err = capsys.readouterr().err
    assert said in err and "alembic" not in err.lower() and err.count("\n") == 1


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        # 5: SQLAlchemy's PendingRollbackError from alembic's clean-up after a Ctrl-C was
        # "internal error", exit 1
        (RuntimeError("Can't reconnect until the transaction is rolled back"), 130, "interrupted"),
        # review R2 F6: memstore's own refusal in the clean-up (the demo's refused flush:
        # "what waits ... is lost") was hidden as "interrupted"
        (StorageFull("disk full: the last turns are lost"), 1, "the last turns are lost"),
    ],
)
def test_an_error_of_the_clean_up_after_ctrl_c_in_a_migration(
    raised: Exception,
    code: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from alembic import command

    def interrupted(*_args: object, **_kwargs: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise raised  # noqa: B904

    db = tmp_path / "m.db"
    MemoryStore.open(db).close()
    monkeypatch.setattr(command, "upgrade", interrupted)
    assert main(["--db", str(db), "db", "upgrade"]) == code
    assert capsys.readouterr().err.strip().endswith(said)
