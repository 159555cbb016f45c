"""Writing Memories.md atomically, and checking a file against what the database would write.

``write_atomically`` writes to a temporary file in the same folder, flushes and fsyncs it,
renames it over the target with ``os.replace`` (atomic on POSIX and Windows) and fsyncs the
folder, so a crash leaves either the old file or the new one, never a torn file, and no
temporary file is left behind on an error.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["export_check", "write_atomically", "write_bytes_atomically"]


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


def write_atomically(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` (written as-is, ``\\n`` line endings kept), atomically.

    The folder is created if needed. A file that already exists keeps its permission bits.
    Returns the path written.
    """
    return write_bytes_atomically(path, text.encode(encoding))


def write_bytes_atomically(path: str | Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically (temporary file, fsync, rename, fsync folder).

    A crash leaves the old file or the new one, never a torn file, and no temporary file
    is left behind on an error. An existing file keeps its permission bits (new: 0644).
    """
    target = Path(path)
    if target.is_dir():  # else the rename fails, naming the temporary file
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(target))
    folder = target.parent if str(target.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    return target


def export_check(path: str | Path, text: str, *, encoding: str = "utf-8") -> bool:
    """True when the file at ``path`` holds exactly ``text`` (byte for byte).

    A missing file is simply different (False); other read errors (a folder, no
    permission) raise OSError.
    """
    try:
        on_disk = Path(path).read_bytes()
    except FileNotFoundError:
        return False
    return on_disk == text.encode(encoding)
