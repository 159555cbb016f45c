"""The supersession links an import makes: each to the memory with the successor's title
at the same location that is most likely the one meant (``write_links``).

Part of ``memstore.import_apply`` (the SQL half of ``memstore import --apply``), inside the
caller's write transaction, with statements built once here and run through
``memstore.executor``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, insert, select, update

from memstore.executor import run, run_rows
from memstore.import_plan import MemoryLike
from memstore.models import Status
from memstore.rows import now
from memstore.schema import memories, memory_links

__all__ = ["MEMORY_KEYS", "SUCCESSOR_LINKS", "TITLES_AT_ONCE", "write_links"]

INSERT_LINK = insert(memory_links)
#: what identifies each persistent memory and ranks it as a successor, in stored order
MEMORY_KEYS = select(
    memories.c.id,
    memories.c.location_id,
    memories.c.title,
    memories.c.episode,
    memories.c.turn_start,
    memories.c.turn_end,
    memories.c.status,
).order_by(memories.c.id)
#: titles asked for in one statement (SQLite allows 32,766 parameters)
TITLES_AT_ONCE = 500
#: the same, of the memories titled as one of ``t0`` .. ``t{n-1}``, for a few sizes ``n``:
#: fixed lists, so that the executor compiles each once (the unused places are NULL, which
#: no title equals), and a few titles bind a few parameters, not 500
TITLED_KEYS = {
    size: MEMORY_KEYS.where(memories.c.title.in_([bindparam(f"t{n}") for n in range(size)]))
    for size in (4, 32, TITLES_AT_ONCE)
}
_TITLE_KEYS = tuple(f"t{n}" for n in range(TITLES_AT_ONCE))
SUCCESSOR_LINKS = select(memory_links.c.memory_id, memory_links.c.superseded_by_id).where(
    memory_links.c.superseded_by_id.is_not(None)
)
#: the memories at one location, to find a way out of a circle (``write_links``)
LOCATION_KEYS = select(
    memories.c.id,
    memories.c.title,
    memories.c.episode,
    memories.c.turn_start,
    memories.c.turn_end,
    memories.c.status,
    memories.c.changed_version,
).where(memories.c.location_id == bindparam("location_id"))
MOVE_LINK = (
    update(memory_links)
    .where(memory_links.c.memory_id == bindparam("pointer_id"))
    .values(superseded_by_id=bindparam("successor_id"))
)


#: the columns of a new link's row, in ``write_links``' order (the table's)
NEW_LINK_COLUMNS = ("memory_id", "superseded_by_id", "episode", "turn", "reason", "created_at")


def _has_link(memory: MemoryLike) -> bool:
    return (
        memory.superseded_by is not None
        or memory.invalidation_reason is not None
        or memory.superseded_at_turn is not None
        or memory.superseded_at_episode is not None
    )


class _Candidate(NamedTuple):
    """A memory that may be a successor: its row id, whether it is live, and when learned."""

    id: int
    live: bool
    episode: int
    start: int
    last: int


def _successor_order(
    candidates: Iterable[_Candidate], memory_id: int, at: tuple[int, int] | None
) -> list[_Candidate]:
    """The possible successors of memory ``memory_id``, the most likely first.

    ``at`` is the link's (episode, turn). The store links a memory to its successor at the
    successor's own episode and last turn (``supersede_memory``; ``apply_synthesis`` at the
    current turn, which is the new memory's), so a candidate learned exactly then comes
    first - the first stored after the memory among several, as the store inserts the
    successor after it. Then, for a hand-edited link, the latest learned before it, then
    the earliest learned after it. Without a link turn: the live one, then the latest
    stored after the memory, then the latest stored before it.
    """
    if at is None:
        return sorted(candidates, key=lambda c: (not c.live, c.id < memory_id, -c.id))

    def rank(c: _Candidate) -> tuple[int, ...]:
        if (c.episode, c.last) == at:
            return (0, c.id < memory_id, c.id)
        if (c.episode, c.start) <= at:
            return (1, -c.episode, -c.start, -c.id)
        return (2, c.episode, c.start, c.id)

    return sorted(candidates, key=rank)


def _titled_keys(conn: Connection, titles: list[str]) -> Any:
    """The rows of MEMORY_KEYS titled as one of ``titles`` (at most TITLES_AT_ONCE), from
    the smallest of TITLED_KEYS that takes them."""
    size = next(size for size in TITLED_KEYS if size >= len(titles))
    padded = [*titles, *[None] * (size - len(titles))]
    return run(conn, TITLED_KEYS[size], dict(zip(_TITLE_KEYS, padded, strict=False)))


def write_links(
    conn: Connection,
    entries: list[tuple[int, int, MemoryLike]],
    relinked: Collection[int] = (),
    base_version: int | None = None,
    version: int = 0,
) -> None:
    """Link each of ``entries`` (row id, location id, memory) to its successor by title
    (``_successor_order``). A memory ``relinked`` lost its successor to this import's
    prune: the successor is the memory with that title added again (its turns fixed), so
    it is ranked without the link's turn, which was the old successor's. A link the file
    states that would close a circle between rows moves another link of that circle to a
    twin of its successor (``untwist``): one this import made or changed (its change is
    ``version``), or, with ``base_version`` (the export's change), one no write changed
    since."""
    entries = [entry for entry in entries if _has_link(entry[2])]
    if not entries:
        return
    # every memory that has a successor's title where it is named, in stored order
    by_title: dict[tuple[int, str], list[_Candidate]] = {
        (location_id, memory.superseded_by): []
        for _id, location_id, memory in entries
        if memory.superseded_by is not None
    }
    superseded = Status.SUPERSEDED.value
    titles = sorted({title for _location_id, title in by_title})
    rows = (
        row
        for at in range(0, len(titles), TITLES_AT_ONCE)
        for row in _titled_keys(conn, titles[at : at + TITLES_AT_ONCE])
    )
    for memory_id, location_id, title, episode, start, end, status in rows:
        found = by_title.get((location_id, title))
        if found is not None:
            found.append(
                _Candidate(
                    memory_id,
                    status != superseded,
                    episode,
                    start,
                    end if end is not None else start,
                )
            )
    # the links already there (memory -> successor), so a new link never closes a cycle
    next_of: dict[int, int] = dict(run(conn, SUCCESSOR_LINKS, {}).fetchall())

    def leads_back(start: int, memory_id: int) -> bool:
        seen = set()
        current: int | None = start
        while current is not None and current not in seen:
            if current == memory_id:
                return True
            seen.add(current)
            current = next_of.get(current)
        return False

    links: list[tuple[Any, ...]] = []
    made: dict[int, int] = {}  # memory id -> its place in links

    places: dict[int, dict[int, tuple[str, _Candidate, int]]] = {}

    def untwist(memory_id: int, location_id: int, first: _Candidate) -> bool:
        """Every memory with the title the file names as the successor of ``memory_id``
        leads back to it (``first`` the most likely): a circle between rows that the check
        of titles (``memstore.import_checks``) cannot see, as a twin of a title on it ends
        somewhere else. A link on the way from ``first`` back to ``memory_id`` is moved to
        such a twin of its successor (the same title: nothing it says changes), when one
        does not lead back; then the link of ``memory_id`` to ``first`` is made (True).
        Only a link of a memory this import made or changed, or one as old as the export
        (``base_version``), is moved: never one an agent wrote since."""
        path = []
        current = first.id
        while current != memory_id:
            path.append(current)
            current = next_of[current]
        rows = places.get(location_id)
        if rows is None:
            rows = places[location_id] = {}
            for row_id, title, ep, start, end, status, changed in run(
                conn, LOCATION_KEYS, {"location_id": location_id}
            ):
                last = start if end is None else end
                live = status != superseded
                rows[row_id] = (title, _Candidate(row_id, live, ep, start, last), changed)
        next_of[memory_id] = first.id
        for pointer in reversed(path):  # (the link into memory_id first)
            changed = rows[pointer][2]
            if not (
                pointer in made
                or changed == version
                or (base_version is not None and changed <= base_version)
            ):
                continue  # an agent's link (or, compared 2-way, perhaps one)
            successor = next_of[pointer]
            title = rows[successor][0]
            twins = [
                candidate
                for twin_id, (twin_title, candidate, _changed) in rows.items()
                if twin_title == title and twin_id not in (successor, pointer, memory_id)
            ]
            for twin in _successor_order(twins, pointer, None):
                if not leads_back(twin.id, pointer):
                    next_of[pointer] = twin.id
                    if pointer in made:  # linked by this import, above: not written yet
                        at = made[pointer]
                        links[at] = (links[at][0], twin.id, *links[at][2:])
                    else:
                        run(conn, MOVE_LINK, {"pointer_id": pointer, "successor_id": twin.id})
                    return True
        del next_of[memory_id]
        return False

    stamp = now()
    for memory_id, location_id, memory in entries:
        episode = memory.superseded_at_episode or memory.episode
        successor: _Candidate | None = None
        if memory.superseded_by is not None:
            candidates = [
                c
                for c in by_title.get((location_id, memory.superseded_by), [])
                if c.id != memory_id
            ]
            at = (
                None
                if memory.superseded_at_turn is None or memory_id in relinked
                else (episode, memory.superseded_at_turn)
            )
            ordered = (
                candidates if len(candidates) < 2 else _successor_order(candidates, memory_id, at)
            )
            successor = next((c for c in ordered if not leads_back(c.id, memory_id)), None)
            if successor is not None:
                next_of[memory_id] = successor.id
            elif ordered and untwist(memory_id, location_id, ordered[0]):
                successor = ordered[0]
        turn = memory.superseded_at_turn
        if turn is None:
            turn = (
                successor.last
                if successor is not None
                else (memory.turn_end if memory.turn_end is not None else memory.turn_start)
            )
        if successor is not None:
            made[memory_id] = len(links)
        links.append(
            (
                memory_id,
                successor.id if successor is not None else None,
                episode,
                turn,
                memory.invalidation_reason,
                stamp,
            )
        )
    run_rows(conn, INSERT_LINK, NEW_LINK_COLUMNS, links)
