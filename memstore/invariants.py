"""The rules every memstore database keeps, checked (``memstore check``, and every import).

* a supersession link belongs to a SUPERSEDED memory (a live memory has none);
* a successor is another memory at the same location;
* links form no cycles (following successors always ends);
* no row is stamped with a version the change counter has not reached;
* every stored memory and location readable by ``memstore export``: one line per row that
  breaks a rule of the models' rule table (``memstore.md_store.refused_rows``, the export's
  own test), and SQLite's own ``PRAGMA integrity_check`` and ``foreign_key_check``, the
  columns the model does not read (ids, versions, the store's counters), an episode
  the next one can follow, and a location name no write could store (a NUL, a lone
  surrogate: ``memstore.models.unstorable_text``, the location-name rule's own test; a
  name longer than LOCATION_NAME_MAX that an older memstore stored is sound: it exports
  and imports back) (``memstore check``).

A SUPERSEDED memory may have no link at all: files of the older implementation wrote no
reference line for some.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection, func, select

from memstore.connection import connection_tiers
from memstore.dialect import greatest
from memstore.executor import run
from memstore.md_store import refused_rows
from memstore.models import INT64_MAX, Persistence, unstorable_text
from memstore.schema import (
    ephemeral_memories,
    ephemeral_memory_links,
    locations,
    memories,
    memory_links,
    store_meta,
)

__all__ = ["check_invariants"]

_SUPERSEDED = "SUPERSEDED"

#: (table, column, the SQLite types its values may have) for the columns the model's rules
#: do not read (``refused_rows`` reads every memory's and location's own values): a column
#: of another type (a text or real in a number column, which SQLite's type affinity lets
#: through) makes the row unreadable to memstore
_COLUMN_TYPES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("memories", "location_id", ("integer",)),
    ("memories", "created_version", ("integer",)),
    ("memories", "changed_version", ("integer",)),
    ("store_meta", "change_counter", ("integer",)),
    ("store_meta", "last_episode", ("integer",)),
    # the map (review S5 C F5: a count holding text passed `check`; the map's reads pass
    # such a row over: memstore.map_sql)
    ("map_rooms", "id", ("integer",)),
    ("map_rooms", "name", ("text",)),
    *(
        ("map_connections", column, ("integer",))
        for column in (
            "from_id",
            "to_id",
            "verifications",
            "failures",
            "first_episode",
            "first_turn",
            "last_episode",
            "last_turn",
        )
    ),  # fmt: skip
    ("map_connections", "action", ("text",)),
    ("map_connections", "action_key", ("text",)),
    ("map_connections", "direction", ("text", "null")),
    *(
        ("map_exit_failures", column, ("integer",))
        for column in ("from_id", "count", "last_episode", "last_turn")
    ),
    ("map_exit_failures", "direction", ("text",)),
    *(
        ("map_pruned_exits", column, ("integer",))
        for column in ("from_id", "pruned_episode", "pruned_turn")
    ),
    ("map_pruned_exits", "direction", ("text",)),
)
#: the persistences only the in-memory tier holds: the model takes them, the persistent
#: table's CHECK constraint (which integrity_check does not re-verify) does not
_NOT_ON_DISK = tuple(p.value for p in Persistence if not p.on_disk)
#: the largest integer SQLite stores: an episode there leaves no number for the next one
_MAX_INTEGER = INT64_MAX


def _unreadable_rows(conn: Connection) -> list[str]:
    """Rows memstore cannot read back: every memory and location the export refuses (one
    line per row), then the columns the model does not read holding a value of the wrong
    type, and an episode with no room after it (one line per column, with how many rows)."""
    problems = refused_rows(conn)
    sqlite = conn.dialect.name == "sqlite"  # a server's typed columns hold only their type
    for table, column, kinds in _COLUMN_TYPES if sqlite else ():
        allowed = ", ".join(f"'{kind}'" for kind in kinds)
        count, example = conn.exec_driver_sql(
            f'SELECT count(*), min(rowid) FROM "{table}" '  # noqa: S608 - constants only
            f'WHERE typeof("{column}") NOT IN ({allowed})'
        ).one()
        if count:
            problems.append(
                f"{table}.{column}: {count} row(s) hold a value that is not "
                f"{' or '.join(kinds)} (the first is row {example}): memstore cannot read them"
            )
    ephemeral = ", ".join(f"'{value}'" for value in _NOT_ON_DISK)
    count, example = conn.exec_driver_sql(
        f"SELECT count(*), min(id) FROM memories WHERE persistence IN ({ephemeral})"  # noqa: S608
    ).one()
    if count:
        problems.append(
            f"memories.persistence: {count} row(s) hold {ephemeral}, which only the in-memory "
            f"tier holds (the first is row {example})"
        )
    problems.extend(_unstorable_names(conn))
    for table in ("location_episodes", "memories", "store_meta"):
        column = "last_episode" if table == "store_meta" else "episode"
        typed = f" WHERE typeof(\"{column}\") = 'integer'" if sqlite else ""
        found = conn.exec_driver_sql(
            f'SELECT max("{column}") FROM "{table}"{typed}'  # noqa: S608 - constants only
        ).scalar()
        if found is not None and found >= _MAX_INTEGER:
            problems.append(
                f"{table}.{column}: episode {found} leaves no number for the next episode "
                f"(at most {_MAX_INTEGER - 1})"
            )
    return problems


_NAMES = select(locations.c.id, locations.c.name).order_by(locations.c.id)


def _unstorable_names(conn: Connection) -> list[str]:
    """One line per location whose stored name no write could store now (a NUL, a lone
    surrogate: ``unstorable_text``, which ``check_location_name`` applies to every write);
    a name of another type is ``refused_rows``' line."""
    problems = []
    for location_id, name in run(conn, _NAMES, {}):
        problem = unstorable_text(name) if isinstance(name, str) else None
        if problem is not None:
            problems.append(
                f"location {location_id}: its name {problem} ({name[:60]!r}): no write "
                f"could store it now (give it another name in Memories.md and import it)"
            )
    return problems


def _describe(location_id: int, title: str) -> str:
    shown = title if len(title) <= 60 else title[:57] + "..."
    return f"location {location_id} {shown!r}"


_TIERS = {
    "persistent": (memories, memory_links, memory_links.c.superseded_by_id),
    "ephemeral": (
        ephemeral_memories,
        ephemeral_memory_links,
        ephemeral_memory_links.c.superseded_by_id,
    ),
}


_COUNTER = select(store_meta.c.change_counter)
_STAMPED = select(func.max(greatest(memories.c.created_version, memories.c.changed_version)))


@cache
def _link_query(tier: str) -> Any:
    """Every link of a tier with its memory and its successor's location (built once)."""
    table, links, successor_column = _TIERS[tier]
    successor = table.alias("successor")
    return (
        select(
            links.c.memory_id,
            successor_column,
            table.c.location_id,
            table.c.title,
            table.c.status,
            successor.c.location_id.label("successor_location"),
        )
        .select_from(
            links.join(table, table.c.id == links.c.memory_id).outerjoin(
                successor, successor.c.id == successor_column
            )
        )
        .order_by(links.c.memory_id)
    )


def _links(conn: Connection, tier: str) -> tuple[list[str], dict[int, int]]:
    problems: list[str] = []
    rows = run(conn, _link_query(tier), {})
    next_of: dict[int, int] = {}
    for memory_id, successor_id, location_id, title, status, successor_location in rows:
        where = _describe(location_id, title)
        if status != _SUPERSEDED:
            problems.append(f"{tier} memory {where} is {status} but has a supersession link")
        if successor_id is None:
            continue
        if successor_id == memory_id:
            problems.append(f"{tier} memory {where} is superseded by itself")
        elif successor_location is None:
            problems.append(f"{tier} memory {where} is superseded by a memory that is not there")
        elif successor_location != location_id:
            problems.append(
                f"{tier} memory {where} is superseded by a memory at location {successor_location}"
            )
        else:
            next_of[memory_id] = successor_id
    return problems, next_of


def _cycles(next_of: dict[int, int]) -> list[list[int]]:
    """The cycles the successor links form, each as its memory ids in link order."""
    cycles = []
    done: set[int] = set()
    for start in sorted(next_of):
        path: list[int] = []
        on_path: set[int] = set()
        node: int | None = start
        while node is not None and node not in done and node not in on_path:
            path.append(node)
            on_path.add(node)
            node = next_of.get(node)
        if node is not None and node in on_path:
            cycles.append(path[path.index(node) :])
        done.update(path)
    return cycles


def check_invariants(
    conn: Connection,
    *,
    sqlite_checks: bool = False,
) -> list[str]:
    """Every broken rule, one line each (empty: the database is sound), in the tiers the
    store's connection holds (a read-only store on a server has no ephemeral tier).

    With ``sqlite_checks``, every row's values and, on SQLite, its ``integrity_check`` and
    ``foreign_key_check`` too (they read the whole file: ``memstore check``, not every
    import; a PostgreSQL server keeps its own pages and foreign keys).
    """
    problems: list[str] = []
    for tier in connection_tiers(conn):
        table = _TIERS[tier][0]
        found, next_of = _links(conn, tier)
        problems.extend(found)
        cycles = _cycles(next_of)
        if cycles:  # the titles, only to say which memories
            ids = sorted({n for cycle in cycles for n in cycle})
            titles = {
                row.id: (row.location_id, row.title)
                for row in conn.execute(
                    select(table.c.id, table.c.location_id, table.c.title).where(
                        table.c.id.in_(ids)
                    )
                )
            }
            for cycle in cycles:
                names = " -> ".join(_describe(*titles[n]) for n in cycle if n in titles)
                problems.append(f"{tier} supersession links form a cycle: {names}")
    found_counter = run(conn, _COUNTER, {}).fetchone()
    counter = found_counter[0] if found_counter is not None else None
    if counter is None:
        problems.append("the change counter (store_meta) is missing")
    else:
        stamped = run(conn, _STAMPED, {}).fetchone()[0]
        if stamped is not None and stamped > counter:
            problems.append(
                f"memories are stamped with version {stamped}, past the change counter {counter}"
            )
    if sqlite_checks:
        problems.extend(_unreadable_rows(conn))
    if sqlite_checks and conn.dialect.name == "sqlite":
        verdict = [row[0] for row in conn.exec_driver_sql("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            problems.extend(f"SQLite integrity_check: {line}" for line in verdict[:20])
        for table, rowid, parent, _fk in conn.exec_driver_sql("PRAGMA foreign_key_check"):
            problems.append(f"SQLite foreign_key_check: {table} row {rowid} points at no {parent}")
    return problems
