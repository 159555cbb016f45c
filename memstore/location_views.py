"""The per-location cache of what the agent sees, kept up to date row by row.

Part of the store layer. A view holds, for one location, the first ``VIEW_LIMIT`` live
memories in priority order (``memstore.retrieval.ViewRow``), how many live memories there
are in all, and the formatted text. A write through the store adds and removes rows (no
query, nothing re-formatted that did not change but the text); a view that lost a row
while it had hidden ones, or that another connection may have changed, is dropped and read
again (``MemoryStore.get_location_memory``).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable
from dataclasses import dataclass, field

from memstore.retrieval import EXITS_RESERVE, VIEW_LIMIT, ViewRow, format_view

__all__ = ["LocationView", "LocationViews"]


@dataclass(slots=True)
class LocationView:
    rows: list[ViewRow]  # priority order, at most VIEW_LIMIT
    total: int
    text: str | None = None


@dataclass
class LocationViews:
    """Views by location id, for one token budget (``cut_reserve``: the tokens a cut memory
    leaves for the map's exits line, 0 when the store's config shows none)."""

    token_budget: int
    cut_reserve: int = EXITS_RESERVE
    views: dict[int, LocationView] = field(default_factory=dict)

    def text(self, location_id: int) -> str | None:
        """The cached text, or None when the location must be read again."""
        view = self.views.get(location_id)
        if view is None:
            return None
        if view.text is None:
            view.text = format_view(view.rows, view.total, self.token_budget, self.cut_reserve)
        return view.text

    def load(self, location_id: int, rows: list[ViewRow], total: int) -> str:
        """Keep what was read from the database (``rows`` in priority order) and format it."""
        view = LocationView(rows[:VIEW_LIMIT], total)
        self.views[location_id] = view
        return self.text(location_id) or ""

    def holds(self, location_id: int) -> bool:
        """Is a view of this location kept (so that a write there must update it)?"""
        return location_id in self.views

    def changed(
        self, location_id: int, removed: Iterable[tuple[int, int]], added: Iterable[ViewRow]
    ) -> None:
        """Apply a committed write: rows removed (by (tier, id)) and rows added."""
        view = self.views.get(location_id)
        if view is None:
            return
        gone = set(removed)
        if gone:
            kept = [row for row in view.rows if row.order not in gone]
            hidden = view.total - len(view.rows)
            if hidden and len(kept) < len(view.rows):
                # a shown row went and a hidden one should take its place: read again
                del self.views[location_id]
                return
            view.total -= len(gone)
            view.rows = kept
        for row in added:
            view.total += 1
            insort(view.rows, row, key=lambda r: r.priority)
            if len(view.rows) > VIEW_LIMIT:
                view.rows.pop()
        view.text = None

    def forget(self, location_id: int | None = None) -> None:
        """Drop one location's view, or every view (None)."""
        if location_id is None:
            self.views.clear()
        else:
            self.views.pop(location_id, None)
