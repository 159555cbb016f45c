"""The values of a ``map_state.json`` checked one at a time, for its reader
(memstore.map_json_read, which says what is refused): each check returns the value as
memstore keeps it, or raises :class:`~memstore.errors.MapStateError` with one line naming
its key; and the file's text loaded as JSON (a leading BOM dropped; a duplicate key, NaN
or anything but an object with ``rooms`` refused the same way).
"""

from __future__ import annotations

import json
import re
from typing import Any

from memstore.errors import MapStateError
from memstore.export_file import BOM
from memstore.map_graph import COUNT_MAX, action_key, visible
from memstore.models import INT64_MAX, unstorable_text

__all__ = [
    "MAX_COUNT",
    "MAX_INTEGER",
    "as_count",
    "as_exit_key",
    "as_object",
    "as_room_id",
    "as_text",
    "as_time",
    "as_whole",
    "key_path",
    "load_json",
    "refusal",
    "shown_value",
    "split_key",
]

#: SQLite's largest integer: no location number, count, episode or turn is larger
MAX_INTEGER = INT64_MAX
#: the largest verification or failure count imported: the map's own (a count stops there)
MAX_COUNT = COUNT_MAX
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
#: the most digits a location number has (a longer key is refused before it is converted)
_MAX_DIGITS = len(str(MAX_INTEGER))


def shown_value(value: Any) -> str:
    """A value as JSON, cut to 60 characters: control characters escaped (by JSON, or
    made ``visible``), a text that is not valid Unicode written with ASCII escapes."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        if unstorable_text(text) is not None:  # a lone surrogate, which no file can hold
            text = json.dumps(value)
    except (TypeError, ValueError):  # pragma: no cover - values come from json.loads
        text = repr(value)
    text = visible(text)
    return text if len(text) <= 60 else text[:57] + "..."


def key_path(*keys: str) -> str:
    """``connections["15"]["north"]``: where a value sits, each key quoted."""
    return keys[0] + "".join(f"[{shown_value(key)}]" for key in keys[1:])


def refusal(where: str, problem: str) -> MapStateError:
    return MapStateError(f"{where} {problem}; nothing was imported")


def as_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise refusal(where, f"must be an object, got {shown_value(value)}")
    return value


def as_whole(value: Any, where: str, least: int = 0, most: int = MAX_INTEGER) -> int:
    most = min(most, MAX_INTEGER)  # (past it: what the database cannot store)
    if type(value) is not int or value < least:
        raise refusal(where, f"must be a whole number {least} or more, got {shown_value(value)}")
    if value > most:
        raise refusal(where, f"must be at most {most}, got {shown_value(value)}")
    return value


def as_count(value: Any, where: str) -> int:
    """A verification or failure count: 0 to MAX_COUNT."""
    return as_whole(value, where, most=MAX_COUNT)


def as_room_id(key: str, where: str) -> int:
    if len(key) > _MAX_DIGITS or not _DECIMAL.fullmatch(key) or int(key) > MAX_INTEGER:
        raise refusal(
            where,
            f"is not a location number (a whole number 0 to {MAX_INTEGER}, as digits)",
        )
    return int(key)


def _storable(text: str, where: str) -> str:
    """``text`` if the database can store it (no NUL, no lone surrogate); else refused."""
    problem = unstorable_text(text)
    if problem is not None:
        raise refusal(where, problem)
    return text


def as_text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise refusal(where, f"must be a string, got {shown_value(value)}")
    return _storable(value, where)


def as_exit_key(exit_: str, where: str) -> str:
    key = action_key(_storable(exit_, where))
    if not key:
        raise refusal(where, "is an empty exit")
    return key


def split_key(key: str, table: str) -> tuple[int, str]:
    """``"15_north"`` -> (15, ``north``); the exit as the map keys it."""
    where = key_path(table, key)
    room, sep, exit_ = key.partition("_")
    if not sep:
        raise refusal(where, 'is not "<room id>_<exit>"')
    return as_room_id(room, where), as_exit_key(exit_, where)


def as_time(value: Any, where: str) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise refusal(where, f"must be [episode, turn], got {shown_value(value)}")
    return as_whole(value[0], where), as_whole(value[1], where)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise refusal(f"key {shown_value(key)}", "appears twice in one object")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise refusal(f"the value {name}", "is not a number JSON allows")


def load_json(text: str) -> dict[str, Any]:
    text = text.removeprefix(BOM)  # as an editor may save it (memstore.export_file)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise MapStateError(
            f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); nothing was imported"
        ) from None
    except RecursionError:
        raise MapStateError(
            "nested too deeply to be a map_state.json; nothing was imported"
        ) from None
    except ValueError as exc:  # an integer longer than Python reads
        raise MapStateError(f"not readable JSON ({exc}); nothing was imported") from None
    if not isinstance(data, dict):
        raise MapStateError("not a map_state.json: the top level must be an object")
    if "rooms" not in data:
        raise MapStateError('not a map_state.json: it has no "rooms"; nothing was imported')
    return data
