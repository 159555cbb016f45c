"""Memories the agent flags itself (spec 001): its ``remember`` field, with an importance.

The spec's in-memory ``MemoryState``, on SQLite ("Future: SQLite Migration"): rows live in
the ``flagged_memories`` table (schema revision 0003) of the same database as the location
memories, and every statement runs through the store's own transactions
(``MemoryStore.transaction``), so this module is the only place that speaks SQL for
flagged memories.

Scope: the whole database. ``session_id`` records which run flagged a memory (provenance),
but reads, de-duplication and statistics cover every session, so a new run remembers what
earlier runs flagged.

De-duplication (the spec's ``_is_similar``): two texts are the same memory when, after
lower-casing and collapsing runs of whitespace, they are equal, or one contains the other
and the shorter is more than 80% as long as the longer (the spec's ``> 0.8``). A
near-duplicate is not stored again; it only raises the stored importance when its own is
higher.

Where duplicates are looked for, so that adding costs the same at 10 or 10,000 memories:

- **Exact duplicates** (equal once normalised) anywhere in the database: every row keeps its
  normalised text in ``content_key`` (revision 0005), under an index, so this is one lookup.
- **Near duplicates** (containment) among a bounded candidate set, at most
  ``NEAR_DUPLICATE_CANDIDATES`` rows for each of: memories anywhere whose normalised text
  starts with the first 80% of the new one's (this catches every containment that shares
  the start: "Lamp is here" / "Lamp is here now", whatever the location), and the most
  recent memories flagged at the same location number (or, without one, without a number).
  A containment that shares no start with a memory at another location, or with one older
  than the location's ``NEAR_DUPLICATE_CANDIDATES`` most recent, is stored as a new memory.

The candidates are read in a plain read transaction, without the write lock. The write
transaction (``BEGIN IMMEDIATE``) then looks only through indexes: the exact duplicate again,
and the rows other writers added since the read (at most ``NEAR_DUPLICATE_CANDIDATES``).
Two writers, in two processes or threads, adding the same text at once store it once.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import bindparam, cast, func, insert, null, select, union_all, update

from memstore.executor import run
from memstore.models import (
    LOCATION_NAME_MAX,
    TEXT_MAX,
    blank_for_sqlite,
    check_int,
    check_location_id,
    check_location_name,
    plain_str,
    unstorable_text,
)
from memstore.rows import now
from memstore.schema import flagged_memories as table
from memstore.synthesis_answer import shows_nothing

MIN_IMPORTANCE = 1
MAX_IMPORTANCE = 1000
#: the longest flagged text: a location memory's text limit, which synthesis answers keep too
MAX_CONTENT_CHARS = TEXT_MAX
#: the longest location name (every write's: memstore.models.check_location_name)
MAX_LOCATION_NAME_CHARS = LOCATION_NAME_MAX
#: the shorter text must be at least this fraction of the longer one to count as contained
SIMILARITY_THRESHOLD = 0.8
#: at most this many rows are read for each kind of near-duplicate candidate (module doc)
NEAR_DUPLICATE_CANDIDATES = 100


class FlaggedMemory(BaseModel):
    """One stored flagged memory (a row of ``flagged_memories``)."""

    model_config = ConfigDict(frozen=True)

    id: int
    content: str
    importance: int
    turn: int
    location_id: int | None
    location_name: str
    score: int | None = None
    moves: int | None = None
    episode: int = 1
    session_id: str
    created_at: str

    @property
    def location_label(self) -> str:
        """``"West of House (#180)"``, or just the name when the location number is unknown."""
        if self.location_id is None:
            return self.location_name
        return f"{self.location_name} (#{self.location_id})"

    def __str__(self) -> str:
        return (
            f"[Turn {self.turn} @ {self.location_label}] {self.content} "
            f"(importance: {self.importance})"
        )


def normalise(text: str) -> str:
    """Lower case, with every run of whitespace one space and no space at either end."""
    return " ".join(text.lower().split())


def is_similar(text1: str, text2: str) -> bool:
    """The spec's ``_is_similar``: equal after ``normalise``, or one contains the other and
    the shorter is more than ``SIMILARITY_THRESHOLD`` of the longer's length."""
    return _similar_keys(normalise(text1), normalise(text2))


def _similar_keys(t1: str, t2: str) -> bool:
    """``is_similar`` for texts already normalised (``content_key`` values)."""
    if t1 == t2:
        return True
    shorter, longer = (t1, t2) if len(t1) <= len(t2) else (t2, t1)
    if not shorter:
        return False
    return shorter in longer and len(shorter) / len(longer) > SIMILARITY_THRESHOLD


def _shared_start(key: str) -> tuple[str, str]:
    """The bounds of the keys that start with ``key``'s first 80% (at least 1 character).

    When one normalised text contains another at least 80% as long, starting at its first
    character, both start with the new text's first 80%: the shorter is at least that long.
    """
    start = key[: max(1, len(key) * 4 // 5)]
    return start, start + "\U0010ffff"


def check_importance(importance: object) -> int:
    """An int from 1 to 1000 (bools and strings are refused); ValueError otherwise."""
    if type(importance) is not int or not MIN_IMPORTANCE <= importance <= MAX_IMPORTANCE:
        raise ValueError(
            f"importance must be an int from {MIN_IMPORTANCE} to {MAX_IMPORTANCE}, "
            f"got {type(importance).__name__} {importance!r}"
        )
    return importance


def check_text(what: str, value: object, limit: int) -> str:
    """A str of at most ``limit`` characters (TypeError or ValueError, on one line), as a
    plain str (memstore.models.plain_str)."""
    value = plain_str(what, value)
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value):,} characters, more than the {limit:,} allowed")
    return value


def check_storable(what: str, value: str) -> str:
    """``value``, if both databases can store it (no NUL, no lone surrogate: memstore.models'
    ``unstorable_text``); a one-line ValueError otherwise."""
    problem = unstorable_text(value)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return value


def _to_model(row: Any) -> FlaggedMemory:
    return FlaggedMemory.model_validate(dict(row._mapping))


_ORDER = (table.c.importance.desc(), table.c.id)

_TOTALS = select(func.count(), func.sum(table.c.importance))
_FIRST_IDS = (
    select(table.c.location_id, func.count().label("count"), func.min(table.c.id).label("first"))
    .where(table.c.location_id.is_not(None))
    .group_by(table.c.location_id)
    .subquery()
)
_NAMED_FIRST = (
    select(table.c.location_name, func.count().label("count"), func.min(table.c.id).label("first"))
    .where(table.c.location_id.is_(None))
    .group_by(table.c.location_name)
    .subquery()
)
#: each location number with its memories' count, the first's id and that one's name; then
#: each name flagged with no number (merged by ``normalise`` in Python)
_BY_LOCATION = union_all(
    select(
        _FIRST_IDS.c.location_id, table.c.location_name, _FIRST_IDS.c.count, _FIRST_IDS.c.first
    ).join(table, table.c.id == _FIRST_IDS.c.first),
    select(
        cast(null(), table.c.location_id.type).label("location_id"),
        _NAMED_FIRST.c.location_name,
        _NAMED_FIRST.c.count,
        _NAMED_FIRST.c.first,
    ),
)

_CANDIDATE_COLUMNS = (table.c.id, table.c.importance, table.c.content_key)


def _bounded(query: Any) -> Any:
    return select(query.limit(NEAR_DUPLICATE_CANDIDATES).subquery())


#: the near-duplicate candidates (module doc), read without the write lock: the exact key,
#: the keys sharing the new text's start, and the location's most recent memories; each part
#: is one index range
_CANDIDATES = union_all(
    _bounded(select(*_CANDIDATE_COLUMNS).where(table.c.content_key == bindparam("key"))),
    _bounded(
        select(*_CANDIDATE_COLUMNS)
        .where(table.c.content_key >= bindparam("low"), table.c.content_key < bindparam("high"))
        .order_by(table.c.content_key)
    ),
    _bounded(
        select(*_CANDIDATE_COLUMNS)
        .where(table.c.location_id.is_not_distinct_from(bindparam("location_id")))
        .order_by(table.c.id.desc())
    ),
)
_LAST_ID = select(func.max(table.c.id))
#: under the write lock: the exact duplicate, through the content_key index
_EXACT = select(table.c.id, table.c.importance).where(table.c.content_key == bindparam("key"))
#: under the write lock: rows other writers added since the candidates were read
_ADDED_SINCE = (
    select(*_CANDIDATE_COLUMNS)
    .where(table.c.id > bindparam("last_id"))
    .order_by(table.c.id)
    .limit(NEAR_DUPLICATE_CANDIDATES)
)
_RAISE_IMPORTANCE = (
    update(table)
    .where(table.c.id == bindparam("row_id"), table.c.importance < bindparam("importance"))
    .values(importance=bindparam("importance"))
)
_INSERT = insert(table)


def _first_similar(key: str, rows: Any) -> tuple[int, int] | None:
    """(id, importance) of the first row similar to ``key``, most important first, then
    oldest (the order the spec's list had)."""
    found = [
        (-importance, row_id) for row_id, importance, stored in rows if _similar_keys(key, stored)
    ]
    if not found:
        return None
    negative_importance, row_id = min(found)
    return row_id, -negative_importance


class FlaggedMemories:
    """Flagged memories in a :class:`~memstore.store.MemoryStore`'s database.

    ``session_id`` (default: a new uuid4 hex per instance) is written on every memory this
    instance adds. Reads return :class:`FlaggedMemory` objects, most important first, then
    oldest first (by id).
    """

    def __init__(self, store: Any, session_id: str | None = None) -> None:
        if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
            raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
        self.store = store
        self.session_id = session_id if session_id is not None else uuid.uuid4().hex

    # --- writing ------------------------------------------------------------------------

    def add_flagged_memory(
        self,
        content: str,
        importance: int,
        turn: int,
        location_id: int | None,
        location_name: str,
        score: int | None = None,
        moves: int | None = None,
        episode: int = 1,
    ) -> bool:
        """Store what the agent flagged; True if a new memory was stored.

        ``content`` must be a str (TypeError) of at most MAX_CONTENT_CHARS characters
        (ValueError). Blank ``content`` is then ignored (False, nothing else is checked: a
        turn with nothing to remember is normal); so is content a reader sees nothing of,
        only format characters such as zero-width spaces (the rule synthesis titles keep:
        memstore.synthesis_answer.shows_nothing). Otherwise it must be storable (no NUL,
        no lone surrogate: ValueError), ``importance`` an int 1..1000 (ValueError),
        ``location_id`` an int or None (TypeError), ``location_name`` a storable str of at
        most MAX_LOCATION_NAME_CHARS characters (TypeError, ValueError), ``turn``
        an int >= 0, ``episode`` an int >= 1, ``score``/``moves`` ints or None (ValueError);
        every number within the database's 64-bit integers (ValueError).

        A near-duplicate of a stored memory (see :func:`is_similar`, and the module doc for
        where it is looked for) is not stored (False); if its importance is higher, the
        stored memory's importance is raised to it. Candidates are read without the write
        lock; the write transaction checks the exact duplicate again through the index, and
        the rows added meanwhile, so concurrent writers never store the same text twice.
        """
        text = check_text("content", content, MAX_CONTENT_CHARS).strip()
        if blank_for_sqlite(text) or shows_nothing(text):
            return False
        check_storable("content", text)
        check_importance(importance)
        if location_id is not None:
            check_location_id(location_id)
        location_name = check_location_name(location_name)
        check_int("turn", turn, 0)
        check_int("episode", episode, 1)
        check_int("score", score, optional=True)
        check_int("moves", moves, 0, optional=True)

        key = normalise(text)
        duplicate, last_id = self._find_similar(key, location_id)
        if duplicate is not None:
            self._raise_importance(*duplicate, importance)
            return False
        with self.store.transaction(changes_memories=False) as conn:  # no location's view changes
            # The candidates were read without the lock: look again, through indexes only,
            # for what another writer stored since (the same text, or anything new).
            exact = run(conn, _EXACT, {"key": key}).fetchall()
            added = run(conn, _ADDED_SINCE, {"last_id": last_id}).fetchall()
            duplicate = _first_similar(key, [(i, imp, key) for i, imp in exact] + added)
            if duplicate is not None:
                row_id, stored_importance = duplicate
                if importance > stored_importance:
                    run(conn, _RAISE_IMPORTANCE, {"row_id": row_id, "importance": importance})
                return False
            run(
                conn,
                _INSERT,
                {
                    "content": text,
                    "content_key": key,
                    "importance": importance,
                    "turn": turn,
                    "location_id": location_id,
                    "location_name": location_name.strip(),
                    "score": score,
                    "moves": moves,
                    "episode": episode,
                    "session_id": self.session_id,
                    "created_at": now(),
                },
            )
            return True

    def _find_similar(
        self, key: str, location_id: int | None
    ) -> tuple[tuple[int, int] | None, int]:
        """The first near-duplicate among the bounded candidates (module doc) as (id,
        importance), or None; and the highest row id the read saw. A read: no write lock."""
        low, high = _shared_start(key)
        params = {"key": key, "low": low, "high": high, "location_id": location_id}
        with self.store.transaction(write=False) as conn:
            rows = run(conn, _CANDIDATES, params).fetchall()
            last_id = run(conn, _LAST_ID, {}).fetchone()[0] or 0
        return _first_similar(key, rows), last_id

    def _raise_importance(self, row_id: int, stored_importance: int, importance: int) -> None:
        """Raise a stored memory's importance to ``importance`` if that is higher (the
        stored one may have been raised meanwhile: the update checks again)."""
        if importance > stored_importance:
            with self.store.transaction(changes_memories=False) as conn:
                run(conn, _RAISE_IMPORTANCE, {"row_id": row_id, "importance": importance})

    # --- reading ------------------------------------------------------------------------

    def _select(self, query: Any) -> list[FlaggedMemory]:
        with self.store.transaction(write=False) as conn:
            return [_to_model(row) for row in conn.execute(query)]

    def top(self, limit: int = 10) -> list[FlaggedMemory]:
        """The ``limit`` most important memories (ties: oldest first)."""
        check_int("limit", limit, 0)
        return self._select(select(table).order_by(*_ORDER).limit(limit))

    def all(self) -> list[FlaggedMemory]:
        """Every memory, most important first (ties: oldest first)."""
        return self._select(select(table).order_by(*_ORDER))

    def by_location_id(self, location_id: int) -> list[FlaggedMemory]:
        """Memories flagged at this location number, most important first."""
        check_location_id(location_id)
        return self._select(
            select(table).where(table.c.location_id == location_id).order_by(*_ORDER)
        )

    def by_location_name(self, name: str) -> dict[int | None, list[FlaggedMemory]]:
        """Memories flagged at locations with this name (case and spacing ignored), grouped
        by location number, by number (memories without a number last).

        Several keys mean the name is shared by several rooms (Zork has several
        "Forest Path" and "Maze" rooms); an empty dict means no memory was flagged there.
        """
        wanted = normalise(plain_str("name", name))
        if not wanted:
            return {}
        with self.store.transaction(write=False) as conn:
            names = conn.execute(select(table.c.location_name).distinct()).scalars().all()
            matching = [stored for stored in names if normalise(stored) == wanted]
            if not matching:
                return {}
            rows = conn.execute(
                select(table).where(table.c.location_name.in_(matching)).order_by(*_ORDER)
            ).all()
        groups: dict[int | None, list[FlaggedMemory]] = {}
        for row in rows:
            memory = _to_model(row)
            groups.setdefault(memory.location_id, []).append(memory)
        return dict(sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0)))

    def count(self) -> int:
        """How many memories are stored."""
        with self.store.transaction(write=False) as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())

    def stats(self) -> dict[str, Any]:
        """The spec's ``get_summary_stats``: ``total_memories``, ``avg_importance`` (a float),
        ``locations_covered`` (distinct locations: by number, or by name when a memory has
        no number) and ``top_location`` (the label, "Name (#id)", of the location with the
        most memories; ties go to the one flagged first). Zeros and None when empty."""
        # aggregated in SQL, each location's first name read back: a status read each turn
        # costs no pydantic model per memory (review S6 J F3: 220 ms at 20,000)
        with self.store.transaction(write=False) as conn:
            total, importance = conn.execute(_TOTALS).one()
            if not total:
                return {
                    "total_memories": 0,
                    "avg_importance": 0.0,
                    "locations_covered": 0,
                    "top_location": None,
                }
            groups = conn.execute(_BY_LOCATION).all()
        counts: dict[object, list[int]] = {}  # key -> [count, first id]
        labels: dict[object, str] = {}
        for location_id, name, count, first in sorted(groups, key=lambda row: row[3]):
            key: object = location_id if location_id is not None else ("name", normalise(name))
            seen = counts.setdefault(key, [0, first])
            seen[0] += count
            labels.setdefault(key, name if location_id is None else f"{name} (#{location_id})")
        top_key = max(counts, key=lambda key: (counts[key][0], -counts[key][1]))
        return {
            "total_memories": int(total),
            "avg_importance": int(importance) / int(total),  # (PostgreSQL's avg rounds)
            "locations_covered": len(counts),
            "top_location": labels[top_key],
        }
