"""Reaching a PostgreSQL memstore database: roles and privileges, URLs and passwords,
schemas, and read-only access.

A role without CREATE on public or without TEMP, and one that may only read, get memstore
errors; a URL that cannot be parsed, a wrong password or a missing database never print
the password (nor does `eval` make a folder named after the URL); a URL naming a missing
schema is a memstore error, and two memstore databases in two schemas do not block each
other; a read-only open of an empty database says there is no memstore database, and the
read-only commands work on a hot standby.

A test that takes ``database`` runs on SQLite and PostgreSQL (tests/conftest.py), so the
SQLite run shows what the same call does there. Part of the adversarial review of the
PostgreSQL backend (issue 18): tests that fail are defects found; tests that pass prove a
property that held under attack.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from conftest import write_lock_held
from pg_cluster import PgCluster

from memstore.errors import (
    DatabaseUnavailable,
    MemstoreError,
    NotAMemstoreDatabase,
    ReadOnlyDatabase,
)
from memstore.store import MemoryStore
from tests.pg_attack_helpers import MEMSTORE, _schema_url, memstore, note
from tests.pg_attack_helpers import cluster as cluster  # a fixture
from tests.pg_attack_helpers import own_cluster as own_cluster  # a fixture

pytestmark = pytest.mark.slow


# =============================================================================================
# Defects found by the review: each failed before its fix
# =============================================================================================


def test_read_only_open_of_an_empty_database_says_there_is_no_memstore_database(
    database: str | Path,
) -> None:
    # SQLite: NotAMemstoreDatabase "no memstore database at PATH"; PostgreSQL before the fix:
    # ReadOnlyDatabase "read-only database: URL; nothing was written" (what `memstore stats`,
    # `show`, `check` and `export` print on an empty server database too)
    with pytest.raises(NotAMemstoreDatabase):
        MemoryStore.open(database, read_only=True)


def test_two_memstore_databases_in_two_schemas_do_not_block_each_other(
    cluster: PgCluster,
) -> None:
    one_url, other_url = _schema_url(cluster), _schema_url(cluster)
    with MemoryStore.open(one_url) as one, MemoryStore.open(other_url, busy_timeout_s=0.5) as other:
        with write_lock_held(one):
            # was: StoreBusy naming the other schema's URL (one advisory lock per database)
            assert other.add_memory(1, "Elsewhere", note("Independent"))


def test_a_url_that_cannot_be_parsed_never_prints_its_password() -> None:
    result = memstore("--db", "postgresql+psycopg://agent:S3cret-pw@127.0.0.1:notaport/db", "stats")
    assert result.returncode == 1
    assert "S3cret-pw" not in result.stderr + result.stdout, result.stderr


def test_a_role_without_create_on_public_gets_a_memstore_error(cluster: PgCluster) -> None:
    # PostgreSQL 15 no longer lets every role create tables in schema public: the fleet's
    # agents logging in as a role that does not own the database meet this first
    name, role = f"noowner_{uuid.uuid4().hex[:10]}", f"agent_{uuid.uuid4().hex[:10]}"
    url = cluster.create_database(name)
    with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        with pytest.raises(MemstoreError):  # was: sqlalchemy ProgrammingError with the DDL
            MemoryStore.open(url.replace("postgres@", f"{role}@"))
    finally:
        cluster.drop_database(name)
        with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP ROLE "{role}"')


def test_a_role_that_may_only_read_gets_read_only_database_on_a_write(cluster: PgCluster) -> None:
    name, role = f"readers_{uuid.uuid4().hex[:10]}", f"reader_{uuid.uuid4().hex[:10]}"
    url = cluster.create_database(name)
    MemoryStore.open(url).close()
    with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    with psycopg.connect(cluster.conninfo(name), autocommit=True) as owner:
        owner.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        with MemoryStore.open(url.replace("postgres@", f"{role}@")) as store:
            # SQLite: a database the process cannot write is ReadOnlyDatabase; PostgreSQL was:
            # psycopg.errors.InsufficientPrivilege (and `memstore` prints "internal error")
            with pytest.raises(ReadOnlyDatabase):
                store.add_memory(1, "Here", note("Not allowed"))
    finally:
        cluster.drop_database(name)
        with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP ROLE "{role}"')


def test_a_url_naming_a_schema_that_does_not_exist_is_a_memstore_error(cluster: PgCluster) -> None:
    cluster_url = _schema_url(cluster).split("?")[0]
    missing = f"{cluster_url}?options=-csearch_path%3Dno_such_schema_{uuid.uuid4().hex[:8]}"
    # was: sqlalchemy ProgrammingError (DuplicateTable "memories": the search path became
    # "None", pg_temp, and the schema was being created among the temporary tables)
    with pytest.raises(MemstoreError):
        MemoryStore.open(missing)


# =============================================================================================
# Properties that held
# =============================================================================================


def test_wrong_password_and_missing_database_are_one_line_without_the_password(
    own_cluster: PgCluster,
) -> None:
    hba = own_cluster.data / "pg_hba.conf"
    hba.write_text(
        "host all pwuser 127.0.0.1/32 scram-sha-256\n" + hba.read_text(), encoding="utf-8"
    )
    with psycopg.connect(own_cluster.conninfo("postgres"), autocommit=True) as admin:
        admin.execute("CREATE ROLE pwuser LOGIN PASSWORD 'right-pw'")
        admin.execute("CREATE DATABASE pwdb OWNER pwuser")
        admin.execute("SELECT pg_reload_conf()")
    base = f"postgresql+psycopg://pwuser:%s@127.0.0.1:{own_cluster.port}/%s"
    for url, reason in (
        (base % ("wr0ng-pw", "pwdb"), "password authentication failed"),
        (base % ("right-pw", "no_such_db"), 'database "no_such_db" does not exist'),
    ):
        with pytest.raises(DatabaseUnavailable, match=reason) as raised:
            MemoryStore.open(url)
        assert "\n" not in str(raised.value) and "-pw" not in str(raised.value)
        result = memstore("--db", url, "show", "1")
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "-pw" not in result.stderr and reason in result.stderr


def test_a_role_without_the_temp_privilege_gets_a_memstore_error(cluster: PgCluster) -> None:
    # `REVOKE TEMP ON DATABASE ... FROM PUBLIC` is common hardening; the ephemeral tier's
    # temporary tables are made at connect, for read-only commands too (`memstore stats`)
    name, role = f"notemp_{uuid.uuid4().hex[:10]}", f"agent_{uuid.uuid4().hex[:10]}"
    url = cluster.create_database(name)
    with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'REVOKE TEMP ON DATABASE "{name}" FROM PUBLIC')
    with psycopg.connect(cluster.conninfo(name), autocommit=True) as owner:
        owner.execute(f'CREATE SCHEMA app AUTHORIZATION "{role}"')
    agent_url = url.replace("postgres@", f"{role}@") + "?options=-csearch_path%3Dapp"
    try:
        # was: sqlalchemy ProgrammingError "permission denied to create temporary tables"
        with pytest.raises(MemstoreError):
            MemoryStore.open(agent_url)
    finally:
        cluster.drop_database(name)
        with psycopg.connect(cluster.conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP ROLE "{role}"')


def test_eval_given_a_server_url_never_makes_a_folder_named_after_it(tmp_path: Path) -> None:
    rom = os.environ.get("MEMSTORE_ROM") or str(Path(__file__).parents[2] / "shared/roms/zork1.z3")
    if not Path(rom).is_file():
        pytest.skip("no Zork I story file (set MEMSTORE_ROM)")
    url = "postgresql+psycopg://agent:S3cret-pw@127.0.0.1:5432/fleet"
    subprocess.run(
        [str(MEMSTORE), "eval", "--episodes", "1", "--moves", "3", "--seeds", "1"]
        + ["--rom", rom, "--db", url],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    # was: it plays on SQLite files under ./postgresql+psycopg:/agent:S3cret-pw@127.0.0.1:5432/
    # fleet/, writing the password into the file system, and says nothing about it
    made = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")]
    assert not any("S3cret-pw" in name for name in made), made


def test_read_only_commands_work_on_a_hot_standby(own_cluster: PgCluster, tmp_path: Path) -> None:
    # a reviewer reading a read replica of the fleet's database (show, stats, export)
    url = own_cluster.create_database("replicated")
    with MemoryStore.open(url) as store:
        assert store.add_memory(79, "Kitchen", note("Sack of food"))
    with own_cluster.hot_standby() as port:
        replica = url.replace(f":{own_cluster.port}/", f":{port}/")
        # was: DatabaseUnavailable "the ephemeral tier (this agent's temporary tables)
        # could not be made: cannot execute CREATE TABLE in a read-only transaction (the
        # role needs the TEMP privilege on the database)"; before that, a raw error
        with MemoryStore.open(replica, read_only=True) as reader:
            assert reader.tiers == ("persistent",)
            assert [m.title for m in reader.memories(79)] == ["Sack of food"]
            assert "Sack of food" in reader.get_location_memory(79)
            assert reader.get_ephemeral_count() == 0 and reader.get_persistent_count(79) == 1
            assert [m.title for m in reader.history(79, "Sack of food")] == ["Sack of food"]
            with pytest.raises(ReadOnlyDatabase, match="read-only"):
                reader.add_memory(79, "Kitchen", note("Lunch", "ephemeral"))
            with pytest.raises(ReadOnlyDatabase, match="read-only"):
                reader.reset_episode()
        for command in (("show", "79"), ("stats",), ("check",), ("export", "--out", "-")):
            done = memstore("--db", replica, *command)
            assert done.returncode == 0, (command, done.stderr)
        reviewed = tmp_path / "Memories.md"
        reviewed.write_text(
            memstore("--db", replica, "export", "--out", "-").stdout.replace(
                "What we learned: Sack of food.", "The sack holds a lunch."
            )
        )
        planned = memstore("--db", replica, "import", str(reviewed))  # a dry run: it reads
        assert planned.returncode == 0 and "changed 1" in planned.stdout, planned.stderr
        shown = memstore("--db", replica, "show", "79")
        assert "Sack of food" in shown.stdout, shown.stderr
