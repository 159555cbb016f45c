"""Titles after an import: how many memories each title will have (``titles_after``), and,
without --prune, the file's memories that would take the title or the place of a live
memory missing from the file (``drop_title_conflicts``: each one a problem, the memory
left out). No SQL here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from memstore.import_lines import LineFinder
from memstore.import_plan import (
    STATUS_FIELDS,
    ImportProblem,
    MemoryChange,
    MemoryKey,
    MemoryLike,
    change_kind,
    differences,
)
from memstore.models import Status, title_spelling

__all__ = ["drop_title_conflicts", "titles_after"]


def titles_after(
    changes: Sequence[MemoryChange],
    pruned: Iterable[MemoryChange],
    db_order: Iterable[tuple[int, str, MemoryKey]],
) -> Counter[tuple[int, str]]:
    """How many memories each (location id, title) will have once the plan is applied.

    The file's memories in ``changes``, plus the database's that no change writes to and
    that are not ``pruned``.
    """
    written = {(c.key, c.occurrence) for c in changes if c.old is not None}
    written.update((c.key, c.occurrence) for c in pruned)
    titles = Counter(
        [(c.location_id, c.new.title if c.new is not None else c.memory.title) for c in changes]
    )
    seen: dict[MemoryKey, int] = {}
    for _location_id, _name, key in db_order:
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if (key, occurrence) not in written:
            titles[(key.location_id, key.title)] += 1
    return titles


def drop_title_conflicts(
    changes: list[MemoryChange],
    missing: list[MemoryChange],
    prune: bool,
    lines: LineFinder,
    problems: list[ImportProblem],
    retitled: Sequence[tuple[MemoryKey, MemoryKey, MemoryLike]] = (),
    relinked: dict[tuple[int, str, str], str] | None = None,
    *,
    unpruned: bool = False,
) -> list[MemoryChange]:
    """Without prune, a missing live memory keeps its title: a file memory may not take it,
    nor take its place under another title or at another location (a retitle or a move the
    merge paired with it, live or superseded: the old one would stay beside the new one).
    ``unpruned``: --prune was asked for, but the file has problems, so it deletes nothing
    (``--skip-invalid`` applies the rest).

    A memory the file links to such a retitle that the database links to the old title
    keeps the database's link (its status change is left out, and the retitle's problem
    says so): skipping the retitle never cuts an agent's link. ``relinked`` gets each
    (location id, title, the file's successor) -> the database's successor so kept."""
    if prune:
        return changes
    advice = (
        "--prune deletes nothing while the file has other problems"
        if unpruned
        else "use --prune to delete it, or keep it in the file"
    )
    held = {
        (change.location_id, title_spelling(change.memory.title)): change
        for change in missing
        if change.memory.status is not Status.SUPERSEDED
    }
    # the file's retitles and moves (by the new memory's key) of a memory missing from it
    missing_keys = {change.key for change in missing}
    edits: dict[MemoryKey, list[tuple[MemoryKey, MemoryLike]]] = {}
    for key, origin_key, origin in retitled:
        if origin_key in missing_keys:
            edits.setdefault(key, []).append((origin_key, origin))
    # the database's memories missing from the file, by title: the file's added memory with
    # that title is one of them edited (its turns, episode, text or status), which would
    # stand beside it; live beside live is ``held``'s, above
    history: dict[tuple[int, str], list[MemoryLike]] = {}
    for change in missing:
        where = (change.location_id, title_spelling(change.memory.title))
        history.setdefault(where, []).append(change.memory)
    if not held and not edits and not history:
        return changes
    # the titles live in the database now, exactly: one the database already has beside a
    # differently spelled one brings no second spelling in
    live_now = {
        (change.location_id, old.title)
        for change in (*changes, *missing)
        if (old := change.old) is not None and old.status is not Status.SUPERSEDED
    }
    kept: list[MemoryChange] = []
    # (location id, the skipped retitle's title) -> (its problem's place, the old title)
    skipped: dict[tuple[int, str], tuple[int, str]] = {}
    for change in changes:
        memory = change.memory
        holder = held.get((change.location_id, title_spelling(memory.title)))
        becomes_live = memory.status is not Status.SUPERSEDED and (
            change.old is None or change.old.status is Status.SUPERSEDED
        )
        if (
            holder is not None
            and holder.memory.title != memory.title
            and (change.location_id, memory.title) in live_now
        ):
            holder = None  # both spellings live already: not the file's doing
        if holder is not None and becomes_live:
            old = holder.memory
            respelled = (
                f", spelled {ascii(old.title)} there (the file's is {ascii(memory.title)}: an "
                f"editor's Unicode normalisation or whitespace?)"
                if old.title != memory.title
                else ""
            )
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    f"memory {memory.title!r} (Ep{memory.episode}, T{memory.turns}) at location "
                    f"{change.location_id} would replace the database's live memory with that "
                    f"title (Ep{old.episode}, T{old.turns}){respelled}, which is not in the "
                    f"file: {advice}; memory skipped",
                    pruned=not unpruned,
                )
            )
            continue
        origins = edits.get(change.key) if change.old is None else None
        if origins:
            origin_key, old = origins.pop(0)
            if origin_key.location_id == change.location_id:
                skipped.setdefault((change.location_id, memory.title), (len(problems), old.title))
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    _edit_message(change.location_id, memory, origin_key, old, unpruned),
                    pruned=not unpruned,
                )
            )
            continue
        edited = _edited_from(history, change) if change.old is None else None
        if edited is not None:
            problems.append(
                ImportProblem(
                    lines.memory_line(change.location_id, memory.title),
                    _refix_message(change.location_id, memory, edited, unpruned),
                    pruned=not unpruned,
                )
            )
            continue
        kept.append(change)
    if skipped:
        kept = _keep_links(kept, skipped, problems, relinked)
    return kept


def _edited_from(
    history: dict[tuple[int, str], list[MemoryLike]], change: MemoryChange
) -> MemoryLike | None:
    """The database's memory missing from the file that the file's added memory is an edit
    of, taken from ``history`` (the same title there; not both live: ``held``'s), or None."""
    found = history.get((change.location_id, title_spelling(change.memory.title)), [])
    live = change.memory.status is not Status.SUPERSEDED
    for n, old in enumerate(found):
        if not (live and old.status is not Status.SUPERSEDED):
            return found.pop(n)
    return None


def _refix_message(location_id: int, memory: MemoryLike, old: MemoryLike, unpruned: bool) -> str:
    """The problem of an added memory that is a database's memory missing from the file,
    with the same title and other turns, episode, text or status."""
    advice = (
        "--prune deletes nothing while the file has other problems"
        if unpruned
        else "use --prune to replace it, or keep it as it was"
    )
    what = "live" if old.status is not Status.SUPERSEDED else "superseded"
    changed = [
        name
        for name, differs in (
            ("episode", old.episode != memory.episode),
            ("turns", old.turns != memory.turns),
            ("text", old.text != memory.text),
            ("status", old.status != memory.status),
        )
        if differs
    ]
    return (
        f"memory {memory.title!r} (Ep{memory.episode}, T{memory.turns}) at location "
        f"{location_id} is the database's {what} memory with that title (Ep{old.episode}, "
        f"T{old.turns}) with its {_listed(changed)} changed, which is not in the "
        f"file: importing it would keep both; {advice}; memory skipped"
    )


def _listed(names: list[str]) -> str:
    """``["turns", "text"]`` as "turns and text" (none: "place")."""
    if len(names) < 2:
        return names[0] if names else "place"
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _edit_message(
    location_id: int, memory: MemoryLike, origin_key: MemoryKey, old: MemoryLike, unpruned: bool
) -> str:
    """The problem of a retitle or move of a database's memory missing from the file."""
    live = old.status is not Status.SUPERSEDED
    if unpruned:
        advice = "--prune deletes nothing while the file has other problems"
    elif origin_key.location_id != location_id:
        advice = f"use --prune to move it, or keep it at location {origin_key.location_id}"
    else:
        advice = "use --prune to replace it, or keep the old title"
    which = "live memory" if live else "superseded memory"
    if origin_key.location_id != location_id:
        return (
            f"memory {memory.title!r} at location {location_id} is the database's {which} "
            f"{old.title!r} of location {origin_key.location_id} moved (the same text; "
            f"Ep{old.episode}, T{old.turns}), which is not in the file there: importing it "
            f"would leave {'it live in both' if live else 'a copy in both'}; {advice}; "
            f"memory skipped"
        )
    both = "both live" if live else "both in its history"
    return (
        f"memory {memory.title!r} at location {location_id} is an edit of the database's "
        f"{which} {old.title!r} (the same text; Ep{old.episode}, T{old.turns}), which is not "
        f"in the file: importing it would leave {both}; {advice}; memory skipped"
    )


def _keep_links(
    changes: list[MemoryChange],
    skipped: dict[tuple[int, str], tuple[int, str]],
    problems: list[ImportProblem],
    relinked: dict[tuple[int, str, str], str] | None,
) -> list[MemoryChange]:
    """``changes`` with each status change that links a memory to a ``skipped`` retitle
    (location id, new title) -> (its problem's place, the old title), where the database
    links it to the old title, left out: the memory keeps the database's link; the
    retitle's problem names it."""
    titles = {(change.location_id, change.memory.title) for change in changes}
    kept: list[MemoryChange] = []
    for change in changes:
        old, new = change.old, change.new
        found = (
            skipped.get((change.location_id, new.superseded_by))
            if old is not None and new is not None and new.superseded_by is not None
            else None
        )
        if (
            found is None
            or old is None
            or new is None
            or old.superseded_by != found[1]
            or (change.location_id, new.superseded_by) in titles
        ):
            kept.append(change)
            continue
        assert new.superseded_by is not None
        if relinked is not None:
            relinked[(change.location_id, new.title, new.superseded_by)] = found[1]
        status = {name: getattr(old, name) for name in STATUS_FIELDS}
        new = new._replace(**status) if isinstance(new, tuple) else new.model_copy(update=status)
        fields = differences(old, new)
        kept.append(change._replace(kind=change_kind(fields), new=new, fields=fields))
        place, was = found
        problem = problems[place]
        problems[place] = replace(
            problem,
            message=problem.message.removesuffix("; memory skipped")
            + f"; memory skipped, and {new.title!r} (superseded by it in the file) keeps "
            f"its link to {was!r}",
        )
    return kept
