"""Review S5 A (the agent loop and the evaluation), findings 1 and 2.

1. The LLM agent's "save" and "restore" went through to Zork, which wrote and read
   ``zork1.qzl`` in the working directory: a later episode, the other arm of an evaluation
   or a later run restored a game saved by another, the map learned "restore" as an exit
   and the memory that it scores; "script" appended a transcript to a file named
   ``script``.
2. One answer such as "n.e.open window.w.w" or "go north then east" was played as one
   move: Zork's parser runs each command of a line joined by ".", ",", '"', "then" or
   "and", so ``--moves`` did not bound the agent, and the map stored an exit from West of
   House straight to the Living Room.

``ZorkGame.step`` now refuses both (GameError, nothing played), the LLM agent reads such
an answer as no command (the turn falls back to the explorer's choice, counted), and the
explorer never takes one that a memory or the map names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstore.explorer import ExplorerAgent
from memstore.game import GameError, ZorkGame, z_machine_context
from memstore.game_commands import command_refusal
from memstore.llm_agent import parse_action
from memstore.manager import SimpleMemoryManager
from memstore.models import Memory
from memstore.store import MemoryStore
from tests.fixtures.walkthrough import rom_or_skip

FILE_COMMANDS = ["save", "restore", "script", "unscript", "SAVE", "n. save", "restart", "quit"]
#: review S5 D F1: Zork reads the first six letters of a word ("restoring" is RESTORE),
#: and its dictionary has debugging verbs ("#reco" records every later command in a file)
SIX_LETTERS = ["scripting", "Scripted", "restarting", "restoring", "Restoration",
               "unscripting", "#reco", "#record", "#comm", "#unre", "#rand 5", "$ve"]  # fmt: skip
JOINED = [
    "n.e",
    "n. e",
    "n,e",
    "n, e",
    'n "e',
    "n then e",
    "N THEN E",
    "go north then east",
    "open mailbox and take leaflet",
    "n.e.open window.w.w",
]


@pytest.fixture
def game(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ZorkGame]:
    monkeypatch.chdir(tmp_path)  # where Frotz would write zork1.qzl or script
    with ZorkGame(rom_or_skip()) as opened:
        opened.reset()
        yield opened


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", FILE_COMMANDS + SIX_LETTERS)
def test_a_command_that_writes_a_file_or_ends_the_game_is_not_played(
    game: ZorkGame, tmp_path: Path, action: str
) -> None:
    game.step("open mailbox")
    before = game.snapshot()
    with pytest.raises(GameError, match="not played") as refused:
        game.step(action)
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # no save file, no transcript
    assert game.snapshot() == before
    assert game.step("take leaflet").response.startswith("Taken")


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", JOINED)
def test_several_commands_in_one_line_are_not_played(game: ZorkGame, action: str) -> None:
    before = game.snapshot()
    with pytest.raises(GameError, match="one command at a time"):
        game.step(action)
    assert game.snapshot() == before
    assert game.step("north").after.location_name == "North of House"


@pytest.mark.slow  # (it starts the game)
def test_a_line_break_is_not_sent_to_the_game(game: ZorkGame) -> None:
    with pytest.raises(GameError, match="line break"):
        game.step("north\nsave")
    assert game.snapshot().moves == 0


@pytest.mark.slow  # (it starts the game)
def test_a_line_the_text_rule_passes_but_that_plays_two_moves_is_undone(
    game: ZorkGame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter checks the Z-machine's move counter too, for a joining word or sign it
    does not know: the game is put back as it was before the line."""
    import memstore.game as game_module

    monkeypatch.setattr(game_module, "command_refusal", lambda action: None)
    with pytest.raises(GameError, match="played 2 moves"):
        game.step("n, e")
    assert game.snapshot().moves == 0 and game.snapshot().location_id == 64
    assert game.step("north").after.moves == 1


@pytest.mark.parametrize("action", ["take leaflet", "open the mailbox", "n", "put egg in case"])
def test_one_command_is_played(action: str) -> None:
    assert command_refusal(action) is None
    assert parse_action(action) == action


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", ["take leaflet and mailbox", "take leaflet, mailbox", "north."])
def test_one_move_with_and_a_comma_or_a_final_stop_is_played(game: ZorkGame, action: str) -> None:
    # review S5 D F4: these are one move in Zork, and were refused as several commands;
    # the move counter tells (a line that played two moves is undone and refused)
    game.step("open mailbox")
    step = game.step(action)
    assert step.after.moves == step.before.moves + 1, step.response


def test_the_llm_agent_still_reads_and_or_a_comma_as_two_commands() -> None:
    """The agent's answer is played by a loop that cannot take a refused step back: it
    keeps to the lines that are one command by their text."""
    assert parse_action("take lamp and sword") is None and parse_action("drop lamp, sword") is None
    assert parse_action("north.") == "north"


@pytest.mark.parametrize("answer", [*FILE_COMMANDS, *JOINED, "Q", "> restore"])
def test_the_llm_agent_reads_such_an_answer_as_no_command(answer: str) -> None:
    assert parse_action(answer) is None


def test_the_explorer_never_takes_an_action_a_memory_learned_from_a_file_command(
    store: MemoryStore,
) -> None:
    """A database written before this change may remember "'restore' scores +10": the
    explorer does not take it again."""
    store.add_memory(
        64,
        "West of House",
        Memory(
            category="SUCCESS",
            title="'restore' scores +10",
            text="restore: Ok. Score +10.",
            episode=1,
            turns="3",
            persistence="permanent",
        ),
    )
    explorer = ExplorerAgent(seed=1)
    explorer.start_episode(SimpleMemoryManager(store))
    assert "restore" not in explorer.lessons(64).worth


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", ["again", "g", "G", "oops north"])
def test_again_is_not_played(game: ZorkGame, action: str) -> None:
    # review S5 C F2: "g" repeats the last command, and the map stored it as an exit of
    # its own ("map route 85 128" answered "g")
    game.step("south")
    with pytest.raises(GameError, match="repeats the last"):
        game.step(action)
    assert game.snapshot().moves == 1


@pytest.mark.slow  # (it starts the game)
def test_a_command_the_parser_does_not_understand_fails_no_exit(store: MemoryStore) -> None:
    """Review S5 C F1: memstore reads "outside" as "out" and "head east" as "east", which
    Zork I does not know: three of each in the Kitchen pruned its real "east" and "out"
    exits (the memories said "not understood")."""
    manager = SimpleMemoryManager(store)
    with ZorkGame(rom_or_skip()) as game:
        game.reset()
        actions = ["n", "e", "open window", "w", "outside", "outside", "outside"]
        for action in [*actions, "head east", "head east", "head east"]:
            step = game.step(action)
            manager.record_action_outcome(
                step.before.location_id,
                step.before.location_name,
                action,
                step.response,
                z_machine_context(step.before, step.after, step.response),
            )
        assert step.response.startswith("You used the word")
        assert game.step("out").after.location_name == "Behind House"
    assert manager.flush()
    kitchen = manager.map.exits(27)
    assert kitchen.pruned == () and kitchen.exits == ()
    assert {"east", "out"} <= set(manager.map.untried_directions(27).directions)


def test_an_action_that_is_not_a_direction_still_fails_its_connection_when_not_understood(
    store: MemoryStore,
) -> None:
    """Review S5 D F2: "y" learned as an exit (before the game refused "restart") answers
    "There was no verb in that sentence!" when tried again: that failure counts, or the
    bogus exit stays routed for good. Only a direction's parser refusal is passed over."""
    from memstore.triggers import ZMachineContext

    manager = SimpleMemoryManager(store, episode=1)
    manager.record_action_outcome(
        137,
        "North of House",
        "y",
        "West of House",
        ZMachineContext(location_before=137, location_after=64),
    )
    for _ in range(3):
        manager.record_action_outcome(
            137,
            "North of House",
            "y",
            "There was no verb in that sentence!",
            ZMachineContext(location_before=137, location_after=137),
        )
    assert manager.flush()
    assert manager.map.route(137, 64).actions is None


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", ["north, superbrief", "north and score", "n, verbose"])
def test_a_join_with_a_command_that_takes_no_move_is_not_played(
    game: ZorkGame, action: str
) -> None:
    # review S5 E F1: the second command took no move, so the counter showed one, and
    # superbrief stayed on for the rest of the game
    with pytest.raises(GameError, match="takes no move"):
        game.step(action)
    assert game.snapshot().moves == 0


@pytest.mark.slow  # (it starts the game)
def test_a_line_jericho_would_cut_is_not_played(game: ZorkGame, tmp_path: Path) -> None:
    # review S5 E F2: Jericho cuts a line at 198 bytes, and Zork read "savex" cut to "save"
    with pytest.raises(GameError, match="longer than"):
        game.step(" " * 194 + "savex")
    assert list(tmp_path.iterdir()) == [] and game.snapshot().moves == 0


@pytest.mark.slow  # (it starts the game)
@pytest.mark.parametrize("action", ["wait.", "z.", "wait,"])
def test_a_final_stop_or_comma_is_one_command_however_many_moves_it_takes(
    game: ZorkGame, action: str
) -> None:
    # review S5 E F8: "wait." was refused as "played 3 moves" (Zork's wait takes three)
    assert game.step(action).after.moves == 3


def test_the_llm_agent_reads_the_command_after_a_think_block() -> None:
    # review S5 E F9: only the first line was read, so such a model "failed" every turn
    assert parse_action("<think>The door is shut.\nBetter go round.</think>\nnorth") == "north"
    assert parse_action("<think>no end") is None


@pytest.mark.parametrize(
    "action",
    [*FILE_COMMANDS, *SIX_LETTERS, "again", "oops north", "n. e", 'n "e', "n then e",
     "north, superbrief", "north and score", " " * 194 + "savex", "north\nsave"],
)  # fmt: skip
def test_the_rule_refuses_by_the_text_alone(action: str) -> None:
    """The everyday loop's check of the rule ``ZorkGame.step`` applies (the tests above
    play the game: ``slow``)."""
    assert command_refusal(action) is not None


@pytest.mark.parametrize(
    ("action", "checked"),
    [
        ("take lamp and sword", True),
        ("drop lamp, sword", True),
        ("wait.", False),
        ("north.", False),
    ],
)
def test_the_rule_leaves_a_join_the_move_counter_tells_to_it(action: str, checked: bool) -> None:
    from memstore.game_commands import needs_move_check

    assert command_refusal(action) is None
    assert needs_move_check(action) is checked
