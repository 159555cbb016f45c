"""``executor.run_rows`` (rows as tuples, which writes the import's rows) against
``run_many`` (rows as dicts), on both backends and tiers.

The same rows (unicode, quotes and placeholders in text, NULLs, 64-bit extremes) written
either way, with the keys in the statement's order or reversed, are stored alike; a tuple
too short writes nothing in either key order. Part of the adversarial review of the
answer watch, read-only stores on a server, and run_rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select

from memstore.executor import run_many, run_rows
from memstore.schema import ephemeral_memories, locations, memories
from memstore.store import MemoryStore

INSERT_PERSISTENT = insert(memories)


INSERT_EPHEMERAL = insert(ephemeral_memories)


INSERT_ROOM = insert(locations)


HUGE = 2**63 - 1


def _rows(tier: str, tag: str) -> list[dict[str, Any]]:
    persistence = "ephemeral" if tier == "ephemeral" else "core"
    texts = ["plain", "ünïcödé ☃ 𝄞 e\u0301 שלום 中文", "line\nbreak\ttab", "'quote\" \\ %s %(x)s ?"]
    rows = []
    for n, text in enumerate(texts):
        rows.append(
            {
                "location_id": 1,
                "category": ["NOTE", "DANGER", "SUCCESS", "DISCOVERY"][n],
                "title": f"{tag} {n} {text}",
                "text": text * (n + 1),
                "episode": [1, HUGE, 2, 1][n],
                "turn_start": [0, HUGE, 5, 1][n],
                "turn_end": [None, None, HUGE, 2][n],
                "score_change": [None, -(2**63), HUGE, 0][n],
                "persistence": persistence,
                "status": "SUPERSEDED",  # not live: no title rule between the runs
                "created_at": f"2026-11-24T00:00:0{n}+00:00",
                "created_version": [0, HUGE, 1, 2][n],
                "changed_version": [0, HUGE, 1, 2][n],
            }
        )
    if tier == "ephemeral":
        for row in rows:
            del row["created_version"], row["changed_version"]
    return rows


def _stored(conn: Any, table: Any, tag: str) -> list[tuple[Any, ...]]:
    columns = [c for c in table.c if c.key != "id"]
    query = select(*columns).where(table.c.title.like(f"{tag} %")).order_by(table.c.id)
    return [tuple(row) for row in conn.execute(query)]


@pytest.mark.parametrize("tier", ["persistent", "ephemeral"])
@pytest.mark.parametrize("order", ["statement", "reversed"])
def test_run_rows_writes_the_same_rows_as_run_many(
    database: str | Path, tier: str, order: str
) -> None:
    statement, table = (
        (INSERT_PERSISTENT, memories)
        if tier == "persistent"
        else (INSERT_EPHEMERAL, ephemeral_memories)
    )
    with MemoryStore.open(database) as store:
        with store.transaction() as conn:
            run_many(conn, INSERT_ROOM, [{"id": 1, "name": "Room", "visit_count": 0}])
            by_name = _rows(tier, "many")
            run_many(conn, statement, by_name)
            as_tuples = _rows(tier, "rows")
            keys = tuple(as_tuples[0])
            if order == "reversed":
                keys = keys[::-1]
            run_rows(conn, statement, keys, [tuple(row[k] for k in keys) for row in as_tuples])
            many, rows = _stored(conn, table, "many"), _stored(conn, table, "rows")
        title = [c.key for c in table.c if c.key != "id"].index("title")
        assert len(many) == len(rows) == 4
        for a, b in zip(many, rows, strict=True):
            assert a[:title] + a[title + 1 :] == b[:title] + b[title + 1 :]
            assert a[title].replace("many", "rows", 1) == b[title]
        assert any(HUGE in row for row in rows) and any(None in row for row in rows)


def test_run_rows_with_a_tuple_too_short_writes_nothing_in_either_key_order(
    database: str | Path,
) -> None:
    with MemoryStore.open(database) as store:
        for keys in (("id", "name", "visit_count"), ("visit_count", "name", "id")):
            with pytest.raises(Exception), store.transaction() as conn:  # noqa: B017, PT011
                run_rows(conn, INSERT_ROOM, keys, [tuple(range(3)), (7, "x")])
            assert store.locations() == []
