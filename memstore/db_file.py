"""Whether a SQLite store's database file is still the one it opened.

A file deleted (or replaced by another) under an open connection goes on taking its writes
in WAL mode: SQLite's own check (SQLITE_READONLY_DBMOVED) runs only with a rollback
journal. Every write committed there would be acknowledged and then lost with the process,
so each write transaction of a store on a file first asks whether the path still names the
file it opened (one ``stat``, a few microseconds beside the commit's fsync).
"""

from __future__ import annotations

import os
from pathlib import Path

from memstore.errors import DatabaseUnavailable

__all__ = ["FileId", "check_same_file", "file_id"]

#: a file's identity: (device, inode)
FileId = tuple[int, int]


def file_id(path: Path) -> FileId | None:
    """The identity of the file at ``path`` (None: there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def check_same_file(path: Path, opened: FileId, display: str) -> None:
    """DatabaseUnavailable (one line) when ``path`` no longer names the file ``opened``."""
    now = file_id(path)
    if now != opened:
        what = "deleted" if now is None else "replaced by another file"
        raise DatabaseUnavailable(
            f"{display} was {what} while this store had it open: nothing was written (it "
            f"would have gone to the file that is gone); open the store again"
        )
