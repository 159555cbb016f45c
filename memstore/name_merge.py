"""The 3-way merge of a location's name, for an import (pure, no SQL).

A location's name is merged as a memory's fields are (``memstore.merge``), against the
name it had when the file was exported (``memstore.versions.names_at``):

* renamed only in the database since the export (an agent visited it under another name):
  the database's name stays - an import never reverts it;
* renamed only in the file: the file's name (the reviewer's edit);
* renamed in both, differently: a conflict (``NameConflict``), resolved like a memory's:
  ``theirs`` takes the file's name; ``ours``, ``skip`` and no resolution keep the
  database's (and without a resolution nothing is applied).
"""

from __future__ import annotations

from dataclasses import dataclass

from memstore.md_rows import LocationRow

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
    file: LocationRow, database: LocationRow, base: str, theirs: bool, line: int
) -> tuple[LocationRow, NameConflict | None]:
    """The file's location with its name merged against ``database`` (the location now) and
    ``base`` (its name at the export), and the conflict if both renamed it differently;
    ``theirs``: a conflict takes the file's name."""
    if file.name == database.name or database.name == base:
        return file, None  # the same name, or renamed only in the file
    if file.name == base:
        return file._replace(name=database.name), None  # renamed only in the database
    conflict = NameConflict(line, file.id, file.name, database.name, base)
    return (file if theirs else file._replace(name=database.name)), conflict
