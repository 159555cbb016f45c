"""The command line's argument types and small text helpers (``type=`` functions, plurals,
reading an input file): a bad value is argparse's usage error, exit code 2; an unreadable
file (missing, not a regular file, too large, not UTF-8) one
:class:`~memstore.errors.CliError` line, exit code 1.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from memstore.errors import CliError
from memstore.models import INT64_MAX


def database(value: str) -> str:
    """``type=`` for --db: a database path or URL, never empty. Which URLs work is the
    store's to say (``MemoryStore.open``: a one-line error, exit code 1), not the parser's."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a database path or URL, not an empty one")
    return value


#: the largest location number SQLite can store (a signed 64-bit integer)
MAX_LOCATION_ID = INT64_MAX
#: --busy-timeout's ceiling: a day (SQLite takes milliseconds in an int)
MAX_BUSY_TIMEOUT_S = 86_400.0


def location_id(value: str) -> int:
    """``type=`` for a location number: a usage error (exit 2) unless 0 to 2**63 - 1, in
    the digits 0-9 (as map_state.json's are read: ``int`` alone takes ``٦٤`` and ``1_0``),
    after a sign as ``int`` takes it (``+64`` is 64)."""
    try:
        number = int(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"location must be an integer (the Z-machine location number), got {value!r}"
        ) from None
    digits = value.strip()
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(
            f"location must be written in the digits 0-9, got {value!r}"
        )
    if number < 0:
        raise argparse.ArgumentTypeError(f"location must not be negative, got {number}")
    if number > MAX_LOCATION_ID:
        raise argparse.ArgumentTypeError(
            f"location must be at most {MAX_LOCATION_ID} (SQLite's largest integer), got {number}"
        )
    return number


def positive_int(value: str) -> int:
    """``type=`` for a count that must be 1 or more (0 is refused, not read as "default")."""
    try:
        number = int(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    if number > MAX_LOCATION_ID:  # SQLite takes no larger integer (a LIMIT, a count)
        raise argparse.ArgumentTypeError(f"must be at most {MAX_LOCATION_ID}, got {number}")
    return number


def at_most(most: int):  # noqa: ANN201
    """``type=`` for a count from 1 to ``most``."""

    def parse(value: str) -> int:
        number = positive_int(value)
        if number > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:,}, got {number}")
        return number

    return parse


def output_path(value: str) -> str:
    """``type=`` for --out and --notes: a path, or - for standard output; never empty."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a file path, or - for standard output")
    return value


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 memory``, ``2 memories``, ``0 locations``."""
    if count == 1:
        return f"{count} {singular}"
    return f"{count} {plural_form or singular + 's'}"


#: the largest file ``read_text`` reads: 256 MiB. 100,000 memories of realistic length (the
#: generator of bench/markdown_bench.py) export to a Memories.md of 38 MB; this leaves room
#: for about 700,000 such memories, while reading and parsing it stays within a few GB
MAX_INPUT_BYTES = 256 * 1024 * 1024


def read_text(path: str, what: str = "Memories.md") -> str:
    """The UTF-8 text of the regular file ``path`` (a ``what`` file; line endings read as
    ``\\n``), or one CliError line.

    Only a regular file (or a link to one) is read: a device (``/dev/zero`` would be read
    until the machine ran out of memory), a FIFO (which would block), a socket or a folder
    is refused before anything is read, as is a file larger than ``MAX_INPUT_BYTES``.
    """
    file = Path(path)
    try:
        kind = _regular_file_problem(os.stat(file).st_mode)
        if kind is None:  # O_NONBLOCK: a FIFO swapped in since the stat does not block
            fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                status = os.fstat(handle.fileno())
                kind = _regular_file_problem(status.st_mode)
                if kind is None:
                    _refuse_large(file, status.st_size, what)
                    data = handle.read(MAX_INPUT_BYTES + 1)
                    _refuse_large(file, len(data), what)  # it grew since the fstat
    except OSError as exc:  # some name no file (ENOENT, EACCES); a read error (EIO) does not
        raise CliError(f"cannot read {file}: {exc.strerror or exc}") from exc
    if kind is not None:
        raise CliError(f"{file} is {kind}, not a regular file: give a {what} file to read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as a text-mode read does


def _regular_file_problem(mode: int) -> str | None:
    """None for a regular file; else what it is (``a folder``, ``a character device`` ...)."""
    if stat.S_ISREG(mode):
        return None
    from memstore.export_file import file_kind

    return file_kind(mode)


def _refuse_large(file: Path, size: int, what: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise CliError(
            f"{file} is larger than {MAX_INPUT_BYTES // 2**20} MiB, far more than a {what} "
            f"file of memstore's holds: nothing was read"
        )


def busy_timeout(value: str) -> float:
    """``type=`` for --busy-timeout: a finite number of seconds, 0 to a day."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 <= seconds <= MAX_BUSY_TIMEOUT_S:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT_S:.0f}, got {value!r}"
        )
    return seconds
