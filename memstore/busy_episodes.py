"""Numbering the episodes a busy database could not number when they started (played
under a provisional number, ``BusyBuffer.provisional_episode``: memstore.busy_buffer), and
renumbering what waits of them, for ``BusyBuffer``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from memstore.store import MemoryStore
from memstore.turn_log import PendingWrites

__all__ = ["EpisodeNumbering"]


class EpisodeNumbering:
    """The episodes played under a provisional number, numbered once the database can
    (``BusyBuffer`` inherits it; its state is the buffer's)."""

    store: MemoryStore
    syntheses: list[dict[str, Any]]
    unnumbered: list[int]
    numbered_as: dict[int, int]
    _seen: dict[int, tuple[dict[str, Any], tuple[int, int]]]

    def stored_episode(self, episode: int) -> int:
        """The number ``episode`` is stored under: a provisional one's real number once
        the database numbered it, any other as it is."""
        return self.numbered_as.get(episode, episode)

    def number_episodes(
        self,
        pending: PendingWrites,
        numbered: Callable[[int, int], None],
        synthesis: dict[str, Any] | None = None,
    ) -> None:
        """Number the unnumbered episodes, oldest first, renumber their rows (``synthesis``,
        one about to be written, too) and tell ``numbered(provisional, episode)``.
        StoreBusy passes through (what was numbered stays numbered)."""
        more = [] if synthesis is None else [synthesis]
        while self.unnumbered:
            provisional = self.unnumbered[0]
            episode = self.store.allocate_episode()
            del self.unnumbered[0]
            self.numbered_as[provisional] = episode
            self._renumber(provisional, episode, pending, more)
            numbered(provisional, episode)

    def _renumber(
        self, provisional: int, episode: int, pending: PendingWrites, more: list[dict[str, Any]]
    ) -> None:
        for key, (seen, (played, turn)) in list(self._seen.items()):
            if played == provisional:
                self._seen[key] = (seen, (episode, turn))
        for synthesis in [*self.syntheses, *more]:
            if synthesis["episode"] == provisional:
                synthesis["episode"] = episode
                memory = synthesis["new_memory"]
                if memory is not None:
                    synthesis["new_memory"] = memory.model_copy(update={"episode": episode})
        pending.visits[:] = [
            (where, name, episode if played == provisional else played)
            for where, name, played in pending.visits
        ]
        pending.decisions[:] = [
            replace(row, episode=episode) if row.episode == provisional else row
            for row in pending.decisions
        ]
        pending.turns[:] = [
            replace(row, episode=episode) if row.episode == provisional else row
            for row in pending.turns
        ]
        pending.map_events[:] = [
            event._replace(episode=episode) if event.episode == provisional else event
            for event in pending.map_events
        ]
