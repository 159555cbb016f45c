"""The Markdown path's reads of the store: persistent memories and locations as plain rows.

Part of the store layer: every function runs inside a transaction the caller opened with
``MemoryStore.transaction()`` (or opens a read one itself) and reads with statements built
once here, run through ``memstore.executor``. Rows come back as ``memstore.models``
``MemoryRow``/``LocationRow``, each checked against the models' rules with no pydantic
object built; a row that breaks one (a damaged database) raises the one-line
``DamagedDatabase`` of ``memstore.rows``.

``export_memories_md`` is ``memstore export``'s text: the same as rendering
``store.export_snapshot()``, from rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, select

from exporters.base_line import ExportBase
from exporters.render import render_memories_md
from memstore.executor import run
from memstore.md_rows import (
    LocationRow,
    LocationRows,
    MemoryRow,
    location_row_problem,
    memory_row_problem,
)
from memstore.merge import StoredMemory
from memstore.models import LocationInfo, Status
from memstore.queries import row_type
from memstore.rows import CATEGORY_OF, PERSISTENCE_OF, STATUS_OF, to_memory_row
from memstore.schema import location_episodes, locations, memories
from memstore.versions import LINK_COLUMNS, MEMORY_CONTENT, WITH_LINK, identity, state_at

__all__ = [
    "export_memories_md",
    "export_snapshot_rows",
    "location_rows",
    "stored_rows",
    "stored_rows_at",
]

#: Every persistent memory with its link, in stored order (the columns ``to_memory`` reads).
STORED_ROWS = (
    select(
        memories.c.id,
        memories.c.location_id,
        memories.c.created_version,
        *MEMORY_CONTENT,
        *LINK_COLUMNS,
    )
    .select_from(WITH_LINK)
    .order_by(memories.c.id)
)
#: their names, in that order
_STORED_NAMES = tuple(STORED_ROWS.selected_columns.keys())
LOCATION_ROWS = select(locations.c.id, locations.c.name, locations.c.visit_count).order_by(
    locations.c.id
)
LOCATION_EPISODES = select(location_episodes.c.location_id, location_episodes.c.episode)

_SUPERSEDED = Status.SUPERSEDED


def _memory_rows(values: Iterator[tuple[Any, ...]]) -> Iterator[StoredMemory[MemoryRow]]:
    categories, persistences, statuses = CATEGORY_OF, PERSISTENCE_OF, STATUS_OF
    for stored in values:
        (
            row_id,
            location_id,
            created_version,
            category,
            title,
            text,
            episode,
            start,
            end,
            score,
            persistence,
            status,
            successor,
            link_turn,
            link_episode,
            reason,
        ) = stored
        status = statuses.get(status, status)
        if type(start) is int and (end is None or type(end) is int):
            turns = str(start) if end is None else f"{start}-{end}"
        else:
            turns = ""  # refused below: memstore.rows says what is wrong
        if status is _SUPERSEDED:
            row = MemoryRow(
                categories.get(category, category),
                title,
                text,
                episode,
                turns,
                score,
                persistences.get(persistence, persistence),
                status,
                successor if reason is None else None,
                link_turn,
                link_episode,
                reason,
            )
        else:
            row = MemoryRow(
                categories.get(category, category),
                title,
                text,
                episode,
                turns,
                score,
                persistences.get(persistence, persistence),
                status,
            )
        if memory_row_problem(row) is not None:
            row = to_memory_row(row_type(_STORED_NAMES)(*stored))  # DamagedDatabase
        yield StoredMemory(row_id, location_id, created_version, row)


def stored_rows(conn: Connection) -> list[StoredMemory[MemoryRow]]:
    """Every persistent memory (all statuses) as a row with its id, location and creating
    version, in stored order (inside the caller's transaction)."""
    return list(_memory_rows(run(conn, STORED_ROWS, {})))


def stored_rows_at(
    conn: Connection, version: int, current: list[StoredMemory[MemoryRow]]
) -> dict[int, StoredMemory[MemoryRow]]:
    """The persistent memories as rows as they were at change ``version``, by row id
    (``current``: ``stored_rows`` now)."""
    return state_at(conn, version, current, to_memory_row)


def location_rows(conn: Connection) -> list[LocationRow]:
    """Every stored location, by id, with its episodes (sorted)."""
    episodes: dict[int, list[int]] = {}
    for location_id, episode in run(conn, LOCATION_EPISODES, {}):
        episodes.setdefault(location_id, []).append(episode)
    found = []
    for location_id, name, visits in run(conn, LOCATION_ROWS, {}).fetchall():
        row = LocationRow(location_id, name, visits, tuple(sorted(episodes.get(location_id, ()))))
        if location_row_problem(row) is not None:
            row = LocationRow(*LocationInfo(**row._asdict()).model_dump().values())
        found.append(row)
    return found


def export_snapshot_rows(store: Any) -> tuple[list[LocationRows], ExportBase]:
    """What ``store.export_snapshot()`` returns, as rows: every location with its persistent
    memories (all statuses, in stored order) and the database's identity and change
    counter, read in one transaction."""
    with store.transaction(write=False) as conn:
        base = identity(conn)
        stored = stored_rows(conn)
        places = location_rows(conn)
    grouped: dict[int, list[MemoryRow]] = {}
    for entry in stored:
        grouped.setdefault(entry.location_id, []).append(entry.memory)
    return [LocationRows(place, tuple(grouped.get(place.id, ()))) for place in places], base


def export_memories_md(store: Any) -> str:
    """The text of ``memstore export`` for ``store``: every persistent memory rendered as
    Memories.md, with the export's base line; byte for byte what
    ``render_memories_md(*store.export_snapshot())`` gives."""
    return render_memories_md(*export_snapshot_rows(store))
