"""What the line reader (``exporters.line_parser``) holds while it reads: the memory and
the location whose headers were read and whose lines are still coming."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memstore.md_rows import MemoryRow
from memstore.models import Category, Persistence, Status

__all__ = ["PendingLocation", "PendingMemory"]


class PendingMemory:
    """A memory whose header was read; its text lines follow until the memory ends."""

    __slots__ = (
        "line",
        "category",
        "persistence",
        "status",
        "title",
        "episode",
        "turns",
        "score_change",
        "reference",
        "reference_line",
        "text",
    )

    def __init__(
        self,
        line: int,
        category: Category,
        persistence: Persistence,
        status: Status,
        title: str,
        episode: int,
        turns: str,
        score_change: int | None,
    ) -> None:
        self.line = line
        self.category = category
        self.persistence = persistence
        self.status = status
        self.title = title
        self.episode = episode
        self.turns = turns
        self.score_change = score_change
        self.reference: re.Match[str] | None = None
        self.reference_line = 0
        self.text: list[str] = []


@dataclass(slots=True)
class PendingLocation:
    """A location whose header was read; its visits line and memories follow."""

    line: int
    id: int
    name: str
    visit_count: int = 0
    episodes: tuple[int, ...] = ()
    visits_seen: bool = False
    memories: list[MemoryRow] = field(default_factory=list)
    #: read in one match (fast_blocks): its values are ones LocationInfo accepts
    checked: bool = False
