"""Exporters: render and parse Memories.md, the human-readable file of location memories.

Pure functions with no database and no I/O: ``render_memories_md`` turns locations into
text, ``parse_memories_md`` turns text back into locations and a list of problems.
"""

from exporters.notes_md import render_notes_md
from exporters.parse import ParseResult, Problem, parse_memories_md
from exporters.render import render_memories_md

__all__ = ["ParseResult", "Problem", "parse_memories_md", "render_memories_md", "render_notes_md"]
