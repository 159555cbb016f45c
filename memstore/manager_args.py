"""The manager's checks of ``record_action_outcome``'s arguments (memstore.manager): a
caller's mistake raises at once (TypeError, ValueError), data a database cannot store is
written out, every text is a plain str (memstore.models.plain_str), and spec 002's plain
context dict is read (memstore.spec_context)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstore.models import (
    INT64_MIN,
    check_int,
    check_location_name,
    plain_str,
    unstorable_text,
)
from memstore.spec_context import context_from_mapping
from memstore.synthesis import loggable_text
from memstore.triggers import ZMachineContext

__all__ = ["as_context", "check_turn", "written_out"]


def check_turn(turn: object) -> int:
    """A turn number the caller gives: TypeError for anything but an int (a bool too),
    ValueError for one below 0 or past the database's 64 bits."""
    if type(turn) is not int:
        raise TypeError(f"turn must be an int, got {type(turn).__name__}")
    check_int("turn", turn, 0)
    return turn


def written_out(text: str) -> str:
    """``text`` as either database can store it: NUL characters and lone surrogates
    written out as escapes (memstore.synthesis.loggable_text), nothing cut."""
    return text if unstorable_text(text) is None else loggable_text(text, len(text))


def as_context(
    value: ZMachineContext | Mapping[str, Any], response: str
) -> tuple[ZMachineContext, tuple[str, ...]]:
    """The typed context, or the spec's plain dict read as one (memstore.spec_context),
    with response_length filled if absent; and the dict's keys it did not read."""
    ignored: tuple[str, ...] = ()
    if isinstance(value, ZMachineContext):
        ctx = value
    elif isinstance(value, Mapping):
        ctx, ignored = context_from_mapping(value)
    else:
        raise TypeError(
            f"z_machine_context must be a ZMachineContext or a dict, got {type(value).__name__}"
        )
    if ctx.response_length == 0 and response:
        ctx = ctx.model_copy(update={"response_length": len(response)})
    name = ctx.location_after_name
    if name is not None and (plain := check_location_name(name, "location_after_name")) is not name:
        ctx = ctx.model_copy(update={"location_after_name": plain})
    if any(type(item) is not str for item in ctx.item_names.values()):  # not validated
        names = {key: plain_str("an item name", item) for key, item in ctx.item_names.items()}
        ctx = ctx.model_copy(update={"item_names": names})
    _check_numbers(ctx)
    return ctx, ignored


def _check_numbers(ctx: ZMachineContext) -> None:
    """Refuse (ValueError, one line) a context with a number the database cannot hold: the
    scores and locations go into the turn record and the map, their difference into a
    memory's score_change."""
    numbers = (
        ("score_before", ctx.score_before, False, INT64_MIN),
        ("score_after", ctx.score_after, False, INT64_MIN),
        # never negative (ZMachineContext's rule, which model_copy and model_construct skip)
        ("location_before", ctx.location_before, True, 0),
        ("location_after", ctx.location_after, True, 0),
        ("score_after - score_before", ctx.score_delta, False, INT64_MIN),
    )
    for name, value, optional, minimum in numbers:
        try:
            check_int(name, value, minimum, optional=optional)
        except ValueError as exc:
            raise ValueError(f"z_machine_context: {exc}") from None
