"""Spec 002's plain ``z_machine_context`` dict, read as a ZMachineContext.

The orchestrator of spec 002 ("Conditional Prompt Injection") passes::

    {'first_visit', 'score_delta', 'location_changed', 'inventory_changed', 'died',
     'response_length'}

``first_visit``, ``died`` and ``response_length`` are ZMachineContext fields. The other
three are what ZMachineContext works out from values before and after the action, so here
they are read as such:

* ``score_delta``: with ``score_before`` or ``score_after``, the other one is worked out
  from it (with both, they must agree with it: ValueError); with neither, the scores are
  counted from 0 before the action (a memory's score change is the difference) and
  ``reported`` holds SCORE_CHANGED to say that only the change is known (the prompt then
  states no absolute score);
* ``location_changed`` and ``inventory_changed``: when true and the dict gives neither
  value of that pair, a change the caller reported (``ZMachineContext.reported``): the
  trigger fires, and nothing is made up (no destination is known, so the map records no
  exit; no item is named). A dict giving one value of a pair (``location_before`` alone)
  and the flag false means the other is the same; with the flag true or absent the other
  is not known, and that is the caller's ValueError (never read as "moved nowhere" or
  "every item lost", the typed model's defaults).

Any other key (a typo such as ``scoreafter``, a key of a later spec) is not read: the
caller learns which (``context_from_mapping``'s second value), and the manager counts
and logs them. A value of the wrong type is the caller's mistake: ValueError or TypeError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from memstore.triggers import Trigger, ZMachineContext

__all__ = ["SPEC_KEYS", "context_from_mapping"]

#: the spec-002 keys that are not ZMachineContext fields
SPEC_KEYS = ("score_delta", "location_changed", "inventory_changed")

_FIELDS = frozenset(ZMachineContext.model_fields) - {"reported"}


def _flag(value: Mapping[str, Any], key: str) -> bool:
    flag = value.get(key, False)
    if not isinstance(flag, bool):
        raise TypeError(f"z_machine_context[{key!r}] must be true or false, got {flag!r}")
    return flag


def _number(value: object, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"z_machine_context[{key!r}] must be an int, got {value!r}")
    return value


def context_from_mapping(value: Mapping[str, Any]) -> tuple[ZMachineContext, tuple[str, ...]]:
    """The context spec 002's dict (or any mapping of ZMachineContext's fields) describes,
    and the keys it did not read, sorted."""
    fields = {key: item for key, item in value.items() if key in _FIELDS}
    ignored = sorted(repr(key) if not isinstance(key, str) else key for key in value)
    ignored = [key for key in ignored if key not in _FIELDS and key not in SPEC_KEYS]
    reported: set[Trigger] = set()
    delta = value.get("score_delta")
    if delta is not None:
        if not isinstance(delta, int) or isinstance(delta, bool):
            raise TypeError(f"z_machine_context['score_delta'] must be an int, got {delta!r}")
        before, after = fields.get("score_before"), fields.get("score_after")
        if before is None and after is None:
            fields["score_after"] = delta
            reported.add(Trigger.SCORE_CHANGED)  # the change only: no absolute score known
        elif after is None:
            fields["score_after"] = _number(before, "score_before") + delta
        elif before is None:
            fields["score_before"] = _number(after, "score_after") - delta
        elif _number(after, "score_after") - _number(before, "score_before") != delta:
            raise ValueError(
                f"z_machine_context: score_delta {delta} disagrees with score_after - "
                f"score_before ({after} - {before})"
            )
    pairs = (
        ("location_changed", ("location_before", "location_after"), Trigger.LOCATION_CHANGED),
        ("inventory_changed", ("inventory_before", "inventory_after"), Trigger.INVENTORY_CHANGED),
    )
    for key, pair, trigger in pairs:
        given = [name for name in pair if name in fields]
        if len(given) == 1:  # half a pair: the other value is not known, never "empty"
            (have,) = given
            (missing,) = (name for name in pair if name != have)
            if key not in value or _flag(value, key):
                raise ValueError(
                    f"z_machine_context gives {have} but not {missing}"
                    f"{f' ({key} is true)' if key in value else ''}: give both, or neither "
                    f"and {key}"
                )
            fields[missing] = fields[have]  # the flag says nothing changed
        elif _flag(value, key) and not given:
            reported.add(trigger)
    try:
        return ZMachineContext(**fields, reported=frozenset(reported)), tuple(ignored)
    except ValidationError as exc:  # pydantic's report is a paragraph: the first in one line
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ValueError(
            f"z_machine_context[{where!r}]: {first['msg']}, got {first.get('input')!r:.60}{more}"
        ) from None
