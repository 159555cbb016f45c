"""Failed actions judged on the real game (release 119): refusals, repeats, a death."""

from __future__ import annotations

from memstore.config import MemstoreConfig
from memstore.game import z_machine_context
from memstore.manager import SimpleMemoryManager
from memstore.outcome import RefusalKind, classify_refusal
from memstore.store import MemoryStore

try:
    from tests.fixtures.walkthrough import new_game
except ModuleNotFoundError:  # pragma: no cover - depends on how pytest was started
    from fixtures.walkthrough import new_game  # type: ignore[no-redef]


def test_the_games_own_answers_decide_which_actions_failed(store: MemoryStore) -> None:
    game = new_game()
    manager = SimpleMemoryManager(store, MemstoreConfig(), run_id="game")
    plan = [
        ("northwest", "refused"),  # "You can't go that way."
        ("take leaflet", "refused"),  # the mailbox is shut: "You can't see any leaflet here!"
        ("open mailbox", "ok"),  # changes nothing tracked, but it is no failure
        ("open mailbox", "refused"),  # "It is already open."
        ("examine mailbox", "ok"),
        ("examine mailbox", "repeated"),  # the same answer again
        ("frobnicate", "refused"),  # "I don't know the word ..."
        ("take leaflet", "ok"),  # now it is there
        ("north", "ok"),
        ("east", "ok"),
        ("open window", "ok"),
        ("west", "ok"),
        ("west", "ok"),
        ("move rug", "ok"),
        ("open trap door", "ok"),
        ("down", "ok"),
        ("north", "died"),  # eaten by a grue in the dark
    ]
    for action, _expected in plan:
        step = game.step(action)
        manager.record_action_outcome(
            step.before.location_id,
            step.before.location_name,
            action,
            step.response,
            z_machine_context(step.before, step.after, step.response),
        )
    manager.flush()
    judged = [(r["action"], r["outcome"]) for r in store.turn_records("game")]
    assert judged == plan
    game.close()


def test_no_exit_and_the_closed_window_are_a_rule_and_a_state() -> None:
    game = new_game()
    wall = classify_refusal(game.step("northwest").response)
    assert wall is not None and wall.kind is RefusalKind.NO_EXIT and wall.rule
    game.step("north")
    game.step("east")
    window = classify_refusal(game.step("west").response)  # "The kitchen window is closed."
    assert window is not None and window.kind is RefusalKind.STATE and not window.rule
    game.close()
