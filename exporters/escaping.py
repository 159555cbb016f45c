r"""Escaping of user content in Memories.md: the only place that knows the scheme.

Every piece of free text that goes into Memories.md (location names, memory titles,
memory texts, successor titles, invalidation reasons) is escaped so that no content can
be mistaken for structure, and the file reads back to exactly the same strings.

README-ready description:

### Escaping in Memories.md

Memories.md uses Markdown-style backslash escapes, so a file reads back to exactly the
strings that were written, whatever they contain. A backslash followed by one of these
characters stands for that character:

- `\\` stands for `\`. Every backslash is escaped, everywhere.
- `\*`, `\[`, `\]` and `\~` stand for `*`, `[`, `]` and `~`. They are escaped everywhere,
  because they carry meaning: `**bold**` headers, the `[CATEGORY - PERSISTENCE]` marker,
  the `[Superseded ...]` reference line and `~~struck~~` text.
- `\"` stands for `"`. It is escaped in one-line fields (location names, titles,
  successor titles, invalidation reasons), which may appear between quotes.
- `\n` stands for a line break and `\r` for a carriage return. One-line fields always
  stay on one line, so every line break in them is written `\n`. Carriage returns are
  written `\r` everywhere.
- `\#`, `\-`, `\ ` (backslash space) and backslash tab stand for `#`, `-`, a space and a
  tab. They protect the first character of a text line that starts with `#`, `---`, a
  space or a tab, so that it cannot look like a heading, a `---` separator or a blank
  line.
- `\<`, `\=`, `\>` and `\|` stand for `<`, `=`, `>` and `|`. They protect the first
  character of a text line that would be a git conflict marker (seven `<`, `=`, `>` or
  `|`, then a space or the end of the line: `=======`, `<<<<<<< HEAD`), which the reader
  refuses as an unresolved merge, or that starts with `<!-- memstore-` (the export's end
  line is one).
- `\xHH` and `\uHHHH` (lower-case hex) stand for a control or format character that a
  terminal or git would act on rather than show: the C0 controls but tab and line breaks,
  DEL, the C1 controls, and the bidirectional marks and overrides (U+061C, U+200E,
  U+200F, U+202A-U+202E, U+2066-U+2069). A NUL written as it is makes git take the whole
  file for binary, and hides the review's diff. Only these characters are read back from
  such an escape: any other `\x..` or `\u....` is kept as it is, as a hand-written
  `C:\x64` always was.
- `\s` and `\t` stand for a space and a tab as the last characters of a line of a text
  (or before its escaped `\n`) or of a location name (which ends its header line): they
  protect a last character that is a space or a tab, so that an editor's "strip
  trailing whitespace" cannot change the content: no line of the file ends in a space
  or a tab that belongs to it. Anywhere else they are kept verbatim (``unescape_lines``).
  Files written before them (trailing spaces written as they are) read as they always
  did.

A memory text is written on as many lines as it has, each escaped as above. A blank
line would end the memory, so an empty line of the text is not written on its own: the
line break before it is written `\n` at the end of the previous line (`"a\n\nb"` is
written as the two lines `a\n` and `b`), and an empty first line is joined to the next
one the same way (`"\nb"` is written `\nb`). An empty text writes no line at all.

Reading is lenient with older files: a backslash followed by any other character is
kept as it is, and unescaped `*`, `[`, `]`, `~` and `"` are read literally wherever they
cannot be mistaken for structure.
"""

from __future__ import annotations

import re

from exporters.conflict_markers import CONFLICT_MARKER

__all__ = [
    "escape_inline",
    "protect_line_end",
    "unescape",
    "unescape_lines",
    "escape_text_lines",
    "unescape_text_lines",
]

#: Characters escaped everywhere, and in one-line fields (``"``, line breaks) too.
_INLINE_TABLE = str.maketrans(
    {
        "\\": "\\\\",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "~": "\\~",
        '"': '\\"',
        "\n": "\\n",
        "\r": "\\r",
    }
)

#: Characters escaped everywhere in a line of memory text (the line break is handled apart).
_TEXT_TABLE = str.maketrans(
    {
        "\\": "\\\\",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "~": "\\~",
        "\r": "\\r",
    }
)
_TEXT_SPECIAL = re.compile(r"[\\*\[\]~\r]")

#: What a backslash followed by a character stands for; anything else is kept verbatim.
_UNESCAPES = {
    "\\": "\\",
    "*": "*",
    "[": "[",
    "]": "]",
    "~": "~",
    '"': '"',
    "#": "#",
    "-": "-",
    " ": " ",
    "\t": "\t",
    "<": "<",
    "=": "=",
    ">": ">",
    "|": "|",
    "n": "\n",
    "r": "\r",
}
#: What ``\s`` and ``\t`` stand for as the last characters of a line of a text or of a
#: location name (``protect_line_end``); elsewhere, and in other fields, they are kept
#: verbatim, as a hand-written ``C:\temp`` or ``\s+`` always was.
_LINE_END_UNESCAPES = {"s": " ", "t": "\t"}
#: How the last character of a line is written when it is a space or a tab (an editor
#: may strip either from a line's end; ``\s`` and ``\t`` it leaves alone).
_LINE_END = {" ": "\\s", "\t": "\\t"}
#: the characters written as ``\xHH`` or ``\uHHHH``: a terminal or git acts on them
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_ESCAPE_SEQUENCE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|.)", re.DOTALL)


def _hidden_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _shown(value: str) -> str:
    """``value`` with each of the characters ``_HIDDEN`` names written as its escape."""
    return _HIDDEN.sub(_hidden_escape, value)


def _unhidden(escape: str) -> str | None:
    """The character an ``x..``/``u....`` escape stands for, when ``_HIDDEN`` names it."""
    if len(escape) > 1:
        char = chr(int(escape[1:], 16))
        if _HIDDEN.fullmatch(char) is not None:
            return char
    return None


def _unescape_match(match: re.Match[str]) -> str:
    char = match.group(1)
    if len(char) > 1:
        return _unhidden(char) or match.group(0)
    return _UNESCAPES.get(char, match.group(0))


def _unescape_line_end_match(match: re.Match[str]) -> str:
    char = match.group(1)
    if len(char) > 1:
        return _unhidden(char) or match.group(0)
    if char in _LINE_END_UNESCAPES:
        end, value = match.end(), match.string
        # a line's end: the value's, a line break, or the escape of one (an empty line of
        # a text is written as ``\n`` on the line before it: escape_text_lines)
        at_line_end = end == len(value) or value[end] == "\n" or value.startswith("\\n", end)
        return _LINE_END_UNESCAPES[char] if at_line_end else match.group(0)
    return _UNESCAPES.get(char, match.group(0))


def escape_inline(value: str) -> str:
    """Escape a one-line field (name, title, successor title, reason).

    The result contains no line break, no unescaped ``*``, ``[``, ``]``, ``~`` or ``"``,
    and ``unescape(escape_inline(value)) == value`` for every string.
    """
    # Eight substring tests are several times faster than one regex search here.
    if (
        "\\" in value
        or "*" in value
        or "[" in value
        or "]" in value
        or "~" in value
        or '"' in value
        or "\n" in value
        or "\r" in value
    ):
        value = value.translate(_INLINE_TABLE)
    if not value.isprintable() and _HIDDEN.search(value) is not None:
        value = _shown(value)
    return value


def protect_line_end(escaped: str) -> str:
    r"""``escaped`` (a field escaped for its line) with its last character written ``\s``
    or ``\t`` when it is a space or a tab: a line that ends with it ends in no whitespace.
    ``unescape`` reads both back; everything before them is unchanged."""
    if escaped and escaped[-1] in _LINE_END:
        return escaped[:-1] + _LINE_END[escaped[-1]]
    return escaped


def unescape(value: str) -> str:
    """Undo the escapes of this module; unknown escape sequences are kept verbatim."""
    if "\\" not in value:
        return value
    return _ESCAPE_SEQUENCE.sub(_unescape_match, value)


def unescape_lines(value: str) -> str:
    """``unescape`` for the fields whose lines end as ``protect_line_end`` writes them (a
    memory's text, a location's name): ``\\s`` and ``\\t`` as the last characters of a
    line are a space and a tab."""
    if "\\" not in value:
        return value
    return _ESCAPE_SEQUENCE.sub(_unescape_line_end_match, value)


def _escape_text_segment(segment: str) -> str:
    if _TEXT_SPECIAL.search(segment) is not None:
        segment = segment.translate(_TEXT_TABLE)
    if not segment.isprintable() and _HIDDEN.search(segment) is not None:
        segment = _shown(segment)
    segment = protect_line_end(segment)  # first: a lone space becomes ``\s``, not ``\ ``
    if segment and (
        segment[0] in "# \t"
        or segment.startswith(("---", "<!-- memstore-"))
        or CONFLICT_MARKER.match(segment) is not None
    ):
        segment = "\\" + segment
    return segment


def escape_text_lines(text: str) -> list[str]:
    """Escape a memory text into the lines written under its header.

    Promises: an empty text gives no line; no line is blank (empty or only spaces and
    tabs); no line starts with ``#``, ``*``, ``[``, ``~``, ``---``, a space or a tab, or
    ends with a space or a tab; no line is a git conflict marker
    (``exporters.conflict_markers``) or starts with ``<!-- memstore-``; no line ends in
    an unpaired backslash;
    ``unescape_text_lines(escape_text_lines(t)) == t``.
    """
    if not text:
        return []
    if not (
        "\\" in text
        or "*" in text
        or "[" in text
        or "]" in text
        or "~" in text
        or "\n" in text
        or "\r" in text
        or text[0] in "#- \t<=>|"
        or text[-1] in " \t"
        or (not text.isprintable() and _HIDDEN.search(text) is not None)
    ):
        return [text]  # the common case: one line with nothing to escape
    lines: list[str] = []
    current: str | None = None
    for segment in text.split("\n"):
        encoded = _escape_text_segment(segment)
        if current is None:
            current = encoded
        elif not encoded or not current:
            # An empty line may not stand alone (it would end the memory): keep the
            # line break as an escape on the line it follows.
            current = current + "\\n" + encoded
        else:
            lines.append(current)
            current = encoded
    assert current is not None
    lines.append(current)
    return lines


def unescape_text_lines(lines: list[str]) -> str:
    """Read the text lines of one memory back into its text (the inverse of the above)."""
    return "\n".join([unescape_lines(line) for line in lines])
