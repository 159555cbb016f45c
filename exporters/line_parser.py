"""The one reader of Memories.md: reads any file and explains what it cannot read.

A state machine over the file's lines (``LineParser.run_lines``): location headers, visits
lines, memory headers, reference lines, text, separators, each kind of problem reported at
its line. ``exporters.block_reader.read_body`` feeds it block by block (the pieces
between empty lines): a memory block in the renderer's exact layout is read in one match
(``exporters.fast_blocks``), every other block line by line, with the same state;
``read_line_by_line`` feeds it every line, and a property test checks that both give the
same. Memories are built as checked
``MemoryRow``s through ``exporters.memory_block``.
"""

from __future__ import annotations

import re
from operator import itemgetter

from pydantic import ValidationError

from exporters.conflict_markers import CONFLICT_MARKER, MARKER_STARTS
from exporters.escaping import unescape_lines
from exporters.header_line import HEADER, read_header
from exporters.memory_block import (
    CATEGORIES,
    FAST_HEADER,
    REFERENCE,
    REFERENCE_STARTS,
    Problem,
    Skipped,
    build_memory,
    clip,
    first_error,
    header_fields,
    location_numbers_problem,
)
from exporters.pending import PendingLocation, PendingMemory
from memstore.md_rows import LocationRow, LocationRows, MemoryRow, location_row_problem
from memstore.models import LocationInfo

__all__ = ["LineParser", "Problem", "read_line_by_line"]


_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_LOCATION = re.compile(r"##[ \t]+Location[ \t]+([0-9]{1,100})[ \t]*:[ \t]?(.*)")
_MEMORIES_HEADING = re.compile(r"###[ \t]+Memories[ \t]*")
_TITLE_HEADING = re.compile(r"#[ \t]+Location[ \t]+Memories[ \t]*")
_VISITS = re.compile(
    r"\*\*Visits:\*\*[ \t]*([0-9]{1,100})[ \t]*\|[ \t]*\*\*Episodes:\*\*[ \t]*(.*?)[ \t]*"
)
#: the location id and the memory title a malformed header still shows (``## Location
#: -79: Kitchen``, ``**[NOTE] Title** (Ep1, T6)``): what the problem skipped, so that the
#: database's memories it stands for are not counted as ones the file dropped
_LOOSE_LOCATION = re.compile(r"##[ \t]*Location[ \t]*[-+]?[ \t]*([0-9]{1,18})\b", re.IGNORECASE)
#: First characters of lines that may be structure (or blank) or a git conflict marker;
#: others are always text.
_STRUCTURE_STARTS = frozenset(("#", "*", "-", " ", "\t", *MARKER_STARTS))
_NO_EPISODES = frozenset({"", "none", "-", "—"})
_LOCATION_ROW = itemgetter(0)
#: a ``**[`` line whose marker starts with a category: a memory's header, even broken
_KNOWN_CATEGORY = re.compile(r"\*\*\[[ \t]*(?:" + "|".join(CATEGORIES) + r")\b", re.IGNORECASE)
#: how sure the reader is that the section's last memory is whole (``LineParser.provisional``)
_NONE, _WEAK, _STRONG = 0, 1, 2
_new = tuple.__new__  # a NamedTuple from its values, without its Python-level __new__


class LineParser:
    """The reader's state over a file's lines (``run_lines``), fed also block by block
    (``exporters.block_reader``)."""

    def __init__(self) -> None:
        self.locations: list[LocationRows] = []
        self.problems: list[Problem] = []
        self.seen_ids: set[int] = set()
        self.location: PendingLocation | None = None
        self.memory: PendingMemory | None = None
        # True while the lines belong to a memory or location that is being skipped.
        self.skipping_memory = False
        self.skipping_location = False
        self.in_stray_text = False
        # While the last memory of the section being read is followed by no memory or
        # location header yet, a line met meanwhile that the file cannot place may be more
        # of its text (``take_back``): STRONG, or WEAK once a "---" line came between
        # (then only text is taken for more of it)
        self.provisional = _NONE
        # True while a location header read right under a memory's text (no empty line
        # between) is followed by nothing but text: that memory, the last of the section
        # before, may go on in it (``stray_text``)
        self.carried = False
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
        self.provisional = _STRONG
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
        self.problem(
            number,
            f"{clip(line)!r} inside the text of memory {clip(memory.title)!r} (memstore ends "
            f"a memory's text with an empty line; its text may go on here): memory "
            f"{clip(memory.title)!r} skipped",
            memory.title,
        )

    def take_back(self, weak_too: bool = False) -> str | None:
        """A line the file cannot place (a problem), met after the section's last memory
        and before the next memory or location header: it may be more of that memory's
        text (after an empty line, a heading, a separator). That memory is taken back and
        skipped, kept as the database has it, never stored with its text cut; its title
        (None: there is none to take back). ``weak_too``: also after a "---" line."""
        location = self.location
        wanted = self.provisional == _STRONG or (weak_too and self.provisional == _WEAK)
        if not wanted or location is None or not location.memories:
            return None
        self.provisional = _NONE
        return location.memories.pop().title

    def taken_back(self, number: int, weak_too: bool = False) -> None:
        """``take_back``, said at line ``number`` (beside the line's own problem)."""
        title = self.take_back(weak_too)
        if title is not None:
            self.problem(
                number,
                f"memory {clip(title)!r} above this line may go on here (its text is "
                f"followed by a line the file cannot place before the next memory): memory "
                f"{clip(title)!r} skipped",
                title,
            )

    def close_section(self) -> None:
        """A "---" line: the section being read is closed."""
        self.carried = False
        if self.provisional == _STRONG:
            self.provisional = _WEAK

    def finish_location(self) -> None:
        if self.memory is not None or self.skipping_memory:
            self.finish_memory()
        self.provisional = _NONE
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
        self.carried = False
        if self.memory is not None and _LOCATION.fullmatch(line) is None:
            self.skip_open_memory(number, line)  # right under a memory's text: more of it?
            return
        if line.startswith("##") and not line.startswith("###"):
            self.location_header(number, line)
            return
        self.finish_memory()
        if line.startswith("### "):
            if _MEMORIES_HEADING.fullmatch(line) is None:
                self.problem(number, f"unexpected heading {clip(line)!r} ignored")
                self.taken_back(number)
            return
        if line.startswith("# ") and _TITLE_HEADING.fullmatch(line) is not None:
            return
        self.problem(number, f"unexpected heading {clip(line)!r} ignored")
        self.taken_back(number)

    def location_header(self, number: int, line: str) -> None:
        match = _LOCATION.fullmatch(line)
        if match is None and _LOOSE_LOCATION.match(line) is None:  # ("## Tip": text, maybe)
            self.taken_back(number)
        under_text = self.memory is not None and self.finish_memory()
        self.finish_location()
        self.carried = under_text and match is not None
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

    def visits(self, number: int, line: str) -> None:
        self.in_stray_text = False
        self.carried = False
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
            self.taken_back(number)
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
        """A ``**[`` line: a memory's header, or what may be text. One that is no header
        shape right under a memory's text (no empty line between) is that text, maybe: the
        memory is skipped. After an empty line, it takes the memory above back. A header
        shape (a memory of its own, even one refused) ends the memory above, but one
        refused right under its text takes it back."""
        self.in_stray_text = False
        self.carried = False
        under_text = self.memory is not None
        shaped = FAST_HEADER.fullmatch(line) is not None or HEADER.fullmatch(line) is not None
        if under_text and not shaped:
            self.skip_open_memory(number, line)
            return
        self.finish_memory()
        if not shaped and not _KNOWN_CATEGORY.match(line):  # ("**[IMPORTANT]** x": text?)
            self.taken_back(number, weak_too=True)
        self.start_memory(number, line)
        if shaped:
            if under_text and self.memory is None:  # refused: the line may be the text above's
                self.taken_back(number)
            self.provisional = _NONE

    def start_memory(self, number: int, line: str) -> None:
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
        read = read_header(number, line)
        if isinstance(read, PendingMemory):
            self.skipping_memory = False
            self.memory = read
        else:
            self.problem(number, *read)

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
            self.stray_text(number, line)

    def stray_text(self, number: int, line: str) -> None:
        """Text outside any memory. After a memory (an empty line, a separator or a
        heading between) it may be more of that memory's text: the memory is taken back
        (``take_back``)."""
        if line.startswith("<!--"):  # a note (an HTML comment): never a memory's text
            self.problem(number, "text outside any memory ignored")
            return
        title = self.take_back(weak_too=True)
        location_id = self.location.id if self.location is not None else 0
        if title is None and self.carried and self.locations:  # (the section before's)
            self.carried = False
            info, memories = self.locations[-1]
            self.locations[-1] = _new(LocationRows, (info, memories[:-1]))
            title, location_id = memories[-1].title, info.id
        if title is None:
            self.problem(number, "text outside any memory ignored")
            return
        self.problems.append(
            Problem(
                number,
                f"text outside any memory after memory {clip(title)!r} (an empty line or a "
                f"header ends a memory's text; its text may go on here): memory "
                f"{clip(title)!r} skipped",
                (location_id, title, None),
            )
        )

    def conflict_marker(self, number: int, line: str) -> None:
        """A git conflict marker (``exporters.conflict_markers``): a merge left unresolved.
        Reported wherever it stands; the memory whose text it is in is skipped (its text
        holds a side of the conflict, or both)."""
        memory = self.memory
        skipped = ""
        self.carried = False
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
                    self.finish_memory()
            elif first == "#" and _HEADING.match(line) is not None:
                self.heading(number, line)
            elif first == "*" and line.startswith("**["):
                self.memory_header(number, line)
            elif first == "*" and line.startswith("**Visits:**"):
                self.visits(number, line)
            elif first == "-" and line.startswith("---") and not line.strip(" \t-"):
                self.in_stray_text = False
                self.finish_memory()
                self.close_section()
            elif CONFLICT_MARKER.match(line) is not None:
                self.conflict_marker(number, line)
            else:
                self.text_line(number, line)

    def add_memories(self, run: list[MemoryRow]) -> None:
        """Memories read in one match each (``exporters.block_reader``), at the end of the
        section being read."""
        location = self.location
        assert location is not None
        self.carried = False
        location.memories = location.memories + run if location.memories else run
        self.provisional = _STRONG

    def open_location(self, number: int, found: tuple[int, str, int, tuple[int, ...]]) -> bool:
        """A location's header and visits line read in one match (``found``: its id, name,
        visits and episodes), as ``location_header`` and ``visits`` would read them
        (False: its id was seen: read them line by line)."""
        if found[0] in self.seen_ids:
            return False
        self.carried = False
        self.finish_location()
        self.seen_ids.add(found[0])
        self.location = PendingLocation(number, *found, True, [], True)
        return True

    def finish(self) -> tuple[list[LocationRows], list[Problem]]:
        self.finish_location()
        self.locations.sort(key=_LOCATION_ROW)  # by id: no two kept locations share one
        return self.locations, self.problems


def read_line_by_line(text: str) -> tuple[list[LocationRows], list[Problem]]:
    """The locations (sorted by id) and problems of a Memories.md body (``\\n`` line
    endings, no byte-order mark, no base line), read line by line. Never raises."""
    parser = LineParser()
    parser.run_lines(text.split("\n"), 1)
    return parser.finish()
