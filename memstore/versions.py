"""The change counter, the rows' earlier states, and the database as it was at a version.

Part of the store layer. Every write that changes a persistent memory takes one new
version from ``store_meta.change_counter`` (:func:`next_version`), stamps the rows it
creates or changes with it, and first copies the state each changed or deleted row had
into ``memory_history`` (:func:`record_history`). So :func:`state_at` can rebuild what
the persistent memories were at any earlier version: an exported Memories.md records the
version it was exported at, and the import merges three ways (base, file, database).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, null, select, update

from exporters.base_line import ExportBase
from memstore.dialect import greatest
from memstore.errors import DamagedDatabase, MemstoreError
from memstore.executor import run, run_many
from memstore.merge import StoredMemory
from memstore.models import MAX_EPISODE
from memstore.rows import now
from memstore.schema import (
    location_episodes,
    location_names,
    locations,
    memories,
    memory_history,
    memory_links,
    store_meta,
    synthesis_decisions,
    turn_records,
)

__all__ = [
    "LINK_COLUMNS",
    "NameHistory",
    "MEMORY_CONTENT",
    "WITH_LINK",
    "WriteVersion",
    "allocate_episode",
    "create_identity",
    "identity",
    "names_since",
    "next_version",
    "record_history",
    "record_renames",
    "rows_fingerprint",
    "state_at",
]

_BUMP = (
    update(store_meta)
    .where(store_meta.c.id == 1)
    .values(change_counter=store_meta.c.change_counter + 1)
)
_BUMP_RETURNING = _BUMP.returning(store_meta.c.change_counter)
_COUNTER = select(store_meta.c.change_counter).where(store_meta.c.id == 1)

_RECORD_NAME = insert(location_names).from_select(
    ["location_id", "name", "replaced_version", "imported"],
    select(locations.c.id, locations.c.name, bindparam("version"), bindparam("imported")).where(
        locations.c.id == bindparam("location_id"), locations.c.name != bindparam("new_name")
    ),
)
_NAMES_SINCE = (
    select(location_names.c.location_id, location_names.c.name, location_names.c.imported)
    .where(location_names.c.replaced_version > bindparam("version"))
    .order_by(location_names.c.location_id, location_names.c.replaced_version)
)

_NEXT_EPISODE = (
    update(store_meta)
    .where(store_meta.c.id == 1)
    .values(last_episode=greatest(store_meta.c.last_episode, bindparam("seen")) + 1)
    .returning(store_meta.c.last_episode)
)

_successor = memories.alias("successor")
#: a persistent memory's own columns, in the order its history row and the export read them
MEMORY_CONTENT = (
    memories.c.category,
    memories.c.title,
    memories.c.text,
    memories.c.episode,
    memories.c.turn_start,
    memories.c.turn_end,
    memories.c.score_change,
    memories.c.persistence,
    memories.c.status,
)
#: its link (successor's title, turn, episode, reason; NULL when it has none), read from
#: WITH_LINK
LINK_COLUMNS = (
    _successor.c.title.label("successor_title"),
    memory_links.c.turn.label("link_turn"),
    memory_links.c.episode.label("link_episode"),
    memory_links.c.reason.label("link_reason"),
)
WITH_LINK = memories.outerjoin(memory_links, memory_links.c.memory_id == memories.c.id).outerjoin(
    _successor, _successor.c.id == memory_links.c.superseded_by_id
)
_HISTORY_COLUMNS = [c.name for c in memory_history.columns if c.name != "id"]


def _record(live: bool) -> Any:
    """The history row of a memory, with its link (a live memory has none: then the link's
    columns are NULL and no join is made)."""
    link = [null()] * len(LINK_COLUMNS) if live else LINK_COLUMNS
    return insert(memory_history).from_select(
        _HISTORY_COLUMNS,
        select(
            memories.c.id,
            memories.c.location_id,
            *MEMORY_CONTENT,
            *link,
            memories.c.created_version,
            bindparam("version"),
            bindparam("deleted"),
        )
        .select_from(memories if live else WITH_LINK)
        .where(memories.c.id == bindparam("memory_id")),
    )


_RECORD = _record(live=False)
#: the same for a memory that is live (the store's supersessions and invalidations): a
#: live memory has no link (memstore.invariants), so none is looked up
_RECORD_LIVE = _record(live=True)


def create_identity(conn: Connection) -> None:
    """Give a new database its identity (a random UUID) and counter 0."""
    conn.execute(insert(store_meta).values(id=1, database_id=str(uuid.uuid4()), change_counter=0))


def allocate_episode(conn: Connection) -> int:
    """The next episode number, handed out once (inside the caller's write transaction):
    one after the last handed out and after every episode the tables hold.

    Raises MemstoreError when that number would be past the largest episode a memory or
    a location may hold (``memstore.models.MAX_EPISODE``: no write could use it; and past
    SQLite's 64-bit integer, one more, SQLite would store a REAL), changing nothing.
    """
    seen = [
        conn.execute(select(func.max(table.c.episode))).scalar() or 0
        for table in (location_episodes, memories, turn_records, synthesis_decisions)
    ]
    last = conn.execute(select(store_meta.c.last_episode)).scalar() or 0
    largest = max(*seen, last)
    if not isinstance(largest, int) or largest >= MAX_EPISODE:
        damaged = not isinstance(largest, int) or largest > MAX_EPISODE
        check = "; run `memstore check`" if damaged else ""
        raise MemstoreError(
            f"cannot number another episode: the database already holds episode {largest} "
            f"(an episode is at most {MAX_EPISODE}){check}"
        )
    return int(run(conn, _NEXT_EPISODE, {"seen": max(seen)}).fetchone()[0])


_IDENTITY = select(store_meta.c.database_id, store_meta.c.change_counter)


def rows_fingerprint(stored: Iterable[StoredMemory[Any]]) -> str:
    """Eight hex digits that change with the persistent memories (each one's id, title,
    status and link): an export records those of the memories it wrote, and the 3-way
    import checks that the database's memories at the file's change are those (a database
    restored from a backup and written since reaches the same change with others: other
    rows, or the same rows superseded otherwise). A CRC of the fields, not a hash of the
    objects, so the same in every process: about 0.3 ms for 1,100 memories."""
    text = "\x1f".join(
        [
            f"{s.id}\x1e{m.title}\x1e{m.status}\x1e{m.superseded_by}\x1e{m.invalidation_reason}"
            for s in sorted(stored, key=_ID)
            for m in (s.memory,)
        ]
    )
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"


_ID = attrgetter("id")


def identity(conn: Connection) -> ExportBase:
    """The database's identity and its change counter now."""
    row = run(conn, _IDENTITY, {}).fetchone()
    if row is None:
        raise DamagedDatabase(
            "the database has no identity or change counter (store_meta is empty); run "
            "`memstore check`"
        )
    return ExportBase(row[0], int(row[1]))


def next_version(conn: Connection) -> int:
    """Advance the change counter (inside the caller's write transaction); the new value."""
    if conn.dialect.name == "sqlite":  # a RETURNING clause costs SQLite a temporary b-tree
        run(conn, _BUMP, {})
        return int(run(conn, _COUNTER, {}).fetchone()[0])
    return int(run(conn, _BUMP_RETURNING, {}).fetchone()[0])


class WriteVersion:
    """The version of one write transaction, taken from the counter when first needed (so
    a transaction that changes no persistent memory leaves the counter alone), and its
    time: the memories and links it writes carry the same ``created_at``."""

    __slots__ = ("conn", "stamp", "value")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.value: int | None = None
        self.stamp = now()

    def get(self) -> int:
        if self.value is None:
            self.value = next_version(self.conn)
        return self.value


def record_history(
    conn: Connection,
    memory_ids: Iterable[int],
    version: int,
    *,
    deleted: bool = False,
    live: bool = False,
) -> None:
    """Keep the state of these persistent memories (with their links) before ``version``
    changes them, or deletes them (``deleted``). ``live``: the memories are not
    SUPERSEDED, so they have no link to keep."""
    statement = _RECORD_LIVE if live else _RECORD
    ids = memory_ids if isinstance(memory_ids, list | tuple) else list(memory_ids)
    if len(ids) == 1:  # (one execute: an executemany of one row costs more)
        run(conn, statement, {"version": version, "deleted": int(deleted), "memory_id": ids[0]})
        return
    flag = int(deleted)
    rows = [{"version": version, "deleted": flag, "memory_id": memory_id} for memory_id in ids]
    run_many(conn, statement, rows)


def state_at(
    conn: Connection,
    version: int,
    current: Iterable[StoredMemory],
    to_memory: Any,
    since: dict[int, list[Any]] | None = None,
    changed_at: dict[int, int] | None = None,
) -> dict[int, StoredMemory]:
    """The persistent memories as they were at ``version``, by row id.

    ``current`` is every persistent memory now. A row created after ``version`` did not
    exist then; a row changed or deleted since then had the state that the first change
    after ``version`` recorded (``to_memory`` reads such a history row). ``since``, when
    given, gets for each row changed more than once since then the states it had in
    between (each set after ``version`` and replaced since; ``to_memory`` read), oldest
    first: what an import merges against, so that a file's value the database has left
    since is not taken again (memstore.merge_types.merge_fields). ``changed_at``, when
    given, gets for each row changed since then the version of its first change after it.
    """
    earlier: dict[int, Any] = {}
    history = conn.execute(
        select(memory_history)
        .where(memory_history.c.replaced_version > version)
        .order_by(memory_history.c.memory_id, memory_history.c.replaced_version.desc())
    )
    for row in history:  # the last one kept per memory is the earliest change after version
        if since is not None and row.memory_id in earlier:  # a later state: in between
            since.setdefault(row.memory_id, []).insert(0, to_memory(earlier[row.memory_id]))
        earlier[row.memory_id] = row
    if changed_at is not None:
        changed_at.update((memory_id, row.replaced_version) for memory_id, row in earlier.items())
    state = {
        stored.id: stored
        for stored in current
        if stored.id not in earlier and stored.created_version <= version
    }
    for memory_id, row in earlier.items():
        if row.created_version <= version:
            state[memory_id] = StoredMemory(
                memory_id, row.location_id, row.created_version, to_memory(row)
            )
    return state


def record_renames(
    conn: Connection, renames: Iterable[tuple[int, str]], version: int, *, imported: bool
) -> None:
    """Keep the name each location of ``renames`` (location id, its new name) has now, as
    the name ``version`` replaced, when the new name differs from it (a location not
    stored yet has no earlier name); ``imported``: an import makes these renames."""
    rows = [
        {
            "version": version,
            "imported": int(imported),
            "location_id": location_id,
            "new_name": name,
        }
        for location_id, name in renames
    ]
    if len(rows) == 1:
        run(conn, _RECORD_NAME, rows[0])
    else:
        run_many(conn, _RECORD_NAME, rows)


#: a location's names from an export on (``names_since``): each name it had, oldest first,
#: with whether an import replaced it (the name after it is then one an import set)
NameHistory = list[tuple[str, bool]]


def names_since(conn: Connection, version: int) -> dict[int, NameHistory]:
    """For each location renamed since ``version``, by location id, the names it had from
    ``version`` on, oldest first (the name at ``version``, then each later one but the
    name it has now), each with whether an import replaced it. A location not in it has
    had the name it has now since then, or has none stored."""
    earlier: dict[int, NameHistory] = {}
    for location_id, name, imported in run(conn, _NAMES_SINCE, {"version": version}):
        earlier.setdefault(location_id, []).append((name, bool(imported)))
    return earlier
