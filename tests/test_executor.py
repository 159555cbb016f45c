"""The one executor: prebuilt statements run with parameters by name, or as tuples."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from memstore.executor import run_many, run_rows
from memstore.schema import locations
from memstore.store import MemoryStore

INSERT_LOCATION = insert(locations)


def stored(store: MemoryStore) -> list[tuple[object, ...]]:
    with store.transaction(write=False) as conn:
        return [tuple(row) for row in conn.execute(select(locations).order_by(locations.c.id))]


@pytest.mark.parametrize(
    "keys",
    [("id", "name", "visit_count"), ("visit_count", "id", "name")],
    ids=["in the statement's order", "in another order"],
)
def test_rows_given_as_tuples_are_written_as_the_same_rows_given_by_name(
    store: MemoryStore, keys: tuple[str, ...]
) -> None:
    by_name = [{"id": n, "name": f"Room {n}", "visit_count": n * 2} for n in (1, 2, 3)]
    with store.transaction() as conn:
        run_rows(conn, INSERT_LOCATION, keys, [tuple(row[k] for k in keys) for row in by_name])
    with_tuples = stored(store)
    with store.transaction() as conn:
        conn.execute(locations.delete())
        run_many(conn, INSERT_LOCATION, by_name)
    assert with_tuples == stored(store) == [(1, "Room 1", 2), (2, "Room 2", 4), (3, "Room 3", 6)]


def test_a_tuple_of_the_wrong_length_is_refused_and_nothing_is_written(store: MemoryStore) -> None:
    keys = ("visit_count", "id", "name")  # not the statement's order: checked row by row
    with pytest.raises(ValueError, match="zip"), store.transaction() as conn:
        run_rows(conn, INSERT_LOCATION, keys, [(0, 1, "Room 1"), (0, 2)])
    assert stored(store) == []
