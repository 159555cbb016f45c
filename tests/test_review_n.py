"""Review E's findings 1 and 2: a spec-002 dict giving half a before/after pair, and
invalidating by a str subclass with its own hashing."""

from __future__ import annotations

import pytest

from memstore.spec_context import context_from_mapping
from memstore.store import MemoryStore
from tests.conftest import MakeMemory

BASE = {"score_delta": 0, "first_visit": False, "died": False, "response_length": 8}


def test_half_a_pair_with_its_flag_false_means_the_other_value_is_the_same() -> None:
    ctx, _ = context_from_mapping(
        {**BASE, "inventory_before": [12, 13], "inventory_changed": False}
    )
    assert ctx.inventory_after == ctx.inventory_before == frozenset({12, 13})
    assert not ctx.inventory_changed  # the flag's "nothing changed", not "all lost"
    ctx, _ = context_from_mapping({**BASE, "location_before": 5, "location_changed": False})
    assert ctx.location_after == ctx.location_before == 5 and not ctx.location_changed


@pytest.mark.parametrize(
    "given",
    [
        {"inventory_before": [12, 13], "inventory_changed": True},
        {"location_after": 6, "location_changed": True},
        {"inventory_before": [12, 13]},  # review G #3: no flag, no "every item lost"
        {"location_before": 5},
    ],
)
def test_half_a_pair_is_refused_when_the_other_value_is_not_known(given: dict) -> None:
    with pytest.raises(ValueError, match="give both"):
        context_from_mapping({**BASE, **given})


def test_a_half_pair_never_stores_a_false_fact_through_the_manager(tmp_path) -> None:
    from memstore import SimpleMemoryManager

    with MemoryStore.open(tmp_path / "m.db") as store:
        manager = SimpleMemoryManager(store)
        manager.record_action_outcome(
            5, "Kitchen", "examine table", "A table.",
            {**BASE, "inventory_before": [12, 13], "inventory_changed": False,
             "location_changed": False},
        )  # fmt: skip
        manager.flush()
        assert store.memories(5) == []  # nothing was lost, so nothing to remember
        with pytest.raises(ValueError, match="give both"):
            manager.record_action_outcome(
                5,
                "Kitchen",
                "look",
                "Kitchen.",
                {**BASE, "location_before": 5, "location_changed": True},
            )
        assert manager.turn == 1  # refused before the turn counted


class CaseInsensitive(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.lower() == other.lower()

    def __hash__(self) -> int:
        return hash(self.lower())


def test_invalidating_by_a_str_subclass_with_its_own_hash_answers_true(
    store: MemoryStore, mem: MakeMemory
) -> None:
    assert store.add_memory(5, "Room", mem("Grue"))
    assert store.invalidate_memory(5, CaseInsensitive("Grue"), "gone", turn=2, episode=1) is True
    assert [m.status.value for m in store.memories(5, include_superseded=True)] == ["SUPERSEDED"]


def test_the_manager_invalidates_by_a_str_subclass_with_its_own_hash(
    store: MemoryStore, mem: MakeMemory
) -> None:
    from memstore import SimpleMemoryManager

    manager = SimpleMemoryManager(store, episode=1)
    assert manager.add_memory(5, "Room", mem("Troll Attacks"))
    assert manager.invalidate_memory(5, CaseInsensitive("Troll Attacks"), "gone") is True
    manager.close()


def test_the_errors_the_agent_loop_documents_are_exported() -> None:
    import memstore
    from memstore.errors import DatabaseUnavailable, StorageFull, StoreBusy

    assert memstore.StorageFull is StorageFull and issubclass(StorageFull, StoreBusy)
    assert memstore.DatabaseUnavailable is DatabaseUnavailable
    assert {"StorageFull", "DatabaseUnavailable", "StoreBusy"} <= set(memstore.__all__)
