"""Render locations and their memories as Memories.md text (spec 000, 002, 004).

Layout, one block per location, sorted by location id::

    # Location Memories

    ## Location 15: West of House
    **Visits:** 3 | **Episodes:** 1, 2, 3

    ### Memories

    **[SUCCESS - PERMANENT] Open window** *(Ep1, T23-24, +0)*
    Window can be opened.

    **[NOTE - CORE - SUPERSEDED] Old spawn state** *(Ep1, T1)*
    [Superseded at Ep2, T50 by "New spawn state"]
    ~~Old text.~~

    ---

A location that was never visited in any episode writes ``**Episodes:** none``.

The reference line of a SUPERSEDED memory is ``[Superseded at T50 by "title"]`` or
``[Invalidated at T50: "reason"]``; ``EpN, `` is written before the turn only when the
supersession happened in another episode than the memory's own; a memory superseded
with neither successor nor reason writes ``[Superseded at T50]``, and one with no
supersession turn or episode at all (older files) writes no reference line. Free text
is escaped as described in ``exporters.escaping``.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporters.base_line import END_LINE, ExportBase, render_base_line
from exporters.escaping import escape_inline, escape_text_lines, protect_line_end
from exporters.memory_block import HEADER_STARTS
from memstore.md_rows import LocationRow, LocationRows, MemoryRow
from memstore.models import LocationInfo, LocationMemories, Memory, Status

__all__ = ["render_memories_md", "render_memory_lines", "FILE_TITLE", "NO_EPISODES"]

FILE_TITLE = "# Location Memories"
#: How an empty episodes list is written after ``**Episodes:**``.
NO_EPISODES = "none"


def _reference_line(memory: Memory | MemoryRow) -> str | None:
    """The ``[Superseded ...]`` / ``[Invalidated ...]`` line of a SUPERSEDED memory, if any."""
    at_parts = []
    episode = memory.superseded_at_episode
    if episode is not None and episode != memory.episode:
        at_parts.append(f"Ep{episode}")
    if memory.superseded_at_turn is not None:
        at_parts.append(f"T{memory.superseded_at_turn}")
    at = f" at {', '.join(at_parts)}" if at_parts else ""
    if memory.invalidation_reason is not None:
        return f'[Invalidated{at}: "{escape_inline(memory.invalidation_reason)}"]'
    if memory.superseded_by is not None:
        return f'[Superseded{at} by "{escape_inline(memory.superseded_by)}"]'
    if at:
        return f"[Superseded{at}]"
    return None


def render_memory_lines(memory: Memory | MemoryRow) -> list[str]:
    """The lines of one memory (header, reference line, text), without a trailing blank.

    Promises: an EPHEMERAL memory gives no line at all (it never goes to disk); the
    same memory always gives the same lines.
    """
    status = memory.status
    start = HEADER_STARTS.get((memory.category, memory.persistence, status))
    if start is None:
        return []  # EPHEMERAL
    score = memory.score_change
    if score is None:
        score_part = ""
    elif score >= 0:
        score_part = f", +{score}"
    else:
        score_part = f", {score}"
    header = (
        f"{start}{escape_inline(memory.title)}** *(Ep{memory.episode}, T{memory.turns}"
        f"{score_part})*"
    )
    text_lines = escape_text_lines(memory.text)
    if status is not Status.SUPERSEDED:
        text_lines.insert(0, header)
        return text_lines
    lines = [header]
    reference = _reference_line(memory)
    if reference is not None:
        lines.append(reference)
    if text_lines:
        text_lines[0] = "~~" + text_lines[0]
        text_lines[-1] = text_lines[-1] + "~~"
        lines.extend(text_lines)
    return lines


def _location_header(location: LocationInfo | LocationRow) -> list[str]:
    episodes = ", ".join(map(str, location.episodes)) if location.episodes else NO_EPISODES
    return [
        f"## Location {location.id}: {protect_line_end(escape_inline(location.name))}",
        f"**Visits:** {location.visit_count} | **Episodes:** {episodes}",
        "",
        "### Memories",
        "",
    ]


def render_memories_md(
    locations: Iterable[LocationMemories | LocationRows], base: ExportBase | None = None
) -> str:
    """Render locations as the text of Memories.md (the public models or plain rows alike).

    With ``base`` (the database and change counter exported from), a hidden comment line
    under the title records it, for the 3-way import, and another ends the file
    (``exporters.base_line``): the import tells a file cut short from one whose reviewer
    deleted its last sections by it.

    Promises: deterministic (the same input always gives byte-identical text, whatever
    the input order of locations); locations sorted by id; memories in the order given;
    EPHEMERAL memories left out; every location followed by a ``---`` line; the text ends
    with a newline and uses ``\\n`` line endings; ``parse_memories_md`` reads it back to
    equal objects. Raises ValueError if two locations share an id.
    """
    ordered = sorted(locations, key=lambda entry: entry.location.id)
    lines = [FILE_TITLE, ""] if base is None else [FILE_TITLE, render_base_line(base), ""]
    previous_id: int | None = None
    for entry in ordered:
        location = entry.location
        if location.id == previous_id:
            raise ValueError(f"location {location.id} appears more than once")
        previous_id = location.id
        lines.extend(_location_header(location))
        for memory in entry.memories:
            memory_lines = render_memory_lines(memory)
            if memory_lines:
                lines += memory_lines
                lines.append("")
        lines.append("---")
        lines.append("")
    lines.pop()  # no blank line after the last separator (or after the title)
    if base is not None:
        lines += ("", END_LINE)
    return "\n".join(lines) + "\n"
