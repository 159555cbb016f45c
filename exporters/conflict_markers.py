"""Git's conflict markers: the lines a merge leaves in a file where it could not join two
edits. Memories.md goes through git for review, so a merge may leave them in it.

A marker is a whole line: exactly seven ``<``, ``=``, ``>`` or ``|`` (diff3's common
ancestor) followed by a space or the end of the line (``<<<<<<< HEAD``, ``=======``,
``>>>>>>> branch``, ``||||||| base``). The reader reports every such line as a problem at
its line number, so an import refuses the file instead of storing both sides of a
conflict in a memory's text; the renderer escapes a text line that would be one
(``exporters.escaping``), so no memory's text can be mistaken for one. ``=======`` inside a
line, eight ``=`` or ``=======x`` are text.
"""

from __future__ import annotations

import re

__all__ = ["CONFLICT_MARKER", "MARKER_PATTERN", "MARKER_STARTS"]

#: A marker at the start of a line (a ``(?!...)`` or ``(?:...)`` group can embed it; the
#: line ends at ``\n`` or the end of the string).
MARKER_PATTERN = r"(?:<{7}|={7}|>{7}|\|{7})(?:[ \n]|\Z)"
#: Matches (``.match``) a line of the file that is a marker.
CONFLICT_MARKER = re.compile(MARKER_PATTERN)
#: The characters a marker line starts with (for ``str.startswith``).
MARKER_STARTS = ("<", "=", ">", "|")
