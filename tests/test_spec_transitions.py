"""Persistence transitions are spec 004's "Allowed Transitions", and the README's list.

Was: ``supersede_memory`` let a CORE memory replace a PERMANENT one (a game mechanic
"corrected" into spawn state), which neither spec 004 (ephemeral -> ephemeral/permanent,
permanent -> permanent, core -> core/permanent) nor the README allows. Now it is refused
as FORBIDDEN_TRANSITION, in the store, in synthesis and in batch supersession alike.
"""

from __future__ import annotations

import pytest

from memstore.models import Persistence
from memstore.store import MemoryStore, SupersedeOutcome
from tests.conftest import MakeMemory

ALLOWED = {
    ("ephemeral", "ephemeral"),
    ("ephemeral", "permanent"),
    ("ephemeral", "core"),  # the README's upgrade (spec 004 lists none against it)
    ("permanent", "permanent"),
    ("core", "core"),
    ("core", "permanent"),
}


@pytest.mark.parametrize("old", [p.value for p in Persistence])
@pytest.mark.parametrize("new", [p.value for p in Persistence])
def test_the_transition_rule_is_spec_004_s_list(old: str, new: str) -> None:
    assert Persistence(old).may_be_superseded_by(Persistence(new)) is ((old, new) in ALLOWED)


def test_a_core_memory_does_not_supersede_a_permanent_one(
    store: MemoryStore, mem: MakeMemory
) -> None:
    store.add_memory(105, "Maze", mem("Old", persistence="permanent"))

    outcome = store.supersede_memory(105, "Maze", "Old", mem("New", persistence="core", turns="2"))

    assert outcome is SupersedeOutcome.FORBIDDEN_TRANSITION and not outcome
    assert [(m.title, m.status.value) for m in store.memories(105, include_superseded=True)] == [
        ("Old", "ACTIVE")
    ]
