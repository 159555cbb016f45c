"""What the agent sees at a location: memory lines within a token budget (spec 000, 002).

Pure functions over rows the store hands in; no SQL here. Display order follows spec 002:
active persistent memories, then active ephemeral ones, then a marked TENTATIVE section.
When the budget is tight, memories are chosen in priority order instead: DANGER first, then
CORE (spawn state), then PERMANENT, then EPHEMERAL, then TENTATIVE, newest first within a
group, and a closing line says how many were left out.

The rule when they do not all fit: memories are taken whole, in priority order, while they
fit (room for the closing line kept). The first one that does not fit whole is cut to the
tokens that are left: its category, title and tier marker kept, its text shortened at a
grapheme-cluster boundary (``memstore.tokens.grapheme_end``) and ended with ``CUT_MARK``
("…"), provided at least ``MIN_CUT_TOKENS`` tokens of its text still show; otherwise it is
left out. Either way no memory after it is shown, so what the agent sees is always the most
important memories, the last possibly cut, and never a lesser memory in place of a greater
one that was too long (a memory of any length, even longer than the whole budget, shows at
least in part when the budget leaves room for its title and MIN_CUT_TOKENS of its text).
A cut leaves ``EXITS_RESERVE`` tokens of the budget unused, room for the map's exits line
that the manager appends within the same budget (``memstore.map_exits.with_exits_line``,
which never cuts memories and shows a shorter line, fewer exits, when the full one is
longer); only the first memory shown, which comes before the exits line, is cut into that
room when it could not show otherwise. The one exception to "nothing after it": a memory
that no view could show, its head (category and title, up to 500 characters) and
MIN_CUT_TOKENS of its text longer than the whole budget, is passed over, counted as not
shown, and the memories after it are taken by the same rule; so one oversized title never
hides a location's other memories, and when every memory is oversized only the closing
line shows. A cut memory counts as shown; "(N more memories not shown)" counts the others.
The block, closing line included, never exceeds the budget.

The cost of a view does not grow with what it hides: only the first ``VIEW_LIMIT`` rows in
priority order are ever formatted and weighed (a budget of a few hundred tokens shows a few
dozen lines at most); the rest are only counted. Each row's line and token count are made
once, when the row enters a view (``view_row``), and a view is kept up to date row by row
as memories are written (``memstore.location_views``). A cut line is made when the view is
formatted (after a write there) from the first tokens of the text only, and kept for the
same row and room (``_cut``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from memstore.errors import DamagedDatabase
from memstore.models import on_one_line
from memstore.tokens import count_tokens, text_prefix

TENTATIVE_HEADER = "⚠️  TENTATIVE MEMORIES (unconfirmed, may be invalidated):"
#: ends the text of a memory cut to fit the budget
CUT_MARK = "…"
#: the fewest tokens of a memory's text that a cut shows; with less room it is left out
MIN_CUT_TOKENS = 8
#: tokens a cut leaves unused for the map's exits line (a line with two or three exits and
#: the untried directions; a longer one shows fewer exits)
EXITS_RESERVE = 40
MARKERS = {"core": " [spawn]", "ephemeral": " [session]", "permanent": ""}
#: the most rows of one location that a view formats and weighs; the rest are counted
VIEW_LIMIT = 64
#: tier numbers: display order puts persistent memories before ephemeral ones
PERSISTENT, EPHEMERAL = 0, 1


class ContextRow(NamedTuple):
    """One non-superseded memory, as the store reads it for the agent's context."""

    category: str
    title: str
    text: str
    persistence: str
    status: str


class ViewRow(NamedTuple):
    """A live memory in a location's view: where it ranks, where it shows, what it costs."""

    priority: tuple[int, int, int]  # (group, -tier, -id): the most important first
    order: tuple[int, int]  # (tier, id): display order
    title: str
    tentative: bool
    line: str
    cost: int  # tokens of the line and its newline
    start: int  # where the memory's text begins in the line
    end: int  # and where it ends (the tier marker follows)


def group(category: str, persistence: str, status: str) -> int:
    """The priority group: DANGER 0, CORE 1, PERMANENT 2, EPHEMERAL 3, TENTATIVE 4."""
    if status == "TENTATIVE":
        return 4
    if category == "DANGER":
        return 0
    return {"core": 1, "permanent": 2, "ephemeral": 3}[persistence]


def _head(row: ContextRow) -> str:
    head = f"[{row.category}] {on_one_line(row.title)}: "
    return f"  {head}" if row.status == "TENTATIVE" else head


def view_row(tier: int, memory_id: int, row: ContextRow, markers: bool) -> ViewRow:
    """A memory's place and line in a view, its tokens counted here, once: when the
    memory is written through the store, or when a cold read brings it into a view.
    A row whose persistence is none of memstore's (damaged around the database's checks)
    is DamagedDatabase, one line."""
    if row.persistence not in MARKERS:
        raise DamagedDatabase(
            f"a stored memory cannot be read (title {str(row.title)[:60]!r}: persistence "
            f"{str(row.persistence)[:30]!r}); run `memstore check` to list what is damaged"
        )
    head, text = _head(row), on_one_line(row.text)
    line = f"{head}{text}{MARKERS[row.persistence] if markers else ''}"
    return ViewRow(
        (group(row.category, row.persistence, row.status), -tier, -memory_id),
        (tier, memory_id),
        row.title,
        row.status == "TENTATIVE",
        line,
        count_tokens(line) + 1,  # +1 for the newline
        len(head),
        len(head) + len(text),
    )


def left_out_line(count: int) -> str:
    return f"({count} more {'memory' if count == 1 else 'memories'} not shown)"


def format_view(
    rows: list[ViewRow], total: int, token_budget: int, cut_reserve: int = EXITS_RESERVE
) -> str:
    """The agent's text from the first rows in priority order (at most VIEW_LIMIT of them)
    and how many live memories there are in all (``total``).

    Returns "" when there is nothing to show. The result's token count (cl100k_base) stays
    within ``token_budget``, the closing "not shown" line included; a cut memory leaves
    ``cut_reserve`` of it unused, for the map's exits line (``_choose``).
    """
    if not total:
        return ""
    has_tentative = any(row.tentative for row in rows)
    header_cost = count_tokens(TENTATIVE_HEADER) + 2 if has_tentative else 0
    if total == len(rows) and sum(row.cost for row in rows) + header_cost <= token_budget:
        chosen = rows
    else:
        chosen = _choose(rows, total, token_budget, header_cost, cut_reserve)
    return _assemble(chosen, total)


def _choose(
    rows: list[ViewRow], total: int, budget: int, header_cost: int, cut_reserve: int
) -> list[ViewRow]:
    """Whole rows in priority order while they fit, then the first that does not, cut
    (``_cut``) or left out, and none after it. The cut leaves ``cut_reserve`` tokens
    unused, unless it is the first memory shown and could show only with them. A row that
    no view could show (``_fits_alone``) is passed over and does not stop the selection.
    Room for the "not shown" line is kept while any memory is still to come or passed
    over: the line for ``total`` is the longest it can be."""
    reserve = count_tokens(left_out_line(total)) + 1
    remaining = budget
    chosen: list[ViewRow] = []
    header_paid = passed = False
    for index, row in enumerate(rows):  # already in priority order
        header = header_cost if row.tentative and not header_paid else 0
        keep = reserve if passed or index + 1 < total else 0  # a "not shown" line?
        if row.cost + header + keep <= remaining:
            remaining -= row.cost + header
            chosen.append(row)
            header_paid = header_paid or row.tentative
            continue
        room = remaining - header - keep
        cut = _cut(row, room - cut_reserve) if cut_reserve else None
        if cut is None and (not chosen or not cut_reserve):
            cut = _cut(row, room)  # the first memory shown comes before the exits line
        if cut is not None:
            chosen.append(cut)
            break
        if _fits_alone(row, budget, header_cost if row.tentative else 0, reserve):
            break  # too little room left: a lesser memory never shows in its place
        passed = True  # its title alone is too long for the budget: nothing could show it
    return chosen


def _fits_alone(row: ViewRow, budget: int, header: int, reserve: int) -> bool:
    """Could ``row`` show, whole or cut, in an otherwise empty view (room kept for the
    tentative header and the "not shown" line)?"""
    room = budget - header - reserve
    return row.cost <= room or _cut(row, room) is not None


@lru_cache(maxsize=64)  # the same row cut to the same room, format after format
def _cut(row: ViewRow, room: int) -> ViewRow | None:
    """``row`` with its text cut so that the line and its newline cost at most ``room``
    tokens, or None when fewer than MIN_CUT_TOKENS tokens of its text would show. The text
    is cut after its last whole token that fits, trailing spaces dropped, then CUT_MARK."""
    if room < MIN_CUT_TOKENS + 3:  # the text, the mark, the newline and a head of 1+ tokens
        return None  # (the common case at the edge of a full budget: nothing to count)
    head, text, tail = row.line[: row.start], row.line[row.start : row.end], row.line[row.end :]
    limit = room - count_tokens(f"{head}{CUT_MARK}{tail}") - 1
    while limit >= MIN_CUT_TOKENS:
        kept = text_prefix(text, limit).rstrip()
        if len(kept) == len(text.rstrip()):  # all of it: a cut shows less
            limit = min(limit, count_tokens(kept)) - 1
            continue
        line = f"{head}{kept}{CUT_MARK}{tail}"
        cost = count_tokens(line) + 1
        if cost > room:
            limit -= cost - room  # tokens do not add up exactly across the joins
            continue
        if count_tokens(kept) < MIN_CUT_TOKENS:
            return None
        return row._replace(line=line, cost=cost)
    return None


def _assemble(chosen: list[ViewRow], total: int) -> str:
    shown = sorted(chosen, key=lambda row: row.order)
    out = [row.line for row in shown if not row.tentative]
    tentative = [row.line for row in shown if row.tentative]
    if tentative:
        if out:
            out.append("")
        out.append(TENTATIVE_HEADER)
        out.extend(tentative)
    missing = total - len(chosen)
    if missing:
        out.append(left_out_line(missing))
    return "\n".join(out)


def format_location_memory(
    rows: list[ContextRow],
    token_budget: int,
    show_markers: bool = True,
    cut_reserve: int = EXITS_RESERVE,
) -> str:
    """Format ``rows`` (display order: persistent then ephemeral, oldest first) for the agent."""
    ranked = sorted(
        (view_row(0, index, row, show_markers) for index, row in enumerate(rows)),
        key=lambda row: row.priority,
    )
    return format_view(ranked[:VIEW_LIMIT], len(rows), token_budget, cut_reserve)
