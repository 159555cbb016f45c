"""Helpers of the adversarial review of the PostgreSQL backend (tests/test_pg_*.py), which
the answer watch's review uses too: where the stores live (a schema of their own in the
session's cluster, or a cluster of the test's own), the review's note(), and the memstore
command in another process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_cluster import PgCluster, PgClusterError, require_or_skip
from pg_cluster import unavailable_reason as pg_unavailable

from memstore.models import Memory

MEMSTORE = Path(sys.executable).with_name("memstore")


@pytest.fixture
def cluster(pg_cluster: PgCluster) -> PgCluster:
    """The session's shared throwaway cluster (fast, not durable; conftest's pg_cluster)."""
    return pg_cluster


def _schema_url(cluster: PgCluster) -> str:
    """A new empty schema in one database of the cluster, as a memstore URL."""
    return cluster.schema_url("pg_attacks")


@pytest.fixture
def pg_url(cluster: PgCluster) -> str:
    """A new, empty memstore database on the server (a schema of its own)."""
    return _schema_url(cluster)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[PgCluster]:
    """A cluster of this test's own, which it may restart or stop."""
    reason = pg_unavailable()
    if reason is not None:
        require_or_skip(reason)
    try:
        started = PgCluster.start(tmp_path)
    except PgClusterError as exc:
        require_or_skip(f"a PostgreSQL cluster did not start: {exc}")
    try:
        yield started
    finally:
        started.stop()


def note(title: str, persistence: str = "permanent", **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "category": "NOTE",
        "title": title,
        "text": f"What we learned: {title}.",
        "episode": 1,
        "turns": "3",
        "persistence": persistence,
    }
    values.update(fields)
    return Memory(**values)


def memstore(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMSTORE), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        check=False,
    )
