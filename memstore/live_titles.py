"""Finding the live memories of a location by exact title, in both tiers at once, or by
the row a prompt showed.

Part of the store layer: run inside the caller's write transaction (a store's), so what is
found is still live when the caller acts on it. One statement (``queries.LIVE_TITLED``)
serves the de-duplication of a new title and the search for a memory to supersede or
invalidate, and a supersession's both at once.

A title resolved from a prompt's handle (``memstore.shown_memories.ShownTitle``) names the
row the prompt showed: :func:`find_shown` finds exactly it, or nothing when it is no longer
live there (stale), never another memory of the same title.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, select

from memstore.executor import run
from memstore.models import Memory, Persistence
from memstore.queries import LIVE_TITLED, SUPERSEDED_LITERAL, TIER_NAMES, TIERS
from memstore.shown_memories import ShownTitle

__all__ = [
    "LiveMemory",
    "find_live",
    "find_named",
    "find_shown",
    "live_title_exists",
    "live_titled",
    "to_supersede",
]


class LiveMemory(NamedTuple):
    """A non-superseded memory as LIVE_TITLED reads it."""

    tier: str
    id: int
    persistence: str
    episode: int
    title: str


def live_titled(
    conn: Connection, location_id: int, title: str, other_title: str | None = None
) -> list[LiveMemory]:
    """The live memories here titled exactly ``title`` (or ``other_title``), in both
    tiers, the persistent tier first: one statement."""
    params = {
        "location_id": location_id,
        "title": title,
        "other_title": None if other_title == title else other_title,
    }
    rows = run(conn, LIVE_TITLED, params).fetchall()
    if len(rows) > 1:
        rows.sort()
    return [
        LiveMemory(TIER_NAMES[tier], memory_id, persistence, episode, found)
        for tier, memory_id, persistence, episode, found in rows
    ]


def find_live(conn: Connection, location_id: int, title: str) -> LiveMemory | None:
    """The live memory with exactly this title here: the persistent tier's first."""
    found = live_titled(conn, location_id, title)
    return found[0] if found else None


#: one live memory of a tier by its id and location: (persistence, episode, title)
LIVE_ROW = {
    tier: select(table.c.persistence, table.c.episode, table.c.title).where(
        table.c.id == bindparam("memory_id"),
        table.c.location_id == bindparam("location_id"),
        table.c.status != SUPERSEDED_LITERAL,
    )
    for tier, table in TIERS
}


def find_shown(conn: Connection, location_id: int, title: ShownTitle) -> LiveMemory | None:
    """The row ``title`` names, if it is still live here under that exact title; else None
    (another agent retired it, or the episode that held it ended)."""
    tier, memory_id = title.row
    params = {"memory_id": memory_id, "location_id": location_id}
    for persistence, episode, found in run(conn, LIVE_ROW[tier], params):
        if found == title:
            return LiveMemory(tier, memory_id, persistence, episode, found)
    return None


def find_named(
    conn: Connection,
    location_id: int,
    title: str,
    stale: list[str],
    retired: Iterable[tuple[str, int]] = (),
) -> LiveMemory | None:
    """The live memory ``title`` names here: a ShownTitle's own row (None, and counted in
    ``stale``, when it is no longer live here and is not one of the ``retired`` rows of
    the caller's write), else the live memory of exactly that title."""
    if not isinstance(title, ShownTitle):
        return find_live(conn, location_id, title)
    found = find_shown(conn, location_id, title)
    if found is None and title.row not in retired:
        stale.append(str(title))
    return found


def to_supersede(
    conn: Connection,
    location_id: int,
    titles: Iterable[str],
    new_memory: Memory,
    stale: list[str],
) -> list[tuple[str, int, str]]:
    """(tier, id, title) of each live memory ``titles`` name (``find_named``) that
    ``new_memory`` may supersede, each once."""
    found: list[tuple[str, int, str]] = []
    for title in titles:
        old = find_named(conn, location_id, title, stale)
        if old is None or any((tier, i) == old[:2] for tier, i, _title in found):
            continue
        if Persistence(old.persistence).may_be_superseded_by(new_memory.persistence):
            found.append((old.tier, old.id, str(title)))
    return found


def live_title_exists(
    conn: Connection, location_id: int, title: str, excluded: Iterable[tuple[str, int]] = ()
) -> bool:
    """Is a live memory titled exactly ``title`` here, in either tier, other than the
    ``excluded`` (tier, id) pairs?"""
    skip = set(excluded)
    return any((live.tier, live.id) not in skip for live in live_titled(conn, location_id, title))
