"""Z-machine triggers: the fast, deterministic "when" of memory synthesis (spec 000, Phase 1).

The game adapter fills a ZMachineContext from the Z-machine's ground truth before and after
an action; ``significance`` says why the turn is worth an LLM call. No reason, no call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

#: A response longer than this may carry information worth remembering (spec 000).
LONG_RESPONSE_CHARS = 100

#: the largest Z-machine object number (versions 4 to 8: 65535 objects; 1 to 3: 255);
#: object 0 is "nothing"
MAX_OBJECT_ID = 65535

#: the context's values as the game gives them, never coerced: an int is an int (not a
#: bool, a str or a float), a flag a bool (pydantic's strict mode, field by field)
_Int = Annotated[int, Strict()]
_Flag = Annotated[bool, Strict()]
#: a Z-machine object number (an inventory item)
_ObjectId = Annotated[int, Strict(), Field(ge=1, le=MAX_OBJECT_ID)]
#: a location id, never negative (the store's rule, memstore.models.check_location_id; one
#: past 64 bits is the manager's one-line ValueError, as every number of the context)
_LocationId = Annotated[int, Strict(), Field(ge=0)]


class Trigger(StrEnum):
    SCORE_CHANGED = "score_changed"
    LOCATION_CHANGED = "location_changed"
    INVENTORY_CHANGED = "inventory_changed"
    DEATH = "death"
    FIRST_VISIT = "first_visit"
    LONG_RESPONSE = "long_response"
    #: the game refused the action (memstore.outcome): worth a FAILURE memory
    REFUSED = "refused"


class ZMachineContext(BaseModel):
    """Ground truth around one action: values before and after it.

    Inventories are Z-machine object numbers (1 to MAX_OBJECT_ID), given as any
    collection of them; locations are never negative. ``first_visit`` may be left as
    None: the manager then works it out from the locations it has seen. Strict: scores,
    locations, object numbers and ``response_length`` must be ints (a bool, a str such as
    ``"6"`` or a float such as ``6.0`` is refused, never read as a number), ``died`` and
    ``first_visit`` bools; a wrong value is a ValidationError (a ValueError) when the
    context is made.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    score_before: _Int = 0
    score_after: _Int = 0
    location_before: _LocationId | None = None
    location_after: _LocationId | None = None
    inventory_before: frozenset[_ObjectId] = Field(default_factory=frozenset)
    inventory_after: frozenset[_ObjectId] = Field(default_factory=frozenset)
    died: _Flag = False
    first_visit: _Flag | None = None
    response_length: _Int = Field(default=0, ge=0)
    #: optional display names, filled by the game adapter for readable offline memories
    location_after_name: str | None = None
    item_names: dict[_ObjectId, str] = Field(default_factory=dict)
    #: changes the caller reported without the values they come from: spec 002's plain
    #: dict says ``location_changed`` and ``inventory_changed`` as flags, and
    #: ``score_delta`` alone (SCORE_CHANGED here: the scores count from 0 before the turn)
    #: (``memstore.spec_context``): ``location_changed`` and ``inventory_changed`` are
    #: true then, and fire their triggers, with no destination or item made up
    reported: frozenset[Trigger] = Field(default_factory=frozenset)

    @property
    def score_delta(self) -> int:
        return self.score_after - self.score_before

    @property
    def location_changed(self) -> bool:
        return (
            self.location_before != self.location_after or Trigger.LOCATION_CHANGED in self.reported
        )

    @property
    def inventory_changed(self) -> bool:
        return (
            self.inventory_before != self.inventory_after
            or Trigger.INVENTORY_CHANGED in self.reported
        )

    @property
    def items_gained(self) -> frozenset[int]:
        return self.inventory_after - self.inventory_before

    @property
    def items_lost(self) -> frozenset[int]:
        return self.inventory_before - self.inventory_after


def significance(ctx: ZMachineContext, *, refused: bool = False) -> list[Trigger]:
    """The reasons this turn is significant, in a fixed order; empty means "skip the LLM".

    ``refused``: the game refused the action (``memstore.outcome``, worked out by the
    manager from the answer's text, which the context does not carry).
    """
    reasons: list[Trigger] = []
    if ctx.score_delta != 0:
        reasons.append(Trigger.SCORE_CHANGED)
    if ctx.location_changed:
        reasons.append(Trigger.LOCATION_CHANGED)
    if ctx.inventory_changed:
        reasons.append(Trigger.INVENTORY_CHANGED)
    if ctx.died:
        reasons.append(Trigger.DEATH)
    if ctx.first_visit:
        reasons.append(Trigger.FIRST_VISIT)
    if ctx.response_length > LONG_RESPONSE_CHARS:
        reasons.append(Trigger.LONG_RESPONSE)
    if refused:
        reasons.append(Trigger.REFUSED)
    return reasons
