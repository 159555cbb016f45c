"""The command line on a PostgreSQL URL (issue 18): --db takes a database path or URL, and
`memstore db current` reads a server's revision without creating anything."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect

from memstore.connection import HEAD_REVISION
from tests.cli_helpers import run


@pytest.fixture
def url(pg_database: str) -> str:
    """A new, empty database of the test's own (conftest's pg_database)."""
    return pg_database


def table_names(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return inspect(conn).get_table_names()
    finally:
        engine.dispose()


def test_db_current_reads_a_server_s_revision_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, out, err = run(capsys, "--db", url, "db", "current")
    assert (code, err) == (0, ""), err
    assert "base: no schema yet (run `memstore db upgrade`)" in out
    assert table_names(url) == []  # current wrote nothing
    code, _out, err = run(capsys, "--db", url, "db", "upgrade")
    assert code == 0, err
    code, out, err = run(capsys, "db", "current", "--db", url)
    assert (code, err) == (0, ""), err
    assert f"{HEAD_REVISION} (head)" in out
    code, out, err = run(capsys, "--db", url, "stats")
    assert (code, err) == (0, ""), err
    assert "locations: 0" in out


def test_a_server_that_cannot_be_reached_is_one_error_line(
    capsys: pytest.CaptureFixture[str], pg_cluster: object
) -> None:
    unreachable = "postgresql+psycopg://memstore:secret-pw@127.0.0.1:1/memstore"
    for argv in (["db", "current"], ["stats"], ["show", "1"], ["db", "upgrade"]):
        code, _out, err = run(capsys, "--db", unreachable, *argv)
        assert code == 1 and err.count("\n") == 1, (argv, err)
        assert err.startswith("memstore: error: ") and "secret-pw" not in err, err
