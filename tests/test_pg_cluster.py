"""The tests' throwaway PostgreSQL cluster (tests/pg_cluster.py): it serves separate
databases, stops leaving nothing behind, and is skipped loudly (or fails, when CI requires
it) where PostgreSQL is unavailable."""

from __future__ import annotations

from pathlib import Path

import pg_cluster  # as conftest imports it (tests/ is on sys.path)
import pytest
from pg_cluster import REQUIRE_VARIABLE, PgCluster, require_or_skip, unavailable_reason


def _start(base: Path, *, durable: bool = False) -> PgCluster:
    reason = unavailable_reason()
    if reason is not None:
        require_or_skip(reason)
    return PgCluster.start(base, durable=durable)


@pytest.mark.slow
def test_a_cluster_serves_two_isolated_databases_and_is_gone_when_stopped(tmp_path: Path) -> None:
    import psycopg

    cluster = _start(tmp_path)
    try:
        alpha = cluster.create_database("alpha")
        beta = cluster.create_database("beta")
        assert alpha == f"postgresql+psycopg://postgres@127.0.0.1:{cluster.port}/alpha"
        assert beta.endswith("/beta")
        with psycopg.connect(cluster.conninfo("alpha"), autocommit=True) as conn:
            conn.execute("CREATE TABLE notes (title text PRIMARY KEY)")
            conn.execute("INSERT INTO notes VALUES ('Mailbox here')")
            assert conn.execute("SELECT title FROM notes").fetchall() == [("Mailbox here",)]
            assert conn.execute("SHOW fsync").fetchone() == ("off",)
        with psycopg.connect(cluster.conninfo("beta"), autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('notes')").fetchone() == (None,)
        cluster.drop_database("beta")
        with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as conn:
            names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        assert "alpha" in names and "beta" not in names
    finally:
        cluster.stop()
    assert not cluster.folder.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.conninfo("postgres"), connect_timeout=2)
    cluster.stop()  # twice is harmless


@pytest.mark.slow
def test_a_durable_cluster_syncs_every_commit(tmp_path: Path) -> None:
    import psycopg

    with _start(tmp_path, durable=True) as cluster:
        with psycopg.connect(cluster.conninfo("postgres")) as conn:
            settings = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in ("fsync", "synchronous_commit", "full_page_writes")
            }
    assert settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
    assert not cluster.folder.exists()


def test_unavailable_postgresql_skips_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no server binaries"):
        require_or_skip("no server binaries")
    monkeypatch.setenv(REQUIRE_VARIABLE, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_VARIABLE}=1 requires"):
        require_or_skip("no server binaries")


def test_without_server_binaries_the_reason_says_where_it_looked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pg_cluster, "find_binaries", lambda: None)
    reason = pg_cluster.unavailable_reason.__wrapped__()
    assert reason is not None and "/usr/lib/postgresql/*/bin" in reason
