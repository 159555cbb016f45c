"""The checks ``plan_import`` makes of a file, each one's problem (``ImportProblem``) and
its wording: a successor no memory will have, a title several live memories share, a
location name no write could store, an episode past the last, supersession references
that go round in a circle; and which of several database memories with one key a file's
memory is (``twin_choices``). No SQL here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from memstore.import_lines import LineFinder
from memstore.import_plan import (
    MAX_EPISODE,
    ChangeKind,
    ImportProblem,
    LocationLike,
    MemoryChange,
    MemoryKey,
    MemoryLike,
    memory_key,
)
from memstore.md_rows import LocationRow
from memstore.models import Status, check_location_name
from memstore.pairing import pair_by_content
from memstore.synthesis_answer import shows_nothing

__all__ = [
    "duplicate_message",
    "episodes_in_range",
    "file_says_superseded",
    "no_successor",
    "reference_cycles",
    "circle_links_skipped",
    "unlinked_skipped",
    "twin_choices",
    "unstorable_name",
]


def no_successor(
    lines: LineFinder, location_id: int, title: str, successor: str, nth: int, prune: bool
) -> ImportProblem:
    """The problem of a memory superseded by a title no memory at its location will have."""
    if prune:  # (a plan with problems prunes nothing: the database's successor stays)
        where = "the file"
        then = (
            "to end the chain there, write its reference line with no successor (as "
            "'[Superseded at T5]', with no 'by'); with --skip-invalid nothing is deleted, "
            "and a link the database has stays"
        )
    else:
        where = "the file or the database"
        then = "with --skip-invalid it is skipped, kept as the database has it"
    return ImportProblem(
        lines.reference_line(location_id, title, nth),
        f"memory {title!r} at location {location_id} is superseded by "
        f"{successor!r}, but no other memory there in {where} has that title: {then}",
    )


def file_says_superseded(lines: LineFinder, location_id: int, title: str, nth: int) -> bool:
    """Whether the file's ``nth`` memory titled ``title`` at the location has a SUPERSEDED
    header (True when it cannot be told: no source text)."""
    number = lines.memory_line(location_id, title, nth)
    for found, header in lines.sections.get(location_id, ()):
        if found == number:
            return "SUPERSEDED" in header.split("]", 1)[0].upper()
    return True


def duplicate_message(
    location_id: int, title: str, memories: Sequence[MemoryLike], not_the_files: Collection[int]
) -> str:
    """The problem of a title several live memories of a location have: the file's, or the
    file's beside the database's that the file does not hold (learned after the export:
    the database's stays as it is, only the file's are skipped)."""
    live = [
        n
        for n, memory in enumerate(memories)
        if memory.title == title and memory.status is not Status.SUPERSEDED
    ]
    theirs = [memories[n] for n in live if n in not_the_files]
    in_file = len(live) - len(theirs)
    if not theirs or not in_file:
        return (
            f"location {location_id} has {len(live)} non-superseded memories titled "
            f"{title!r} (one is allowed): all of them skipped"
        )
    old = theirs[0]
    mine, are = ("memory", "is") if in_file == 1 else (f"{in_file} memories", "are")
    return (
        f"the file's {mine} titled {title!r} at location {location_id} would be live beside "
        f"the database's memory with that title (Ep{old.episode}, T{old.turns}), which is not "
        f"in the file (written after the export: an agent's, or an earlier import's of a "
        f"file from that export): one live memory per title is allowed, so the file's {are} "
        f"skipped and the database's stays (to edit it, export again)"
    )


def twin_choices(
    location_id: int,
    memories: Sequence[MemoryLike],
    db_memories: dict[MemoryKey, list[MemoryLike]],
    twin_keys: set[MemoryKey],
    rows: Mapping[int, tuple[MemoryKey, int] | None] | None = None,
) -> dict[int, int | None]:
    """For each memory of a section (by its place) whose key several database memories
    have, which of them it is (None: none left for it). ``rows``: the database memory a
    memory stands for, by its place, as (its key, its index among that key's), or None
    for one new in the file, where the 3-way merge knows it (``MergeResult.row_ids``):
    taken as it is; the others are paired by what they say (``pair_by_content``) among
    the rest."""
    if not twin_keys:
        return {}
    places: dict[MemoryKey, list[int]] = {}
    for position, memory in enumerate(memories):
        key = memory_key(location_id, memory)
        if key in twin_keys:
            places.setdefault(key, []).append(position)
    chosen: dict[int, int | None] = {}
    for key, at in places.items():
        stored = db_memories[key]
        known: dict[int, int | None] = {}
        if rows:
            for position in at:
                if position in rows and rows[position] is None:
                    known[position] = None  # new in the file: the merge paired it with none
                elif (row := rows.get(position)) is not None and row[0] == key:
                    known[position] = row[1]
        rest = [position for position in at if position not in known]
        taken = {index for index in known.values() if index is not None}
        free = [index for index in range(len(stored)) if index not in taken]
        found = pair_by_content([memories[n] for n in rest], [stored[k] for k in free])
        chosen.update(known)
        chosen.update(
            (position, None if index is None else free[index])
            for position, index in zip(rest, found, strict=True)
        )
    return chosen


def unstorable_name(location: LocationLike, stored: LocationLike | None) -> str | None:
    """The problem of a location whose name a write could not store now (the one rule,
    ``memstore.models.check_location_name``: a NUL, a lone surrogate, more than
    LOCATION_NAME_MAX characters), or None. A name the database already holds for that
    location is not written again, so it passes whatever it is: an older database whose
    names are longer than the rule allows imports its own export. A header that names the
    location with nothing a reader sees (blanks, zero-width characters), where the database
    has a name, is no rename anyone means (the name was deleted by mistake): a problem
    too."""
    if stored is not None and stored.name == location.name:
        return None
    if stored is not None and not shows_nothing(stored.name) and shows_nothing(location.name):
        return (
            f"location {location.id}: its header gives no name (the database's is "
            f"{stored.name[:60]!r}): give it back, or another one; the location and its "
            f"memories skipped"
        )
    try:
        check_location_name(location.name, "its name")
    except (TypeError, ValueError) as exc:
        return f"location {location.id}: {exc}: the location and its memories skipped"
    return None


def episodes_in_range(
    location: LocationLike, lines: LineFinder, problems: list[ImportProblem]
) -> LocationLike:
    """``location`` without the episodes past MAX_EPISODE, each one a problem."""
    too_large = [episode for episode in location.episodes if episode > MAX_EPISODE]
    if not too_large:
        return location
    problems.append(
        ImportProblem(
            lines.location_lines.get(location.id, 0) + 1,
            f"location {location.id} lists episode {too_large[0]}: at most {MAX_EPISODE} "
            f"(the next episode must still be numbered): that episode skipped",
        )
    )
    kept = tuple(episode for episode in location.episodes if episode <= MAX_EPISODE)
    if isinstance(location, LocationRow):
        return location._replace(episodes=kept)
    return location.model_copy(update={"episodes": kept})


#: the titles of a circle a problem names (a file's circle may hold thousands)
CIRCLE_SHOWN = 10


def reference_cycles(
    changes: Sequence[MemoryChange],
    lines: LineFinder,
    kept: Sequence[MemoryChange] = (),
    circles: set[tuple[int, str]] | None = None,
) -> list[ImportProblem]:
    """Supersession references in the file that can only go round in a circle (A by B, B
    by A): the database cannot link them (a problem at the first line).

    Titles are not unique: a chain may come back to a title on another memory (A by B, B
    by a newer A, which was invalidated) and end there. So a title *ends* a chain when some
    memory with it is live (in the file, or ``kept`` from the database), has no successor
    (invalidated, or superseded with none named), or names a successor that itself ends;
    a circle is a set of titles none of which ends. A memory ``kept`` (the database's,
    missing from the file) names its successor as stored: a circle may run through it.
    ``circles`` receives the titles of each circle reported, as (location id, title).
    """
    successors: dict[tuple[int, str], set[str]] = {}
    ends: set[tuple[int, str]] = set()
    superseded = Status.SUPERSEDED
    # how many memories have each title: one superseded by its own title with no other is
    # reported above (no successor); with others, they are its successors like any title's
    # (all superseded by that title, none ends: a circle)
    titled: dict[tuple[int, str], int] = {}
    for change in changes:
        memory = change.new if change.new is not None else change.old
        assert memory is not None
        key = (change.location_id, memory.title)
        titled[key] = titled.get(key, 0) + 1
    for change in changes:
        memory = change.new if change.new is not None else change.old
        assert memory is not None
        key = (change.location_id, memory.title)
        if (
            memory.status is not superseded
            or memory.superseded_by is None
            or (memory.superseded_by == memory.title and titled[key] == 1)
        ):
            ends.add(key)  # live, no successor, or itself alone (reported above)
        else:
            successors.setdefault(key, set()).add(memory.superseded_by)
    for change in kept:  # the database's memories the file leaves out, as they are stored
        memory = change.memory
        key = (change.location_id, memory.title)
        if memory.status is not superseded or memory.superseded_by is None:
            ends.add(key)
        elif memory.superseded_by != memory.title:  # (a link to a twin leads elsewhere)
            successors.setdefault(key, set()).add(memory.superseded_by)
    # a title ends when one of its successors ends, or is no title the file has (reported
    # above, not a circle): spread from the ends backwards, each reference once
    waiting_on: dict[tuple[int, str], list[tuple[int, str]]] = {}
    found = list(ends)
    for key, names in successors.items():
        for name in names:
            target = (key[0], name)
            if target not in successors and target not in ends:
                ends.add(key)
                found.append(key)
            else:
                waiting_on.setdefault(target, []).append(key)
    while found:
        for key in waiting_on.pop(found.pop(), ()):
            if key not in ends:
                ends.add(key)
                found.append(key)
    problems = []
    walked: set[tuple[int, str]] = set()  # every title a walk passed: its circle is known
    for start in successors:
        if start in ends or start in walked:
            continue
        location_id, title = start
        path = [title]
        on_path = {title}
        current = start
        known = False
        while True:  # follow successors that do not end (every title on a circle has one)
            walked.add(current)
            following = sorted(
                name
                for name in successors.get(current, ())
                if (location_id, name) in successors and (location_id, name) not in ends
            )
            if not following:
                break
            current = (location_id, following[0])
            if current[1] in on_path:
                path = path[path.index(current[1]) :]
                break
            if current in walked:  # into a circle an earlier walk reported
                known = True
                break
            path.append(current[1])
            on_path.add(current[1])
        if known:
            continue
        if circles is not None:
            circles.update((location_id, name) for name in path)
        first = path[0]
        shown = [*path[:CIRCLE_SHOWN], first] if len(path) <= CIRCLE_SHOWN else path[:CIRCLE_SHOWN]
        circle = " -> ".join(repr(t[:60]) for t in shown)
        if len(path) > CIRCLE_SHOWN:
            circle += f" -> ... ({len(path):,} titles in all)"
        problems.append(
            ImportProblem(
                lines.reference_line(location_id, first),
                f"supersession references at location {location_id} go round "
                f"in a circle ({circle}): no memory ends it (with --skip-invalid the "
                f"file's memories that close it are skipped, kept as the database has them)",
            )
        )
    return problems


#: the kinds of change that write a memory's status or link as the file has it
_WRITTEN = (ChangeKind.ADDED, ChangeKind.CHANGED, ChangeKind.STATUS_CHANGED)


def _writes_link(change: MemoryChange) -> bool:
    """The file adds ``change``'s memory, or changes its status or successor, to a link
    to a successor's title."""
    new, old = change.new, change.old
    return (
        change.kind in _WRITTEN
        and new is not None
        and new.superseded_by is not None
        and (old is None or (old.status, old.superseded_by) != (new.status, new.superseded_by))
    )


def _skipped(change: MemoryChange) -> MemoryChange | None:
    """``change`` skipped: the database's memory as it is (None: an added one, not added)."""
    if change.old is None:
        return None
    return change._replace(kind=ChangeKind.UNCHANGED, new=change.old, fields=())


def circle_links_skipped(
    changes: list[MemoryChange], circles: set[tuple[int, str]]
) -> list[MemoryChange]:
    """``changes`` without those that close a circle of titles ``reference_cycles``
    reported (``circles``): a memory on it that the file links to a title on it, where the
    database has no such link (added, or its status or successor changed), is skipped,
    kept as the database has it (an added one is not added). The database's links go
    round in no circle, so what is left ends: ``--skip-invalid`` never stores a memory
    superseded with no successor for it, which every later run would report as a
    conflict with its own write (review I F1)."""
    kept = []
    for change in changes:
        new = change.new
        closes = (
            _writes_link(change)
            and new is not None
            and (change.location_id, new.title) in circles
            and (change.location_id, new.superseded_by) in circles
        )
        replaced = _skipped(change) if closes else change
        if replaced is not None:
            kept.append(replaced)
    return kept


def unlinked_skipped(
    changes: list[MemoryChange],
    titles: Mapping[tuple[int, str], int],
    relinked: Mapping[tuple[int, str, str], str],
) -> tuple[list[MemoryChange], list[MemoryChange]]:
    """(``changes`` without those that link a memory to a successor's title no memory will
    have, the changes skipped): each is kept as the database has it (an added one is not
    added), and what that leaves with no successor is skipped in turn. ``titles``: how
    many memories each (location id, title) will have (``titles_after``); ``relinked``:
    the links kept to the database's old title. Stored superseded with no successor, such
    a memory would be a conflict with the import's own write at every later run (review J
    J1, and before it every "no successor" problem under ``--skip-invalid``)."""
    counts = dict(titles)
    skipped_all: list[MemoryChange] = []
    while True:
        kept: list[MemoryChange] = []
        skipped: list[MemoryChange] = []
        for change in changes:
            new = change.new
            if _writes_link(change) and new is not None and new.superseded_by is not None:
                successor = (change.location_id, new.superseded_by)
                itself = 1 if new.superseded_by == new.title else 0
                relink = (change.location_id, new.title, new.superseded_by)
                if relink not in relinked and counts.get(successor, 0) <= itself:
                    skipped.append(change)
                    replaced = _skipped(change)
                    if replaced is None:
                        counts[(change.location_id, new.title)] -= 1
                    else:
                        kept.append(replaced)
                    continue
            kept.append(change)
        if not skipped:
            return changes, skipped_all
        skipped_all += skipped
        changes = kept
