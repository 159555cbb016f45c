"""The mark at the end of the files memstore writes for people only (Map.md, Notes.md).

Nothing imports those files back: an edit made in one is lost when the next export
replaces it. So memstore ends each with a hidden line holding a digest of the text above
it, and an export replaces a marked file only when the text still has that digest (or
with ``--force``)::

    <!-- memstore-written: sha256=<64 hex digits> -->

A file without the mark (an older memstore's, or one whose mark was deleted) is judged by
its layout alone, as before. Line endings (git may turn them into ``\\r\\n``), a byte order
mark an editor added and blank space after the mark do not count; anything else after it
is an edit.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["edited_since_written", "marked"]

_MARK = "<!-- memstore-written: sha256={} -->"
_MARK_LINE = re.compile(r"<!-- memstore-written: sha256=([0-9a-f]{64}) -->\s*")
_MARK_START = "\n<!-- memstore-written: "


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def marked(text: str) -> str:
    """``text`` ending in a newline and the mark of it."""
    body = text if text.endswith("\n") else text + "\n"
    return body + _MARK.format(_digest(body)) + "\n"


def edited_since_written(text: str) -> bool:
    """Whether ``text`` is a marked file changed since memstore wrote it: the text above
    the last mark is not what its digest says, or something other than blank space follows
    it. False for a file with no mark."""
    normal = text.removeprefix("\ufeff").replace("\r\n", "\n")
    at = normal.rfind(_MARK_START)
    if at < 0:
        return False
    body, mark = normal[: at + 1], normal[at + 1 :]
    found = _MARK_LINE.fullmatch(mark)
    return found is None or found.group(1) != _digest(body)
