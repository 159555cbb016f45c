"""The 3-way merge of a location's name, for an import (pure, no SQL).

A location's name is merged as a memory's fields are (``memstore.merge``), against the
names it had since the file was exported (``memstore.versions.names_since``: each with
whether an import replaced it). Names are compared as written, but for Unicode
normalisation (NFC: an editor may save the file so; whitespace is the reviewer's edit):

* the same name as the database's: the database's spelling stays;
* renamed only in the database since the export (an agent visited it under another name),
  or the file's name is one an import set since the export (this file, imported before,
  and the database moved on): the database's name stays - an import never reverts it;
* renamed only in the file (the database has the name it had at the export, whatever
  names agents used in between): the file's name (the reviewer's edit);
* renamed in both, differently: a conflict (``NameConflict``), resolved like a memory's:
  ``theirs`` takes the file's name; ``ours``, ``skip`` and no resolution keep the
  database's (and without a resolution nothing is applied).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memstore.md_rows import LocationRow

__all__ = ["NameConflict", "NameHistory", "merge_name"]


@dataclass(frozen=True, slots=True)
class NameConflict:
    """A location both the file and the database renamed, differently, since the export."""

    line: int
    location_id: int
    file: str
    database: str
    base: str

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return (
            f"{where}location {self.location_id} renamed from {self.base!r} both in the file "
            f"({self.file!r}) and in the database ({self.database!r}) since the export"
        )


#: a location's names since an export, oldest first, each with whether an import replaced
#: it (``memstore.versions.NameHistory``, the same shape)
NameHistory = Sequence[tuple[str, bool]]


def merge_name(
    file: LocationRow, database: LocationRow, since: NameHistory, theirs: bool, line: int
) -> tuple[LocationRow, NameConflict | None]:
    """The file's location with its name merged against ``database`` (the location now)
    and ``since`` (its names from the export on, oldest first, the current one left out;
    empty: it had its current name then), and the conflict if both renamed it differently;
    ``theirs``: a conflict takes the file's name."""
    written = _nfc(file.name)
    if written == _nfc(database.name):
        return file._replace(name=database.name), None  # the same name
    base = since[0][0] if since else database.name
    later = [name for name, _imported in since[1:]] + [database.name]
    imported = {later[n] for n, (_name, by_import) in enumerate(since) if by_import}
    if written == _nfc(base) or written in map(_nfc, imported):
        return file._replace(name=database.name), None  # nothing new in the file
    if database.name == base:
        return file, None  # renamed only in the file
    conflict = NameConflict(line, file.id, file.name, database.name, base)
    return (file if theirs else file._replace(name=database.name)), conflict


def _nfc(name: str) -> str:
    return name if name.isascii() else unicodedata.normalize("NFC", name)
