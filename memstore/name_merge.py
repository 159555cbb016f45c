"""The 3-way merge of a location's name, for an import (pure, no SQL).

A location's name is merged as a memory's fields are (``memstore.merge``), against the
names it had since the file was exported (``memstore.versions.names_since``). Names are
compared as a reader reads them (``models.title_spelling``: Unicode NFC, runs of
whitespace as one space), so an editor normalising the file renames nothing:

* the same name as the database's: the database's spelling stays;
* renamed only in the database since the export (an agent visited it under another name),
  or the file's name is one the database had since the export (the file's rename was
  imported, and the database moved on): the database's name stays - an import never
  reverts it;
* renamed only in the file: the file's name (the reviewer's edit);
* renamed in both, differently: a conflict (``NameConflict``), resolved like a memory's:
  ``theirs`` takes the file's name; ``ours``, ``skip`` and no resolution keep the
  database's (and without a resolution nothing is applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstore.md_rows import LocationRow
from memstore.models import title_spelling

__all__ = ["NameConflict", "merge_name"]


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


def merge_name(
    file: LocationRow, database: LocationRow, since: Sequence[str], theirs: bool, line: int
) -> tuple[LocationRow, NameConflict | None]:
    """The file's location with its name merged against ``database`` (the location now)
    and ``since`` (its names from the export on, oldest first, the current one left out;
    empty: it had its current name then), and the conflict if both renamed it differently;
    ``theirs``: a conflict takes the file's name."""
    base = since[0] if since else database.name
    spelling = title_spelling(file.name)
    if spelling == title_spelling(database.name) or spelling in map(title_spelling, since):
        return file._replace(name=database.name), None  # nothing new in the file
    if database.name == base:
        return file, None  # renamed only in the file
    conflict = NameConflict(line, file.id, file.name, database.name, base)
    return (file if theirs else file._replace(name=database.name)), conflict
