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

Inventories may also be given as Jericho gives them (spec 003:
``get_inventory_structured()`` returns ZObjects): an item with an int ``num`` is read as
that object number, and its ``name`` as its display name (``item_names``, unless the dict
gives one). Inventories given as names only (``["leaflet"]``, no object numbers) say
whether the inventory changed, and nothing more: a difference between the two is a
change the caller reported, as ``inventory_changed`` true would be; no item is named.

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


def _object_numbers(fields: dict[str, Any], reported: set[Trigger]) -> None:
    """Inventories of ZObjects read as object numbers (their names kept), and inventories
    of names only as a reported change (the module doc)."""
    names: dict[object, object] = {}
    by_name: dict[str, frozenset[str]] = {}
    for key in ("inventory_before", "inventory_after"):
        items = fields.get(key)
        if isinstance(items, str | bytes) or not isinstance(items, list | tuple | set | frozenset):
            continue
        if items and all(isinstance(item, str) for item in items):
            by_name[key] = frozenset(items)
            continue
        numbers = []
        for item in items:
            number = getattr(item, "num", None) if not isinstance(item, int) else None
            if type(number) is int:
                numbers.append(number)
                name = getattr(item, "name", None)
                if isinstance(name, str):
                    names.setdefault(number, name)
            else:
                numbers.append(item)  # an int, or a value the model refuses in one line
        fields[key] = numbers
    if by_name and "inventory_before" in fields and "inventory_after" in fields:
        before, after = fields.pop("inventory_before"), fields.pop("inventory_after")
        sides = (("inventory_before", before), ("inventory_after", after))
        if any(items and key not in by_name for key, items in sides):
            raise ValueError(
                "z_machine_context gives one inventory as names and the other as object "
                "numbers: give both the same way"
            )
        if by_name.get("inventory_before", frozenset()) != by_name.get(
            "inventory_after", frozenset()
        ):
            reported.add(Trigger.INVENTORY_CHANGED)
    if names and "item_names" not in fields:
        fields["item_names"] = names


def context_from_mapping(value: Mapping[str, Any]) -> tuple[ZMachineContext, tuple[str, ...]]:
    """The context spec 002's dict (or any mapping of ZMachineContext's fields) describes,
    and the keys it did not read, sorted."""
    fields = {key: item for key, item in value.items() if key in _FIELDS}
    reported: set[Trigger] = set()
    _object_numbers(fields, reported)
    ignored = sorted(repr(key) if not isinstance(key, str) else key for key in value)
    ignored = [key for key in ignored if key not in _FIELDS and key not in SPEC_KEYS]
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
