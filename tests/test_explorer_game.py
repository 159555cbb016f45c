"""The explorer on the real game (slow): what it sees, that it is reproducible, and that a
permanent failure in its memory is never tried again in a later episode."""

from __future__ import annotations

from pathlib import Path

from memstore.config import MemstoreConfig
from memstore.explorer import ExplorerAgent, observe
from memstore.game import ZorkGame, z_machine_context
from memstore.manager import SimpleMemoryManager
from memstore.models import Category, Persistence
from memstore.recorder import refused_action
from memstore.store import MemoryStore

try:
    from tests.fixtures.walkthrough import new_game, rom_or_skip
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import new_game, rom_or_skip  # type: ignore[no-redef]

BEHIND_HOUSE, LIVING_ROOM = 85, 75


def play(
    game: ZorkGame, manager: SimpleMemoryManager, agent: ExplorerAgent, moves: int
) -> list[tuple[int, str]]:
    """One episode; (room, action) of every turn."""
    agent.start_episode(manager)
    text, snapshot = game.reset()
    observation = observe(game, snapshot, text)
    taken = []
    for _ in range(moves):
        choice = agent.choose(observation)
        step = game.step(choice.action)
        manager.record_action_outcome(
            step.before.location_id,
            step.before.location_name,
            choice.action,
            step.response,
            z_machine_context(step.before, step.after, step.response),
        )
        taken.append((step.before.location_id, choice.action))
        observation = observe(game, step.after, step.response)
        if game.game_over():
            break
    manager.reset_episode()
    return taken


def test_the_object_tree_shows_the_room_its_scenery_and_the_parsers_nouns() -> None:
    game = new_game()
    names = {name for _, name in game.room_objects()}
    assert {"small mailbox", "leaflet", "door", "white house"} <= names
    assert "cretin" not in names  # never the player
    for action in ("north", "east"):
        game.step(action)
    assert game.snapshot().location_id == BEHIND_HOUSE
    window = [n for n, name in game.room_objects() if name == "kitchen window"]
    assert window, "the kitchen window is the room's scenery"
    assert game.object_words(window[0]) == ("window",)
    rug = next(n for n in range(1, 251) if game.object_name(n) == "carpet")
    assert game.object_words(rug) == ("rug", "carpet")
    assert not game.game_over()
    game.close()


def test_the_game_is_over_only_after_the_last_death() -> None:
    game = new_game()
    into_the_dark = ["north", "east", "open window", "west", "west", "move rug"]
    for action in into_the_dark + ["open trap door", "down", "north"]:
        step = game.step(action)
    assert step.after.died and not game.game_over()  # the first death: the game goes on
    game.close()


def test_the_explorer_is_reproducible(tmp_path: Path) -> None:
    rom = rom_or_skip()
    runs = []
    for index in range(2):
        with MemoryStore.open(tmp_path / f"run{index}.db") as store, ZorkGame(rom, seed=4) as game:
            manager = SimpleMemoryManager(store, MemstoreConfig())
            runs.append(play(game, manager, ExplorerAgent(seed=4), 80))
    assert runs[0] == runs[1]


def test_a_permanent_failure_is_never_tried_again_in_a_later_episode(tmp_path: Path) -> None:
    rom = rom_or_skip()
    with MemoryStore.open(tmp_path / "memory.db") as store, ZorkGame(rom, seed=2) as game:
        manager = SimpleMemoryManager(store, MemstoreConfig())
        agent = ExplorerAgent(seed=2)
        play(game, manager, agent, 120)
        failed = {
            (room.id, action)
            for room in manager.map.rooms()
            for memory in store.memories(room.id)
            if memory.category is Category.FAILURE
            and memory.persistence is Persistence.PERMANENT
            and (action := refused_action(memory.title)) is not None
        }
        assert len(failed) > 20  # the first episode met many refusals
        second = play(game, manager, agent, 120)
        assert not failed & set(second)
        assert len({room for room, _ in second}) > 5
