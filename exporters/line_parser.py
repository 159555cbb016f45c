"""The one reader of Memories.md: reads any file and explains what it cannot read.

A state machine over the file's lines (``_Parser.run_lines``): location headers, visits
lines, memory headers, reference lines, text, separators, each kind of problem reported at
its line. ``read_body`` feeds it block by block (the pieces between empty lines): a memory
block in the renderer's exact layout is read in one match (``exporters.fast_blocks``),
every other block line by line, with the same state; ``read_line_by_line`` feeds it every
line, and a property test checks that both give the same. Memories are built as checked
``MemoryRow``s through ``exporters.memory_block``.
"""

from __future__ import annotations

import re
from operator import itemgetter

from pydantic import ValidationError

from exporters.conflict_markers import CONFLICT_MARKER, MARKER_STARTS
from exporters.escaping import unescape, unescape_lines
from exporters.fast_blocks import (
    LOCATION_BLOCK_START,
    MEMORY_BLOCK_START,
    read_location_block,
    read_memory_run,
)
from exporters.memory_block import (
    CATEGORIES,
    FAST_HEADER,
    PERSISTENCES,
    REFERENCE,
    REFERENCE_STARTS,
    STATUSES,
    Problem,
    Skipped,
    build_memory,
    clip,
    first_error,
    header_fields,
    location_numbers_problem,
)
from exporters.pending import PendingLocation, PendingMemory
from memstore.md_rows import LocationRow, LocationRows, location_row_problem
from memstore.models import LocationInfo, Persistence, Status

__all__ = ["Problem", "read_body", "read_line_by_line"]


_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_LOCATION = re.compile(r"##[ \t]+Location[ \t]+([0-9]{1,100})[ \t]*:[ \t]?(.*)")
_MEMORIES_HEADING = re.compile(r"###[ \t]+Memories[ \t]*")
_TITLE_HEADING = re.compile(r"#[ \t]+Location[ \t]+Memories[ \t]*")
_VISITS = re.compile(
    r"\*\*Visits:\*\*[ \t]*([0-9]{1,100})[ \t]*\|[ \t]*\*\*Episodes:\*\*[ \t]*(.*?)[ \t]*"
)
_HEADER = re.compile(r"\*\*\[([^\]]*)\] ?(.*)\*\* \*\(([^)]*)\)\*[ \t]*")
#: the location id and the memory title a malformed header still shows (``## Location
#: -79: Kitchen``, ``**[NOTE] Title** (Ep1, T6)``): what the problem skipped, so that the
#: database's memories it stands for are not counted as ones the file dropped
_LOOSE_LOCATION = re.compile(r"##[ \t]*Location[ \t]*[-+]?[ \t]*([0-9]{1,18})\b", re.IGNORECASE)
_LOOSE_TITLE = re.compile(r"\*\*\[[^\]]*\][ \t]*(.*?)[ \t]*(?:\*\*|\*?\(|$)")
_METADATA = re.compile(
    r"[ \t]*(?:Ep(?:ep_)?([0-9]{1,100})[ \t]*,[ \t]*)?"
    r"T([0-9]{1,100}(?:-[0-9]{1,100})?)[ \t]*(?:,[ \t]*([+-]?[0-9]{1,100})[ \t]*)?"
)
_MARKER_SPLIT = re.compile(r"[ \t]*-[ \t]*")
#: First characters of lines that may be structure (or blank) or a git conflict marker;
#: others are always text.
_STRUCTURE_STARTS = frozenset(("#", "*", "-", " ", "\t", *MARKER_STARTS))
_NO_EPISODES = frozenset({"", "none", "-", "—"})
_LOCATION_ROW = itemgetter(0)
_new = tuple.__new__  # a NamedTuple from its values, without its Python-level __new__


class _Parser:
    def __init__(self, closed_sections: bool = False) -> None:
        self.locations: list[LocationRows] = []
        self.problems: list[Problem] = []
        self.seen_ids: set[int] = set()
        self.location: PendingLocation | None = None
        self.memory: PendingMemory | None = None
        # True while the lines belong to a memory or location that is being skipped.
        self.skipping_memory = False
        self.skipping_location = False
        self.in_stray_text = False
        # True right after a memory that an empty line ended (text that follows it may be
        # more of its text: ``stray_text``)
        self.after_memory = False
        # every section must end with a "---" line (a file with an export base: memstore
        # wrote it): one that does not was cut short (``finish``)
        self.closed_sections = closed_sections
        self.any_closed = False
        # whether a "---" line closed the section being read
        self.section_closed = True
        # memory blocks read line by line by run_blocks (the others in one match)
        self.slow_memory_blocks = 0

    # -- helpers ---------------------------------------------------------------------

    def problem(self, line: int, message: str, title: str | None = None) -> None:
        """Report ``message`` at ``line``; ``title``: the memory it skips, in the location
        being read (``Problem.skipped``)."""
        location = self.location
        skipped = (location.id, title, None) if title is not None and location else None
        self.problems.append(Problem(line, message, skipped))

    def finish_memory(self) -> bool:
        """End the memory being read; whether it was kept (not skipped)."""
        pending = self.memory
        self.memory = None
        self.skipping_memory = False
        if pending is None:
            return False
        location = self.location
        assert location is not None
        memory = build_memory(
            pending.category,
            pending.persistence,
            pending.status,
            pending.title,
            pending.episode,
            pending.turns,
            pending.score_change,
            pending.reference,
            "\n".join(pending.text),
        )
        if isinstance(memory, Skipped):
            line = pending.reference_line if memory.at_reference else pending.line
            text = "\n".join(pending.text)
            self.problems.append(Problem(line, memory.message, (location.id, pending.title, text)))
            return False
        location.memories.append(memory)
        return True

    def skip_open_memory(self, number: int, line: str) -> None:
        """A structure line (a heading, a separator, a memory header that is not one) right
        under the memory being read, with no empty line between: the memory's text may go
        on past it (a reviewer's Markdown in the text). The memory is skipped, kept as the
        database has it, never stored with its text cut there."""
        memory = self.memory
        assert memory is not None
        self.memory = None
        self.skipping_memory = True
        self.after_memory = False
        self.problem(
            number,
            f"{clip(line)!r} inside the text of memory {clip(memory.title)!r} (memstore ends "
            f"a memory's text with an empty line; its text may go on here): memory "
            f"{clip(memory.title)!r} skipped",
            memory.title,
        )

    def close_section(self) -> None:
        """A "---" line: the section being read is closed."""
        self.section_closed = True
        self.any_closed = True

    def cut_short(self, line: int, location_id: int) -> None:
        """The file ends inside the section whose header is at ``line``: no "---" line
        closes it. Cut short (an editor, a copy or a full disk stopped writing it): its
        last memory's text may be cut anywhere, so the whole section is skipped."""
        self.memory = None
        self.location = None
        self.problems.append(
            Problem(
                line,
                f"the file ends inside location {location_id}'s section, which no '---' line "
                f"closes (memstore closes every section with one): cut short? the section is "
                f"skipped",
                (location_id, None, None),
            )
        )

    def finish_location(self) -> None:
        if self.memory is not None or self.skipping_memory:
            self.finish_memory()
        pending = self.location
        self.location = None
        self.skipping_location = False
        if pending is None:
            return
        episodes = pending.episodes
        if len(episodes) > 1:  # sorted, each once
            episodes = tuple(sorted(set(episodes)))
        info = _new(LocationRow, (pending.id, pending.name, pending.visit_count, episodes))
        if not pending.checked and location_row_problem(info) is not None:
            try:
                LocationInfo(**info._asdict())
            except ValidationError as error:
                self.problems.append(
                    Problem(
                        pending.line,
                        f"location {pending.id} is invalid ({first_error(error)}): "
                        f"location skipped",
                        (pending.id, None, None),
                    )
                )
                return
        self.locations.append(_new(LocationRows, (info, tuple(pending.memories))))

    # -- line kinds ------------------------------------------------------------------

    def heading(self, number: int, line: str) -> None:
        self.in_stray_text = False
        self.after_memory = False
        if self.memory is not None and _LOCATION.fullmatch(line) is None:
            self.skip_open_memory(number, line)
            return
        if line.startswith("##") and not line.startswith("###"):
            self.location_header(number, line)
            return
        self.finish_memory()
        if line.startswith("### "):
            if _MEMORIES_HEADING.fullmatch(line) is None:
                self.problem(number, f"unexpected heading {clip(line)!r} ignored")
            return
        if line.startswith("# ") and _TITLE_HEADING.fullmatch(line) is not None:
            return
        self.problem(number, f"unexpected heading {clip(line)!r} ignored")

    def location_header(self, number: int, line: str) -> None:
        self.finish_location()
        match = _LOCATION.fullmatch(line)
        self.open_section()
        if match is None:
            self.skipping_location = True
            loose = _LOOSE_LOCATION.match(line)
            self.problems.append(
                Problem(
                    number,
                    f"malformed location header {clip(line)!r} (expected '## Location <id>: "
                    f"<name>'): section skipped up to the next location header",
                    (int(loose.group(1)), None, None) if loose is not None else None,
                )
            )
            return
        location_id = int(match.group(1))
        numbers = location_numbers_problem(location_id, 0, ())
        if numbers is not None:
            self.skipping_location = True
            self.problem(number, f"{numbers}: section skipped up to the next location header")
            return
        if location_id in self.seen_ids:
            self.skipping_location = True
            self.problem(
                number,
                f"duplicate location id {location_id}: this section is skipped, "
                f"the first one is kept",
            )
            return
        self.seen_ids.add(location_id)
        self.location = PendingLocation(number, location_id, unescape_lines(match.group(2)))

    def open_section(self) -> None:
        self.section_closed = False
        self.after_memory = False

    def visits(self, number: int, line: str) -> None:
        self.in_stray_text = False
        self.after_memory = False
        if self.memory is not None:
            self.skip_open_memory(number, line)
            return
        self.finish_memory()
        if self.skipping_location:
            return
        location = self.location
        if location is None:
            self.problem(number, "visits line outside any location ignored")
            return
        if location.visits_seen or location.memories:
            self.problem(number, f"unexpected visits line in location {location.id} ignored")
            return
        match = _VISITS.fullmatch(line)
        if match is None:
            self.problem(
                number,
                f"malformed visits line {clip(line)!r} (expected '**Visits:** N | **Episodes:** "
                f"1, 2'): location {location.id} kept with 0 visits and no episodes",
            )
            return
        visit_count = int(match.group(1))
        numbers = location_numbers_problem(location.id, visit_count, ())
        if numbers is None:
            raw_episodes = match.group(2)
            try:
                episodes = (
                    ()
                    if raw_episodes.lower() in _NO_EPISODES
                    else tuple(int(part.strip(" \t")) for part in raw_episodes.split(","))
                )
            except ValueError:
                self.problem(
                    number,
                    f"malformed episode list {clip(raw_episodes)!r}: location {location.id} "
                    f"kept with {visit_count} visits and no episodes",
                )
                episodes = ()
            numbers = location_numbers_problem(location.id, visit_count, episodes)
        if numbers is not None:
            self.location = None
            self.skipping_location = True
            self.problems.append(
                Problem(
                    number, f"{numbers}: location {location.id} skipped", (location.id, None, None)
                )
            )
            return
        location.visits_seen = True
        location.visit_count = visit_count
        location.episodes = episodes

    def memory_header(self, number: int, line: str) -> None:
        self.in_stray_text = False
        self.after_memory = False
        self.section_closed = False
        if self.memory is not None and FAST_HEADER.fullmatch(line) is None:
            if _HEADER.fullmatch(line) is None:  # not a header: the memory's text, maybe
                self.skip_open_memory(number, line)
                return
        self.finish_memory()
        if self.skipping_location:
            self.skipping_memory = True
            return
        if self.location is None:
            self.skipping_memory = True
            self.problem(number, "memory outside any location (no '## Location' above) skipped")
            return
        fast = FAST_HEADER.fullmatch(line)
        if fast is not None:
            self.memory = PendingMemory(number, *header_fields(fast))
            return
        self.skipping_memory = True  # until the header proves valid
        match = _HEADER.fullmatch(line)
        if match is None:
            loose = _LOOSE_TITLE.match(line)
            self.problem(
                number,
                "malformed memory header (expected '**[CATEGORY - PERSISTENCE] Title** "
                "*(EpN, Tn, +s)*'): memory skipped",
                (unescape(loose.group(1)) or None) if loose is not None else None,
            )
            return
        marker, raw_title, raw_metadata = match.groups()
        title = unescape(raw_title)
        parts = _MARKER_SPLIT.split(marker.strip())
        category = CATEGORIES.get(parts[0].upper())
        if category is None:
            self.problem(
                number,
                f"unknown category {clip(parts[0])!r} (expected one of "
                f"{', '.join(CATEGORIES)}): memory {clip(title)!r} skipped",
                title,
            )
            return
        persistence: Persistence | None = None
        status: Status | None = None
        for part in parts[1:]:
            word = part.upper()
            if word in PERSISTENCES and persistence is None:
                persistence = PERSISTENCES[word]
            elif word in STATUSES and status is None:
                status = STATUSES[word]
            else:
                self.problem(
                    number,
                    f"unknown or repeated marker {clip(part)!r} in [{clip(marker)}] "
                    f"(expected CORE or PERMANENT, then TENTATIVE or SUPERSEDED): "
                    f"memory {clip(title)!r} skipped",
                    title,
                )
                return
        if persistence is Persistence.EPHEMERAL:
            self.problem(
                number,
                f"EPHEMERAL memory {clip(title)!r} skipped: ephemeral memories are never "
                f"written to Memories.md",
                title,
            )
            return
        metadata = _METADATA.fullmatch(raw_metadata)
        if metadata is None:
            self.problem(
                number,
                f"malformed metadata {clip(raw_metadata)!r} "
                f"(expected 'EpN, Tn' or 'EpN, Tn-m, +s'): memory {clip(title)!r} skipped",
                title,
            )
            return
        episode, turns, score = metadata.groups()
        self.skipping_memory = False
        self.memory = PendingMemory(
            number,
            category,
            persistence or Persistence.PERMANENT,
            status or Status.ACTIVE,
            title,
            int(episode) if episode is not None else 1,
            turns,
            int(score) if score is not None else None,
        )

    def reference(self, number: int, line: str) -> None:
        memory = self.memory
        assert memory is not None
        match = REFERENCE.fullmatch(line)
        if match is None:
            self.memory = None
            self.skipping_memory = True
            self.problem(
                number,
                f"malformed reference line {clip(line)!r} "
                f"(expected '[Superseded at Tn by \"title\"]' or "
                f"'[Invalidated at Tn: \"reason\"]'): memory {clip(memory.title)!r} skipped",
                memory.title,
            )
            return
        memory.reference = match
        memory.reference_line = number

    def text_line(self, number: int, line: str) -> None:
        memory = self.memory
        if memory is not None:
            if not memory.text and memory.reference is None and line.startswith(REFERENCE_STARTS):
                self.reference(number, line)
                return
            memory.text.append(line)
            return
        if self.skipping_memory or self.skipping_location:
            return
        if not self.in_stray_text:
            self.in_stray_text = True
            self.stray_text(number)

    def stray_text(self, number: int) -> None:
        """Text outside any memory. Right after a memory that an empty line ended, it may
        be more of that memory's text (a paragraph break): the memory is taken back,
        skipped, and kept as the database has it, never stored with half its text."""
        location = self.location
        if self.after_memory and location is not None and location.memories:
            self.after_memory = False
            memory = location.memories.pop()
            self.problem(
                number,
                f"text outside any memory right after memory {clip(memory.title)!r}, "
                f"after an empty line (an empty line ends a memory's text; its text may go "
                f"on here): memory {clip(memory.title)!r} skipped",
                memory.title,
            )
            return
        self.problem(number, "text outside any memory ignored")

    def conflict_marker(self, number: int, line: str) -> None:
        """A git conflict marker (``exporters.conflict_markers``): a merge left unresolved.
        Reported wherever it stands; the memory whose text it is in is skipped (its text
        holds a side of the conflict, or both)."""
        memory = self.memory
        skipped = ""
        self.after_memory = False
        if memory is not None:
            self.memory = None
            self.skipping_memory = True
            skipped = f": memory {clip(memory.title)!r} skipped"
        self.problem(
            number,
            f"unresolved git conflict marker {clip(line)!r} (keep one side of the conflict "
            f"and delete its marker lines){skipped}",
            memory.title if memory is not None else None,
        )

    def run_lines(self, lines: list[str], number: int) -> None:
        """Read ``lines``, the first of which is line ``number`` of the file."""
        for number, line in enumerate(lines, number):  # noqa: B020 - the line numbers go on
            first = line[:1]
            if first and first not in _STRUCTURE_STARTS:
                # The common case, kept inline: a line of text under a memory.
                pending = self.memory
                if pending is not None and (pending.text or first != "["):
                    pending.text.append(line)
                else:
                    self.text_line(number, line)
            elif not line.strip(" \t"):
                self.in_stray_text = False
                if self.memory is not None or self.skipping_memory:
                    self.after_memory = self.finish_memory()
            elif first == "#" and _HEADING.match(line) is not None:
                self.heading(number, line)
            elif first == "*" and line.startswith("**["):
                self.memory_header(number, line)
            elif first == "*" and line.startswith("**Visits:**"):
                self.visits(number, line)
            elif first == "-" and line.startswith("---") and not line.strip(" \t-"):
                self.in_stray_text = False
                if self.memory is not None and self.memory.text:
                    self.skip_open_memory(number, line)  # (a Markdown heading's underline?)
                    continue
                self.after_memory = False
                self.finish_memory()
                self.close_section()
            elif CONFLICT_MARKER.match(line) is not None:
                self.conflict_marker(number, line)
            else:
                self.text_line(number, line)

    def run_blocks(self, text: str) -> None:
        """Read ``text`` block by block (the pieces between empty lines): a location's
        header and visits line, or a memory, in the renderer's exact layout in one match
        (``exporters.fast_blocks``), every other block line by line. Gives what
        ``run_lines`` over the whole text gives."""
        number = 1
        blocks = text.split("\n\n")
        count = len(blocks)
        index = 0
        while index < count:
            block = blocks[index]
            if index:  # the empty line between this block and the one before
                self.in_stray_text = False
                if self.memory is not None or self.skipping_memory:
                    self.after_memory = self.finish_memory()
                number += 1
            index += 1
            if block.startswith(MEMORY_BLOCK_START):
                location = self.location
                if location is not None and not self.skipping_location and self.memory is None:
                    # The common case: a run of memories, each read in one match, up to the
                    # first block that is not one (the empty lines between them change
                    # nothing in the state); that block is read again below.
                    run, breaks = read_memory_run(blocks, index - 1)
                    if run:
                        location.memories = location.memories + run if location.memories else run
                        index += len(run) - 1
                        # each block's lines and the empty line after it (but the last's)
                        number += breaks + 2 * len(run) - 1
                        self.after_memory = True
                        self.section_closed = False
                        if index < count and blocks[index] == "---":
                            # the separator after a location's memories, read as below
                            self.in_stray_text = False
                            self.after_memory = False
                            self.close_section()
                            index += 1
                            number += 2
                        continue
                    self.slow_memory_blocks += 1
            elif block == "---" or block == "### Memories":  # as run_lines reads them
                self.finish_memory()
                self.after_memory = False
                if block == "---":
                    self.close_section()
                number += 1
                continue
            elif block.startswith(LOCATION_BLOCK_START) and self._location_block(block, number):
                number += 2
                if index < count and blocks[index] == "### Memories":
                    # the heading under a location's header, read as below
                    self.in_stray_text = False
                    index += 1
                    number += 2
                continue
            lines = block.split("\n")
            self.run_lines(lines, number)
            number += len(lines)

    def _location_block(self, block: str, number: int) -> bool:
        """A location's header and visits line read in one match, as ``location_header``
        and ``visits`` would read them (False: read them line by line)."""
        found = read_location_block(block)
        if found is None or found[0] in self.seen_ids:
            return False
        self.finish_location()
        self.open_section()
        self.seen_ids.add(found[0])
        self.location = PendingLocation(number, *found, True, [], True)
        return True

    def finish(self) -> tuple[list[LocationRows], list[Problem]]:
        if self.location is not None and not self.section_closed:  # (a skipped one is said)
            if self.closed_sections or self.any_closed:
                self.cut_short(self.location.line, self.location.id)
        self.finish_location()
        self.locations.sort(key=_LOCATION_ROW)  # by id: no two kept locations share one
        return self.locations, self.problems


def read_line_by_line(
    text: str, *, closed_sections: bool = False
) -> tuple[list[LocationRows], list[Problem]]:
    """The locations (sorted by id) and problems of a Memories.md body (``\\n`` line
    endings, no byte-order mark, no base line), read line by line. Never raises.

    The last section must end with a "---" line when ``closed_sections`` (the file has an
    export base: memstore wrote it, and closes every section) or another section does: a
    file that ends inside a section was cut short, and that section is skipped."""
    parser = _Parser(closed_sections)
    parser.run_lines(text.split("\n"), 1)
    return parser.finish()


def read_body(
    text: str, *, closed_sections: bool = False
) -> tuple[list[LocationRows], list[Problem], bool]:
    """What ``read_line_by_line`` returns, read block by block (``_Parser.run_blocks``),
    and whether every memory block took the fast path. Never raises."""
    parser = _Parser(closed_sections)
    parser.run_blocks(text)
    locations, problems = parser.finish()
    return locations, problems, parser.slow_memory_blocks == 0
