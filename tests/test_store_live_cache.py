"""After apply_synthesis the store updates its cached live memories instead of reloading them:
what it returns must be exactly what a reload from the database gives."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.models import Memory
from memstore.store import MemoryStore

TITLES = ["Lamp", "Troll", "Grating", "Egg", "Rope"]

step = st.tuples(
    st.sampled_from([1, 2]),  # location
    st.none() | st.sampled_from(TITLES),  # new memory's title
    st.sampled_from(["core", "permanent", "ephemeral"]),
    st.sampled_from(["ACTIVE", "TENTATIVE"]),
    st.sampled_from(["7", "007", "3-4", "03-04"]),  # turn strings the database normalises
    st.lists(st.sampled_from(TITLES), max_size=2),  # supersede
    st.lists(st.sampled_from(TITLES), max_size=2),  # invalidate
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=12))
def test_cached_live_memories_equal_a_reload_after_every_synthesis(
    tmp_path_factory: object, steps: list[tuple]
) -> None:
    folder: Path = tmp_path_factory.mktemp("live")  # type: ignore[attr-defined]
    with MemoryStore.open(folder / "m.db") as store:
        for turn, (location, title, persistence, status, turns, supersede, invalidate) in enumerate(
            steps, 1
        ):
            store.memories(location)  # fill the cache, as the manager does before deciding
            new = None
            if title is not None:
                new = Memory(
                    category="NOTE",
                    title=title,
                    text=f"{title} at turn {turn}",
                    episode=1,
                    turns=turns,
                    persistence=persistence,
                    status=status,
                )
            store.apply_synthesis(
                location,
                f"Room {location}",
                new_memory=new,
                supersede_titles=supersede,
                invalidate_titles=invalidate,
                invalidation_reason="proven wrong" if invalidate else None,
                episode=1,
                turn=turn,
            )
            cached = store.memories(location)
            store._forget()  # drop every cache: the next read comes from the database
            assert cached == store.memories(location)


CATEGORIES = ["NOTE", "DANGER", "SUCCESS"]
operation = st.tuples(
    st.sampled_from(["add", "supersede", "invalidate", "synthesis", "reset"]),
    st.sampled_from(TITLES),
    st.sampled_from(TITLES),
    st.sampled_from(CATEGORIES),
    st.sampled_from(["core", "permanent", "ephemeral"]),
    st.sampled_from(["ACTIVE", "TENTATIVE"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(operation, min_size=1, max_size=25),
    st.sampled_from([40, 300]),  # a budget that bites, and one that usually does not
    st.integers(min_value=0, max_value=80),  # memories already there (past VIEW_LIMIT too)
)
def test_the_agents_view_kept_up_to_date_equals_a_fresh_read_after_every_write(
    tmp_path_factory: object, operations: list[tuple], budget: int, already: int
) -> None:
    from memstore.config import MemstoreConfig

    folder: Path = tmp_path_factory.mktemp("view")  # type: ignore[attr-defined]
    config = MemstoreConfig(token_budget=budget)
    with MemoryStore.open(folder / "m.db", config=config) as store:
        for n in range(already):
            store.add_memory(
                5,
                "Cave",
                Memory(
                    category="NOTE",
                    title=f"Old {n}",
                    text="x" * (n % 7),
                    episode=1,
                    turns=str(n),
                    persistence="permanent",
                ),
            )
        for turn, (kind, title, other, category, persistence, status) in enumerate(operations, 1):
            store.get_location_memory(5)  # the view is cached before each write
            memory = Memory(
                category=category,
                title=title,
                text=f"{title} at {turn}",
                episode=1,
                turns=str(turn),
                persistence=persistence,
                status=status,
            )
            if kind == "add":
                store.add_memory(5, "Cave", memory)
            elif kind == "supersede":
                store.supersede_memory(5, "Cave", other, memory)
            elif kind == "invalidate":
                store.invalidate_memory(5, other, "wrong", turn=turn)
            elif kind == "synthesis":
                store.apply_synthesis(
                    5,
                    "Cave",
                    new_memory=memory,
                    supersede_titles=[other],
                    invalidate_titles=[t for t in TITLES if t not in (title, other)][:1],
                    invalidation_reason="wrong",
                    episode=1,
                    turn=turn,
                )
            else:
                store.reset_episode()
            kept = store.get_location_memory(5)
            store._forget()  # the next read comes from the database
            assert kept == store.get_location_memory(5)
