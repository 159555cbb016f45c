"""memstore: spatial, cross-episode memory for LLM agents playing Zork I, stored in SQLite.

    from memstore import MemoryStore, SimpleMemoryManager, Memory

Names are imported on first use, so ``import memstore`` (and the ``memstore`` command) starts
fast; litellm is imported only when a litellm completion is built (an LLM will be called).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "MemstoreConfig": "memstore.config",
    "load_config": "memstore.config",
    "MemoryNotFound": "memstore.errors",
    "MemstoreError": "memstore.errors",
    "NotAMemstoreDatabase": "memstore.errors",
    "SchemaOutOfDate": "memstore.errors",
    "SchemaTooNew": "memstore.errors",
    "StoreBusy": "memstore.errors",
    "StorageFull": "memstore.errors",
    "SchemaChanged": "memstore.errors",
    "DatabaseUnavailable": "memstore.errors",
    "StoreClosed": "memstore.errors",
    "TransactionAborted": "memstore.errors",
    "UnsupportedDatabase": "memstore.errors",
    "ReadOnlyDatabase": "memstore.errors",
    "RebuildFailed": "memstore.errors",
    "SimpleMemoryManager": "memstore.manager",
    "rebuild_from_log": "memstore.manager",
    "INVALIDATION_MARKER": "memstore.models",
    "Category": "memstore.models",
    "LocationInfo": "memstore.models",
    "LocationMemories": "memstore.models",
    "Memory": "memstore.models",
    "Persistence": "memstore.models",
    "Status": "memstore.models",
    "MemoryStatus": "memstore.models",
    "MemoryStatusType": "memstore.models",
    "AppliedSynthesis": "memstore.store",
    "MemoryStore": "memstore.store",
    "SupersedeOutcome": "memstore.store",
    "LLMCallable": "memstore.synthesis",
    "MemorySynthesisResponse": "memstore.synthesis",
    "SynthesisError": "memstore.synthesis",
    "Trigger": "memstore.triggers",
    "ZMachineContext": "memstore.triggers",
    "significance": "memstore.triggers",
    "FlaggedMemories": "memstore.flagged",
    "MemoryToolkit": "memstore.memory_tools",
    "ZorkGame": "memstore.game",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers and editors
    from memstore.config import MemstoreConfig, load_config  # noqa: F401
    from memstore.flagged import FlaggedMemories  # noqa: F401
    from memstore.game import ZorkGame  # noqa: F401
    from memstore.manager import SimpleMemoryManager, rebuild_from_log  # noqa: F401
    from memstore.memory_tools import MemoryToolkit  # noqa: F401
    from memstore.models import Memory, Persistence, Status  # noqa: F401
    from memstore.store import MemoryStore  # noqa: F401
