"""What the agent's model flagged to remember, read as ``MemoryToolkit.add_memory`` stores it.

Spec 001's game loop passes ``AdventurerResponse.remember`` and ``.rememberImportance``
straight from the model's answer, so both are untrusted: a value memstore cannot take is
counted and the note not stored (False), never raised into the loop.

* the importance: an int, or a finite float (rounded), or a str holding an int, is kept
  within 1..1000 (a value outside is moved to the nearer bound and counted as
  ``importance_clamped``); anything else (None, NaN, a bool, "high") refuses the note
  (``importance_refused``);
* the content: a str (a str subclass read as its text); a NUL or a lone surrogate is
  written out as an escape (``\\x00``), as the manager keeps an action or a response; more
  than MAX_CONTENT_CHARS characters so written, or not a str, refuses the note
  (``content_refused``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from memstore.flagged import MAX_CONTENT_CHARS, MAX_IMPORTANCE, MIN_IMPORTANCE
from memstore.manager_args import written_out

__all__ = ["ModelNote", "one_argument", "read_note"]

_INT = re.compile(r"[+-]?[0-9]{1,30}")


@dataclass(frozen=True, slots=True)
class ModelNote:
    """A note read from the model's answer: its ``content`` and ``importance``, or why it
    is refused (``refusal``: the counter's name, and ``reason``: one line)."""

    content: str = ""
    importance: int = MIN_IMPORTANCE
    clamped: bool = False
    refusal: str | None = None
    reason: str = ""


def _importance(value: object) -> int | None:
    """The importance as an int (not yet kept within bounds), or None if it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return round(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = str.__str__(value).strip()
        if _INT.fullmatch(text):
            return int(text)
    return None


def _shown(value: object) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)[:40]
    return f"(a {type(value).__name__})"


def read_note(content: object, importance: object) -> ModelNote:
    """The note to store, or why not (the module doc)."""
    if not isinstance(content, str):
        return ModelNote(
            refusal="content_refused",
            reason=f"the content is a {type(content).__name__}, not text",
        )
    text = written_out(str.__str__(content))  # (escapes make it longer: checked after)
    if len(text) > MAX_CONTENT_CHARS:
        return ModelNote(
            refusal="content_refused",
            reason=f"the content is {len(text):,} characters (NULs and lone surrogates "
            f"written out), more than the {MAX_CONTENT_CHARS:,} a note keeps",
        )
    number = _importance(importance)
    if number is None:
        return ModelNote(
            refusal="importance_refused",
            reason=f"the importance {_shown(importance)} is not a number from "
            f"{MIN_IMPORTANCE} to {MAX_IMPORTANCE}",
        )
    kept = min(max(number, MIN_IMPORTANCE), MAX_IMPORTANCE)
    return ModelNote(text, kept, clamped=kept != number)


def one_argument(name: str, value: object, alias: str, alias_value: object) -> Any:
    """The argument given as ``name`` or by spec 001's ``alias``: TypeError if both are
    given, or neither."""
    if value is not None and alias_value is not None:
        raise TypeError(f"add_memory got both {name} and {alias} (spec 001's name for it)")
    if value is None and alias_value is None:
        raise TypeError(f"add_memory needs {name} (or spec 001's {alias})")
    return value if value is not None else alias_value
