"""How the import pairs a file's memories with stored ones: pure functions over rows.

* ``pair_by_content``: twins, memories with one key (location, title, episode, turns),
  told apart by what they say;
* ``pair_section``: every memory of a file's section with the stored memory of its key;
* ``edited_from``: the export's memory a memory new in the file was edited from (its
  title, or its episode or turns, changed).

Used by ``memstore.merge`` (file against the export's base) and ``memstore.importing``
(the merged file against the database).
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from memstore.import_plan import CONTENT_FIELDS, STATUS_FIELDS, MemoryKey
from memstore.md_rows import MemoryRow

__all__ = [
    "edited_from",
    "likeness",
    "pair_by_content",
    "pair_section",
    "sure_alignment",
    "title_likeness",
]


class _HasRow(Protocol):
    """A stored memory: its row id and its memory (memstore.merge.StoredMemory)."""

    @property
    def id(self) -> int: ...

    @property
    def memory(self) -> MemoryRow: ...


Stored = TypeVar("Stored", bound=_HasRow)


#: a memory's place in its section: (from its start, from its end)
Place = tuple[int, int]


def pair_by_content(
    file: Sequence[Any],
    stored: Sequence[Any],
    file_places: Sequence[Place] | None = None,
    stored_places: Sequence[Place] | None = None,
    ambiguous: set[int] | None = None,
    aligned: Mapping[int, int] | None = None,
) -> list[int | None]:
    """Which of ``stored`` (the memories of one key, in stored order) each of ``file`` (the
    file's with that key, in its order) is, by index (None: none is left for it).

    Twins, memories with one key (an agent superseded a memory with one of the same title
    in the same turn), are told apart by what they say, never by where the file has them:
    a reviewer who deletes, moves or edits one must not pair another with the wrong row.
    Identical pairs first; then, of the rest, the likeliest pair first (``likeness``: the
    same status and link, the same text or the most of it, the same other fields). Where
    what they say cannot tell (several stored twins identical, or as likely), the one the
    section's alignment pairs it with decides (``aligned``: file index -> stored index,
    ``sure_alignment``'s), else the nearest place: with as many in the file as stored,
    each one's place among its key's (memories added, deleted or moved around the twins
    leave it as it was); else
    (``file_places``, ``stored_places``: each one's place in its section, counted from its
    start and from its end, as the export wrote it) the nearer of the two counts (a twin
    retitled or deleted leaves the others where they were in the section); then order.
    ``ambiguous`` gains each of ``file`` that says something else than the stored twin it
    was paired with, where another twin left was as likely and as near: which row its
    change is for cannot be told."""
    chosen: list[int | None] = [None] * len(file)
    by_order = len(file) == len(stored)
    placed = not by_order and file_places is not None and stored_places is not None

    def distance(n: int, k: int) -> int:
        if by_order:
            return abs(n - k)
        if not placed:
            return 0
        (file_start, file_end), (start, end) = file_places[n], stored_places[k]  # type: ignore[index]
        return min(abs(file_start - start), abs(file_end - end))

    taken_identical: set[int] = set()
    alike = _identical(stored)  # what each says -> the indices saying it, in order
    for n, memory in enumerate(file):
        same = alike.get(memory) if alike is not None else None
        if alike is None:  # (what they say cannot be hashed: compared one by one)
            same = [k for k in range(len(stored)) if k not in taken_identical]
            same = [k for k in same if stored[k] == memory]
        if not same:
            continue
        at = 0
        if len(same) > 1 and aligned and aligned.get(n) in same:
            at = same.index(aligned[n])
        elif len(same) > 1 and (by_order or placed):  # the nearest (``same`` is in order)
            if by_order:
                near = {bisect_left(same, n) - 1, bisect_left(same, n)}
            else:
                start, end = file_places[n]  # type: ignore[index]
                by_start = bisect_left(same, start, key=lambda k: stored_places[k][0])  # type: ignore[index]
                by_end = bisect_left(same, -end, key=lambda k: -stored_places[k][1])  # type: ignore[index]
                near = {by_start - 1, by_start, by_end - 1, by_end}
            at = min(
                (i for i in near if 0 <= i < len(same)), key=lambda i: (distance(n, same[i]), i)
            )
        best = same.pop(at) if alike is not None else same[at]
        chosen[n] = best
        taken_identical.add(best)
    free = [k for k in range(len(stored)) if k not in taken_identical]
    left = [n for n, found in enumerate(chosen) if found is None]
    if left and free:
        paired = aligned or {}
        score = {
            (n, k): (likeness(file[n], stored[k]), paired.get(n) == k, -distance(n, k))
            for n in left
            for k in free
        }
        ranked = sorted(score, key=lambda pair: (score[pair], -pair[0], -pair[1]), reverse=True)
        taken: set[int] = set()
        for n, k in ranked:
            if chosen[n] is None and k not in taken:
                chosen[n] = k
                taken.add(k)
                if ambiguous is not None and file[n] != stored[k]:
                    if any(score[n, other] == score[n, k] for other in free if other not in taken):
                        ambiguous.add(n)
    return chosen


def _identical(stored: Sequence[Any]) -> dict[Any, list[int]] | None:
    """The indices of ``stored`` by what each says (None: rows that cannot be hashed)."""
    found: dict[Any, list[int]] = {}
    try:
        for k, memory in enumerate(stored):
            found.setdefault(memory, []).append(k)
    except TypeError:
        return None
    return found


def likeness(file: Any, stored: Any) -> tuple[bool, bool, float, int]:
    """How likely a file's memory is an edit of a stored one of its key: the same status
    and link (a reviewer edits what a memory says more often than what became of it), the
    same kind of end (both superseded by a memory, whatever its title: a link pointed at
    its successor's new title; or both invalidated, or both not superseded), the share of
    the text in common, how many other fields are the same."""
    same_status = all(getattr(file, name) == getattr(stored, name) for name in STATUS_FIELDS)
    same_end = file.status == stored.status and (file.superseded_by is None) == (
        stored.superseded_by is None
    )
    text = difflib.SequenceMatcher(None, file.text, stored.text, autojunk=False).ratio()
    others = sum(getattr(file, name) == getattr(stored, name) for name in CONTENT_FIELDS)
    return same_status, same_end, text, others


def pair_section(
    numbered: Sequence[tuple[MemoryRow, MemoryKey, int, int]],
    stored: dict[MemoryKey, list[Any]],
    memory_of: Callable[[Any], MemoryRow],
    place_of: Callable[[Any], Place] | None = None,
    ambiguous: set[int] | None = None,
    section: Sequence[Any] = (),
) -> list[int | None]:
    """For each of a section's memories (``merge._numbered``: memory, key, its place among
    its key's, its place among its title's), the index of the stored memory of its key it
    is: its place among its key's when neither the file nor the store has another of that
    key, else ``pair_by_content``'s choice (``place_of``: a stored memory's place in its
    section, from its start and from its end, for its ties; ``ambiguous`` gains the places
    of the memories ``pair_by_content`` could not tell apart).

    With ``section`` (the stored memories of the section, in the export's order), the
    stretch of the section around the twins is aligned with the export's
    (``_aligned_around``), and what every best alignment says is used where what the
    memories say cannot tell: it breaks a tie between twins, and a stored twin it pairs
    with a memory of another key that says all it says but its title (a retitle) is that
    memory's, not a twin's."""
    chosen: list[int | None] = [nth for _memory, _key, nth, _title_nth in numbered]
    in_file: dict[MemoryKey, list[int]] = {}
    for n, (_memory, key, _nth, _title_nth) in enumerate(numbered):
        in_file.setdefault(key, []).append(n)
    twins = {
        key: places
        for key, places in in_file.items()
        if len(stored.get(key, ())) > 1 or (len(places) > 1 and stored.get(key))
    }
    sure = _aligned_around(numbered, stored, twins, section, memory_of) if section else {}
    # a stored twin the alignment pairs with a memory of another key that says all it says
    # but its title: retitled (a memory that only shares its text may be anything)
    elsewhere = {
        id(section[j]): numbered[n][1]
        for n, j in sure.items()
        if numbered[n][0] == memory_of(section[j])._replace(title=numbered[n][0].title)
    }
    last = len(numbered) - 1
    for key, places in twins.items():
        pool = [
            k for k, item in enumerate(stored[key]) if elsewhere.get(id(item), key) == key
        ]  # (less the twins the alignment gives a memory of another key)
        index_of = {id(stored[key][k]): i for i, k in enumerate(pool)}
        aligned = {
            local: index_of[id(section[sure[n]])]
            for local, n in enumerate(places)
            if n in sure and id(section[sure[n]]) in index_of
        }
        olds = [memory_of(stored[key][k]) for k in pool]
        stored_places = [place_of(stored[key][k]) for k in pool] if place_of else None
        file_places = [(n, last - n) for n in places]
        unsure: set[int] = set()
        found = pair_by_content(
            [numbered[n][0] for n in places], olds, file_places, stored_places, unsure, aligned
        )
        for n, index in zip(places, found, strict=True):
            chosen[n] = None if index is None else pool[index]
        if ambiguous is not None:
            ambiguous.update(places[n] for n in unsure)
    return chosen


#: the most cells (the file's memories times the export's) of the stretch of a section
#: that ``pair_section`` aligns (a quadratic table): a larger one is not aligned
ALIGN_CELLS = 100_000
#: the memories aligned on each side of the stretch that holds the section's twins
ALIGN_MARGIN = 8


def _aligned_around(
    numbered: Sequence[tuple[MemoryRow, MemoryKey, int, int]],
    stored: dict[MemoryKey, list[Any]],
    twins: dict[MemoryKey, list[int]],
    section: Sequence[Any],
    memory_of: Callable[[Any], MemoryRow],
) -> dict[int, int]:
    """``sure_alignment`` of the stretch of the section that holds its twins, in the file
    and in the export, with ALIGN_MARGIN memories on each side (a section of thousands
    with its twins together is aligned in a few cells): file place -> section place.
    Nothing when there are no twins, or the stretch is over ALIGN_CELLS."""
    if not twins:
        return {}
    at = {id(item): j for j, item in enumerate(section)}
    file_places = [n for places in twins.values() for n in places]
    base_places = [at[id(item)] for key in twins for item in stored[key] if id(item) in at]
    if not base_places:
        return {}
    low, high = max(0, min(file_places) - ALIGN_MARGIN), max(file_places) + ALIGN_MARGIN + 1
    start, end = max(0, min(base_places) - ALIGN_MARGIN), max(base_places) + ALIGN_MARGIN + 1
    file = [row[0] for row in numbered[low:high]]
    base = [memory_of(item) for item in section[start:end]]
    if len(file) * len(base) > ALIGN_CELLS:
        return {}
    return {low + n: start + j for n, j in sure_alignment(file, base).items()}


def sure_alignment(file: Sequence[MemoryRow], base: Sequence[MemoryRow]) -> dict[int, int]:
    """The pairs (file index -> base index) that every best order-preserving alignment of
    one section's memories in the file with the export's makes. A pair scores most when
    the two are identical, less when they share a key (an edit), least when they share
    only their text (a retitle, or other turns); a memory may stay unpaired (added or
    deleted). A memory that the best alignments pair otherwise, or leave unpaired in one
    of them, is left out (moved blocks, or two readings that fit alike). Order is only a
    hint: ``pair_section`` takes it where what the memories say cannot tell (a reviewer
    who moves a twin and edits it is told by its text and status, not by its place)."""
    n, m = len(file), len(base)
    step = min(n, m) + 1  # (an identical pair's extra 1 only breaks ties)
    by_row: dict[MemoryRow, list[int]] = {}
    by_key: dict[tuple[str, int, str], list[int]] = {}
    by_text: dict[str, list[int]] = {}
    for j, row in enumerate(base):
        by_row.setdefault(row, []).append(j)
        by_key.setdefault((row.title, row.episode, row.turns), []).append(j)
        by_text.setdefault(row.text, []).append(j)
    weights: list[dict[int, int]] = []
    for row in file:
        weight = dict.fromkeys(by_text.get(row.text, ()), step)
        weight.update(dict.fromkeys(by_key.get((row.title, row.episode, row.turns), ()), 2 * step))
        weight.update(dict.fromkeys(by_row.get(row, ()), 4 * step + 1))
        weights.append(weight)
    ahead = [[0] * (m + 1) for _ in range(n + 1)]  # best of file[:i] with base[:j]
    for i in range(n):
        before, row_now, weight = ahead[i], ahead[i + 1], weights[i]
        for j in range(m):
            best = max(before[j + 1], row_now[j])
            if j in weight:
                best = max(best, before[j] + weight[j])
            row_now[j + 1] = best
    behind = [[0] * (m + 1) for _ in range(n + 1)]  # best of file[i:] with base[j:]
    for i in range(n - 1, -1, -1):
        after, row_now, weight = behind[i + 1], behind[i], weights[i]
        for j in range(m - 1, -1, -1):
            best = max(after[j], row_now[j + 1])
            if j in weight:
                best = max(best, after[j + 1] + weight[j])
            row_now[j] = best
    total = ahead[n][m]
    sure: dict[int, int] = {}
    for i in range(n):
        if any(ahead[i][j] + behind[i + 1][j] == total for j in range(m + 1)):
            continue  # unpaired in a best alignment
        paired = [
            j for j, w in weights[i].items() if ahead[i][j] + w + behind[i + 1][j + 1] == total
        ]
        if len(paired) == 1:
            sure[i] = paired[0]
    return sure


def title_likeness(title: str, other: str) -> float:
    """How like two titles are: the share of their characters in common (0 to 1)."""
    return difflib.SequenceMatcher(None, title, other, autojunk=False).ratio()


def edited_from(
    memory: MemoryRow,
    dropped: list[Stored],
    level: int,
    changed: Callable[[Stored], bool],
    tied: set[int],
) -> Stored | None:
    """The export's memory that ``memory``, new in the file, was edited from: one the file
    no longer names at the same location, found (``level``) by the same title (its episode
    or turns were fixed) or by the same text (its title was). Among several with the same
    text, the one learned when it was (the same episode and turns: a retitle keeps them),
    then the one with its status (a chain retitled whole keeps each one's), then the one
    whose title is likeliest (the most characters in common: a typo fixed);
    among those left, one the database changed since the export (the safe side: its copy
    is a conflict, not a live copy of what an agent retired), and the others as likely are
    added to ``tied``: the file may have renamed any of them, so none is pruned for it.
    Each is taken once."""
    if level == 0:  # (not one of its key: the pairing of twins found it another's)
        found = [
            n
            for n, was in enumerate(dropped)
            if was.memory.title == memory.title
            and (was.memory.episode, was.memory.turns) != (memory.episode, memory.turns)
        ]
    else:
        found = [n for n, was in enumerate(dropped) if was.memory.text == memory.text]
    if not found:
        return None
    if level == 1 and len(found) > 1:
        alike = {
            n: (
                dropped[n].memory.episode == memory.episode,
                dropped[n].memory.turns == memory.turns,
                dropped[n].memory.status == memory.status,  # (a chain retitled whole)
                title_likeness(memory.title, dropped[n].memory.title),
            )
            for n in found
        }
        best = max(alike.values())
        found = [n for n in found if alike[n] == best]
    chosen = next((n for n in found if changed(dropped[n])), found[0])
    if changed(dropped[chosen]):
        tied.update(dropped[n].id for n in found if n != chosen)
    return dropped.pop(chosen)
