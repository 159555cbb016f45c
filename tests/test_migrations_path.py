"""The migrations are the imported package's own.

Was: ``migrations_path`` asked the import system for ``memstore.migrations`` first, and an
editable install of one tree answered for a checkout of another tree run from
``PYTHONPATH``: ``memstore db upgrade`` from that checkout applied the other tree's newer
revisions, and every other command of the checkout then refused the database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import memstore
from memstore.migrations_dir import migrations_path

ROOT = Path(memstore.__file__).resolve().parent.parent


def test_the_migrations_are_beside_the_imported_package() -> None:
    package = Path(memstore.__file__).resolve().parent
    assert migrations_path() in (package / "migrations", package.parent / "migrations")
    assert (migrations_path() / "env.py").is_file()


def test_a_checkout_on_pythonpath_uses_its_own_migrations(tmp_path: Path) -> None:
    tree = tmp_path / "other"
    for name in ("memstore", "exporters", "migrations"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import memstore, memstore.migrations_dir as m; "
            "print(memstore.__file__); print(m.migrations_path())",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.splitlines()
    assert found == [str(tree / "memstore" / "__init__.py"), str(tree / "migrations")]
