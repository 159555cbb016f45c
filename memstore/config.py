"""Configuration: one place that says where the database is and which model to call.

Precedence, highest first:
1. arguments given in code (``load_config(model=...)``) or on the command line;
2. environment variables ``MEMSTORE_DB``, ``MEMSTORE_MODEL``, ``MEMSTORE_API_BASE``;
3. the ``[tool.memstore]`` table of the nearest ``pyproject.toml`` (from the working
   directory upwards);
4. the defaults below.

The library, the command line and alembic's ``migrations/env.py`` all call ``load_config``,
so they agree on which database they mean.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

DEFAULT_DB = "game_files/memories.db"

ENV_VARS = {
    "db": "MEMSTORE_DB",
    "model": "MEMSTORE_MODEL",
    "api_base": "MEMSTORE_API_BASE",
}


class ConfigWarning(UserWarning):
    """A setting memstore accepts but advises against (``history_window`` above 10). The
    command line prints it as one line, ``memstore: warning: ...``; in a program it points
    at the caller's line that made the configuration."""


#: the folders whose frames a ConfigWarning skips to reach the caller's line: memstore's
#: own and pydantic's (the validator runs inside pydantic)
_INTERNAL_FOLDERS = tuple(
    str(Path(file).resolve().parent) + os.sep for file in (__file__, pydantic.__file__) if file
)


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside memstore and pydantic, counted from
    the function that calls this one (which then passes it to ``warnings.warn``)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _internal(filename: str) -> bool:
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, RuntimeError, ValueError):
        return False
    return resolved.startswith(_INTERNAL_FOLDERS)


#: the longest ``timeout`` a configuration may give (seconds)
MAX_TIMEOUT_S = 86_400.0
#: the largest ``history_window`` (spec 003 recommends at most 10: a warning above)
MAX_HISTORY_WINDOW = 50


#: the settings that are numbers, flags and text (each checked for what it is, below)
_NUMBERS = (
    "temperature",
    "max_tokens",
    "timeout",
    "num_retries",
    "history_window",
    "token_budget",
    "map_prune_after",
    "map_route_confidence",
)
_FLAGS = ("show_persistence_markers", "map_exits_line")
_TEXTS = ("db", "model", "api_base", "api_key", "query_model")


class MemstoreConfig(BaseModel):
    """Every setting memstore reads, validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db: str = DEFAULT_DB
    #: litellm model name; None means "no LLM": the manager runs the offline recorder.
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1000, ge=1)
    #: seconds one LLM call may take, retries included: at most a day (a larger or infinite
    #: value would reach the call's timers as one they cannot hold)
    timeout: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_S)
    num_retries: int = Field(default=2, ge=0, le=10)
    #: recent turns shown to the synthesis LLM (spec 003: 1 to 10, default 3)
    history_window: int = Field(default=3, ge=1, le=MAX_HISTORY_WINDOW)
    #: tokens of memory text given to the agent per location (spec 000: 200-300)
    token_budget: int = Field(default=300, ge=20)
    #: "[spawn]" / "[session]" markers in the agent's context (spec 002)
    show_persistence_markers: bool = True
    #: a cheap model for the query tools; defaults to ``model``
    query_model: str | None = None
    #: the map (memstore.map_graph): a direction that failed this often and never moved the
    #: player is pruned
    map_prune_after: int = Field(default=3, ge=1)
    #: routes use connections whose confidence, (v + 1) / (v + f + 2), is above this
    map_route_confidence: float = Field(default=0.5, ge=0.0, lt=1.0)
    #: the agent's context ends with one line of the room's known exits and untried
    #: directions, within the same token budget
    map_exits_line: bool = True

    @field_validator(*_NUMBERS, mode="before")
    @classmethod
    def _no_bool_number(cls, value: object, info: ValidationInfo) -> object:
        """``timeout = true`` is a mistake, not 1 second: a bool is no number here (nor
        anywhere else in memstore)."""
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not {str(value).lower()}")
        return value

    @field_validator(*_FLAGS, mode="before")
    @classmethod
    def _bool_flag(cls, value: object, info: ValidationInfo) -> object:
        """A flag is true or false, not 1 or "yes"."""
        if not isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be true or false, not {value!r:.40}")
        return value

    @field_validator(*_TEXTS)
    @classmethod
    def _no_nul(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A NUL character fits no path, URL, model name or key (the operating system
        refuses it in a path): one line naming the setting, not an error from deep
        inside."""
        if value is not None and "\x00" in value:
            raise ValueError(f"{info.field_name} holds a NUL character (\\u0000): remove it")
        return value

    @field_validator("db")
    @classmethod
    def _db_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give a database path or URL, not an empty one")
        return value

    @field_validator("model", "api_base", "api_key", "query_model")
    @classmethod
    def _not_blank(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A setting given as blank space is a mistake, not a model named '   ' (leave it
        out for none), wherever it comes from."""
        if value is not None and not value.strip():
            raise ValueError(f"{info.field_name} is blank: give it a value, or leave it out")
        return value

    @field_validator("history_window")
    @classmethod
    def _window_warning(cls, value: int) -> int:
        if value > 10:
            warnings.warn(
                f"history_window = {value} may use excessive context; recommended 3-8, at most 10",
                ConfigWarning,
                stacklevel=_caller_stacklevel(),
            )
        return value

    @property
    def llm_configured(self) -> bool:
        return bool(self.model)


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml from ``start`` (default: the working directory) upwards."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


#: the last pyproject.toml whose ``[tool.memstore]`` was read: (path, its bytes, the table).
#: Every ``MemoryStore.open`` and command reads the file (microseconds); parsing it again
#: (0.3 ms, a quarter of opening a store) only when its bytes changed is exact, where a
#: cache keyed by its modification time would keep settings rewritten within one tick.
_last_read: tuple[Path, bytes, dict[str, Any]] | None = None


def _pyproject_settings(path: Path | None) -> dict[str, Any]:
    """The ``[tool.memstore]`` table of ``path``, or one ValueError line naming the file.

    A file that cannot be parsed (not TOML, not UTF-8) and never says "memstore" holds no
    memstore settings: it is another project's, and memstore reads nothing from it rather
    than refuse every command run below it. One that says "memstore" and cannot be read,
    or whose ``[tool.memstore]`` is not a table, is refused: memstore cannot tell which
    settings were meant.
    """
    global _last_read
    if path is None:
        return {}
    where = f"cannot read [tool.memstore] from {path}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror or exc}") from exc
    last = _last_read
    if last is not None and last[0] == path and last[1] == data:
        return copy.deepcopy(last[2])
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        if b"memstore" not in data:
            return {}
        if isinstance(exc, UnicodeDecodeError):
            raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        raise ValueError(f"{where}: {exc}") from exc
    tool = parsed.get("tool", {})
    section = tool.get("memstore", {}) if isinstance(tool, dict) else {}
    if not isinstance(section, dict):
        raise ValueError(f"[tool.memstore] in {path} must be a table, not {section!r:.40}")
    section = {**_spec_settings(tool, path, set(section)), **section}
    if "db" in section and isinstance(section["db"], str) and not section["db"].strip():
        raise ValueError(
            f"{path}: [tool.memstore] db is empty: give a database path or URL, or leave it out"
        )
    _last_read = (path, data, copy.deepcopy(section))
    return dict(section)


def _spec_settings(tool: object, path: Path, own: set[str]) -> dict[str, Any]:
    """The settings the specs name, under ``[tool.zorkgpt]``: ``memory_sampling``'s
    ``memory_history_window`` (specs 003, 004) and ``memory``'s ``show_persistence_markers``
    (spec 002), which ``[tool.memstore]``'s own keys override. A window below 1 is the
    spec's default 3, and one above MAX_HISTORY_WINDOW that bound, each with a warning (the
    spec warns and goes on); other values are checked as memstore's own."""
    zorkgpt = tool.get("zorkgpt") if isinstance(tool, dict) else None
    if not isinstance(zorkgpt, dict):
        return {}
    settings: dict[str, Any] = {}
    sampling, memory = zorkgpt.get("memory_sampling"), zorkgpt.get("memory")
    if (
        isinstance(sampling, dict)
        and "memory_history_window" in sampling
        and (
            "history_window" not in own  # (memstore's own key wins: no word of the spec's)
        )
    ):
        window = sampling["memory_history_window"]
        if type(window) is int and not 1 <= window <= MAX_HISTORY_WINDOW:
            used = 3 if window < 1 else MAX_HISTORY_WINDOW
            warnings.warn(
                f"{path}: [tool.zorkgpt.memory_sampling] memory_history_window = {window} is "
                f"outside 1-{MAX_HISTORY_WINDOW}: {used} is used",
                ConfigWarning,
                stacklevel=_caller_stacklevel(),
            )
            window = used
        settings["history_window"] = window
    if (
        isinstance(memory, dict)
        and "show_persistence_markers" in memory
        and ("show_persistence_markers" not in own)
    ):
        settings["show_persistence_markers"] = memory["show_persistence_markers"]
    return settings


#: a SQLite URL's start, up to the path (``sqlite:///``, ``sqlite+pysqlite:///``)
_SQLITE_URL = re.compile(r"^(sqlite(?:\+\w+)?:///)(.*)$")


def _beside(db: str, folder: Path) -> str:
    """``db`` as written in the pyproject.toml in ``folder``: a relative file path, or a
    SQLite URL's, made absolute in ``folder`` (the link's own folder, for a pyproject.toml
    that is a symbolic link: review S5 D F7); anything else as it is (an absolute path, a
    ``~`` path, a server URL, an in-memory database, a blank one refused later)."""
    url = _SQLITE_URL.match(db)
    start, path = (url.group(1), url.group(2)) if url else ("", db)
    path, mark, query = path.partition("?") if url else (path, "", "")
    if url is None and "://" in db:
        return db
    if not path.strip() or path[:1] in ("/", "~") or path == ":memory:" or Path(path).is_absolute():
        return db
    if url is None:
        return str(folder / path)
    # (a URL's path is read %-decoded and ends at "?": the folder's own name is quoted,
    # the path as written is the URL's: review S5 E F5)
    return f"{start}{quote(str(folder), safe='/')}/{path}{mark}{query}"


def load_config(pyproject: Path | None = None, **overrides: Any) -> MemstoreConfig:
    """Merge defaults, ``[tool.memstore]``, environment variables and ``overrides``.

    Overrides whose value is None are ignored, so command-line options can be passed
    straight through. A relative ``db`` path in ``[tool.memstore]`` is beside that
    pyproject.toml (a command run in a subfolder of the project opens the project's
    database); one from the environment or an argument is from the working directory.
    """
    found = pyproject or find_pyproject()
    settings: dict[str, Any] = _pyproject_settings(found)
    db = settings.get("db")
    if found is not None and isinstance(db, str):
        settings["db"] = _beside(db, Path(os.path.abspath(found)).parent)
    for key, var in ENV_VARS.items():
        value = os.environ.get(var)
        if value and not value.strip():  # set to nothing ("") is unset; blank space is not
            raise ValueError(f"{var} is blank: give it a value, or unset it")
        if value:
            settings[key] = value
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return MemstoreConfig(**settings)
