"""Where the alembic migrations are, installed or in a checkout, and what they contain.

The repository keeps them in its top-level ``migrations/`` folder; the package installs
that folder as ``memstore.migrations`` (``[tool.setuptools.package-dir]`` in
pyproject.toml), so an installed memstore can upgrade a database from any directory
(``memstore db upgrade``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["known_revisions", "migrations_path", "newer_revision"]

_REVISION = re.compile(r'^revision\s*=\s*"([^"]+)"', re.MULTILINE)
_DOWN = re.compile(r'^down_revision\s*=\s*(?:"([^"]*)"|None)', re.MULTILINE)


@cache
def migrations_path() -> Path:
    """The folder holding alembic's ``env.py`` and ``versions/``: the one that belongs to
    the imported package. Installed, it is the package's ``migrations`` folder; in a
    checkout (an editable install, or the tree on ``PYTHONPATH``), the ``migrations/``
    beside the package. Only when neither is there is the import system asked
    (``memstore.migrations`` as a resource), which an editable install of ANOTHER tree
    would answer with that tree's migrations."""
    package = Path(__file__).resolve().parent
    for folder in (package / "migrations", package.parent / "migrations"):
        if (folder / "env.py").is_file():
            return folder
    try:
        installed = Path(str(resources.files("memstore.migrations")))
    except (ModuleNotFoundError, TypeError):
        installed = None
    if installed is not None and (installed / "env.py").is_file():
        return installed
    raise FileNotFoundError("memstore's migrations are not installed with this package")


@cache
def known_revisions() -> tuple[str, ...]:
    """Every revision id, oldest first, read from the migration files (no hand-kept list)."""
    following: dict[str | None, str] = {}
    for script in (migrations_path() / "versions").glob("*.py"):
        text = script.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is not None and down is not None:
            following[down.group(1) or None] = revision.group(1)
    chain: list[str] = []
    current = following.get(None)
    while current is not None and current not in chain:
        chain.append(current)
        current = following.get(current)
    return tuple(chain)


def newer_revision(version: str) -> bool:
    """Whether ``version``, a revision this memstore does not know, is a later memstore's:
    numbered as memstore numbers them (four digits) and past the newest known. Anything
    else (blank, padded, another project's id) is no memstore's revision (review S6 C F6:
    it was called "newer")."""
    known = known_revisions()
    return (
        len(version) == 4
        and version.isascii()
        and version.isdigit()
        and bool(known)
        and int(version) > int(known[-1])
    )
