"""Zork I end to end: the memory manager in the loop of the real game (offline recorder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.base_line import split_base_line
from memstore.config import MemstoreConfig
from memstore.demo import DEFAULT_EPISODES, DEFAULT_MOVES, run_demo
from memstore.game import ZorkGame, z_machine_context
from memstore.manager import SimpleMemoryManager
from memstore.models import Category, Persistence
from memstore.store import MemoryStore
from memstore.tokens import count_tokens
from tests.fixtures.walkthrough import GRUE_DEATH_SEQUENCE, get_walkthrough_slice, rom_or_skip

ROOT = Path(__file__).resolve().parents[1]
#: from the start into the kitchen, pick up the sack and drop it again
KITCHEN_DROP = ["N", "E", "Open window", "W", "Take sack", "Drop sack"]


def play(game: ZorkGame, manager: SimpleMemoryManager, actions: list[str]) -> list:
    _, snapshot = game.reset()
    results = []
    for action in actions:
        manager.get_location_memory(snapshot.location_id)
        result = game.step(action)
        manager.record_action_outcome(
            result.before.location_id,
            result.before.location_name,
            action,
            result.response,
            z_machine_context(result.before, result.after, result.response),
        )
        results.append(result)
        snapshot = result.after
    return results


@pytest.fixture
def game() -> ZorkGame:
    with ZorkGame(rom_or_skip()) as opened:
        yield opened


def test_episode_two_sees_episode_ones_persistent_memories_but_not_its_ephemeral_ones(
    game: ZorkGame, store: MemoryStore
) -> None:
    manager = SimpleMemoryManager(store)
    results = play(game, manager, KITCHEN_DROP)
    kitchen = results[-1].before.location_id
    assert results[-1].before.location_name == "Kitchen"
    ephemeral = [m for m in store.memories(kitchen) if m.persistence is Persistence.EPHEMERAL]
    assert [m.title for m in ephemeral] == ["Dropped brown sack here"]
    seen_in_episode_one = {
        r.before.location_id: store.get_location_memory(r.before.location_id) for r in results
    }
    manager.reset_episode()
    results_two = play(game, manager, KITCHEN_DROP[:4])
    assert [r.before.location_id for r in results_two] == [
        r.before.location_id for r in results[:4]
    ]
    kitchen_view = manager.get_location_memory(kitchen)
    assert "Dropped brown sack here" not in kitchen_view
    assert "Dropped brown sack here" in seen_in_episode_one[kitchen]
    for location_id, view in seen_in_episode_one.items():
        for line in view.splitlines():
            if line and "[session]" not in line:
                assert line in manager.get_location_memory(location_id)


def test_the_memory_of_a_move_is_stored_where_the_move_started(
    game: ZorkGame, store: MemoryStore
) -> None:
    manager = SimpleMemoryManager(store)
    results = play(game, manager, ["N", "E"])
    north_of_house, behind_house = results[0].after, results[1].after
    assert (north_of_house.location_name, behind_house.location_name) == (
        "North of House",
        "Behind House",
    )
    titles = [m.title for m in store.memories(north_of_house.location_id)]
    assert f"'e' leads to Behind House ({behind_house.location_id})" in titles
    assert store.memories(behind_house.location_id) == []


def test_dying_in_the_dark_leaves_a_danger_memory_where_it_happened(
    game: ZorkGame, store: MemoryStore
) -> None:
    manager = SimpleMemoryManager(store)
    results = play(game, manager, list(GRUE_DEATH_SEQUENCE))
    fatal = results[-1]
    assert fatal.after.died
    dangers = [m for m in store.memories(fatal.before.location_id) if m.category is Category.DANGER]
    assert len(dangers) == 1
    assert dangers[0].persistence is Persistence.PERMANENT
    assert "grue" in dangers[0].text.lower()
    manager.reset_episode()
    assert "[DANGER]" in manager.get_location_memory(fatal.before.location_id)


def test_agent_context_stays_within_its_token_budget(game: ZorkGame, db_path: Path) -> None:
    config = MemstoreConfig(token_budget=80)
    with MemoryStore.open(db_path, config=config) as store:
        manager = SimpleMemoryManager(store, config)
        actions = get_walkthrough_slice(0, 150)
        for _ in range(2):
            play(game, manager, actions)
            manager.reset_episode()
        views = [store.get_location_memory(loc.id) for loc in store.locations()]
    assert any("not shown)" in view for view in views)  # the budget really bit somewhere
    assert max(count_tokens(view) for view in views) <= 80


def test_the_demo_reproduces_the_committed_memories_md(tmp_path: Path) -> None:
    rom_or_skip()
    out = tmp_path / "Memories.md"
    with MemoryStore.open(tmp_path / "demo.db") as store:
        report = run_demo(
            store, episodes=DEFAULT_EPISODES, moves=DEFAULT_MOVES, out=out, progress=False
        )
    assert report.mode == "offline" and report.llm_calls == 0
    made_base, made = split_base_line(out.read_text(encoding="utf-8"))
    committed_base, committed = split_base_line(
        (ROOT / "game_files" / "Memories.md").read_text(encoding="utf-8")
    )
    assert made == committed
    # the base line names a database (a new one each run) and its change counter
    assert made_base is not None and committed_base is not None
    assert made_base.version == committed_base.version


def test_rerunning_the_demo_continues_episodes_and_duplicates_nothing(tmp_path: Path) -> None:
    rom_or_skip()
    db = tmp_path / "demo.db"
    with MemoryStore.open(db) as store:
        run_demo(store, episodes=1, moves=40, out=None, progress=False)
        first = [(loc.location.id, loc.memories) for loc in store.export_locations()]
    with MemoryStore.open(db) as store:
        report = run_demo(store, episodes=1, moves=40, out=None, progress=False)
        second = [(loc.location.id, loc.memories) for loc in store.export_locations()]
    assert report.episodes == [2]
    assert second == first
