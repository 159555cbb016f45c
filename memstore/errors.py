"""Errors a user of memstore can cause, each with a message that says what to do."""

from __future__ import annotations

from enum import StrEnum


class MemstoreError(Exception):
    """Base class: every error memstore raises on purpose."""


class NotAMemstoreDatabase(MemstoreError):
    """The file exists but is not a memstore database; it was left untouched."""


class SchemaOutOfDate(MemstoreError):
    """The database was made by an older memstore: it needs ``memstore db upgrade``."""


class SchemaTooNew(MemstoreError):
    """The database was made by a newer memstore than this one."""


class StoreClosed(MemstoreError):
    """The store was closed (``close()``, or the end of its ``with`` block): open it again."""


class TransactionAborted(MemstoreError):
    """The database rolled a transaction back by itself after an error inside it that the
    caller caught (SQLite: a full disk; PostgreSQL: any error): nothing of it was written."""


class StoreBusy(MemstoreError):
    """Another process held the database lock for longer than the busy timeout."""


class StorageFull(StoreBusy):
    """The database had no room for a write (a full disk or quota: SQLITE_FULL, SQLSTATE
    53100; or an I/O error of the driver): nothing was written. A StoreBusy, so the
    manager treats it as one: counted (``store_full``), what waits waits, never raised."""


class SchemaChanged(StoreBusy):
    """A table or column this store uses is gone: the schema changed under the open store
    (a confirmed ``memstore db downgrade`` while it ran, a table dropped by hand); nothing
    was written. A StoreBusy, so the manager treats it as one: counted
    (``store_schema_changed``), what waits waits (for ``memstore db upgrade``), never
    raised into the agent loop."""


def refusal_counter(exc: BaseException) -> str:
    """The counter a refusal the agent loop rides out is counted in: ``store_unavailable``
    (DatabaseUnavailable), ``store_full`` (StorageFull), ``store_schema_changed``
    (SchemaChanged) or ``store_busy`` (any other StoreBusy)."""
    if isinstance(exc, DatabaseUnavailable):
        return "store_unavailable"
    if isinstance(exc, StorageFull):
        return "store_full"
    if isinstance(exc, SchemaChanged):
        return "store_schema_changed"
    return "store_busy"


class UnsupportedDatabase(MemstoreError):
    """Not a database memstore runs on: a SQLite path or URL, or a PostgreSQL URL."""


class DatabaseUnavailable(MemstoreError):
    """The database server refused the connection (down, wrong credentials, no such
    database); the message is the server's reason, on one line."""


class UnstorableText(MemstoreError, ValueError):
    """Text the database cannot hold (PostgreSQL: a NUL character); nothing was written."""


class MemoryNotFound(MemstoreError):
    """No memory with that exact title at that location."""


class ReadOnlyDatabase(MemstoreError):
    """The database cannot be written (a read-only file, folder or file system)."""


class DamagedDatabase(MemstoreError):
    """A stored row cannot be read (written around memstore): ``memstore check`` lists them."""


class RebuildFailed(MemstoreError):
    """A decision-log row could not be replayed; the rebuild wrote nothing."""


# --- the game and its story file -----------------------------------------------------------


class GameError(MemstoreError):
    """The story file cannot be read by this adapter, or a line is not one game command it
    plays (``memstore.game_commands``; the message says why)."""


class RomError(MemstoreError):
    """The Zork I story file is missing or is not release 119 (the message says what to do)."""


# --- synthesis and the model call ----------------------------------------------------------


class ModelUnavailable(MemstoreError):
    """The LLM agent's model failed so many turns in a row that an evaluation stopped (the
    message names the last failure): it would otherwise wait out every turn's timeout."""


class SynthesisErrorKind(StrEnum):
    """Why a synthesis produced nothing usable; the manager logs, counts and skips."""

    PROVIDER_ERROR = "provider_error"
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    INVALID_JSON = "invalid_json"
    SCHEMA = "schema"


class SynthesisError(MemstoreError):
    """A failed synthesis: ``kind`` (a SynthesisErrorKind) and a readable message."""

    def __init__(self, kind: SynthesisErrorKind | str, message: str) -> None:
        self.kind = SynthesisErrorKind(kind)
        self.message = message
        super().__init__(f"{self.kind.value}: {message}")


class LLMCallError(SynthesisError):
    """The call itself failed: provider_error, timeout or rate_limit."""


class AnswerError(SynthesisError):
    """The model answered, but not usably: invalid_json or schema. ``raw`` is the answer's
    text when ``synthesize`` had one (the manager keeps a bounded copy in the decision log)."""

    raw: str | None = None


class LLMDeadlineExceeded(TimeoutError):
    """The model call (retries included) had no answer by ``config.timeout``."""


# --- importing Memories.md -----------------------------------------------------------------


class ImportConflict(MemstoreError):
    """The database changed between planning and applying; nothing was written."""


class ImportRefused(MemstoreError):
    """The import would break one of the database's rules; nothing was written."""


# --- the map ---------------------------------------------------------------------------------


class MapStateError(MemstoreError):
    """A map_state.json memstore cannot read, or will not import as it is; nothing was
    written (memstore.map_json)."""


# --- files ---------------------------------------------------------------------------------


class NotARegularFile(OSError):
    """The export's target exists and is not a regular file (a device, FIFO, socket)."""


class FileChanged(MemstoreError):
    """The file an export was to replace changed after it was checked (someone saved it
    meanwhile): nothing was written."""


# --- the command line ----------------------------------------------------------------------


class CliError(Exception):
    """A user error found by the command line itself (one line, exit code 1)."""
