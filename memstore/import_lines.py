"""Line numbers for an import's own problems and conflicts (best effort, 0 when unknown).

The parser reports its problems with their lines; the plan and the merge find theirs here,
by the location headers and memory headers of the file's text. The index is built on the
first question, so an import with nothing to report never scans the text.
"""

from __future__ import annotations

import re

from exporters.escaping import escape_inline

__all__ = ["LineFinder"]

_LOCATION_LINE = re.compile(r"##[ \t]+Location[ \t]+([0-9]+)[ \t]*:")


class LineFinder:
    """Best-effort line numbers for the plan's own problems (0 when not found)."""

    def __init__(self, source: str | None) -> None:
        self._source = source
        self._sections: dict[int, list[tuple[int, str]]] | None = None
        self._location_lines: dict[int, int] = {}

    @property
    def sections(self) -> dict[int, list[tuple[int, str]]]:
        """Each location's memory header lines, as (line number, line)."""
        if self._sections is None:
            self._sections = {}
            self._index(self._source)
        return self._sections

    @property
    def location_lines(self) -> dict[int, int]:
        """The line of each location's header."""
        self.sections  # noqa: B018 - builds the index
        return self._location_lines

    def _index(self, source: str | None) -> None:
        if not source:
            return
        sections = self.sections
        current: list[tuple[int, str]] | None = None
        for number, line in enumerate(source.replace("\r\n", "\n").split("\n"), 1):
            match = _LOCATION_LINE.match(line)
            if match is not None:
                location_id = int(match.group(1))
                if location_id in sections:  # a duplicate section: the parser skips it
                    current = None
                    continue
                current = sections.setdefault(location_id, [])
                self._location_lines[location_id] = number
            elif current is not None and line.startswith("**["):
                current.append((number, line))

    def memory_lines(self, location_id: int, title: str) -> list[int]:
        escaped = escape_inline(title)
        needles = {f"] {escaped}** *(", f"] {title}** *("}
        return [
            number
            for number, line in self.sections.get(location_id, ())
            if any(needle in line for needle in needles)
        ]

    def memory_line(self, location_id: int, title: str, nth: int = 0) -> int:
        found = self.memory_lines(location_id, title)
        if nth < len(found):
            return found[nth]
        return self.location_lines.get(location_id, 0)

    def reference_line(self, location_id: int, title: str, nth: int = 0) -> int:
        """The line after the ``nth`` header titled ``title``: its reference line, if any."""
        found = self.memory_lines(location_id, title)
        if nth < len(found):
            return found[nth] + 1
        return self.location_lines.get(location_id, 0)
