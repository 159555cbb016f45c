"""A failed action by the game's own evidence (memstore.outcome): refusals, repeats, deaths."""

from __future__ import annotations

import pytest

from memstore.outcome import (
    REFUSALS,
    Outcome,
    RefusalKind,
    classify_refusal,
    first_line,
    judge_outcome,
    response_key,
)
from memstore.triggers import ZMachineContext

#: one answer of release 119 (collected by playing it) per refusal, in REFUSALS' order
EXAMPLES = [
    'I don\'t know the word "frobnicate".',
    'You used the word "hello" in a way that I don\'t understand.',
    "That sentence isn't one I recognize.",
    "There was no verb in that sentence!",
    "I don't understand that.",
    "I beg your pardon?",
    "There seems to be a noun missing in that sentence!",
    "What do you want to take?",
    "You must tell me how to do that to a sword.",
    "You should say what to light them with.",
    "If you wish to burn the brown sack, you should say so.",
    "Which wall do you mean, the granite wall or the surrounding wall?",
    "You can't go that way.",
    "There is a wall there.",
    "The forest becomes impenetrable to the north.",
    "Storm-tossed trees block your way.",
    "The rank undergrowth prevents eastward movement.",
    "You would need a machete to go further west.",
    "There is no tree here suitable for climbing.",
    "You cannot climb any higher.",
    "Only Santa Claus climbs down chimneys.",
    "You cannot go down without fracturing many bones.",
    "The windows are all boarded.",
    "The door is boarded and you can't remove the boards.",
    "The door is nailed shut.",
    "It is too narrow for most insects.",
    "The stream emerges from a spot too small for you to enter.",
    "The chasm probably leads straight to the infernal regions.",
    "Are you out of your mind?",
    "It's a long way...",
    "You wouldn't fit and would die if you could.",
    "You try to ascend the ramp, but it is impossible, and you slide back down.",
    "The door is locked from above.",
    "The east wall is solid rock.",
    "You would drown.",
    "The dam blocks your way.",
    "Some invisible force prevents you from passing through the gate.",
    "The cyclops doesn't look like he'll let you past.",
    "You can't go there without a vehicle.",
    "You cannot fit through this passage with that load.",
    "You cannot reach the rope.",
    "You can't be serious.",
    "What a concept!",
    "A valiant attempt.",
    "An interesting idea...",
    "You can't do that!",
    "You can't turn that on.",
    "You can't move the small mailbox.",
    "You aren't an accomplished enough juggler.",
    "That would involve quite a contortion!",
    "You hit your head against the small mailbox as you attempt this feat.",
    "How does one read a small mailbox?",
    "I don't think that the small mailbox would agree with you.",
    "Pushing the small mailbox doesn't seem to work.",
    "Moving the glass bottle reveals nothing.",
    "The kitchen table doesn't lead upward.",
    "There's nothing special about the sword.",
    "It is securely anchored.",
    "It is an integral part of the control panel.",
    "The boards are securely fastened.",
    "The windows are boarded and can't be opened.",
    "I can't see how to get in from here.",
    "The mirror is many times your size. Give up.",
    "It is far too large to carry.",
    "The rug is extremely heavy and cannot be carried.",
    "The door cannot be opened.",
    "You cannot close that.",
    "As hard as you try, the book cannot be closed.",
    "Sounds reasonable, but this isn't how.",
    "It's not clear how to turn it on with your bare hands.",
    "They're greek to you.",
    'A hollow voice says "Fool."',
    "You're not at the house.",
    "Nothing happens.",
    "You have neither the tools nor the expertise.",
    "You can't see any leaflet here!",
    "You don't have the small mailbox.",
    "You're not carrying the lunch.",
    "You already have that!",
    "You have to be holding the glass bottle first.",
    "It's too dark to see!",
    "It is impossible to read in the dark.",
    "It is already open.",
    "The book is already open to page 569.",
    "You are already in the magic boat!",
    "You're inside of it!",
    "There's nothing here you can take.",
    "Your load is too heavy.",
    "You can't reach him; he's on the ceiling.",
    "The door is too heavy.",
    "Have your eyes checked.",
    "Too late for that.",
    "The window is closed.",
    "You cannot enter the painting.",
]

NOT_REFUSALS = [
    "Opening the small mailbox reveals a leaflet.",
    "With great effort, you open the window far enough to allow entry.",
    "Taken.",
    "Time passes...",
    "West of House\nYou are standing in an open field west of a white house.",
    "The small mailbox is closed.",  # examining it: an answer, not a refusal
    "The lamp is on.",
    "",
]

NOTHING = ZMachineContext(location_before=1, location_after=1)
MOVED = ZMachineContext(location_before=1, location_after=2)


def test_every_refusal_has_a_real_answer_that_is_classified_as_it() -> None:
    assert len(EXAMPLES) == len(REFUSALS)
    for example, refusal in zip(EXAMPLES, REFUSALS, strict=True):
        assert classify_refusal(example) is refusal, example


@pytest.mark.parametrize("answer", NOT_REFUSALS)
def test_other_answers_are_not_refusals(answer: str) -> None:
    assert classify_refusal(answer) is None


def test_what_the_game_adds_after_the_refusal_does_not_matter() -> None:
    found = classify_refusal("You can't go that way.\nThe axe sweeps past as you jump aside.\n")
    assert found is not None and found.kind is RefusalKind.NO_EXIT and found.rule
    assert classify_refusal("\n  You can't go that way.  \n") is found


def test_the_parsers_object_note_is_skipped() -> None:
    assert first_line("(kitchen window)\nHave your eyes checked.") == "Have your eyes checked."
    found = classify_refusal("(trap door)\nThe door is locked from above.")
    assert found is not None and found.kind is RefusalKind.STATE and not found.rule


def test_rules_and_state_are_told_apart() -> None:
    rules = ["You can't go that way.", 'I don\'t know the word "xyzzyplugh".', "What a concept!"]
    states = ["You can't see any leaflet here!", "The trap door is closed.", "It is already open."]
    assert all(classify_refusal(a).rule for a in rules)  # type: ignore[union-attr]
    assert not any(classify_refusal(a).rule for a in states)  # type: ignore[union-attr]


def test_a_refusal_that_changed_nothing_is_refused() -> None:
    assert judge_outcome("You can't go that way.", NOTHING, None) is Outcome.REFUSED


def test_a_first_answer_that_changed_nothing_is_no_failure() -> None:
    """A first 'open window' changes no score, location or inventory: not a failure now."""
    answer = "With great effort, you open the window far enough to allow entry."
    assert judge_outcome(answer, NOTHING, None) is Outcome.OK
    assert judge_outcome(answer, NOTHING, response_key("Something else.")) is Outcome.OK


def test_the_same_answer_again_with_nothing_changed_is_repeated() -> None:
    answer = "The small mailbox is closed.\n"
    assert judge_outcome(answer, NOTHING, response_key("The small  mailbox is closed.")) is (
        Outcome.REPEATED
    )


def test_a_tracked_change_is_ok_whatever_the_answer() -> None:
    assert judge_outcome("You can't go that way.", MOVED, None) is Outcome.OK
    assert judge_outcome("Kitchen", MOVED, response_key("Kitchen")) is Outcome.OK
    scored = ZMachineContext(score_before=0, score_after=10)
    assert judge_outcome("Taken.", scored, response_key("Taken.")) is Outcome.OK


def test_a_death_is_a_failure_even_though_the_state_changed() -> None:
    died = ZMachineContext(location_before=1, location_after=2, died=True)
    assert judge_outcome("Oh, no! A lurking grue ...", died, None) is Outcome.DIED
    assert Outcome.DIED.failed and Outcome.REFUSED.failed and not Outcome.OK.failed
