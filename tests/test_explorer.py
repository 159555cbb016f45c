"""The explorer agent without the game: its candidates, and what it makes of its memory."""

from __future__ import annotations

import pytest

from memstore.config import MemstoreConfig
from memstore.explorer import (
    ExplorerAgent,
    Observation,
    Thing,
    candidate_actions,
    mentioned,
    parser_noun,
)
from memstore.manager import SimpleMemoryManager
from memstore.store import MemoryStore
from memstore.triggers import ZMachineContext

WEST_OF_HOUSE, NORTH_OF_HOUSE = 64, 137
MAILBOX = Thing(230, "small mailbox", ("mailbo", "box"))
LEAFLET = Thing(76, "leaflet", ("advert", "leaflet"))
RUG = Thing(55, "carpet", ("rug", "carpet"))
TRAP_DOOR = Thing(240, "trap door", ("door", "trapdo"))
WOODEN_DOOR = Thing(100, "wooden door", ("door",))
LAMP = Thing(146, "brass lantern", ("lamp", "lanter", "light"))


def here(*objects: Thing, response: str = "", inventory: tuple[Thing, ...] = ()) -> Observation:
    return Observation(WEST_OF_HOUSE, "West of House", response, 0, inventory, objects)


def test_things_are_named_by_the_noun_the_parser_knows() -> None:
    assert parser_noun(MAILBOX, [MAILBOX]) == "mailbox"  # "mailbo" is the cut "mailbox"
    assert parser_noun(RUG, [RUG]) == "rug"
    assert parser_noun(LAMP, [LAMP]) == "lamp"
    assert parser_noun(Thing(1, "pair of candles"), []) == "candles"  # no words: last word
    doors = [TRAP_DOOR, WOODEN_DOOR]
    assert [parser_noun(d, doors) for d in doors] == ["trap door", "wooden door"]


def test_a_thing_is_mentioned_by_any_of_its_nouns_as_a_whole_word() -> None:
    assert mentioned(RUG, "a large oriental rug in the center of the room")
    assert mentioned(LAMP, "a battery-powered brass lantern is on the trophy case")
    assert not mentioned(LEAFLET, "there is a small mailbox here.")  # not "mail" in mailbox
    assert mentioned(MAILBOX, "there is a small mailbox here.")


def test_candidates_put_what_the_game_mentioned_first() -> None:
    observation = here(MAILBOX, LEAFLET, inventory=(LAMP,))
    found = candidate_actions(observation, "there is a small mailbox here.")
    assert found["room"] == ["open mailbox", "take mailbox", "move mailbox"]
    assert found["unseen"] == ["open advert", "take advert", "move advert"]  # its first noun
    assert found["inventory"] == ["turn on lamp", "open lamp"]
    assert "examine lamp" in found["look"] and "read mailbox" in found["look"]
    assert len(found["directions"]) == 12
    assert candidate_actions(observation)["unseen"] == []  # no text given: all are seen


@pytest.fixture
def manager(store: MemoryStore) -> SimpleMemoryManager:
    return SimpleMemoryManager(store, MemstoreConfig(), run_id="explorer")


def refuse(manager: SimpleMemoryManager, action: str, answer: str) -> None:
    ctx = ZMachineContext(
        location_before=WEST_OF_HOUSE, location_after=WEST_OF_HOUSE, first_visit=False
    )
    manager.record_action_outcome(WEST_OF_HOUSE, "West of House", action, answer, ctx)


def test_the_explorer_never_takes_an_action_its_memory_says_failed_here(
    manager: SimpleMemoryManager,
) -> None:
    refuse(manager, "open mailbox", "You must tell me how to do that to a small mailbox.")
    refuse(manager, "take mailbox", "It is securely anchored.")
    refuse(manager, "move mailbox", "You can't move the small mailbox.")
    for direction in ("up", "down", "in", "out", "northwest", "southwest", "east"):
        refuse(manager, direction, "You can't go that way.")
    manager.reset_episode()  # a new episode: only the permanent failures are left
    agent = ExplorerAgent(seed=7)
    agent.start_episode(manager)
    observation = here(MAILBOX, response="There is a small mailbox here.")
    chosen = [agent.choose(observation).action for _ in range(8)]
    failed = {"open mailbox", "take mailbox", "move mailbox", "up", "down", "in", "out"}
    assert not failed & set(chosen)
    assert {"north", "south", "west", "northeast", "southeast"} <= set(chosen)


def test_what_the_memory_says_scores_comes_before_anything_new(
    manager: SimpleMemoryManager,
) -> None:
    scored = ZMachineContext(
        location_before=WEST_OF_HOUSE,
        location_after=WEST_OF_HOUSE,
        score_before=0,
        score_after=5,
        first_visit=False,
    )
    manager.record_action_outcome(WEST_OF_HOUSE, "West of House", "pray", "Done.", scored)
    manager.reset_episode()
    agent = ExplorerAgent(seed=1)
    agent.start_episode(manager)
    choice = agent.choose(here(response="You are in an open field."))
    assert choice.action == "pray"
    assert "'pray' scores +5" in choice.reasoning


def test_a_failure_for_now_is_tried_again_once_something_worked_there(
    manager: SimpleMemoryManager,
) -> None:
    refuse(manager, "west", "The kitchen window is closed.")  # EPHEMERAL, turn 1
    agent = ExplorerAgent(seed=3)
    agent.start_episode(manager)
    assert "west" in agent.lessons(WEST_OF_HOUSE).avoid
    window = Thing(243, "kitchen window", ("window",))
    seen = here(window, response="In one corner there is a small window, slightly ajar.")
    choice = agent.choose(seen)
    assert choice.action == "open window"
    opened = "With great effort, you open the window far enough to allow entry."
    ctx = ZMachineContext(location_before=WEST_OF_HOUSE, location_after=WEST_OF_HOUSE)
    manager.record_action_outcome(WEST_OF_HOUSE, "West of House", choice.action, opened, ctx)
    agent.note_turn(here(window, response=opened))
    assert "west" not in agent.lessons(WEST_OF_HOUSE).avoid


def test_the_same_seed_makes_the_same_choices(store: MemoryStore, db_path) -> None:  # noqa: ANN001
    def play(seed: int) -> list[str]:
        with MemoryStore.open(db_path.with_name(f"s{seed}-{len(str(db_path))}.db")) as fresh:
            manager = SimpleMemoryManager(fresh, MemstoreConfig())
            agent = ExplorerAgent(seed)
            agent.start_episode(manager)
            return [agent.choose(here(MAILBOX, response="a mailbox")).action for _ in range(6)]

    assert play(5) == play(5)
    assert play(5) != play(6) or play(5) != play(8)


def test_choose_before_start_episode_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="start_episode"):
        ExplorerAgent().choose(here())
