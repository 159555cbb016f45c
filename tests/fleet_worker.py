"""One agent of the fleet test (tests/test_fleet.py): mixed operations on a shared database,
each recorded with what the API answered.

Usage: python tests/fleet_worker.py DB AGENT AGENTS OPERATIONS LOG BARRIERS

It opens the store, prints ``ready`` and waits for a line on stdin (the start barrier, so
every agent starts together), then runs ``schedule(OPERATIONS)``: the same kinds of
operation on the same keys in every agent at the same step. Before each racing step
(``race``, ``contest``) the agents meet at a barrier (a file per agent and step in the
folder BARRIERS), so those steps start together and really race; otherwise the agent that
took the write lock first runs ahead and wins them all. Each attempt is one JSON line in
LOG, written before the next starts:

* ``add``: a title of this agent's own (must be acknowledged: add_memory returned True);
* ``race``: one title every agent adds at the same location at once (exactly one wins);
* ``contest``: a memory the test seeded, which half the agents supersede and the other
  half invalidate at once (exactly one of them succeeds);
* ``revise``: this agent supersedes one of its own acknowledged memories;
* ``session``: an ephemeral memory, the same title in every agent (each has its own tier);
* ``read``: get_location_memory and memories(); this agent's latest own memory must show.

Anything unexpected is a line with ``"error"``; the process exits 1 after an exception.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from memstore.models import Category, Memory, Persistence
from memstore.store import MemoryStore

#: the schedule's seed: the same in every agent, so step i is the same kind everywhere
SEED = 18
KINDS = ("add", "race", "contest", "revise", "session", "read")
WEIGHTS = (30, 12, 12, 10, 6, 30)
#: where each kind writes (location ids; the racing kinds spread over a few rooms)
OWN_ROOMS = 20
RACE_ROOMS = (100, 101, 102, 103, 104)
CONTEST_ROOMS = (200, 201, 202, 203, 204, 205, 206)
SESSION_ROOM = 300
RACING = frozenset({"race", "contest"})
#: how long an agent waits at a barrier for the others before it gives up (one died)
BARRIER_TIMEOUT_S = 120


def schedule(operations: int) -> list[str]:
    """The kind of operation at each step, the same for every agent."""
    return random.Random(SEED).choices(KINDS, WEIGHTS, k=operations)


def race_key(step: int) -> tuple[int, str]:
    return RACE_ROOMS[step % len(RACE_ROOMS)], f"race {step}"


def contest_key(step: int) -> tuple[int, str]:
    """The seeded memory that step ``step``'s contest is about."""
    return CONTEST_ROOMS[step % len(CONTEST_ROOMS)], f"contested {step}"


def contest_successor(step: int, agent: int) -> str:
    return f"contested {step} superseded by agent {agent}"


def own_key(step: int, agent: int) -> tuple[int, str]:
    return 1 + step % OWN_ROOMS, f"agent {agent} note {step}"


def room(location_id: int) -> str:
    return f"Room {location_id}"


def memory(title: str, step: int, persistence: str = "permanent") -> Memory:
    return Memory(
        category=Category.NOTE,
        title=title,
        text=f"Learned at step {step}: {title}.",
        episode=1,
        turns=str(step + 1),
        persistence=Persistence(persistence),
    )


class Barrier:
    """Agents meet before a step: each leaves a file, then waits for everyone's."""

    def __init__(self, folder: Path, agents: int, agent: int) -> None:
        self.folder = folder
        self.agents = agents
        self.agent = agent

    def wait(self, step: int) -> None:
        (self.folder / f"{step}.{self.agent}").touch()
        others = [self.folder / f"{step}.{agent}" for agent in range(self.agents)]
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while not all(path.exists() for path in others):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the other agents never reached step {step}")
            time.sleep(0.0005)


class Agent:
    def __init__(self, store: MemoryStore, agent: int, log: TextIO) -> None:
        self.store = store
        self.agent = agent
        self.log = log
        self.own: list[tuple[int, str]] = []  # its live memories, oldest first
        self.sessions = 0

    def record(self, **entry: Any) -> None:
        self.log.write(json.dumps({"agent": self.agent, **entry}) + "\n")
        self.log.flush()

    def run(self, step: int, kind: str) -> None:
        getattr(self, kind)(step)

    def add(self, step: int) -> None:
        location, title = own_key(step, self.agent)
        ok = self.store.add_memory(location, room(location), memory(title, step))
        self.record(step=step, op="add", loc=location, title=title, ok=ok)
        if ok:
            self.own.append((location, title))
        else:
            self.record(step=step, error=f"add_memory refused its own title {title!r}")

    def race(self, step: int) -> None:
        location, title = race_key(step)
        ok = self.store.add_memory(location, room(location), memory(title, step))
        self.record(step=step, op="race", loc=location, title=title, ok=ok)

    def contest(self, step: int) -> None:
        location, title = contest_key(step)
        if (self.agent + step) % 2 == 0:  # half the agents, a different half each step
            new = contest_successor(step, self.agent)
            outcome = self.store.supersede_memory(
                location, room(location), title, memory(new, step)
            )
            self.record(
                step=step,
                op="contest",
                how="supersede",
                loc=location,
                title=title,
                new=new,
                ok=bool(outcome),
                outcome=outcome.name,
            )
        else:
            ok = self.store.invalidate_memory(
                location, title, f"agent {self.agent} proved it false", step + 1, episode=1
            )
            self.record(step=step, op="contest", how="invalidate", loc=location, title=title, ok=ok)

    def revise(self, step: int) -> None:
        if not self.own:
            return
        location, old = self.own.pop(0)
        new = f"{old} (revised at {step})"
        outcome = self.store.supersede_memory(location, room(location), old, memory(new, step))
        self.record(
            step=step,
            op="revise",
            loc=location,
            title=old,
            new=new,
            ok=bool(outcome),
            outcome=outcome.name,
        )
        if outcome:
            self.own.append((location, new))
        else:
            self.record(step=step, error=f"could not revise its own {old!r}: {outcome.name}")

    def session(self, step: int) -> None:
        title = f"session note {step}"
        ok = self.store.add_memory(
            SESSION_ROOM, room(SESSION_ROOM), memory(title, step, "ephemeral")
        )
        self.record(step=step, op="session", loc=SESSION_ROOM, title=title, ok=ok)
        self.sessions += ok
        if not ok:
            self.record(step=step, error=f"another agent's session tier held {title!r}")
        count = self.store.get_ephemeral_count()
        if count != self.sessions:
            self.record(step=step, error=f"{count} ephemeral memories, {self.sessions} added")

    def read(self, step: int) -> None:
        location = 1 + step % OWN_ROOMS
        self.store.get_location_memory(location)
        live = {m.title for m in self.store.memories(location)}
        mine = [title for loc, title in self.own if loc == location]
        missing = [title for title in mine if title not in live]
        self.record(step=step, op="read", loc=location, ok=not missing)
        if missing:
            self.record(step=step, error=f"its own acknowledged {missing} not read back")


def main() -> None:
    db, agent, agents, operations = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    log_path, barrier = sys.argv[5], Barrier(Path(sys.argv[6]), agents, agent)
    with open(log_path, "a", encoding="utf-8") as log, MemoryStore.open(db) as store:
        worker = Agent(store, agent, log)
        print("ready", flush=True)
        sys.stdin.readline()  # the start barrier
        try:
            for step, kind in enumerate(schedule(operations)):
                if kind in RACING:
                    barrier.wait(step)
                worker.run(step, kind)
        except Exception:
            worker.record(error=traceback.format_exc())
            raise SystemExit(1) from None


if __name__ == "__main__":
    main()
