"""What one turn's outcome was, from the game's own evidence (issue 17): pure, no I/O.

**A failed action** (the ``outcome`` of a turn record, revision 0007) is one of:

* ``died``: the action killed the player (the death flag);
* ``refused``: nothing the Z-machine tracks changed (score, location, inventory) and the
  game's answer is one of Zork I's refusals (``REFUSALS``: "You can't go that way.",
  "I don't know the word ...", "You can't see any ... here!", "What a concept!", ...);
* ``repeated``: nothing tracked changed and the answer is word for word (whitespace
  aside) the answer the same action got the last time at the same place in this
  episode: the game says it did nothing new.

Anything else is ``ok``: a first ``open mailbox`` ("Opening the small mailbox reveals a
leaflet.") changes no score, location or inventory but is not a failure. The older
definition, "changed no score, location or inventory" (the ``state_changed`` column), is
kept beside it for comparison (memstore.metrics).

The refusals were collected by playing release 119: at every room of the walkthrough
each direction and take / open / examine / read / enter / close / push / climb / eat /
move / drop / turn on on each object there, and a set of verbs without objects; every
answer that changed nothing was read and sorted. A refusal is recognised by the first
line of the answer (what the game's clock adds after it, "The axe sweeps past as you jump
aside.", does not matter). Each says whether it proves a **rule** (the same action here
will always be refused: "You can't go that way.", "I don't know the word ...") or only
the **state** of this game (it may work later: "The kitchen window is closed.", "You
can't see any leaflet here!"; or there is nothing to do: "It is already open."). The
offline recorder stores the first kind as PERMANENT FAILURE memories and the second as
EPHEMERAL ones (memstore.recorder). Zork I also answers "You can't go that way." for a
few exits that open later (the trap door under the living room's rug): the recorder
stores it for the episode only when a memory says the same action worked there before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstore.triggers import ZMachineContext

__all__ = [
    "Outcome",
    "REFUSALS",
    "Refusal",
    "RefusalKind",
    "classify_refusal",
    "failed_by_state",
    "judge_outcome",
    "response_key",
]


class Outcome(StrEnum):
    """A turn's outcome (the ``turn_records.outcome`` column)."""

    OK = "ok"
    REFUSED = "refused"
    REPEATED = "repeated"
    DIED = "died"

    @property
    def failed(self) -> bool:
        return self is not Outcome.OK


class RefusalKind(StrEnum):
    """Why the game refused: what the agent should learn from it."""

    #: the parser did not understand the command ("I don't know the word ...")
    PARSER = "parser"
    #: there is no way to go in that direction here ("You can't go that way.")
    NO_EXIT = "no_exit"
    #: the verb does not apply to that object ("What a concept!", "You can't do that!")
    IMPOSSIBLE = "impossible"
    #: not now: something in the game's state is in the way ("The door is locked.")
    STATE = "state"
    #: nothing to do: what the action would bring about is already so ("It is already
    #: open.", "You already have that!")
    ALREADY = "already"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One of the game's refusals: its pattern (on the first line of the answer), what it
    means, and whether it proves a rule (the same action here is always refused)."""

    pattern: re.Pattern[str]
    kind: RefusalKind
    rule: bool

    def matches(self, line: str) -> bool:
        return self.pattern.match(line) is not None


def _r(pattern: str, kind: RefusalKind, rule: bool) -> Refusal:
    return Refusal(re.compile(pattern, re.IGNORECASE), kind, rule)


P, X, V, S = RefusalKind.PARSER, RefusalKind.NO_EXIT, RefusalKind.IMPOSSIBLE, RefusalKind.STATE
A = RefusalKind.ALREADY

#: Zork I's refusals (release 119), most specific first; the generic "You can't ..." last.
REFUSALS: tuple[Refusal, ...] = (
    # --- the parser did not understand: the same words never work
    _r(r'I don\'t know the word "', P, True),
    _r(r'You used the word "[^"]*" in a way that I don\'t understand', P, True),
    _r(r"That sentence isn't one I recognize", P, True),
    _r(r"There was no verb in that sentence", P, True),
    _r(r"I don't understand that", P, True),
    _r(r"I beg your pardon", P, True),
    _r(r"There seems to be a noun missing", P, True),
    _r(r"What do you want to ", P, True),
    _r(r"You must tell me how to do that to ", P, True),
    _r(r"You should say what to ", P, True),
    _r(r"If you wish to burn the ", P, True),
    _r(r"Which .+ do you mean", P, False),  # depends on what is here now
    # --- no exit that way: a rule of the room
    _r(r"You can't go that way", X, True),
    _r(r"There is a wall there", X, True),  # the wording of the later Zork games
    _r(r"The forest becomes impenetrable", X, True),
    _r(r"Storm-tossed trees block your way", X, True),
    _r(r"The rank undergrowth prevents ", X, True),
    _r(r"You would need a machete ", X, True),
    _r(r"There is no tree here suitable for climbing", X, True),
    _r(r"You cannot climb any higher", X, True),
    _r(r"Only Santa Claus climbs down chimneys", X, True),
    _r(r"You cannot go down without fracturing many bones", X, True),
    _r(r"The windows are all boarded", X, True),
    _r(r"The door is boarded and you can't remove the boards", X, True),
    _r(r"The door is nailed shut", X, True),
    _r(r"It is too narrow for most insects", X, True),
    _r(r"The stream emerges from a spot too small for you to enter", X, True),
    _r(r"The chasm probably leads straight to the infernal regions", X, True),
    _r(r"Are you out of your mind\?", X, True),
    _r(r"It's a long way\.\.\.", X, True),
    _r(r"You wouldn't fit and would die if you could", X, True),
    _r(r"You try to ascend the ramp, but it is impossible", X, True),
    # --- exits that open later: the state of this game
    _r(r"The (kitchen window|trap door|grating|door|gate) is (closed|locked)", S, False),
    _r(r"The east wall is solid rock", S, False),  # until the cyclops breaks through
    _r(r"You would drown", S, False),  # until the reservoir is drained
    _r(r"The dam blocks your way", S, False),
    _r(r"Some invisible force prevents you from passing", S, False),
    _r(r"The .+ doesn't look like he'll let you past", S, False),
    _r(r"You can't go there without a vehicle", S, False),
    _r(r"You cannot fit through this passage with that load", S, False),
    _r(r"You cannot reach the rope", S, False),
    # --- the verb does not apply to the object: a rule
    _r(r"You can't be serious", V, True),
    _r(r"What a concept", V, True),
    _r(r"A valiant attempt", V, True),
    _r(r"An interesting idea", V, True),
    _r(r"You can't do that", V, True),
    _r(r"You can't turn that", V, True),
    _r(r"You can't move the ", V, True),
    _r(r"You aren't an accomplished enough juggler", V, True),
    _r(r"That would involve quite a contortion", V, True),
    _r(r"You hit your head against the ", V, True),
    _r(r"How does one (read|look through) ", V, True),
    _r(r"I don't think that the .+ would agree with you", V, True),
    _r(r"(Pushing|Kicking) the .+ (has no effect|doesn't seem to work|isn't notably)", V, True),
    _r(r"Moving the .+ reveals nothing", V, True),
    _r(r"The .+ doesn't lead upward", V, True),
    _r(r"There's nothing special about the ", V, True),
    _r(r"It is securely anchored", V, True),
    _r(r"It is an integral part of ", V, True),
    _r(r"The .+ (is|are) securely fastened", V, True),
    _r(r"The .+ (is|are) boarded", V, True),
    _r(r"I can't see how to get in from here", V, True),
    _r(r"The .+ is many times your size", V, True),
    _r(r"It is far too large to carry", V, True),
    _r(r"The .+ is extremely heavy and cannot be carried", V, True),
    _r(r"The .+ cannot be (opened|closed)", V, True),
    _r(r"You cannot close that", V, True),
    _r(r"As hard as you try, the .+ cannot be closed", V, True),
    _r(r"Sounds reasonable, but this isn't how", V, True),
    _r(r"It's not clear how to turn it on with your bare hands", V, True),
    _r(r"They're greek to you", V, True),
    _r(r'A hollow voice says "Fool\."', V, True),
    _r(r"You're not at the house", V, True),
    _r(r"Nothing happens", V, True),
    _r(r"You have neither the tools nor the expertise", V, True),  # (the egg: the thief's)
    # --- not now: the state of this game
    _r(r"You can't see any .+ here", S, False),
    _r(r"You don't have (the |that)", S, False),
    _r(r"You're not carrying the ", S, False),
    _r(r"You already have that", A, False),
    _r(r"You have to be holding the ", S, False),
    _r(r"It's too dark to see", S, False),
    _r(r"It is impossible to read in the dark", S, False),
    _r(r"It is already (open|closed|on|off)", A, False),
    _r(r"The .+ is already (open|closed|on|off)", A, False),
    _r(r"You are already in the ", A, False),
    _r(r"You're inside of it", A, False),
    _r(r"There's nothing here you can take", S, False),
    _r(r"Your load is too heavy", S, False),
    _r(r"You can't reach ", S, False),
    _r(r"The door is too heavy", S, False),
    _r(r"Have your eyes checked", A, False),
    _r(r"Too late for that", A, False),
    _r(r"The (window|door|grating) is (closed|locked)", S, False),
    # --- anything else the game says the player cannot do
    _r(r"You can(?:'|no)t ", V, False),
)
del P, X, V, S, A

#: "(kitchen window)": the parser saying which object it picked, before the answer
_PICKED = re.compile(r"\A\s*\([^)\n]*\)\s*")


def first_line(response: str) -> str:
    """The answer's first non-empty line, without the parser's "(object)" note."""
    text = _PICKED.sub("", response, count=1)
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


#: every refusal in one pattern (a named group each, in order): one match per answer
_ANY_REFUSAL = re.compile(
    "|".join(f"(?P<r{index}>{r.pattern.pattern})" for index, r in enumerate(REFUSALS)),
    re.IGNORECASE,
)


def classify_refusal(response: str) -> Refusal | None:
    """The refusal the answer opens with (the first of ``REFUSALS`` that matches its first
    line), or None when it is not one of them."""
    found = _ANY_REFUSAL.match(first_line(response))
    if found is None or found.lastgroup is None:
        return None
    return REFUSALS[int(found.lastgroup[1:])]


def response_key(response: str) -> str:
    """An answer as compared with the last one: whitespace runs collapsed, trimmed."""
    return " ".join(response.split())


def failed_by_state(ctx: ZMachineContext) -> bool:
    """The older definition: the action changed no score, location or inventory."""
    return not (ctx.score_delta != 0 or ctx.location_changed or ctx.inventory_changed)


def judge_outcome(response: str, ctx: ZMachineContext, previous: str | None) -> Outcome:
    """The turn's outcome (see the module docstring). ``previous`` is ``response_key`` of
    the answer the same action got the last time at the same place this episode (None
    if it was not taken there yet)."""
    if ctx.died:
        return Outcome.DIED
    if not failed_by_state(ctx):
        return Outcome.OK
    if classify_refusal(response) is not None:
        return Outcome.REFUSED
    if previous is not None and response_key(response) == previous:
        return Outcome.REPEATED
    return Outcome.OK
