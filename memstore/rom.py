"""The Zork I story file: where to find it, how to check it, how to fetch it.

The project does not ship the story file. ``find_rom`` looks, in order, at

1. an explicit path given in code or on the command line;
2. the ``MEMSTORE_ROM`` environment variable;
3. ``roms/zork1.z3`` relative to the working directory;
4. ``roms/zork1.z3`` in the repository root (next to the ``memstore`` package).

A missing or wrong file raises :class:`RomError`, whose message says what to do.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from memstore.errors import (
    RomError,  # noqa: F401 - importable from here too
)

if TYPE_CHECKING:
    from memstore.export_file import FileState

#: Zork I release 119 / serial 880429 (historicalsource/zork1, MIT licence).
ZORK1_SHA256 = "37084966477dff679282de42974b2077156b1bd68fad92a65d4ea94d8eb64d79"
UPSTREAM_URL = "https://github.com/historicalsource/zork1/raw/master/COMPILED/zork1.z3"
ROM_ENV_VAR = "MEMSTORE_ROM"
ROM_RELATIVE_PATH = Path("roms") / "zork1.z3"
#: the repository root: the directory that holds the ``memstore`` package
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 30.0
#: a story file is far smaller than this; anything larger is not one
MAX_ROM_BYTES = 1024 * 1024

HOW_TO_GET = (
    f"To get it: run `memstore rom fetch` (downloads it to {ROM_RELATIVE_PATH}), "
    f"or set {ROM_ENV_VAR}=/path/to/zork1.z3, "
    f"or download {UPSTREAM_URL} yourself and check that its sha256 is {ZORK1_SHA256}."
)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_story(p: Path, what: str) -> bytes:
    """The bytes of ``p``, or RomError naming ``what`` was looked for and how to get it."""
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise RomError(f"No {what} at {p}. {HOW_TO_GET}") from None
    except OSError as exc:
        raise RomError(f"Cannot read the {what} {p}: {exc}. {HOW_TO_GET}") from exc


def verify_rom(path: str | Path, expected_sha256: str = ZORK1_SHA256) -> Path:
    """Check that ``path`` is the expected story file; return it, or raise RomError."""
    p = Path(path)
    data = _read_story(p, "Zork I story file")
    digest = sha256_of(data)
    if digest != expected_sha256:
        raise RomError(
            f"{p} is not Zork I release 119: its sha256 is {digest}, expected "
            f"{expected_sha256}. Replace it with the right file. {HOW_TO_GET}"
        )
    return p


#: bytes per unit of the header's file-length word (0x1A), by Z-machine version
_LENGTH_UNIT = {1: 2, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 8}
_HEADER_BYTES = 64


def _header_problem(data: bytes) -> str | None:
    """What keeps ``data`` from being a Z-machine story file by its header (None: nothing)."""
    if len(data) < _HEADER_BYTES or data[0] not in _LENGTH_UNIT:
        return "is not a Z-machine story file (no version 1-8 header)"
    declared = ((data[0x1A] << 8) | data[0x1B]) * _LENGTH_UNIT[data[0]]
    if declared > len(data):
        return f"is cut short: its header says {declared} bytes, the file has {len(data)}"
    return None


def is_story_file(data: bytes) -> bool:
    """True when ``data`` is a whole Z-machine story file by its header (any game)."""
    return _header_problem(data) is None


def check_story_file(path: str | Path) -> bytes:
    """The bytes of a Z-machine story file at ``path``, or RomError saying what is wrong.

    For a story file given by path (any game, so no checksum): it must be readable, hold a
    64-byte header whose version is 1 to 8, and be at least as long as its header says.
    Frotz ends the whole process on a file that fails these checks, so they come first.
    """
    p = Path(path)
    data = _read_story(p, "story file")
    problem = _header_problem(data)
    if problem is not None:
        raise RomError(f"{p} {problem}. {HOW_TO_GET}")
    return data


def refuse_to_replace(dest: Path) -> FileState:
    """The state of ``dest`` (for ``write_bytes_atomically``'s ``unchanged``) if a fetched
    story file may replace it: nothing there, an empty file, or a story file (the rule of
    every memstore export, memstore.export_file.foreign_file); else RomError, in one line,
    before anything is downloaded. A folder, device or FIFO is refused as exports refuse
    it (OSError)."""
    from memstore.export_file import check_target, file_head, file_state, foreign_file

    check_target(dest)
    state = file_state(dest)
    if not state.present or state.size == 0:
        return state
    force = "pass --force to replace it"
    try:
        data = file_head(dest, MAX_ROM_BYTES + 1)
    except OSError as exc:
        raise RomError(
            f"cannot read {dest}: {exc.strerror or exc}; cannot tell whether it is a story "
            f"file: {force}"
        ) from exc
    # bytes as latin-1 characters, one each, for the rule's "empty" (whitespace only)
    if foreign_file(data.decode("latin-1"), lambda body: is_story_file(body.encode("latin-1"))):
        raise RomError(f"{dest} exists and is not a Z-machine story file: {force}")
    return state


def candidate_paths(path: str | Path | None = None) -> list[tuple[str, Path]]:
    """Where ``find_rom`` looks, in order, as (where it came from, path)."""
    found: list[tuple[str, Path]] = []
    if path is not None:
        found.append(("the given path", Path(path)))
    env_value = os.environ.get(ROM_ENV_VAR)
    if env_value:
        found.append((f"${ROM_ENV_VAR}", Path(env_value).expanduser()))
    cwd_rom = Path.cwd() / ROM_RELATIVE_PATH
    found.append(("the working directory", cwd_rom))
    root_rom = REPO_ROOT / ROM_RELATIVE_PATH
    if root_rom.resolve() != cwd_rom.resolve():
        found.append(("the repository root", root_rom))
    return found


def find_rom(path: str | Path | None = None, *, verify: bool = True) -> Path:
    """Return the Zork I story file's path, or raise RomError saying what to do.

    An explicit ``path`` or a set ``MEMSTORE_ROM`` is authoritative: if it names no file,
    that is an error (no silent fall-back to another copy). With ``verify`` the file's
    sha256 must be release 119's.
    """
    for source, candidate in candidate_paths(path):
        if candidate.is_file():
            return verify_rom(candidate) if verify else candidate
        if source == "the given path" or source == f"${ROM_ENV_VAR}":
            raise RomError(f"{source} {candidate} is not a file. {HOW_TO_GET}")
    searched = ", ".join(str(c) for _, c in candidate_paths(path))
    raise RomError(f"The Zork I story file was not found (looked at {searched}). {HOW_TO_GET}")


def fetch_rom(
    dest: str | Path,
    url: str = UPSTREAM_URL,
    *,
    expected_sha256: str = ZORK1_SHA256,
    timeout: float = DEFAULT_TIMEOUT,
    force: bool = False,
) -> Path:
    """Download the story file to ``dest``, check its sha256, write it atomically.

    An existing ``dest`` that is not a story file (notes, a database) is refused before
    anything is downloaded, unless ``force`` (``refuse_to_replace``). The bytes go to a
    temporary file beside ``dest``, are fsync'd and renamed into place only when the
    checksum matches: a failed or wrong download never leaves a file at ``dest`` (an
    existing good file there is left as it was).
    """
    dest = Path(dest)
    unchanged = None if force else refuse_to_replace(dest)
    shown = url if url.isprintable() else repr(url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            data = response.read(MAX_ROM_BYTES + 1)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise RomError(
            f"Could not download {shown}: {exc}. Check the network, or set "
            f"{ROM_ENV_VAR}=/path/to/zork1.z3 to a copy whose sha256 is {expected_sha256}."
        ) from exc
    digest = sha256_of(data)
    if len(data) > MAX_ROM_BYTES or digest != expected_sha256:
        raise RomError(
            f"The file downloaded from {shown} is not Zork I release 119 (sha256 {digest}, "
            f"expected {expected_sha256}); nothing was written to {dest}. Try again later, "
            f"or set {ROM_ENV_VAR}=/path/to/zork1.z3 to a copy you have checked."
        )
    from memstore.export_file import write_bytes_atomically

    return write_bytes_atomically(dest, data, unchanged=unchanged)
