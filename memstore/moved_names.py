"""Names a module gave before it was split (issue 15), still found where they were.

A module whose names moved to another sets ``__getattr__ = forwarding(__name__, {name:
new module})``: ``from memstore.eval_results import EvalReport`` and a pickle made before
the split still load, and the new module is imported only when such a name is asked for
(it may import the old one: no import cycle).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["forwarding"]


def forwarding(module: str, moved: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that finds each of ``moved``'s names (name -> the module
    that holds it now) there, and is AttributeError for any other name, as Python's."""

    def __getattr__(name: str) -> object:
        where = moved.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where), name)

    return __getattr__
