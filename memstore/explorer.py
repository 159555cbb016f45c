"""A deterministic explorer agent: a reference agent for benchmarks, no LLM (issue 17).

Like the random and heuristic agents of the text-game literature, it plays from candidate
actions it builds from the game: the twelve canonical directions, and open / take / move /
turn on / enter / read / examine on the objects the Z-machine's object tree shows in the
room and in the inventory (``observe``: their names and the nouns the parser knows them
by). Everything it knows about the world beyond what it sees this turn and what it did
this episode comes from memstore's public read API, the same information an LLM agent is
given:

* ``manager.get_location_memory(room)``: the text it reads before every action (what the
  token metrics count);
* ``manager.store.memories(room)``: the memories there. The offline recorder starts every
  title with the action (``memstore.recorder.memory_action``): FAILURE memories (the
  game's refusals) and DANGER ones (deaths, lost points) are actions not to take there;
  SUCCESS ones (points, items) are actions worth taking again in a new episode;
* the map (``manager.map``): ``untried_directions``, ``exits``, ``route`` and
  ``nearest_unexplored``, to walk to a room where the memory says an action scores, or
  to the closest room with a direction never tried.

Its working memory within an episode (what it tried where, where something it did worked,
what the game's text mentioned in each room) is cleared by ``start_episode``. A FAILURE
memory of this episode only ("The kitchen window is closed.") is tried again once
something else worked in that room since (``open window``).

Each turn it takes the first of, in order: a light when the room is pitch black; an action
the memory says scores or gets an item, not taken yet this episode; open / take / move on
what the game's text mentioned here, and turn on / open on what it carries, not tried yet
this episode; a direction never tried here; the first step of a route to a room whose
memory holds such actions, else to the nearest room with a direction never tried, else to
a room not visited this episode; the same verbs on objects the text never mentioned, and
enter / read / examine; a known exit; any direction. Ties are broken by
``random.Random(seed)``, so a run is reproducible. It never takes an action its memory says
failed or is deadly there.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memstore.game_commands import one_command_by_its_text
from memstore.map_graph import DIRECTIONS, canonical_direction
from memstore.models import Category, Memory, Persistence

# what the agent sees and could do (memstore.observation), importable from here too
from memstore.observation import (
    DARK,
    INVENTORY_VERBS,
    LOOK_VERBS,
    ROOM_VERBS,
    Choice,
    Observation,
    Thing,
    candidate_actions,
    mentioned,
    observe,
    parser_noun,
)
from memstore.outcome import RefusalKind, classify_refusal
from memstore.recorder import memory_action

if TYPE_CHECKING:
    from memstore.manager import SimpleMemoryManager

__all__ = [
    "DARK",
    "INVENTORY_VERBS",
    "LOOK_VERBS",
    "ROOM_VERBS",
    "Choice",
    "ExplorerAgent",
    "Observation",
    "Thing",
    "candidate_actions",
    "mentioned",
    "observe",
    "parser_noun",
]

#: verbs that may change a room when the game does not refuse them (the rug moved, the
#: window open): what failed there before may work now
ACTING_VERBS = frozenset(verb.split(" ")[0] for verb in ROOM_VERBS + INVENTORY_VERBS)
CANNOT_SEE = re.compile(r"You can't see any .+ here", re.IGNORECASE)
#: a route's step taken this often in a room this episode is not taken again (no circles)
MAX_WALKS = 6
#: a key of the working memory for what the player carries (the same wherever it is)
CARRIED = -1
_PAIRS = [("north", "south"), ("east", "west"), ("northeast", "southwest")]
_PAIRS += [("northwest", "southeast"), ("up", "down"), ("in", "out")]
OPPOSITE = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}


@dataclass
class Lessons:
    """What the memories of one room say about its actions (action -> the memory's title)."""

    avoid: dict[str, str] = field(default_factory=dict)
    worth: dict[str, str] = field(default_factory=dict)


class ExplorerAgent:
    """The explorer (see the module docstring): ``start_episode(manager)`` before each
    episode, then ``choose(observation)`` before each action."""

    name = "explorer"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.manager: SimpleMemoryManager | None = None
        # the working memory of one episode
        self._tried: set[tuple[int, str]] = set()
        #: (room, action) -> the turn the game refused it there
        self._refused: dict[tuple[int, str], int] = {}
        self._walked: dict[tuple[int, str], int] = {}
        self._worked_at: dict[int, int] = {}  # room -> the last turn something worked there
        self._seen: dict[int, str] = {}  # room -> what the game's text said there
        #: (room, noun) -> the turn the game said it could not see it there
        self._absent: dict[tuple[int, str], int] = {}
        self._visited: set[int] = set()
        self._last: tuple[int, str, int, frozenset[int], int] | None = None
        self._worth_rooms: set[int] | None = None

    # --- the episode ---------------------------------------------------------------------

    def start_episode(self, manager: SimpleMemoryManager) -> None:
        """A new episode, remembered through ``manager``: the working memory is cleared."""
        self.manager = manager
        self._tried.clear()
        self._refused.clear()
        self._walked.clear()
        self._worked_at.clear()
        self._seen.clear()
        self._absent.clear()
        self._visited.clear()
        self._last = None
        self._worth_rooms = None

    def _manager(self) -> SimpleMemoryManager:
        if self.manager is None:
            raise RuntimeError("call start_episode(manager) before choose()")
        return self.manager

    # --- reading the memory ----------------------------------------------------------------

    def read_memory(self, location_id: int) -> str:
        """The text the agent reads here (``get_location_memory``, which the token metrics
        count); the decisions use the same memories through ``memories``."""
        return self._manager().get_location_memory(location_id)

    def lessons(self, location_id: int, held: Sequence[str] = ()) -> Lessons:
        """Actions the memories here say to avoid (refused, deadly, lost points) and worth
        taking (scored, or got an item not carried now)."""
        found = Lessons()
        for memory in self._manager().store.memories(location_id):
            action = memory_action(memory.title)
            if action is None or not one_command_by_its_text(action):
                continue  # (one the game does not play: learned before it refused it)
            if memory.category is Category.FAILURE:
                if not self._worth_retrying(location_id, memory):
                    found.avoid[action] = memory.title
            elif memory.category is Category.DANGER:
                found.avoid[action] = memory.title
            elif memory.category is Category.SUCCESS and not any(
                item in memory.title for item in held
            ):
                found.worth[action] = memory.title
        for action in found.avoid:
            found.worth.pop(action, None)
        return found

    def _worth_retrying(self, location_id: int, memory: Memory) -> bool:
        """A failure of this episode only, and something else worked in that room since."""
        return (
            memory.persistence is Persistence.EPHEMERAL
            and self._worked_at.get(location_id, -1) > memory.turn_start
        )

    def _worth_visiting(self, held: Sequence[str]) -> dict[int, dict[str, str]]:
        """Rooms whose memories hold actions worth taking, not taken there this episode
        (the rooms are found once an episode; their memories are read each time)."""
        manager = self._manager()
        if self._worth_rooms is None:
            self._worth_rooms = {r.id for r in manager.map.rooms() if self.lessons(r.id).worth}
        found = {}
        for room in sorted(self._worth_rooms):
            worth = {
                action: title
                for action, title in self.lessons(room, held).worth.items()
                if (room, action) not in self._tried
            }
            if worth:
                found[room] = worth
        return found

    # --- choosing --------------------------------------------------------------------------

    def _learn_from_last(self, observation: Observation) -> None:
        """Note what the game said here, and whether the last action changed something
        here: the score or the inventory, or an open / take / move / turn on the game did
        not refuse (a move, a refusal or a look changes nothing in the room)."""
        here = observation.location_id
        self._seen[here] = self._seen.get(here, "") + "\n" + observation.response.lower()
        if self._last is None:
            return
        room, action, turn, inventory, score = self._last
        moved = here != room
        changed = inventory != {t.number for t in observation.inventory}
        changed = changed or score != observation.score
        refusal = classify_refusal(observation.response)
        refused = refusal is not None
        if refusal is not None and refusal.kind is not RefusalKind.ALREADY and not moved:
            # something is in the way ("The kitchen window is closed."): worth another
            # try once something else worked here; "It is already open." never is
            self._refused[(room, action)] = turn
        else:
            self._refused.pop((room, action), None)
        absent = CANNOT_SEE.match(observation.response.strip())
        if absent and not moved:
            # "You can't see any songbird here!": nothing to do with it here, until
            # something else worked here (the rug moved: now there is a trap door)
            self._absent[(room, action.split(" ", 1)[-1])] = turn
        acted = action.split(" ")[0] in ACTING_VERBS
        if changed or (acted and not moved and not refused):
            self._worked_at[room] = turn

    def choose(self, observation: Observation) -> Choice:
        """The next action (see the module docstring for the order): ``note_turn``, read
        the memory here, ``decide``, ``took``."""
        self.note_turn(observation)
        self.read_memory(observation.location_id)
        choice = self.decide(observation)
        self.took(observation, choice.action)
        return choice

    def note_turn(self, observation: Observation) -> None:
        """Learn from what the last action did (call once a turn, before deciding)."""
        self._learn_from_last(observation)
        self._visited.add(observation.location_id)

    def decide(self, observation: Observation) -> Choice:
        """The explorer's choice here, from the memories and the map (no side effects on
        its working memory: ``took`` records the action actually taken)."""
        return self._decide(observation, self.lessons(observation.location_id, observation.held))

    def took(self, observation: Observation, action: str) -> None:
        """Record that ``action`` is taken now (by this agent or another that uses it as
        its fallback), so the working memory follows every turn."""
        here = observation.location_id
        where = CARRIED if action in self._carried_actions(observation) else here
        self._tried.add((where, action))
        self._walked[(here, action)] = self._walked.get((here, action), 0) + 1
        self._last = (
            here,
            action,
            self._manager().turn + 1,
            frozenset(t.number for t in observation.inventory),
            observation.score,
        )

    @staticmethod
    def _carried_actions(observation: Observation) -> set[str]:
        return set(candidate_actions(observation, "")["inventory"])

    def _pick(self, actions: Sequence[str]) -> str:
        return self.rng.choice(list(actions))

    def _decide(self, observation: Observation, lessons: Lessons) -> Choice:
        here = observation.location_id
        candidates = candidate_actions(observation, self._seen.get(here, ""))

        def fresh(actions: Iterable[str], where: int = here) -> list[str]:
            return [
                a
                for a in actions
                if self._may_try(where, here, a)
                and a not in lessons.avoid
                and not self._out_of_sight(here, a.split(" ", 1)[-1])
            ]

        carried = fresh(candidates["inventory"], CARRIED)
        room = fresh(candidates["room"])
        if observation.dark:
            lights = [a for a in carried if a.startswith("turn on")]
            if lights:
                return Choice(lights[0], "it is pitch black here: make light")
            back = self._way_back(here, lessons)
            if back is not None:
                return Choice(back, f"it is pitch black and I have no light: back ({back})")
        # opening first: a shut window or mailbox stands before what the memory says to do
        found = self._by_verb(carried, ("turn", "open")) or self._by_verb(room, ("open",))
        if found:
            return Choice(found, f"not tried here yet: {found}")
        worth = fresh(lessons.worth)
        if worth:
            return Choice(worth[0], f"my memory here says: {lessons.worth[worth[0]]}")
        found = self._by_verb(room, ROOM_VERBS)
        if found:
            return Choice(found, f"not tried here yet: {found}")
        untried = self._untried_directions(here)
        directions = fresh(d for d in DIRECTIONS if d in untried)
        if directions:
            action = self._pick(directions)
            return Choice(action, f"a direction never tried here: {action}")
        step = self._route_step(here, lessons, observation.held)
        if step is not None:
            return step
        found = self._by_verb(fresh(candidates["unseen"]), ROOM_VERBS) or self._by_verb(
            fresh(candidates["look"]), LOOK_VERBS
        )
        if found:
            return Choice(found, f"nothing better here: {found}")
        exits = [
            e.command
            for e in self._manager().map.exits(here, pending=self._pending()).exits
            if e.routable and e.command not in lessons.avoid
        ]
        if exits:
            action = self._pick(exits)
            return Choice(action, f"a known exit: {action}")
        anywhere = [d for d in DIRECTIONS if d not in lessons.avoid] or list(DIRECTIONS)
        action = self._pick(anywhere)
        return Choice(action, f"nothing left to try here: {action}")

    def _may_try(self, where: int, here: int, action: str) -> bool:
        """Not tried yet this episode, or refused and something else worked here since."""
        if (where, action) not in self._tried:
            return True
        refused = self._refused.get((here, action))
        return refused is not None and self._worked_at.get(here, -1) > refused

    def _out_of_sight(self, here: int, noun: str) -> bool:
        """The game said it cannot see this here, and nothing worked here since."""
        said = self._absent.get((here, noun))
        return said is not None and self._worked_at.get(here, -1) <= said

    def _way_back(self, here: int, lessons: Lessons) -> str | None:
        """The opposite of the move that led here, if the last action was a direction."""
        if self._last is None or self._last[0] == here:
            return None
        direction = canonical_direction(self._last[1])
        back = OPPOSITE.get(direction or "")
        return back if back is not None and back not in lessons.avoid else None

    def _by_verb(self, actions: list[str], verbs: Sequence[str]) -> str | None:
        """An action of the first verb that has any (the verb's first word), at random."""
        for verb in verbs:
            first = verb.split(" ")[0]
            group = [a for a in actions if a.split(" ")[0] == first]
            if group:
                return self._pick(group)
        return None

    def _pending(self):  # noqa: ANN202 - the manager's buffered map events
        return self._manager().pending_map_events

    def _untried_directions(self, here: int) -> set[str]:
        found = self._manager().map.untried_directions(here, pending=self._pending())
        if found.reason is not None:  # not on the map yet: nothing was tried here
            return set(DIRECTIONS)
        return set(found.directions)

    def _route_step(self, here: int, lessons: Lessons, held: Sequence[str]) -> Choice | None:
        """The first step of a route to a room worth visiting, else to the nearest room
        with a direction never tried, else to a room not visited this episode; None when
        no route starts with a step allowed here."""
        manager = self._manager()
        graph = manager.map.graph(pending=self._pending())
        threshold = manager.map.threshold

        def usable(action: str) -> bool:
            """Allowed here, and not walked so often this episode that it goes round."""
            return (
                action not in lessons.avoid
                and self._walked.get((here, action), 0) < MAX_WALKS
                and one_command_by_its_text(action)
            )

        def first_step(target: int) -> tuple[int, str] | None:
            route = graph.route(here, target, threshold)
            if not route.actions or not usable(route.actions[0]):
                return None
            return len(route.actions), route.actions[0]

        worth = self._worth_visiting(held)
        best = _nearest(first_step, [room for room in worth if room != here])
        if best is not None:
            target, length, action = best
            why = next(iter(worth[target].values()))
            return Choice(
                action,
                f"on my way to {graph.rooms.get(target) or target} ({length} moves), where "
                f"my memory says: {why}",
            )
        unexplored = graph.nearest_unexplored(here, threshold)
        route = unexplored.route
        if route is not None and route.actions and usable(route.actions[0]):
            return Choice(
                route.actions[0],
                f"on my way to {unexplored.name} ({len(route.actions)} moves), which has "
                f"directions never tried: {', '.join(unexplored.directions)}",
            )
        best = _nearest(first_step, [r for r in graph.rooms if r not in self._visited])
        if best is not None:
            target, length, action = best
            return Choice(
                action,
                f"on my way to {graph.rooms.get(target) or target} ({length} moves), not "
                "visited yet this episode",
            )
        return None


def _nearest(
    first_step: Callable[[int], tuple[int, str] | None], targets: Iterable[int]
) -> tuple[int, int, str] | None:
    """(target, route length, first step) of the closest target (ties: the lowest id)."""
    best: tuple[int, int, str] | None = None
    for target in sorted(targets):
        found = first_step(target)
        if found is not None and (best is None or found[0] < best[1]):
            best = (target, *found)
    return best
