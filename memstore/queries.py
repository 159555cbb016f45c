"""The store's prebuilt statements: built once at import, compiled once per dialect.

Building a SQLAlchemy Core statement costs more than running it on SQLite, so every
statement used on a per-turn path is a module constant here, run with bound parameters
through ``memstore.executor`` inside the store's transactions.
"""

from __future__ import annotations

from collections import namedtuple
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    select,
    union_all,
    update,
)

from memstore.dialect import OnConflict, one_more
from memstore.models import INT64_MAX, Status
from memstore.retrieval import EPHEMERAL, PERSISTENT, VIEW_LIMIT
from memstore.schema import (
    ephemeral_memories,
    ephemeral_memory_links,
    location_episodes,
    locations,
    memories,
    memory_links,
    synthesis_decisions,
    turn_records,
    write_receipts,
)

# inline, so compiled SQL keeps only the ids
SUPERSEDED_LITERAL: ColumnElement[str] = literal_column("'SUPERSEDED'")
LIVE = memories.c.status != SUPERSEDED_LITERAL
EPHEMERAL_LIVE = ephemeral_memories.c.status != SUPERSEDED_LITERAL


TIERS = (("persistent", memories), ("ephemeral", ephemeral_memories))

# Statements used on every turn are built once: building a Core statement costs more than
# running it. Parameters are bound by name at execution.
#: (run with ``executor.insert_id``: on SQLite the new id is the driver's ``lastrowid``)
INSERT_MEMORY = {tier: insert(table) for tier, table in TIERS}
TIER_NAMES = ("persistent", "ephemeral")
#: the live memories here titled exactly ``title`` or ``other_title`` (None: only
#: ``title``), in both tiers at once: (tier number, id, persistence, episode, title).
#: One equality per title: SQLite would look an ``IN`` list up through a temporary b-tree
#: (about 3 µs a write). No ORDER BY, which would sort too (the caller sorts the few rows).
LIVE_TITLED = union_all(
    *(
        select(
            literal_column(str(number)).label("tier"),
            table.c.id,
            table.c.persistence,
            table.c.episode,
            table.c.title,
        ).where(
            table.c.location_id == bindparam("location_id"),
            table.c.title == bindparam(name),
            table.c.status != SUPERSEDED_LITERAL,
        )
        for number, (_tier, table) in enumerate(TIERS)
        for name in ("title", "other_title")
    )
)
MARK_SUPERSEDED = {
    "persistent": update(memories)
    .where(memories.c.id == bindparam("memory_id"))
    .values(status=SUPERSEDED_LITERAL, changed_version=bindparam("version")),
    "ephemeral": update(ephemeral_memories)
    .where(ephemeral_memories.c.id == bindparam("memory_id"))
    .values(status=SUPERSEDED_LITERAL),
}
INSERT_LINK = {"persistent": insert(memory_links), "ephemeral": insert(ephemeral_memory_links)}
ENSURE_LOCATION = OnConflict(locations, ["id"])
VISIT_LOCATION = OnConflict(
    locations,
    ["id"],
    values={"id": bindparam("id"), "name": bindparam("name"), "visit_count": 1},
    update=lambda excluded: {
        "name": excluded.name,
        "visit_count": one_more(locations.c.visit_count, INT64_MAX),
    },
)
#: a visit to a location stored under the name it is visited with (one row, or none: a
#: new location, or one visited under another name, which ``VISIT_LOCATION`` writes)
VISIT_KNOWN = (
    update(locations)
    .where(locations.c.id == bindparam("visit_id"), locations.c.name == bindparam("visit_name"))
    .values(visit_count=one_more(locations.c.visit_count, INT64_MAX))
)
LOCATION_NAME = select(locations.c.name).where(locations.c.id == bindparam("id"))
VISIT_EPISODE = OnConflict(location_episodes)
INSERT_DECISION = insert(synthesis_decisions)
INSERT_TURNS = insert(turn_records)
#: a write transaction's receipt (memstore.synthesis_runner: a COMMIT in doubt), and the
#: writer's earlier receipts, which it no longer needs, deleted in the same transaction
INSERT_RECEIPT = insert(write_receipts)
DELETE_RECEIPT = delete(write_receipts).where(write_receipts.c.receipt == bindparam("receipt"))
#: the writer's previous receipt becomes this transaction's (one statement, where a delete
#: and an insert would be two)
REPLACE_RECEIPT = (
    update(write_receipts)
    .where(write_receipts.c.receipt == bindparam("old"))
    .values(receipt=bindparam("receipt"), created_at=bindparam("created_at"))
)
#: receipts older than the cutoff: a writer that crashed never deleted its last one
DELETE_OLD_RECEIPTS = delete(write_receipts).where(
    write_receipts.c.created_at < bindparam("cutoff")
)
RECEIPT_FOUND = select(write_receipts.c.receipt).where(
    write_receipts.c.receipt == bindparam("receipt")
)


# --- reads -----------------------------------------------------------------------


TIER_NUMBER = {"persistent": PERSISTENT, "ephemeral": EPHEMERAL}


def view_query(table: Any) -> Any:
    """The first VIEW_LIMIT live memories of a location in one tier, by priority (group,
    then newest first), each with the tier's count of live memories there.

    The ranking reads only ids and the three columns of the group (a subquery); the texts
    are read for the rows it keeps, and the count is one index count.
    """
    here = (table.c.location_id == bindparam("location_id"), table.c.status != SUPERSEDED_LITERAL)
    priority_group = case(
        (table.c.status == "TENTATIVE", 4),
        (table.c.category == "DANGER", 0),
        (table.c.persistence == "core", 1),
        (table.c.persistence == "permanent", 2),
        else_=3,
    )
    first = (
        select(table.c.id)
        .where(*here)
        .order_by(priority_group, table.c.id.desc())
        .limit(VIEW_LIMIT)
    )
    counted = table.alias("counted")
    live_here = (
        select(func.count())
        .where(
            counted.c.location_id == bindparam("location_id"),
            counted.c.status != SUPERSEDED_LITERAL,
        )
        .scalar_subquery()
    )
    return select(
        table.c.id,
        table.c.category,
        table.c.title,
        table.c.text,
        table.c.persistence,
        table.c.status,
        live_here.label("total"),
    ).where(table.c.id.in_(first))


VIEW_QUERY = {tier: view_query(table) for tier, table in TIERS}


def upgraded_successor(upgraded: Any, links: Any) -> ColumnElement[bool]:
    """The join of an ephemeral memory's link to the persistent memory that superseded it
    (the upgrade). ``superseded_by_persistent_id`` has no foreign key (the tiers are two
    databases), so another process may delete that memory (an import with ``--prune``) and
    SQLite hand its id to a later one; the successor and the link were written in one
    transaction, with the same ``created_at`` (memstore.versions.WriteVersion), which no
    later memory has: a row with the id but not the time is not the successor."""
    return and_(
        upgraded.c.id == links.c.superseded_by_persistent_id,
        upgraded.c.created_at == links.c.created_at,
    )


@cache
def load_query(tier: str, by_location: bool, include_superseded: bool) -> Any:
    """Memories of one tier with their link details; built once per shape."""
    table = memories if tier == "persistent" else ephemeral_memories
    if tier == "persistent":
        links = memory_links
        successor = memories.alias("successor")
        joined = table.outerjoin(links, links.c.memory_id == table.c.id).outerjoin(
            successor, successor.c.id == links.c.superseded_by_id
        )
        successor_title = successor.c.title
    else:
        links = ephemeral_memory_links
        successor = ephemeral_memories.alias("successor")
        upgraded = memories.alias("upgraded")
        joined = (
            table.outerjoin(links, links.c.memory_id == table.c.id)
            .outerjoin(successor, successor.c.id == links.c.superseded_by_id)
            .outerjoin(upgraded, upgraded_successor(upgraded, links))
        )
        successor_title = func.coalesce(successor.c.title, upgraded.c.title)
    query = select(
        table,
        links.c.episode.label("link_episode"),
        links.c.turn.label("link_turn"),
        links.c.reason.label("link_reason"),
        successor_title.label("successor_title"),
    ).select_from(joined)
    conditions = []
    if by_location:
        conditions.append(table.c.location_id == bindparam("location_id"))
    if not include_superseded:
        conditions.append(table.c.status != Status.SUPERSEDED.value)
    if conditions:
        query = query.where(and_(*conditions))
    return query.order_by(table.c.id)


@cache
def row_type(names: tuple[str, ...]) -> Any:
    """A named-tuple type for a result's columns, so rows read like SQLAlchemy's."""
    return namedtuple("Row", names, rename=True)  # noqa: PYI024
