"""Replaying Jericho's Zork I walkthrough on release 119 through the adapter."""

from __future__ import annotations

import pytest

from memstore.game import StepResult, ZorkGame

# spec 003 imports ``tests.fixtures.walkthrough``; without a tests/__init__.py pytest
# puts tests/ itself on sys.path, where the same module is ``fixtures.walkthrough``.
try:
    from tests.fixtures.walkthrough import (
        DARK_SEQUENCE_START,
        LAMP_OBJECT,
        get_walkthrough_dark_sequence,
        get_walkthrough_slice,
        get_walkthrough_until_lamp,
        get_zork1_seed,
        get_zork1_walkthrough,
        new_game,
        replay_walkthrough,
    )
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import (  # type: ignore[no-redef]
        DARK_SEQUENCE_START,
        LAMP_OBJECT,
        get_walkthrough_dark_sequence,
        get_walkthrough_slice,
        get_walkthrough_until_lamp,
        get_zork1_seed,
        get_zork1_walkthrough,
        new_game,
        replay_walkthrough,
    )

WEST_OF_HOUSE = 64
MAGIC_BOAT = 208


@pytest.fixture(scope="module")
def full_run() -> tuple[ZorkGame, list[StepResult]]:
    game = new_game()
    results = replay_walkthrough(game, get_zork1_walkthrough())
    yield game, results
    game.close()


def test_walkthrough_comes_from_jericho_with_seed_12():
    actions = get_zork1_walkthrough()
    assert len(actions) == 396
    assert actions[:3] == ["N", "N", "U"]
    assert actions[-1] == "W"
    assert get_zork1_seed() == 12
    assert get_walkthrough_slice(3, 5) == ["Get egg", "D"]


def test_full_walkthrough_scores_350_of_350(full_run):
    game, results = full_run
    final = results[-1].after
    assert final.score == 350
    assert final.moves == 394
    assert game.snapshot().score == 350


def test_full_walkthrough_wins_only_on_the_last_action(full_run):
    game, results = full_run
    assert [i for i, r in enumerate(results) if r.after.won and not r.before.won] == [395]
    assert "You have mastered the first part of the ZORK trilogy" in results[-1].response
    assert game.env.victory() is False  # Jericho cannot tell: the text can
    assert not any(r.after.died for r in results)


def test_full_walkthrough_visits_86_distinct_locations(full_run):
    _, results = full_run
    locations = {results[0].before.location_id} | {r.after.location_id for r in results}
    assert len(locations) == 86
    assert all(r.after.location_name for r in results)


def test_location_numbers_are_deterministic_across_replays():
    actions = get_walkthrough_slice(0, 120)
    runs = []
    for _ in range(2):
        game = new_game()
        runs.append([r.after.location_id for r in replay_walkthrough(game, actions)])
        game.close()
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 20


def test_reset_replays_identically_in_the_same_game():
    game = new_game()
    actions = get_walkthrough_slice(0, 40)
    first = [(r.after.location_id, r.after.score) for r in replay_walkthrough(game, actions)]
    game.reset()
    second = [(r.after.location_id, r.after.score) for r in replay_walkthrough(game, actions)]
    game.close()
    assert first == second


def test_start_is_west_of_house():
    game = new_game()
    snap = game.snapshot()
    game.close()
    assert (snap.location_id, snap.location_name) == (WEST_OF_HOUSE, "West of House")


def test_inventory_gains_the_lamp_when_the_walkthrough_takes_it():
    actions = get_walkthrough_until_lamp()
    assert actions[-1] == "Get lamp" and len(actions) == 13
    game = new_game()
    results = replay_walkthrough(game, actions)
    game.close()
    holding = [LAMP_OBJECT in r.after.inventory_ids for r in results]
    assert holding == [False] * 12 + [True]
    assert results[-1].after.location_name == "Living Room"


def test_dark_rooms_keep_their_location_ids_with_the_lamp():
    game = new_game()
    replay_walkthrough(game, get_walkthrough_slice(0, DARK_SEQUENCE_START))
    results = replay_walkthrough(game, get_walkthrough_dark_sequence())
    game.close()
    # into the Cellar with the lamp off: the text says nothing of where, the Z-machine does
    assert "pitch black" in results[0].response
    assert (results[0].after.location_id, results[0].after.location_name) == (33, "Cellar")
    assert all(LAMP_OBJECT in r.after.inventory_ids for r in results)
    visited = [r.after.location_name for r in results if r.moved]
    assert visited == [
        "Cellar",
        "The Troll Room",
        "East-West Passage",
        "Round Room",
        "Engravings Cave",
        "Dome Room",
        "Torch Room",
    ]


def test_boat_keeps_the_player_tracked_and_the_room_correct(full_run):
    _, results = full_run
    in_boat = [r for r in results if r.after.vehicle_id == MAGIC_BOAT]
    assert [r.action for r in in_boat][0] == "Enter boat"
    assert [r.action for r in in_boat][-1] == "Land"
    # the room is global 0, not the boat: the river carries the player through 4 rooms
    rooms = [r.after.location_name for r in in_boat if r.moved]
    assert rooms == ["Frigid River", "Frigid River", "Frigid River", "Shore"]
    assert len({r.after.location_id for r in in_boat}) == 5
    # the inventory is still the player's: things taken from the boat show up
    gained = {n for r in in_boat for n in r.after.inventory_names} - {
        n for n in in_boat[0].before.inventory_names
    }
    assert gained == {"sceptre", "red buoy"}
    out = next(r for r in results if r.action == "Get out of boat")
    assert out.after.vehicle_id is None and out.after.location_name == "Shore"
