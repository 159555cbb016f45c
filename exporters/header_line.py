"""A memory header the renderer's exact layout does not match (``FAST_HEADER``), read
field by field: the memory it starts, or why it is refused (one line) and the title it
still shows (so that the database's memory it stands for is not counted as dropped)."""

from __future__ import annotations

import re

from exporters.escaping import unescape
from exporters.memory_block import CATEGORIES, PERSISTENCES, STATUSES, clip
from exporters.pending import PendingMemory
from memstore.models import Persistence, Status

__all__ = ["HEADER", "read_header"]

#: a memory header's shape: ``**[MARKER] Title** *(metadata)*``
HEADER = re.compile(r"\*\*\[([^\]]*)\] ?(.*)\*\* \*\(([^)]*)\)\*[ \t]*")
#: the title a malformed header still shows (``**[NOTE] Title** (Ep1, T6)``)
_LOOSE_TITLE = re.compile(r"\*\*\[[^\]]*\][ \t]*(.*?)[ \t]*(?:\*\*|\*?\(|$)")
_METADATA = re.compile(
    r"[ \t]*(?:Ep(?:ep_)?([0-9]{1,100})[ \t]*,[ \t]*)?"
    r"T([0-9]{1,100}(?:-[0-9]{1,100})?)[ \t]*(?:,[ \t]*([+-]?[0-9]{1,100})[ \t]*)?"
)
_MARKER_SPLIT = re.compile(r"[ \t]*-[ \t]*")


def read_header(number: int, line: str) -> PendingMemory | tuple[str, str | None]:
    """The memory whose header is ``line`` (line ``number`` of the file), or why it is
    refused and the title it shows (None: none can be read)."""
    match = HEADER.fullmatch(line)
    if match is None:
        loose = _LOOSE_TITLE.match(line)
        return (
            "malformed memory header (expected '**[CATEGORY - PERSISTENCE] Title** "
            "*(EpN, Tn, +s)*'): memory skipped",
            (unescape(loose.group(1)) or None) if loose is not None else None,
        )
    marker, raw_title, raw_metadata = match.groups()
    title = unescape(raw_title)
    parts = _MARKER_SPLIT.split(marker.strip())
    category = CATEGORIES.get(parts[0].upper())
    if category is None:
        return (
            f"unknown category {clip(parts[0])!r} (expected one of "
            f"{', '.join(CATEGORIES)}): memory {clip(title)!r} skipped",
            title,
        )
    persistence: Persistence | None = None
    status: Status | None = None
    for part in parts[1:]:
        word = part.upper()
        if word in PERSISTENCES and persistence is None:
            persistence = PERSISTENCES[word]
        elif word in STATUSES and status is None:
            status = STATUSES[word]
        else:
            return (
                f"unknown or repeated marker {clip(part)!r} in [{clip(marker)}] "
                f"(expected CORE or PERMANENT, then TENTATIVE or SUPERSEDED): "
                f"memory {clip(title)!r} skipped",
                title,
            )
    if persistence is Persistence.EPHEMERAL:
        return (
            f"EPHEMERAL memory {clip(title)!r} skipped: ephemeral memories are never "
            f"written to Memories.md",
            title,
        )
    metadata = _METADATA.fullmatch(raw_metadata)
    if metadata is None:
        return (
            f"malformed metadata {clip(raw_metadata)!r} "
            f"(expected 'EpN, Tn' or 'EpN, Tn-m, +s'): memory {clip(title)!r} skipped",
            title,
        )
    episode, turns, score = metadata.groups()
    return PendingMemory(
        number,
        category,
        persistence or Persistence.PERMANENT,
        status or Status.ACTIVE,
        title,
        int(episode) if episode is not None else 1,
        turns,
        int(score) if score is not None else None,
    )
