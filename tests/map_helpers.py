"""A small made-up map for the tests of Map.md, map_state.json, `memstore map` and get_route.

Rooms carry Zork's numbers where Zork has them; two rooms share the name "Forest", and one
has a name full of characters Markdown and Mermaid give meaning to.
"""

from __future__ import annotations

from memstore.map_graph import MapEvent, MapGraph, event_for_turn
from memstore.map_store import MapStore
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext

WEST, NORTH, BEHIND, KITCHEN, LIVING, ATTIC = 64, 137, 85, 27, 75, 187
FOREST_A, FOREST_B, WEIRD = 87, 88, 99
NAMES = {
    WEST: "West of House",
    NORTH: "North of House",
    BEHIND: "Behind House",
    KITCHEN: "Kitchen",
    LIVING: "Living Room",
    ATTIC: "Attic",
    FOREST_A: "Forest",
    FOREST_B: "Forest",
    WEIRD: 'Weird "room" [a|b] #1 <x> `%% end',
}

#: (before, action, after): a move when the rooms differ, else a failure
SCRIPT = [
    (WEST, "n", NORTH),
    (WEST, "w", WEST),  # blocked once: not pruned
    (NORTH, "e", BEHIND),
    (BEHIND, "w", BEHIND),  # the window is shut: three failures prune "west"
    (BEHIND, "w", BEHIND),
    (BEHIND, "w", BEHIND),
    (BEHIND, "Enter Window", KITCHEN),  # an action-labelled connection
    (KITCHEN, "w", LIVING),
    (LIVING, "e", KITCHEN),
    (KITCHEN, "u", ATTIC),
    (ATTIC, "d", KITCHEN),
    (KITCHEN, "w", LIVING),
    (LIVING, "climb ladder", WEIRD),
    (WEIRD, "out", LIVING),
    (NORTH, "n", FOREST_A),
    (FOREST_A, "e", FOREST_B),
    (FOREST_B, "w", FOREST_A),
    (WEST, "n", NORTH),
    (BEHIND, "enter window", BEHIND),  # the window shut again: a failure of that action
]


def map_event(before: int, action: str, after: int, turn: int = 1, *, episode: int = 1) -> MapEvent:
    found = event_for_turn(
        ZMachineContext(
            location_before=before, location_after=after, location_after_name=NAMES.get(after)
        ),
        action,
        location_id=before,
        location_name=NAMES.get(before, ""),
        episode=episode,
        turn=turn,
    )
    assert found is not None
    return found


def script_events(script: list[tuple[int, str, int]] | None = None) -> list[MapEvent]:
    return [
        map_event(before, action, after, turn)
        for turn, (before, action, after) in enumerate(script or SCRIPT, 1)
    ]


def sample_graph() -> MapGraph:
    return MapGraph().apply_all(script_events())


def record_sample(store: MemoryStore) -> MapStore:
    """The sample map written into ``store``."""
    the_map = MapStore(store)
    the_map.record(script_events())
    return the_map
