"""Counting tokens offline, fast enough for every turn.

litellm ships OpenAI's cl100k_base tokenizer file; tiktoken reads it from there without a
network and without importing litellm itself (which takes seconds). Counts of the same line
are cached, since an agent sees the same memories turn after turn. If tiktoken or the file
is missing, a length/4 estimate is used instead (``TOKENIZER`` says which).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

TOKENIZER = "uninitialised"
_encode: Callable[[str], list[int]] | None = None


def _load() -> None:
    global TOKENIZER, _encode
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

        _encode = tiktoken.get_encoding("cl100k_base").encode_ordinary
        TOKENIZER = "tiktoken cl100k_base"
    except Exception:  # noqa: BLE001 - any failure means: estimate instead
        _encode = None


@lru_cache(maxsize=16384)
def count_tokens(text: str) -> int:
    """Tokens in ``text`` (cl100k_base), cached per distinct string."""
    if TOKENIZER == "uninitialised":
        _load()
    if _encode is None:
        return (len(text) + 3) // 4
    return len(_encode(text))
