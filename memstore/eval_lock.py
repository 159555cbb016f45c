"""The lock an evaluation holds on its ``--db`` folder while it plays there.

Two evaluations into one folder would share databases and both report wrong figures: the
second is refused (EvalFolderInUse). The lock is ``flock`` on a file of its own in the
folder, so a run that dies releases it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LOCK_NAME", "EvalFolderInUse", "folder_lock"]

#: the file an evaluation holds locked in its folder while it runs (``folder_lock``)
LOCK_NAME = "memstore-eval.lock"


#: how often ``folder_lock`` tries again when the file it locked was removed meanwhile
_LOCK_ATTEMPTS = 10


class EvalFolderInUse(FileExistsError):
    """Another evaluation is playing into the same folder: its databases are not this
    one's to share (both reports would be wrong)."""


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s LOCK_NAME file locked (``flock``) while an evaluation plays there;
    another evaluation into the same folder is refused (EvalFolderInUse) instead of
    sharing its databases. The operating system releases the lock of a process that dies,
    so a killed run's file blocks nothing; the file is removed when the run ends."""
    import fcntl

    lock = folder / LOCK_NAME
    for _attempt in range(_LOCK_ATTEMPTS):
        fd = _open_lock(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            raise EvalFolderInUse(
                f"{folder} is in use by another evaluation (process {holder or 'unknown'}, "
                f"which holds {lock}): wait for it to end, or give another --db folder"
            ) from None
        except OSError as exc:  # a file system without locks (ENOLCK, EOPNOTSUPP)
            os.close(fd)
            raise OSError(
                exc.errno,
                f"cannot lock {lock} ({exc.strerror}): give a --db folder on a "
                "file system that has locks",
            ) from exc
        except BaseException:
            os.close(fd)
            raise
        if _still_there(fd, lock):  # not removed by a run that ended meanwhile
            break
        os.close(fd)
    else:
        raise EvalFolderInUse(f"{lock} keeps being replaced: is another evaluation starting?")
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()  # before the lock is released: the next run makes its own
        os.close(fd)


def _still_there(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd``."""
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _open_lock(lock: Path) -> int:
    """``lock`` opened for reading and writing, made if missing: never through a symbolic
    link, and never a file with another name too (a hard link), since the run writes its
    process id there and removes it at the end. Either is EvalFolderInUse, left as it is."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise EvalFolderInUse(
            f"{lock} is a symbolic link: an evaluation writes its lock there and removes "
            f"it; remove the link (its target is left alone), or give another --db folder"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        raise EvalFolderInUse(
            f"{lock} is not a lock file of its own (a hard link to another file, or not a "
            f"file): remove that name (the other file is left alone), or give another "
            f"--db folder"
        )
    return fd
