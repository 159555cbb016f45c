"""Whether a SQLite store's database file is still the one it opened.

A file deleted (or replaced by another) under an open connection goes on taking its writes
in WAL mode: SQLite's own check (SQLITE_READONLY_DBMOVED) runs only with a rollback
journal. Every write committed there would be acknowledged and then lost with the process,
so a store's write transactions ask, once a second at most (CHECK_S), whether the path
still names the file it opened and its ``-wal`` the log it writes to; once either is gone,
every write is refused.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memstore.errors import DatabaseUnavailable

__all__ = ["FileId", "OpenedFile", "file_id"]

#: a file's identity: (device, inode)
FileId = tuple[int, int]
#: the files are looked at once a second at most: a ``stat`` of a file SQLite has just
#: written costs the next write more than the call itself (measured here: the database
#: file's about 10 us, the -wal's about 45 us, against a durable add of about 200 us); so
#: the writes of the second after a file was deleted may still be lost with the process,
#: as is what the files held when they were deleted
CHECK_S = 1.0


def file_id(path: Path) -> FileId | None:
    """The identity of the file at ``path`` (None: there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


class OpenedFile:
    """The database file a store opened, and its ``-wal`` (which SQLite keeps while any
    connection has the database open: one deleted under it takes the commits just as
    well, and loses them with the process)."""

    __slots__ = ("checked", "database", "display", "gone", "path", "wal", "wal_path")

    def __init__(self, path: Path, display: str) -> None:
        """``display``: the database as its refusals name it."""
        self.path, self.wal_path, self.display = path, Path(f"{path}-wal"), display
        self.database, self.wal = file_id(path), file_id(self.wal_path)
        self.checked = time.monotonic()
        self.gone: str | None = None  # (once found, every write is refused at once)

    def check(self) -> None:
        """DatabaseUnavailable (one line) when the path no longer names the file opened,
        or its ``-wal`` is another (or none) than the one seen first; looked at once every
        CHECK_S at most."""
        if self.gone is None:
            moment = time.monotonic()
            if moment < self.checked + CHECK_S:
                return
            self.checked = moment
            self.gone = self._gone(self.display)
        if self.gone is not None:
            raise DatabaseUnavailable(self.gone)

    def _gone(self, display: str) -> str | None:
        now = file_id(self.path)
        if now != self.database:
            what = (
                "is no longer at that path (deleted, or its folder moved)"
                if now is None
                else "was replaced by another file"
            )
            return (
                f"{display} {what} while this store had it open: nothing was written (it "
                f"would have gone to the file that is gone); open a store on the database "
                f"where it is now (opening this path again makes a new, empty one)"
            )
        wal = file_id(self.wal_path)
        if self.wal is None:
            self.wal = wal  # (made by the first write)
        elif wal != self.wal:
            return (
                f"{self.wal_path.name}, the write-ahead log of {display}, was deleted or "
                f"replaced while this store had it open: nothing was written (what it held "
                f"that was not yet copied into the database goes with this process); close "
                f"every process that has the database open, then open it again"
            )
        return None
