"""Errors a user of memstore can cause, each with a message that says what to do."""

from __future__ import annotations


class MemstoreError(Exception):
    """Base class: every error memstore raises on purpose."""


class NotAMemstoreDatabase(MemstoreError):
    """The file exists but is not a memstore database; it was left untouched."""


class SchemaOutOfDate(MemstoreError):
    """The database was made by an older memstore: it needs ``memstore db upgrade``."""


class SchemaTooNew(MemstoreError):
    """The database was made by a newer memstore than this one."""


class StoreBusy(MemstoreError):
    """Another process held the database lock for longer than the busy timeout."""


class UnsupportedDatabase(MemstoreError):
    """Only SQLite URLs can hold the attached in-memory ephemeral tier."""


class MemoryNotFound(MemstoreError):
    """No memory with that exact title at that location."""


class ReadOnlyDatabase(MemstoreError):
    """The database cannot be written (a read-only file, folder or file system)."""


class RebuildFailed(MemstoreError):
    """A decision-log row could not be replayed; the rebuild wrote nothing."""
