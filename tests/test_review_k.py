"""Review C's findings fixed outside the helpers' files: a password given as a URL query
parameter is never shown (finding 6)."""

from __future__ import annotations

import socket

import pytest

from memstore.connection import resolve_target
from tests.cli_helpers import one_error_line, run


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres@127.0.0.1:5432/m1?password=hunter2",
        "postgresql+psycopg:///m1?host=127.0.0.1&user=postgres&PASSWORD=hunter2&port=5432",
        "postgresql+psycopg://postgres:hunter2@127.0.0.1/m1?sslpassword=hunter2",
    ],
)
def test_a_password_in_the_url_query_is_never_shown(url: str) -> None:
    shown = resolve_target(url).display
    assert "hunter2" not in shown and "***" in shown
    assert "127.0.0.1" in shown and "m1" in shown


def test_a_url_that_does_not_parse_hides_its_query_password() -> None:
    from memstore.errors import UnsupportedDatabase

    with pytest.raises(UnsupportedDatabase) as raised:
        resolve_target("postgresql+psycopg://host:notaport/db?password=hunter2")
    assert "hunter2" not in str(raised.value)


def test_a_refused_connection_never_prints_the_query_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/m1?password=hunter2"

    code, out, err = run(capsys, "--db", url, "stats")

    assert code == 1
    line = one_error_line(err, "127.0.0.1")
    assert "hunter2" not in line and "hunter2" not in out


def test_upgrades_run_at_once_on_a_server_upgrade_it_once_and_the_others_say_so(
    pg_database: str,
) -> None:
    """Three `memstore db upgrade` at once on a new PostgreSQL database (finding 9): they
    wait on the migration's lock, held here until all three are waiting. The first to get
    it upgrades from base; the others read the revision again under the lock and find it
    at head ("nothing to do"), rather than each claiming an upgrade from base."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from sqlalchemy import create_engine, text

    from memstore.connection import HEAD_REVISION
    from memstore.pg_connection import write_lock_key

    engine = create_engine(pg_database)
    try:
        with engine.connect() as holder:
            schema = holder.execute(text("SELECT current_schema()")).scalar()
            holder.execute(text(f"SELECT pg_advisory_lock({write_lock_key(str(schema))})"))
            runs = [
                subprocess.Popen(
                    [
                        str(Path(sys.executable).with_name("memstore")),
                        "--db",
                        pg_database,
                        "--busy-timeout",
                        "60",
                        "db",
                        "upgrade",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
                )
                for _ in range(3)
            ]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # all three waiting on the lock
                waiting = holder.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    )
                ).scalar()
                if waiting == 3:
                    break
                time.sleep(0.1)
            assert waiting == 3
            holder.execute(text(f"SELECT pg_advisory_unlock({write_lock_key(str(schema))})"))
            holder.commit()
        outputs = [run.communicate(timeout=120) for run in runs]
    finally:
        engine.dispose()
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    stdouts = [out for out, _err in outputs]
    assert sum("revision before: base" in out for out in stdouts) == 1, stdouts
    assert sum("nothing to do" in out for out in stdouts) == 2, stdouts
    assert all(f"revision after: {HEAD_REVISION}" in out for out in stdouts), stdouts


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://postgres:hunter2@127.0.0.1:5432/m1",  # a server URL written sqlite://
        "sqlite:///x.db?password=hunter2",
    ],
)
def test_a_sqlite_url_refusal_never_shows_a_password(url: str) -> None:
    """Review D, D5: the two sqlite:// refusals printed the URL as given."""
    from memstore.errors import UnsupportedDatabase

    with pytest.raises(UnsupportedDatabase) as raised:
        resolve_target(url)
    assert "hunter2" not in str(raised.value)


def test_a_password_holding_an_unencoded_at_sign_is_masked_whole() -> None:
    shown = resolve_target("postgresql+psycopg://postgres:hun@ter2@127.0.0.1:5432/m1").display
    assert "hun" not in shown and "ter2" not in shown, shown


def test_the_target_s_repr_never_shows_a_query_password() -> None:
    target = resolve_target("postgresql+psycopg://postgres@127.0.0.1:5432/m1?password=hunter2")
    assert "hunter2" not in repr(target) and "127.0.0.1" in repr(target)
