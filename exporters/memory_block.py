"""One memory as Memories.md writes it: header line, reference line, struck or plain text.

Shared by the two paths of the one reader (``exporters.line_parser``): line by line, which
reads any file and explains what it cannot read, and the fast path
(``exporters.fast_blocks``), which reads a memory block in exactly the renderer's layout in
one match. Both turn the pieces of a memory into a ``MemoryRow`` here, checked against the
model's rules (``memstore.md_rows.memory_row_problem``), so they cannot disagree on what a
memory is.

The numbers of a file must fit where they are stored: SQLite keeps integers as signed
64-bit numbers, so a location id, visit count, episode, turn, score change or reference
number outside ``INT64_MIN .. INT64_MAX`` is a problem at its line (``memory_numbers_problem``,
``location_numbers_problem`` and ``build_memory`` say so), as is an episode below 1 in a
location's episode list (the database's CHECK) or past the model's largest episode
(``memstore.models.MAX_EPISODE``, one below: the next episode must still be numbered).
Problems quote at most about 80 characters of what the file holds (``clip``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from exporters.escaping import unescape, unescape_lines
from memstore.md_rows import MemoryRow, memory_of_row, memory_row_problem
from memstore.models import (
    INT64_MAX,
    INT64_MIN,
    MEMORY_RULES,
    Category,
    Persistence,
    Status,
    canonical_turns,
)

#: Well-formed headers as written by the renderer, read in one match; older or broken
#: headers go through the detailed checks of the line parser, which say what is wrong.
FAST_HEADER = re.compile(
    r"\*\*\[(SUCCESS|FAILURE|DISCOVERY|DANGER|NOTE)(?: - (CORE|PERMANENT))?"
    r"(?: - (TENTATIVE|SUPERSEDED|ACTIVE))?\] ?(.*)\*\* \*\("
    r"(?:Ep(?:ep_)?([0-9]{1,100}), )?T([0-9]{1,100}(?:-[0-9]{1,100})?)"
    r"(?:, ([+-]?[0-9]{1,100}))?\)\*[ \t]*"
)
#: The start of a header, ``**[CATEGORY - PERSISTENCE( - STATUS)] ``, for every memory
#: that goes to disk (StrEnum members format as their values: "NOTE", "SUPERSEDED").
HEADER_STARTS = {
    (category, persistence, status): (
        f"**[{category} - {persistence.value.upper()}] "
        if status is Status.ACTIVE
        else f"**[{category} - {persistence.value.upper()} - {status}] "
    )
    for category in Category
    for persistence in (Persistence.CORE, Persistence.PERMANENT)
    for status in Status
}
#: ``[Superseded at EpN, Tn by "title"]`` or ``[Invalidated at Tn: "reason"]``.
REFERENCE = re.compile(
    r"\[(Superseded|Invalidated)"
    r"(?: at (?:Ep(?:ep_)?([0-9]{1,100}))?(?:, ?)?(?:T([0-9]{1,100}))?)?"
    r'(?: by "(.*)"|: "(.*)")?\][ \t]*'
)
#: How a reference line starts: the first text line of a memory starting so is one.
REFERENCE_STARTS = ("[Superseded", "[Invalidated")

#: The range of a SQLite integer (signed 64-bit).
#: A run of this many digits or fewer always fits (10**18 < 2**63): no need to read it.
SHORT_DIGITS = 18
#: The largest episode of a memory, its link and a location's list (the model's rule).
EPISODE_MAX = MEMORY_RULES["episode"].maximum or 0
assert len(str(EPISODE_MAX)) > SHORT_DIGITS

CATEGORIES = {category.value: category for category in Category}
PERSISTENCES = {persistence.value.upper(): persistence for persistence in Persistence}
STATUSES = {status.value: status for status in Status}


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in the file that could not be read: its 1-based line and what was wrong."""

    line: int
    message: str
    #: what the problem skipped of a location the file names: a memory (the location id,
    #: its title, its text when it was read) or the whole location (its id, None, None),
    #: so that an import does not count the database's memories it may stand for as ones
    #: the file dropped (not compared: the message says it)
    skipped: tuple[int, str | None, str | None] | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Skipped:
    """Why a memory is skipped, and whether its reference line is to blame (or its header)."""

    message: str
    at_reference: bool = False


def clip(value: str, limit: int = 80) -> str:
    """A piece of the file short enough to quote in a problem message."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def memory_numbers_problem(episode: int, turns: str, score_change: int | None) -> str | None:
    """Why a memory header's numbers cannot be stored (out of SQLite's range), or None.

    ``turns`` is the header's turn string (digits, maybe a ``-`` and digits).
    """
    if episode > EPISODE_MAX:
        return f"episode {clip(str(episode))} is out of range (at most {EPISODE_MAX})"
    if len(turns) > SHORT_DIGITS:
        for part in turns.split("-"):
            if part.isdigit() and int(part) > INT64_MAX:
                return f"turn {clip(part)} is out of range (at most {INT64_MAX})"
    if score_change is not None and not INT64_MIN <= score_change <= INT64_MAX:
        return (
            f"score change {clip(str(score_change))} is out of range ({INT64_MIN} to {INT64_MAX})"
        )
    return None


def location_numbers_problem(
    location_id: int, visit_count: int, episodes: tuple[int, ...]
) -> str | None:
    """Why a location's numbers cannot be stored, or None: each must fit a SQLite integer,
    and each episode of its list be at least 1 (the database's CHECK)."""
    if location_id > INT64_MAX:
        return f"location id {clip(str(location_id))} is out of range (at most {INT64_MAX})"
    if visit_count > INT64_MAX:
        return f"visit count {clip(str(visit_count))} is out of range (at most {INT64_MAX})"
    for episode in episodes:
        if episode < 1:
            return f"episode {clip(str(episode))} in the episode list is below 1 (they start at 1)"
        if episode > EPISODE_MAX:
            return f"episode {clip(str(episode))} is out of range (at most {EPISODE_MAX})"
    return None


def header_fields(
    match: re.Match[str],
) -> tuple[Category, Persistence, Status, str, int, str, int | None]:
    """Category, persistence, status, title, episode, turns and score of a FAST_HEADER match."""
    category, persistence, status, raw_title, episode, turns, score = match.groups()
    return (
        CATEGORIES[category],
        PERSISTENCES[persistence] if persistence else Persistence.PERMANENT,
        STATUSES[status] if status else Status.ACTIVE,
        unescape(raw_title),
        int(episode) if episode is not None else 1,
        turns,
        int(score) if score is not None else None,
    )


def ends_with_strike(text: str) -> bool:
    """Whether the text ends with an unescaped ``~~``."""
    if not text.endswith("~~"):
        return False
    body = text[:-2]
    backslashes = len(body) - len(body.rstrip("\\"))
    return backslashes % 2 == 0


def build_memory(
    category: Category,
    persistence: Persistence,
    status: Status,
    title: str,
    episode: int,
    turns: str,
    score_change: int | None,
    reference: re.Match[str] | None,
    escaped_text: str,
) -> MemoryRow | Skipped:
    """The memory of a header, an optional REFERENCE match and the text lines as written.

    ``escaped_text`` is the memory's text lines joined by line breaks, still escaped and,
    for a SUPERSEDED memory, maybe struck through (``~~...~~`` over all the lines).
    Returns the memory's row (one ``Memory`` accepts), or why it must be skipped.

    A reference line without ``EpN`` was made in the memory's own episode (the renderer
    writes ``EpN`` only for another one), except a line that names nothing else either
    (``[Superseded]``): the renderer writes no line for that memory, and reading no line
    gives no supersession episode, so neither does reading ``[Superseded]`` (nor
    ``[Superseded at EpN]`` in the memory's own episode): the file reads back the same
    after an export.
    """
    numbers = memory_numbers_problem(episode, turns, score_change)
    if numbers is not None:
        return Skipped(f"{numbers}: memory {clip(title)!r} skipped")
    if (
        status is Status.SUPERSEDED
        and escaped_text.startswith("~~")
        and ends_with_strike(escaped_text)
        and (len(escaped_text) >= 4 or "\n" in escaped_text)
    ):
        escaped_text = escaped_text[2:-2]
    superseded_by = superseded_at_turn = superseded_at_episode = invalidation_reason = None
    if reference is not None:
        if status is not Status.SUPERSEDED:
            return Skipped(
                f"memory {clip(title)!r} has a reference line but is {status.value}, "
                f"not SUPERSEDED: memory skipped",
                at_reference=True,
            )
        kind, at_episode, at_turn, successor, reason = reference.groups()
        if kind == "Superseded" and reason is not None:
            return Skipped(
                f'a "Superseded" reference line names a reason instead of a successor '
                f'(write [Invalidated at T..: "..."]): memory {clip(title)!r} skipped',
                at_reference=True,
            )
        if kind == "Invalidated" and successor is not None:
            return Skipped(
                f'an "Invalidated" reference line names a successor instead of a reason '
                f'(write [Superseded at T.. by "..."]): memory {clip(title)!r} skipped',
                at_reference=True,
            )
        for name, digits, largest in (
            ("episode", at_episode, EPISODE_MAX),
            ("turn", at_turn, INT64_MAX),
        ):
            if digits is not None and len(digits) > SHORT_DIGITS and int(digits) > largest:
                return Skipped(
                    f"reference {name} {clip(digits)} is out of range (at most {largest}): "
                    f"memory {clip(title)!r} skipped",
                    at_reference=True,
                )
        superseded_at_episode = int(at_episode) if at_episode is not None else episode
        superseded_at_turn = int(at_turn) if at_turn is not None else None
        if (
            superseded_at_turn is None
            and successor is None
            and reason is None
            and superseded_at_episode == episode
        ):
            superseded_at_episode = None  # as when the file has no reference line
        if successor is not None:
            superseded_by = unescape(successor)
        if reason is not None:
            invalidation_reason = unescape(reason)
    # unescape works across line breaks as it does line by line: no escape is
    # ``\`` followed by a line break, so a backslash at the end of a line stays as it is.
    row = MemoryRow(
        category,
        title,
        unescape_lines(escaped_text),
        episode,
        canonical_turns(turns),
        score_change,
        persistence,
        status,
        superseded_by,
        superseded_at_turn,
        superseded_at_episode,
        invalidation_reason,
    )
    if memory_row_problem(row) is None:
        return row
    return refused(row) or row


def refused(row: MemoryRow) -> Skipped | None:
    """Why the model refuses a row, in pydantic's words (None if it accepts it after all)."""
    try:
        memory_of_row(row)
    except ValidationError as error:
        return Skipped(
            f"memory {clip(row.title)!r} is invalid ({first_error(error)}): memory skipped"
        )
    return None


def first_error(error: ValidationError) -> str:
    """The first complaint of a pydantic error, as ``field: message`` (at most 120 characters)."""
    details = error.errors()
    if not details:
        return clip(str(error), 120)
    first = details[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = first.get("msg", "invalid")
    # a validator's message may quote the value (a turn string of 200 digits)
    return clip(f"{where}: {message}" if where else message, 120)
