"""Counting tokens offline, fast enough for every turn.

litellm ships OpenAI's cl100k_base tokenizer file; tiktoken reads it from there without a
network and without importing litellm itself (which takes seconds). Counts of the same line
are cached, since an agent sees the same memories turn after turn. If tiktoken or the file
is missing, a length/4 estimate is used instead (``TOKENIZER`` says which).
``text_prefix`` gives the start of a text of about so many tokens, for cutting a line, cut
at a grapheme-cluster boundary (``grapheme_end``).
"""

from __future__ import annotations

import importlib.util
import os
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

TOKENIZER = "uninitialised"
_encode: Callable[[str], list[int]] | None = None
_decode: Callable[[list[int]], bytes] | None = None


def _load() -> None:
    global TOKENIZER, _encode, _decode
    TOKENIZER = "estimate (4 characters per token)"
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return
    cache = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
    if not cache.is_dir():
        return
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
        _encode, _decode = encoding.encode_ordinary, encoding.decode_bytes
        TOKENIZER = "tiktoken cl100k_base"
    except Exception:  # noqa: BLE001 - any failure means: estimate instead
        _encode = _decode = None


@lru_cache(maxsize=16384)
def count_tokens(text: str) -> int:
    """Tokens in ``text`` (cl100k_base), cached per distinct string."""
    if TOKENIZER == "uninitialised":
        _load()
    if _encode is None:
        return (len(text) + 3) // 4
    return len(_encode(text))


@lru_cache(maxsize=1024)
def text_prefix(text: str, limit: int) -> str:
    """The start of ``text`` that its first ``limit`` tokens spell (all of it if it has
    no more), cut at a character boundary. Only the text's first few characters per token
    are encoded, however long it is: a memory's text may hold 20,000 characters. Tokens
    are not additive across a join, so a caller counts the line it builds from this."""
    if limit <= 0:
        return ""
    if TOKENIZER == "uninitialised":
        _load()
    if _encode is None or _decode is None:
        return text[: grapheme_end(text, limit * 4)]
    window = limit * 6 + 16  # about 4 characters a token in English
    while True:
        piece = text[:window]
        tokens = _encode(piece)
        if len(tokens) > limit:
            break
        if window >= len(text):
            return text
        window *= 4
    prefix = _decode(tokens[:limit]).decode("utf-8", errors="ignore")
    while not text.startswith(prefix):  # defensive: a prefix of the text, always
        prefix = prefix[:-1]
    return text[: grapheme_end(text, len(prefix))]


#: how far back ``grapheme_end`` looks for a boundary (a family emoji is 5-11 characters)
GRAPHEME_BACKOFF = 32
_ZWJ = "\u200d"


def grapheme_end(text: str, end: int) -> int:
    """The largest ``i <= end`` where ``text[:i]`` ends between two grapheme clusters, so
    that a cut there keeps each character whole with its marks: never before a combining
    mark, a zero-width joiner, a variation selector, an emoji modifier or a tag character;
    never after a joiner or a virama (an Indic conjunct); never inside a flag's pair of
    regional indicators, a Hangul jamo syllable or CR LF. An approximation of Unicode's
    extended grapheme clusters (UAX #29) without a dependency. It looks back at most
    GRAPHEME_BACKOFF characters; with no boundary there (a pathological run of marks) the
    cut stays at ``end``."""
    if end <= 0 or end >= len(text):
        return max(0, min(end, len(text)))
    cut = end
    while cut > 0 and _joined(text, cut):
        cut -= 1
        if end - cut > GRAPHEME_BACKOFF:
            return end
    return cut


def _joined(text: str, at: int) -> bool:
    """Do ``text[at - 1]`` and ``text[at]`` belong to one grapheme cluster?"""
    before, after = text[at - 1], text[at]
    code = ord(after)
    if unicodedata.category(after) in ("Mn", "Mc", "Me") or after == _ZWJ:
        return True  # combining marks (variation selectors, keycap, virama), joiner
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return True  # emoji skin-tone modifiers, tag characters (subdivision flags)
    if before == _ZWJ or (before == "\r" and after == "\n"):
        return True
    if unicodedata.combining(before) == 9 and after.isalpha():
        return True  # a virama joins the next consonant (Devanagari क्ष)
    if _regional(after) and _regional(before):
        run = 0  # the indicators pair off from the start of their run
        while at - run > 0 and _regional(text[at - run - 1]):
            run += 1
        return run % 2 == 1
    if 0x1160 <= code <= 0x11FF or 0xD7B0 <= code <= 0xD7FF:
        return True  # Hangul vowel and final jamo
    before_code = ord(before)
    leading = 0x1100 <= before_code <= 0x115F or 0xA960 <= before_code <= 0xA97F
    return leading and (0x1100 <= code <= 0x115F or 0xAC00 <= code <= 0xD7A3)


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF
