"""memstore: spatial, cross-episode memory for LLM agents playing Zork I, stored in SQLite."""

from memstore.models import (
    INVALIDATION_MARKER,
    Category,
    LocationInfo,
    LocationMemories,
    Memory,
    Persistence,
    Status,
)
from memstore.triggers import Trigger, ZMachineContext, significance

__all__ = [
    "INVALIDATION_MARKER",
    "Category",
    "LocationInfo",
    "LocationMemories",
    "Memory",
    "Persistence",
    "Status",
    "Trigger",
    "ZMachineContext",
    "significance",
]
