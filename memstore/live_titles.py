"""Finding the live memories of a location by exact title, in both tiers at once.

Part of the store layer: run inside the caller's write transaction (a store's), so what is
found is still live when the caller acts on it. One statement (``queries.LIVE_TITLED``)
serves the de-duplication of a new title and the search for a memory to supersede or
invalidate, and a supersession's both at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Connection

from memstore.executor import run
from memstore.queries import LIVE_TITLED, TIER_NAMES

__all__ = ["LiveMemory", "find_live", "live_title_exists", "live_titled"]


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
    return [
        LiveMemory(TIER_NAMES[tier], memory_id, persistence, episode, found)
        for tier, memory_id, persistence, episode, found in sorted(run(conn, LIVE_TITLED, params))
    ]


def find_live(conn: Connection, location_id: int, title: str) -> LiveMemory | None:
    """The live memory with exactly this title here: the persistent tier's first."""
    found = live_titled(conn, location_id, title)
    return found[0] if found else None


def live_title_exists(
    conn: Connection, location_id: int, title: str, excluded: Iterable[tuple[str, int]] = ()
) -> bool:
    """Is a live memory titled exactly ``title`` here, in either tier, other than the
    ``excluded`` (tier, id) pairs?"""
    skip = set(excluded)
    return any((live.tier, live.id) not in skip for live in live_titled(conn, location_id, title))
