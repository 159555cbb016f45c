"""`memstore export --out PATH` (and --notes PATH) is safe whatever PATH already is.

A symbolic link is written through to its target and stays a link; a device, FIFO,
socket or folder is refused in one line before anything is written (a FIFO never
blocks); ``-`` is standard output; a hard-linked file is replaced atomically, with a
warning; a killed export's leftover temporary files are removed by the next export.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest

import memstore.cli as cli
from memstore.export_file import STALE_TEMP_SECONDS, NotARegularFile, write_atomically
from memstore.store import MemoryStore
from tests.cli_helpers import never_blocks as never_blocks  # a fixture
from tests.cli_helpers import one_error_line, run
from tests.conftest import MakeMemory

#: an older Memories.md with no memories (its title): a file of the kind the export writes
OLD_EXPORT = "# Location Memories\n"


def temporary_files(*folders: Path) -> list[str]:
    return sorted(p.name for folder in folders for p in folder.iterdir() if p.suffix == ".tmp")


@pytest.fixture
def db(db_path: Path, mem: MakeMemory) -> Path:
    with MemoryStore.open(db_path) as store:
        store.record_visit(15, "West of House", 1)
        store.add_memory(15, "West of House", mem("Mailbox", category="DISCOVERY"))
        store.add_memory(33, "Troll Room", mem("Troll", category="DANGER", score_change=-10))
    return db_path


@pytest.fixture
def reference(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> tuple[str, str]:
    """The texts of Memories.md and of the notes, as written to plain new files."""
    folder = tmp_path / "reference"
    memories_md, notes_md = folder / "Memories.md", folder / "Notes.md"
    code, _out, err = run(
        capsys, "--db", str(db), "export", "--out", str(memories_md), "--notes", str(notes_md)
    )
    assert code == 0, err
    return memories_md.read_text(encoding="utf-8"), notes_md.read_text(encoding="utf-8")


@pytest.fixture
def expected(reference: tuple[str, str]) -> str:
    """The text of Memories.md."""
    return reference[0]


def export_argv(db: Path, option: str, target: Path, other: Path) -> list[str]:
    """Export with ``target`` given to ``option`` (--out or --notes), ``other`` the other."""
    if option == "--out":
        return ["--db", str(db), "export", "--out", str(target), "--notes", str(other)]
    return ["--db", str(db), "export", "--out", str(other), "--notes", str(target)]


# --- not a regular file: refused, nothing written -----------------------------------------------


@pytest.mark.parametrize("option", ["--out", "--notes"])
def test_a_fifo_is_refused_before_it_is_opened_and_stays_a_fifo(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, never_blocks: None, option: str
) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    other = tmp_path / "other.md"

    code, _out, err = run(capsys, *export_argv(db, option, fifo, other))

    assert code == 1
    one_error_line(err, str(fifo), "FIFO", "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not other.exists()  # nothing written, not even the other file
    assert temporary_files(tmp_path) == []
    # --check would read it: refused too, without blocking
    code, _out, err = run(capsys, *export_argv(db, option, fifo, other), "--check")
    assert code == 1
    one_error_line(err, str(fifo), "FIFO")


def character_devices(tmp_path: Path) -> list[Path]:
    devices = []
    if os.access("/dev/null", os.W_OK) and stat.S_ISCHR(os.stat("/dev/null").st_mode):
        devices.append(Path("/dev/null"))
    made = tmp_path / "null"
    try:  # a copy of /dev/null's device number, where only root may make one
        os.mknod(made, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pass
    else:
        devices.append(made)
    return devices


def test_a_character_device_like_dev_null_is_refused_and_stays_a_device(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    devices = character_devices(tmp_path)
    if not devices:
        pytest.skip("no character device writable here (/dev/null read-only, not root)")
    for device in devices:
        before = os.stat(device)

        code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(device))

        assert code == 1
        one_error_line(err, str(device), "character device", "nothing was written")
        after = os.stat(device)
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
        assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)
    assert temporary_files(tmp_path, Path("/dev")) == []


def test_a_socket_is_refused(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    path = tmp_path / "sock.md"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(path))
    assert code == 1
    one_error_line(err, str(path), "socket")
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_a_folder_as_notes_is_refused_before_memories_md_is_written(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    out = tmp_path / "Memories.md"

    code, _out, err = run(capsys, *export_argv(db, "--notes", folder, out))

    assert code == 1
    one_error_line(err, f"{folder}: is a folder, not a file")
    assert not out.exists() and list(folder.iterdir()) == []
    # through a link, the message says where the link goes
    link = tmp_path / "link.md"
    link.symlink_to(folder)
    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(link))
    assert code == 1
    one_error_line(err, str(link), f"links to {folder}, a folder")
    assert link.is_symlink() and list(folder.iterdir()) == []


def test_write_atomically_refuses_a_fifo_with_a_named_error(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile) as caught:
        write_atomically(fifo, "text\n")
    assert isinstance(caught.value, OSError) and caught.value.filename == str(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and temporary_files(tmp_path) == []


# --- symbolic links: written through --------------------------------------------------------------


@pytest.mark.parametrize("option", ["--out", "--notes"])
def test_a_symlink_is_written_through_to_its_final_target_and_stays_a_link(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    tmp_path: Path,
    reference: tuple[str, str],
    option: str,
) -> None:
    real_folder, link_folder = tmp_path / "real", tmp_path / "links"
    real_folder.mkdir()
    link_folder.mkdir()
    real = real_folder / "Memories.md"
    # an older file of the kind the option writes (an export replaces no other kind)
    real.write_text(OLD_EXPORT if option == "--out" else "# Agent Notes\n", encoding="utf-8")
    real.chmod(0o600)
    middle = link_folder / "middle.md"
    middle.symlink_to(real)
    link = link_folder / "M.md"
    link.symlink_to("middle.md")  # a chain of two links, the last one relative
    other = tmp_path / "other.md"

    code, _out, err = run(capsys, *export_argv(db, option, link, other))

    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == "middle.md"
    assert middle.is_symlink() and os.readlink(middle) == str(real)
    assert not real.is_symlink() and real.stat().st_mode & 0o777 == 0o600
    memories_md, notes_md = reference
    through_link, plain = (memories_md, notes_md) if option == "--out" else (notes_md, memories_md)
    assert real.read_text(encoding="utf-8") == through_link
    assert other.read_text(encoding="utf-8") == plain
    assert temporary_files(real_folder, link_folder, tmp_path) == []


def test_a_symlink_to_nothing_creates_its_target(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, expected: str
) -> None:
    link = tmp_path / "M.md"
    link.symlink_to(tmp_path / "target.md")

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(link))

    assert code == 0, err
    assert link.is_symlink()
    assert (tmp_path / "target.md").read_text(encoding="utf-8") == expected


# --- standard output ----------------------------------------------------------------------------


def test_out_dash_writes_the_export_to_standard_output(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    tmp_path: Path,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)

    code, out, err = run(capsys, "--db", str(db), "export", "--out", "-")

    assert code == 0, err
    assert out == expected  # the export alone: what is said about it went to stderr
    assert f"database: {db}" in err
    assert list(folder.iterdir()) == []  # no file named "-"


def test_notes_dash_writes_the_notes_to_standard_output(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    tmp_path: Path,
    reference: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    out_file = tmp_path / "M.md"

    code, out, err = run(capsys, *export_argv(db, "--notes", Path("-"), out_file))

    assert code == 0, err
    assert out == reference[1]
    assert out_file.read_text(encoding="utf-8") == reference[0]
    assert f"wrote {out_file}" in err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--out", "-", "--check"],
        ["export", "--out", "M.md", "--notes", "-", "--check"],
        ["export", "--out", "-", "--notes", "-"],
    ],
)
def test_dash_with_check_or_twice_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
    db: Path,
    tmp_path: Path,
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)

    code, out, err = run(capsys, "--db", str(db), *argv)

    assert code == 1 and out == ""
    one_error_line(err, "standard output")
    assert list(folder.iterdir()) == []


# --- hard links, leftovers ----------------------------------------------------------------------


def test_a_hard_linked_file_is_replaced_atomically_with_a_warning(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, expected: str
) -> None:
    out = tmp_path / "Memories.md"
    out.write_text(OLD_EXPORT, encoding="utf-8")
    copy = tmp_path / "reviewer-copy.md"
    os.link(out, copy)

    code, _stdout, err = run(capsys, "--db", str(db), "export", "--out", str(out))

    assert code == 0
    (warning,) = err.strip().splitlines()
    assert warning.startswith("memstore: warning: ") and str(out) in warning
    assert "1 other hard link" in warning and "keep the old content" in warning
    assert out.read_text(encoding="utf-8") == expected
    assert copy.read_text(encoding="utf-8") == OLD_EXPORT  # the link was broken
    assert out.stat().st_nlink == 1
    # a second export has nothing to warn about
    code, _stdout, err = run(capsys, "--db", str(db), "export", "--out", str(out))
    assert code == 0 and err == ""


def test_the_next_export_removes_a_killed_exports_leftover_temporary_files(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path, expected: str
) -> None:
    out = tmp_path / "Memories.md"
    old = time.time() - STALE_TEMP_SECONDS - 60
    leftovers = [tmp_path / ".Memories.md.k1ll3d_x.tmp", tmp_path / ".Memories.md.abcdefgh.tmp"]
    in_progress = tmp_path / ".Memories.md.wr1t1ng0.tmp"  # another export, writing now
    not_ours = [
        tmp_path / ".Notes.md.abcdefgh.tmp",  # another file's
        tmp_path / ".Memories.md.abc.tmp",  # not tempfile's name
        tmp_path / "Memories.md.abcdefgh.tmp",  # not hidden
    ]
    for path in [*leftovers, in_progress, *not_ours]:
        path.write_text("partial", encoding="utf-8")
    for path in [*leftovers, *not_ours]:
        os.utime(path, (old, old))

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(out))

    assert code == 0, err
    assert out.read_text(encoding="utf-8") == expected
    assert not any(path.exists() for path in leftovers)
    assert in_progress.exists() and all(path.exists() for path in not_ours)


def test_leftovers_are_removed_next_to_a_symlinks_target(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    real_folder = tmp_path / "real"
    real_folder.mkdir()
    link = tmp_path / "M.md"
    link.symlink_to(real_folder / "Memories.md")
    leftover = real_folder / ".Memories.md.abcdefgh.tmp"
    leftover.write_text("partial", encoding="utf-8")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(leftover, (old, old))

    code, _out, err = run(capsys, "--db", str(db), "export", "--out", str(link))

    assert code == 0, err
    assert not leftover.exists() and (real_folder / "Memories.md").is_file()


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_export_never_writes_over_the_database_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    from memstore.models import Memory
    from memstore.store import MemoryStore

    db = tmp_path / "d.db"
    with MemoryStore.open(db) as store:
        store.add_memory(
            1,
            "Room",
            Memory(
                category="NOTE", title="t", text="x", episode=1, turns="1", persistence="permanent"
            ),
        )
    target = str(db) + suffix
    for option in ("--out", "--notes"):
        code = cli.main(["--db", str(db), "export", option, target])
        _out, err = capsys.readouterr()
        assert code == 1 and "is the database's own file" in err and err.count("\n") == 1
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"
    with MemoryStore.open(db) as store:
        assert store.get_persistent_count() == 1
