"""Making a file or folder read-only for a test, and writable again afterwards.

As root, permission bits do not stop a write: the path is made immutable (``chattr +i``)
instead; as another user its write bits are removed. A machine where neither works skips
the test, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def lock(path: Path) -> None:
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: nothing can make a file read-only")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"this file system has no immutable flag: {done.stderr.strip()}")
    else:
        path.chmod(0o555 if path.is_dir() else 0o444)


def unlock(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    else:
        path.chmod(0o755 if path.is_dir() else 0o644)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` read-only for the ``with`` block, always writable again after it."""
    lock(path)
    try:
        yield path
    finally:
        unlock(path)
