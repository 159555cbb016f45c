"""The Markdown path's reads of the store: persistent memories and locations as plain rows.

Part of the store layer: every function runs inside a transaction the caller opened with
``MemoryStore.transaction()`` (or opens a read one itself) and reads with statements built
once here, run through ``memstore.executor``. Rows come back as ``memstore.models``
``MemoryRow``/``LocationRow``, each checked against the models' rules with no pydantic
object built; a row that breaks one (a damaged database) raises the one-line
``DamagedDatabase`` of ``memstore.rows``.

``export_memories_md`` is ``memstore export``'s text: the same as rendering
``store.export_snapshot()``, from rows. ``refused_rows`` lists, for ``memstore check``,
every stored row the export refuses, by the same rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, select

from exporters.base_line import ExportBase
from exporters.render import render_memories_md
from memstore.errors import DamagedDatabase
from memstore.executor import run
from memstore.md_rows import (
    LocationRow,
    LocationRows,
    MemoryRow,
    location_row_problem,
    memory_row_problem,
)
from memstore.merge import StoredMemory
from memstore.models import MEMORY_RULES, Status
from memstore.queries import row_type
from memstore.rows import CATEGORY_OF, PERSISTENCE_OF, STATUS_OF, stored_row, to_memory_row
from memstore.schema import location_episodes, locations, memories
from memstore.versions import (
    LINK_COLUMNS,
    MEMORY_CONTENT,
    WITH_LINK,
    identity,
    rows_fingerprint,
    state_at,
)

__all__ = [
    "export_memories_md",
    "export_snapshot_rows",
    "location_rows",
    "refused_rows",
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
    conn: Connection,
    version: int,
    current: list[StoredMemory[MemoryRow]],
    since: dict[int, list[MemoryRow]] | None = None,
    changed_at: dict[int, int] | None = None,
) -> dict[int, StoredMemory[MemoryRow]]:
    """The persistent memories as rows as they were at change ``version``, by row id
    (``current``: ``stored_rows`` now; ``since``, ``changed_at``: filled as ``state_at``
    says)."""
    return state_at(conn, version, current, to_memory_row, since, changed_at)


def _stored_locations(conn: Connection) -> list[LocationRow]:
    """Every stored location, by id, with its episodes as stored (unchecked)."""
    episodes: dict[int, list[int]] = {}
    for location_id, episode in run(conn, LOCATION_EPISODES, {}):
        episodes.setdefault(location_id, []).append(episode)
    return [
        LocationRow(location_id, name, visits, tuple(episodes.get(location_id, ())))
        for location_id, name, visits in run(conn, LOCATION_ROWS, {}).fetchall()
    ]


def location_rows(conn: Connection) -> list[LocationRow]:
    """Every stored location, by id, with its episodes (sorted). A row the model refuses
    raises DamagedDatabase (one line that points at ``memstore check``)."""
    found = []
    for row in _stored_locations(conn):
        problem = location_row_problem(row)
        if problem is not None:
            raise DamagedDatabase(
                f"a stored location cannot be read (location {row.id}: {problem}); "
                f"run `memstore check` to list what is damaged"
            )
        if len(row.episodes) > 1:
            row = row._replace(episodes=tuple(sorted(row.episodes)))
        found.append(row)
    return found


#: The stored columns of the MemoryRow fields not stored under their own name.
_STORED_AS = {
    "turns": "turns (turn_start, turn_end)",
    "superseded_by": "superseded_by (the successor's title)",
    "superseded_at_turn": "superseded_at_turn (memory_links.turn)",
    "superseded_at_episode": "superseded_at_episode (memory_links.episode)",
    "invalidation_reason": "invalidation_reason (memory_links.reason)",
}


def _shown(title: object) -> str:
    text = str(title)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def refused_rows(conn: Connection) -> list[str]:
    """One line for each stored row that ``export_memories_md`` refuses (every persistent
    memory, then every location, by id), saying which row and the first rule it breaks.

    The export's own test, not a copy of it: a memory is refused exactly when
    ``memory_row_problem`` (the models' ``MEMORY_RULES``) finds a problem in its row as
    ``memstore.rows.stored_row`` reads it, a location when ``location_row_problem`` does.
    """
    lines = []
    named = row_type(_STORED_NAMES)
    for stored in run(conn, STORED_ROWS, {}):
        row = named(*stored)
        problem = memory_row_problem(stored_row(row))
        if problem is not None:
            field, _, detail = problem.partition(": ")
            if field in MEMORY_RULES:
                problem = f"{_STORED_AS.get(field, field)}: {detail}"
            lines.append(
                f"memory {row.id} at location {row.location_id} {_shown(row.title)}: "
                f"{problem} (`memstore export` cannot read it)"
            )
    for location in _stored_locations(conn):
        problem = location_row_problem(location)
        if problem is not None:
            lines.append(
                f"location {location.id} {_shown(location.name)}: {problem} "
                f"(`memstore export` cannot read it)"
            )
    return lines


def export_snapshot_rows(store: Any) -> tuple[list[LocationRows], ExportBase]:
    """What ``store.export_snapshot()`` returns, as rows: every location with its persistent
    memories (all statuses, in stored order) and the database's identity and change
    counter, read in one transaction."""
    with store.transaction(write=False) as conn:
        base = identity(conn)
        stored = stored_rows(conn)
        places = location_rows(conn)
    base = replace(base, rows=rows_fingerprint(stored))
    grouped: dict[int, list[MemoryRow]] = {}
    for entry in stored:
        grouped.setdefault(entry.location_id, []).append(entry.memory)
    return [LocationRows(place, tuple(grouped.get(place.id, ()))) for place in places], base


def export_memories_md(store: Any) -> str:
    """The text of ``memstore export`` for ``store``: every persistent memory rendered as
    Memories.md, with the export's base line; byte for byte what
    ``render_memories_md(*store.export_snapshot())`` gives."""
    return render_memories_md(*export_snapshot_rows(store))
