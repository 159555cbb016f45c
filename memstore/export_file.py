"""Writing Memories.md atomically, checking a file against what the database would write,
and the one rule of what an export may replace (``foreign_file``;
``memstore.export_risk.edits_at_risk`` finds the reviewer's edits that replacing a
Memories.md would lose).

``write_atomically`` writes to a temporary file in the target's folder (named
``.{name}.XXXXXXXX.tmp``), flushes and fsyncs it, renames it over the target with
``os.replace`` (atomic on POSIX and Windows) and fsyncs the folder, so a crash leaves
either the old file or the new one, never a torn file, and no temporary file is left
behind on an error.

What the target may be:

- **missing or a regular file**: written as above (an existing file keeps its permission
  bits; a new one gets 0644).
- **a symbolic link**: written through to its final target (every link in the chain
  resolved), atomically there (the temporary file goes in the final target's folder);
  the link itself stays a link. A link to nothing creates its target.
- **anything else** (a folder, a character or block device such as ``/dev/null``, a FIFO,
  a socket): refused with ``NotARegularFile`` (``IsADirectoryError`` for a folder) before
  anything is opened or written, so a FIFO never blocks and a device is never replaced.
- **a file with other hard links** (``st_nlink > 1``): still replaced atomically, which
  gives the name a new file: the other names keep the old content. Writing in place
  would keep the links but could leave a torn file after a crash, and a reviewer's copy
  that shares the file would change under them; so the atomic replace is kept and the
  caller is told, through ``warn``, in one line.

A killed export can leave its temporary file behind. The next export of the same file
removes such leftovers: regular files in the target's folder named exactly
``.{name}.XXXXXXXX.tmp`` (``tempfile``'s eight characters) and untouched for
``STALE_TEMP_SECONDS``, so that a concurrent export's temporary file, still being written,
is left alone.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from memstore.errors import (
    FileChanged,
    NotARegularFile,  # noqa: F401 - importable from here too
)
from memstore.moved_names import forwarding

__all__ = [
    "STALE_TEMP_SECONDS",
    "FileState",
    "NotARegularFile",
    "check_target",
    "check_writable",
    "frozen",
    "file_state",
    "file_kind",
    "export_check",
    "foreign_file",
    "file_head",
    "write_atomically",
    "write_bytes_atomically",
]

#: A leftover temporary file this old (by its modification time) is a killed export's.
STALE_TEMP_SECONDS = 10.0

Warn = Callable[[str], None]

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, by its ``st_mode``: ``a folder``, ``a
    character device``, ``a FIFO (named pipe)`` ..."""
    if stat.S_ISDIR(mode):
        return "a folder"
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable where the platform allows it (not on Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _final_target(target: Path) -> Path:
    """The file a write to ``target`` lands in: ``target``, or the end of its link chain.

    A loop of links raises ``OSError`` (ELOOP).
    """
    if not target.is_symlink():
        return target
    try:
        return Path(os.path.realpath(target, strict=True))
    except FileNotFoundError:  # a link to nothing: write its target
        return Path(os.path.realpath(target))


def _existing_mode(target: Path, shown: Path) -> os.stat_result | None:
    """The target's status if it exists and is a regular file; None if it does not exist.

    Raises ``IsADirectoryError`` for a folder and ``NotARegularFile`` for anything else
    that is not a regular file, naming ``shown`` (the path the caller gave).
    """
    through = f"links to {target}, " if shown != target else "is "
    try:
        status = os.stat(target)
    except FileNotFoundError:
        if shown == target:
            return None
        # A link the kernel follows but no path names: /dev/stdout -> /proc/self/fd/1 ->
        # "pipe:[1234]" (a pipe or socket), or a deleted file. Look at what it leads to.
        try:
            status = os.stat(shown)
        except FileNotFoundError:
            return None  # a link to nothing: its target is created
        through = "is "
        if stat.S_ISREG(status.st_mode):
            raise NotARegularFile(
                errno.EINVAL,
                f"leads to a file with no name to write through ({target}): nothing was written",
                str(shown),
            ) from None
    if stat.S_ISDIR(status.st_mode):  # else the rename fails, naming the temporary file
        raise IsADirectoryError(errno.EISDIR, f"{through}a folder, not a file", str(shown))
    if not stat.S_ISREG(status.st_mode):
        kind = file_kind(status.st_mode)
        raise NotARegularFile(
            errno.EINVAL, f"{through}{kind}, not a regular file: nothing was written", str(shown)
        )
    return status


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Remove what a killed export of ``name`` left in ``folder`` (best effort)."""
    pattern = re.compile(re.escape(f".{name}.") + r"[a-z0-9_]{8}\.tmp")
    cutoff = time.time() - STALE_TEMP_SECONDS
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if pattern.fullmatch(entry.name) is None:
            continue
        try:
            status = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(status.st_mode) and status.st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:
            continue


class FileState(NamedTuple):
    """One version of a file, as ``stat`` tells it (``present`` False: there was none)."""

    present: bool
    device: int = 0
    inode: int = 0
    size: int = 0
    modified_ns: int = 0


def file_state(path: str | Path) -> FileState:
    """The state of the file ``path`` names (through its links) now."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return FileState(False)
    return FileState(True, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def frozen(path: str | Path) -> str | None:
    """Why an export should not replace the file ``path`` names though it can (its folder
    can be written, so the rename goes through): it was made read-only, every write bit
    off (``chmod 444``), to be kept as it is (review S6 B F5: replaced without a word);
    None otherwise. A command's ``--force`` replaces it all the same."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if not stat.S_ISREG(mode) or mode & 0o222:
        return None
    return f"{path} is read-only (mode {mode & 0o777:o}), made so to keep it as it is"


def file_head(path: str | Path, size: int) -> bytes:
    """The first ``size`` bytes (fewer in a shorter file) of the regular file ``path``
    names, through its links: for telling what a file is before an export replaces it.
    Raises what ``check_target`` raises for a target that is not a regular file, and
    ``OSError`` when it cannot be read; never blocks (a FIFO swapped in is not read).

    Call it before this process opens the file as a database: closing a descriptor of a
    file releases every POSIX lock the process holds on it (memstore.connection)."""
    given = Path(path)
    check_target(given)
    fd = os.open(given, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):  # swapped since check_target
            raise NotARegularFile(
                errno.EINVAL, f"is {file_kind(mode)}, not a regular file", str(given)
            )
        return handle.read(size)


def check_target(path: str | Path) -> None:
    """Raise what ``write_atomically(path, ...)`` would raise for a target that is not a
    regular file (``IsADirectoryError``, ``NotARegularFile``), writing nothing: a caller
    that writes several files checks them all first."""
    _refuse_folder_name(path)
    given = Path(path)
    _existing_mode(_final_target(given), given)


def _refuse_folder_name(path: str | Path) -> None:
    """Raise ``IsADirectoryError`` when the text of ``path`` names a folder (it ends with
    a slash, or with ``.`` or ``..``), existing or not: ``Path`` would drop the slash and
    write a file with the folder's name."""
    text = os.fspath(path)
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    ending = "a slash" if text.endswith(seps) else repr(os.path.basename(text))
    if ending == "a slash" or ending in ("'.'", "'..'"):
        raise IsADirectoryError(
            errno.EISDIR, f"names a folder (it ends with {ending}), not a file", text
        )


def _nearest_existing(folder: Path, given: Path) -> Path:
    """``folder`` or its nearest ancestor that exists: where the missing folders are created.
    A symbolic link to nothing on the way is refused (``NotADirectoryError`` naming it and
    ``given``): the folders cannot be created through it (``mkdir`` says "File exists")."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            raise NotADirectoryError(
                errno.ENOTDIR,
                f"{existing} is a symbolic link to nothing ({os.readlink(existing)}): cannot "
                f"create {folder} through it",
                str(given),
            )
        existing = existing.parent
    return existing


def check_writable(path: str | Path) -> None:
    """Raise, writing nothing that stays, what ``write_atomically(path, ...)`` would raise
    for a target it could not write: ``check_target``'s refusals, a folder that cannot be
    written or created (one ``OSError`` naming ``path``: ``cannot write in FOLDER: ...``),
    a missing folder under a symbolic link to nothing (``NotADirectoryError`` naming it).

    The only sure test of a folder is to write in it (as root, or on /proc, the permission
    bits say nothing): an empty temporary file is created there and removed at once (named
    as ``write_atomically``'s, so a leftover is removed by the next export), or, when the
    folder is still missing, a temporary folder in its nearest existing ancestor. A command
    that plays or computes before writing calls this first.
    """
    _refuse_folder_name(path)
    given = Path(path)
    target = _final_target(given)
    folder = target.parent if str(target.parent) else Path(".")
    existing = _nearest_existing(folder, given)
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{existing} is not a folder", str(given))
    _existing_mode(target, given)
    try:
        if existing == folder:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
            os.close(fd)
            os.unlink(tmp_name)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=existing))
    except OSError as exc:
        doing = f"cannot write in {folder}" if existing == folder else f"cannot create {folder}"
        raise OSError(exc.errno, f"{doing}: {exc.strerror or exc}", str(given)) from exc


def write_atomically(
    path: str | Path,
    text: str,
    *,
    encoding: str = "utf-8",
    warn: Warn | None = None,
    unchanged: FileState | None = None,
) -> Path:
    """Replace ``path`` with ``text`` (written as-is, ``\\n`` line endings kept), atomically.

    The folder is created if needed. A file that already exists keeps its permission bits.
    Returns the path written. See ``write_bytes_atomically`` for what ``path`` may be and
    ``unchanged``.
    """
    return write_bytes_atomically(path, text.encode(encoding), warn=warn, unchanged=unchanged)


def write_bytes_atomically(
    path: str | Path, data: bytes, *, warn: Warn | None = None, unchanged: FileState | None = None
) -> Path:
    """Replace ``path`` with ``data`` atomically (temporary file, fsync, rename, fsync folder).

    A crash leaves the old file or the new one, never a torn file, and no temporary file
    is left behind on an error. An existing file keeps its permission bits (new: 0644).
    A symbolic link is written through to its final target and stays a link; a target
    that is not a regular file (folder, device, FIFO, socket) raises ``OSError``
    (``IsADirectoryError``, ``NotARegularFile``) before anything is written; a target
    with other hard links is replaced all the same, and ``warn`` (if given) is called
    with one line saying that the other links keep the old content. Leftover temporary
    files of a killed export of the same file are removed.

    ``unchanged``: the state the file had when the caller checked it (``file_state``); if
    it changed since (someone saved it while the export ran), FileChanged is raised just
    before the rename and nothing is written.
    """
    _refuse_folder_name(path)
    given = Path(path)
    target = _final_target(given)
    existing = _existing_mode(target, given)
    if existing is not None and existing.st_nlink > 1 and warn is not None:
        warn(
            f"{given} has {existing.st_nlink - 1} other hard link(s); they keep the old "
            f"content (the export replaces the file atomically)"
        )
    mode = 0o644 if existing is None else existing.st_mode & 0o7777
    folder = target.parent if str(target.parent) else Path(".")
    _nearest_existing(folder, given)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(folder, target.name)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:  # name what the user asked for, not the temporary file
        raise OSError(
            exc.errno, f"cannot write in {folder}: {exc.strerror or exc}", str(given)
        ) from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if unchanged is not None and file_state(target) != unchanged:
            raise FileChanged(
                f"{given} changed while it was being exported (saved by someone?): nothing "
                f"was written; export again"
            )
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename == tmp_name:  # name the target instead
            raise OSError(
                exc.errno, f"cannot replace it: {exc.strerror or exc}", str(given)
            ) from exc
        raise
    _fsync_dir(folder)
    return given


def export_check(path: str | Path, text: str, *, encoding: str = "utf-8") -> bool:
    """True when the file at ``path`` holds exactly ``text`` (byte for byte).

    A missing file is simply different (False); a target that is not a regular file
    (a folder, a device, a FIFO, which a read could block on) raises ``OSError`` without
    being opened, as do other read errors (no permission).
    """
    given = Path(path)
    if _existing_mode(_final_target(given), given) is None:
        return False
    try:
        on_disk = given.read_bytes()
    except FileNotFoundError:
        return False
    return on_disk == text.encode(encoding)


# --- what an export may replace ------------------------------------------------------------

#: a UTF-8 byte order mark, as the first character of a decoded file (editors add one)
BOM = "\ufeff"


def foreign_file(text: str, is_kind: Callable[[str], bool]) -> bool:
    """The one rule of every export (Memories.md, Map.md, map_state.json): it replaces,
    without ``--force``, only an empty file (nothing but whitespace) or a file of the kind
    it writes. True when a file holding ``text`` is neither: ``is_kind`` is asked about the
    text with a leading byte order mark removed, so a file an editor saved with one is
    still recognised."""
    body = text.removeprefix(BOM)
    return bool(body.strip()) and not is_kind(body)


#: names that moved when this module was split (issue 15), found here as before
__getattr__ = forwarding(
    __name__, {"EditsAtRisk": "memstore.export_risk", "edits_at_risk": "memstore.export_risk"}
)
