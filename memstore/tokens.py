"""Counting tokens offline, fast enough for every turn.

litellm ships OpenAI's cl100k_base tokenizer file; tiktoken reads it from there without a
network and without importing litellm itself (which takes seconds). Counts of the same line
are cached, since an agent sees the same memories turn after turn. If tiktoken or the file
is missing, a length/4 estimate is used instead (``TOKENIZER`` says which).
``text_prefix`` gives the start of a text of about so many tokens, for cutting a line.
"""

from __future__ import annotations

import importlib.util
import os
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
        return text[: limit * 4]
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
    return prefix
