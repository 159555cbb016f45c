r"""The fast path of the Memories.md reader: one memory block laid out exactly as the
renderer writes it, read in one match, or declined.

The renderer separates every piece of the file by one blank line, so splitting the text on
blank lines gives whole memories, whose text needs no line-by-line work: a memory's text
is the rest of its block. The reader (``exporters.line_parser``) hands each block that
starts like a memory to ``read_memory_block`` when its state allows one (inside a location,
no memory pending); a block that is declined - an older layout, a hand edit, anything to
report with its line number - is read line by line by the same reader, so what a file
reads as never depends on the fast path. Memories are built through
``exporters.memory_block`` either way; a property test checks that the reader with and
without this path agree on any text (tests/test_memories_md_canonical.py).

``read_memory_run`` reads a run of memory blocks (the reader's inner loop). Its common
cases, a block in the plainest layout (``_PLAIN_BLOCK``: nothing escaped, one text line)
and a struck SUPERSEDED one (``_STRUCK_BLOCK``), are read by one regex each with almost no
check in Python: every value they take is one the model's rules accept, and a property
test checks that they give what ``read_general_memory_block`` gives for any block
(tests/test_md_fast_blocks.py).

Text in any script takes them too (``_unicode_allowed``). Neither reader treats a
character beyond ASCII as structure: the line reader splits the file at ``\n`` only
(``str.split``, after ``\r\n`` became ``\n``; never ``splitlines()``, which would split at
U+0085, U+2028, U+001C and more), strips and compares only spaces and tabs
(``strip(" \t")``, ``[ \t]``), and reads the lines of a block in these layouts with
``FAST_HEADER``, ``REFERENCE`` and plain text, whose patterns, like these, use no ``\s``,
``\d``, ``\w`` or case folding. So U+0085, U+2028, U+3000, U+00A0 and their kin are text
to both readers alike. The one place the two could part is the model's rules, which see
unicode: a title or a reason blank to ``str.strip()`` (U+3000 alone), and lone surrogates
in a title or a text; ``_unicode_allowed`` declines those blocks.
"""

from __future__ import annotations

import re

from exporters.conflict_markers import CONFLICT_MARKER, MARKER_PATTERN, MARKER_STARTS
from exporters.escaping import unescape, unescape_lines
from exporters.memory_block import (
    HEADER_STARTS,
    REFERENCE,
    REFERENCE_STARTS,
    SHORT_DIGITS,
    Skipped,
    build_memory,
    memory_numbers_problem,
)
from memstore.md_rows import MemoryRow, memory_row_problem
from memstore.models import (
    MEMORY_RULES,
    Status,
    canonical_turns,
    reason_problem,
    title_problem,
    turns_problem,
)

__all__ = [
    "LOCATION_BLOCK_START",
    "MEMORY_BLOCK_START",
    "read_general_memory_block",
    "read_location_block",
    "read_memory_block",
    "read_memory_run",
]

#: How every memory block starts.
MEMORY_BLOCK_START = "**["
#: How every location block (header and visits line) starts.
LOCATION_BLOCK_START = "## Location "
#: A location's header and visits line as the renderer writes them, with numbers that need
#: no range check (at most SHORT_DIGITS digits; episodes from 1, as written): others are
#: read line by line, which says what is wrong.
_LOCATION_BLOCK = re.compile(
    rf"## Location ([0-9]{{1,{SHORT_DIGITS}}}): (.*)\n"
    rf"\*\*Visits:\*\* ([0-9]{{1,{SHORT_DIGITS}}}) \| \*\*Episodes:\*\* "
    rf"(none|[1-9][0-9]{{0,{SHORT_DIGITS - 1}}}(?:, [1-9][0-9]{{0,{SHORT_DIGITS - 1}}})*)"
)

#: What each ``CATEGORY - PERSISTENCE( - STATUS)`` the renderer writes stands for (the
#: inside of the brackets of HEADER_STARTS).
_KINDS = {start[3:-2]: kind for kind, start in HEADER_STARTS.items()}
#: A memory's block as the renderer writes it: the header
#: ``**[KIND] Title** *(EpN, Tn(-m)(, +s))*``, then its text lines if any. The title is
#: what lies between ``] `` and the last ``** *(`` of the header line: the greedy
#: ``[^\n]*`` backs off to it. No other split fits, since the end holds no other ``**``;
#: so ``FAST_HEADER`` reads the same fields. The title's group ends with the first ``*``
#: of ``** *(`` (so that sre tries only the places where a ``*`` stands; a group that
#: ended before it would be tried at every place): the reader drops that ``*``. A turn
#: is at most 100 digits, each end of a range too, as the line reader's ``_METADATA``
#: takes it; a range out of order is declined by ``memory_row_problem``.
_MEMORY_BLOCK = re.compile(
    r"\*\*\[([^]]+)\] ([^\n]*\*)\* \*\("
    r"Ep([0-9]{1,100}), T([0-9]{1,100}(?:-[0-9]{1,100})?)(, [+-][0-9]{1,100}|)\)\*"
    r"(?:\n|\Z)(.*)",
    re.DOTALL,
)
#: The episodes and scores (as the header writes them: ``, +5``, or nothing) a header
#: usually holds, read by one lookup instead of ``int()`` (which reads any other).
_EPISODES = {str(n): n for n in range(1000)}
_SCORES: dict[str, int | None] = {"": None}
_SCORES.update({f", {sign}{n}": int(f"{sign}{n}") for sign in "+-" for n in range(1000)})
#: How a text line that could be read as structure (or as a blank line) starts; the
#: renderer escapes every such start.
_STRUCTURE_STARTS = ("#", "*", "[", " ", "\t", "---")
#: A line break followed by such a start, or by a git conflict marker (the line reader
#: reports it).
_STRUCTURE_AFTER_BREAK = re.compile(rf"\n(?:[#*\[ \t]|---|{MARKER_PATTERN})")
_SUPERSEDED = Status.SUPERSEDED

#: The kinds of the memories the plain block reads (no reference line, no strike-through).
_PLAIN_KINDS = {text: kind for text, kind in _KINDS.items() if kind[2] is not _SUPERSEDED}
_TITLE_MAX = MEMORY_RULES["title"].maximum or 0
_TEXT_MAX = MEMORY_RULES["text"].maximum or 0
#: The common case of ``_MEMORY_BLOCK``, read with almost no check in Python: a block
#: matching it (its title and text within MEMORY_RULES' lengths) whose kind is not
#: SUPERSEDED (no reference line, no strike-through), with no backslash (nothing to
#: unescape), and all ASCII or passing ``_unicode_allowed``, holds values the model accepts
#: as they stand (``memory_row_problem`` passes; tests/test_md_fast_blocks.py checks it) and
#: reads as ``_MEMORY_BLOCK`` reads it.
#: The title does not start with a space, a control character or ``*`` (so an ASCII one
#: is not blank) and holds no NUL; the text is one line not starting as structure would (``#``,
#: ``*``, ``[``, a space or tab, ``---``) and not a git conflict marker (which the line
#: reader reports); the episode (1 to 999) and the score change
#: (-999 to +999) are written as the renderer writes them (the keys of ``_EPISODES`` and
#: ``_SCORES``); the turn (or each end of a turn range, which ``turns_problem`` checks) is at
#: most SHORT_DIGITS digits. The header line ends
#: at ``)*``, which holds no other ``*`` and no ``** *(``: the title splits off as there.
_PLAIN_BLOCK = re.compile(
    rf"\*\*\[([^]]+)\] ([^\x00-\x20*][^\n\x00*]{{0,{_TITLE_MAX - 1}}})\*\* \*\("
    r"Ep([1-9][0-9]{0,2}), "
    rf"T([0-9]{{1,{SHORT_DIGITS}}}(?:-[0-9]{{1,{SHORT_DIGITS}}})?)"
    r"(|, [+-](?:0|[1-9][0-9]{0,2}))\)\*"
    rf"(?:\n(?=[^#*\[ \t\n])(?!---|{MARKER_PATTERN})|\Z)(.{{0,{_TEXT_MAX}}})",
    re.DOTALL,  # the text is checked for line breaks in Python (faster than [^\n]* here)
)
#: The kinds of the memories ``_STRUCK_BLOCK`` reads.
_STRUCK_KINDS = {text: kind for text, kind in _KINDS.items() if kind[2] is _SUPERSEDED}
#: The common case of a SUPERSEDED memory, read as ``_PLAIN_BLOCK`` reads the others (the
#: same conditions, the same header): its reference line as the renderer writes it (a turn,
#: the episode when it is another, a successor title or a reason with no ``"`` and no line
#: break; the reason not starting with a space or a control character, so an ASCII one is
#: not blank, and any other is checked by ``reason_problem``), then its text on one line,
#: struck through.
_EPISODE = "([1-9][0-9]{0,2})"
_TURN = f"([0-9]{{1,{SHORT_DIGITS}}})"
_STRUCK_BLOCK = re.compile(
    _PLAIN_BLOCK.pattern[: _PLAIN_BLOCK.pattern.index(r"\)\*") + 4]
    + rf'\n\[(?:Superseded at (?:Ep{_EPISODE}, )?T{_TURN} by "([^"\n]*)"'
    + rf'|Invalidated at (?:Ep{_EPISODE}, )?T{_TURN}: "([^\x00-\x20"][^"\n]*)")\]'
    + r"\n~~(.*)~~",
    re.DOTALL,
)
assert (MEMORY_RULES["episode"].minimum or 0) <= 1 and (MEMORY_RULES["title"].minimum or 0) <= 1
assert (MEMORY_RULES["superseded_at_episode"].minimum or 0) <= 1
assert (MEMORY_RULES["superseded_at_turn"].minimum or 0) <= 0
_new = tuple.__new__
_make_row = MemoryRow._make


def read_memory_run(blocks: list[str], start: int) -> tuple[list[MemoryRow], int]:
    """The memories of ``blocks[start:]`` up to the first block that ``read_memory_block``
    declines (each what it gives), and how many line breaks the blocks read hold.

    The reader's inner loop: a block matching ``_PLAIN_BLOCK`` is read here with no
    function call. Never raises.
    """
    rows: list[MemoryRow] = []
    append = rows.append
    plain_match = _PLAIN_BLOCK.fullmatch
    kinds, episodes, scores = _PLAIN_KINDS, _EPISODES, _SCORES
    without_text = 0  # plain blocks of one line (no text)
    others = 0  # rows read by read_general_memory_block
    other_breaks = 0  # the line breaks of their blocks
    for index in range(start, len(blocks)):
        block = blocks[index]
        plain = plain_match(block)
        if plain is not None:
            kind_text, title, raw_episode, turns, raw_score, body = plain.groups()
            kind = kinds.get(kind_text)
            if (
                kind is not None
                and "\\" not in block
                and "\n" not in body
                and ("-" not in turns or turns_problem(turns) is None)
                and (block.isascii() or _unicode_allowed(title, block))  # O(1): a str knows
            ):
                category, persistence, status = kind
                append(
                    _new(
                        MemoryRow,
                        (
                            category,
                            title,
                            body,
                            episodes[raw_episode],
                            canonical_turns(turns),
                            scores[raw_score],
                            persistence,
                            status,
                            None,
                            None,
                            None,
                            None,
                        ),
                    )
                )
                if not body:
                    without_text += 1
                continue
        if not block.startswith(MEMORY_BLOCK_START):  # the run ends (at "---", mostly)
            break
        row = _read_struck_block(block) or read_general_memory_block(block)
        if row is None:
            break
        append(row)
        others += 1
        other_breaks += block.count("\n")
    return rows, len(rows) - others - without_text + other_breaks


def _read_struck_block(block: str) -> MemoryRow | None:
    """The memory of a block matching ``_STRUCK_BLOCK`` (None: it does not)."""
    struck = _STRUCK_BLOCK.fullmatch(block)
    if struck is None:
        return None
    (kind_text, title, raw_episode, turns, raw_score) = struck.groups()[:5]
    by_episode, by_turn, successor, at_episode, at_turn, reason, body = struck.groups()[5:]
    kind = _STRUCK_KINDS.get(kind_text)
    if (
        kind is None
        or "\\" in block
        or "\n" in body
        or len(title) > _TITLE_MAX
        or len(body) > _TEXT_MAX
        or ("-" in turns and turns_problem(turns) is not None)
        or not (
            block.isascii()
            or (
                _unicode_allowed(title, block)
                and (reason is None or reason.isascii() or reason_problem(reason) is None)
            )
        )
    ):
        return None
    category, persistence, status = kind
    episode = _EPISODES[raw_episode]
    if reason is None:  # superseded by a successor (else invalidated for a reason)
        at_episode, at_turn = by_episode, by_turn
    return _new(  # type: ignore[no-any-return]
        MemoryRow,
        (
            category,
            title,
            body,
            episode,
            canonical_turns(turns),
            _SCORES[raw_score],
            persistence,
            status,
            successor,
            int(at_turn),
            episode if at_episode is None else _EPISODES[at_episode],
            reason,
        ),
    )


def _unicode_allowed(title: str, block: str) -> bool:
    """Whether a block that is not all ASCII may be read by ``_PLAIN_BLOCK`` or
    ``_STRUCK_BLOCK`` all the same: the rules of MEMORY_RULES that see beyond ASCII hold.

    The title, of at most ``_TITLE_MAX`` characters by the pattern, must not be blank to
    the model (``title_problem``: ``str.strip()`` drops U+3000, U+0085, U+00A0 and the
    rest of unicode's whitespace; an ASCII title starting as the pattern says is never
    blank). The title and the text, length-limited fields, must hold no surrogate (in a
    str every surrogate is lone; the model refuses them there): UTF-8 refuses exactly the
    surrogates, and encoding is several times faster than a regex search. The block is
    encoded whole: its other parts are ASCII by the patterns, but for a successor title or
    a reason, which may hold surrogates (the model takes them there); such a rare block is
    declined, and ``read_general_memory_block`` reads it instead.
    """
    try:
        block.encode()
    except UnicodeEncodeError:
        return False
    return title.isascii() or title_problem(title) is None


def read_memory_block(block: str) -> MemoryRow | None:
    """The memory of a block in the renderer's exact layout (header line, optional
    reference line, text lines; no blank line), or None: then the block is read line by
    line, and what this returns is what that reading gives, with no problem.

    Never raises.
    """
    rows, _breaks = read_memory_run([block], 0)
    return rows[0] if rows else None


def read_general_memory_block(block: str) -> MemoryRow | None:
    """``read_memory_block`` without its common case (``_PLAIN_BLOCK``), which gives the
    same (tests/test_md_fast_blocks.py)."""
    if block.endswith("\n"):  # a last line left empty: the line reader ends the memory there
        return None
    match = _MEMORY_BLOCK.fullmatch(block)
    if match is None:
        return None
    kind_text, title, raw_episode, turns, raw_score, body = match.groups()
    turns = canonical_turns(turns)
    title = title[:-1]
    kind = _KINDS.get(kind_text)
    if kind is None:
        return None
    category, persistence, status = kind
    episode = _EPISODES.get(raw_episode)
    if episode is None or raw_score not in _SCORES:  # numbers beyond the lookup tables
        episode, score = int(raw_episode), (int(raw_score[2:]) if raw_score else None)
        if memory_numbers_problem(episode, turns, score) is not None:
            return None
    else:
        score = _SCORES[raw_score]
        if len(turns) > SHORT_DIGITS and memory_numbers_problem(1, turns, None) is not None:
            return None
    if "\\" in title:
        title = unescape(title)
    if status is not _SUPERSEDED:
        # The common case: no reference line, no strike-through.
        if (
            body.startswith(_STRUCTURE_STARTS)
            or (body.startswith(MARKER_STARTS) and CONFLICT_MARKER.match(body) is not None)
            or ("\n" in body and _STRUCTURE_AFTER_BREAK.search(body) is not None)
        ):
            return None
        memory = _make_row(
            (
                category,
                title,
                unescape_lines(body) if "\\" in body else body,
                episode,
                turns,
                score,
                persistence,
                status,
                None,
                None,
                None,
                None,
            )
        )
        return memory if memory_row_problem(memory) is None else None
    reference = None
    if body.startswith(REFERENCE_STARTS):
        line, _, body = body.partition("\n")
        reference = REFERENCE.fullmatch(line)
        if reference is None:
            return None
    if (
        body.startswith(_STRUCTURE_STARTS)
        or (body.startswith(MARKER_STARTS) and CONFLICT_MARKER.match(body) is not None)
        or ("\n" in body and _STRUCTURE_AFTER_BREAK.search(body) is not None)
    ):
        return None
    built = build_memory(
        category, persistence, status, title, episode, turns, score, reference, body
    )
    return None if isinstance(built, Skipped) else built


def read_location_block(block: str) -> tuple[int, str, int, tuple[int, ...]] | None:
    """The id, name, visit count and episodes (as listed) of a location's header and visits
    line in the renderer's exact layout, or None: then the block is read line by line.
    Numbers that might be out of range are declined too (the line reader says what is
    wrong), so ``location_numbers_problem`` has nothing to say about those it reads."""
    match = _LOCATION_BLOCK.fullmatch(block)
    if match is None:
        return None
    raw_id, name, raw_visits, raw_episodes = match.groups()
    ints = _INTS.__getitem__
    episodes = () if raw_episodes == "none" else tuple(map(ints, raw_episodes.split(", ")))
    return ints(raw_id), unescape_lines(name) if "\\" in name else name, ints(raw_visits), episodes


class _Ints(dict[str, int]):
    """The numbers a file usually holds, by their digits (a lookup is cheaper than
    ``int()``); any other is read by ``int()``."""

    def __missing__(self, digits: str) -> int:
        return int(digits)


_INTS = _Ints({str(n): n for n in range(1000)})
