"""memstore: spatial, cross-episode memory for LLM agents playing Zork I, stored in SQLite.

    from memstore import MemoryStore, SimpleMemoryManager, Memory

Importing memstore is fast: litellm is imported only when an LLM is actually called.
"""

from memstore.config import MemstoreConfig, load_config
from memstore.errors import (
    MemoryNotFound,
    MemstoreError,
    NotAMemstoreDatabase,
    SchemaOutOfDate,
    SchemaTooNew,
    StoreBusy,
    UnsupportedDatabase,
)
from memstore.manager import SimpleMemoryManager, rebuild_from_log
from memstore.models import (
    INVALIDATION_MARKER,
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
)
from memstore.store import AppliedSynthesis, MemoryStore
from memstore.synthesis import LLMCallable, MemorySynthesisResponse, SynthesisError
from memstore.triggers import Trigger, ZMachineContext, significance

__all__ = [
    "INVALIDATION_MARKER",
    "AppliedSynthesis",
    "Category",
    "LLMCallable",
    "LocationInfo",
    "LocationMemories",
    "Memory",
    "MemoryNotFound",
    "MemoryStore",
    "MemorySynthesisResponse",
    "MemstoreConfig",
    "MemstoreError",
    "NotAMemstoreDatabase",
    "Persistence",
    "SchemaOutOfDate",
    "SchemaTooNew",
    "SimpleMemoryManager",
    "Status",
    "StoreBusy",
    "SynthesisError",
    "Trigger",
    "UnsupportedDatabase",
    "ZMachineContext",
    "load_config",
    "rebuild_from_log",
    "significance",
]
