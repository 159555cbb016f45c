"""A throwaway PostgreSQL cluster for the tests and the fleet benchmark (issue 18).

    cluster = PgCluster.start(tmp_folder)            # initdb + pg_ctl start, on a free port
    url = cluster.create_database("fleet")           # postgresql+psycopg://postgres@127.0.0.1:P/fleet
    ...
    cluster.stop()                                   # pg_ctl stop -m immediate, folder removed

The server binaries (initdb, pg_ctl, postgres) are found under /usr/lib/postgresql/*/bin
(the newest version) or on PATH. PostgreSQL refuses to run as root, so when this process is
root the binaries run as the ``postgres`` user (``runuser -u postgres --``) in folders it
owns; otherwise they run as this user. Authentication is ``trust`` and the server listens
on 127.0.0.1 only.

A cluster started for the tests is fast and not durable (fsync, synchronous_commit and
full_page_writes off: a crash of the machine may lose it, which a test never minds);
``durable=True`` turns all three on, for the benchmark's durable writes.

Where no cluster can be started, ``unavailable_reason()`` says why and ``require_or_skip``
skips the test with that reason, or fails it when ``MEMSTORE_REQUIRE_POSTGRES=1`` (CI sets
it, so a machine without PostgreSQL fails CI instead of silently skipping).

This module lives in tests/, outside the installed package; the benchmark imports it by path.
"""

from __future__ import annotations

import atexit
import functools
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

__all__ = [
    "REQUIRE_VARIABLE",
    "PgCluster",
    "PgClusterError",
    "find_binaries",
    "require_or_skip",
    "shared_cluster",
    "unavailable_reason",
]

#: set to 1 (as .ci/run does) to turn "PostgreSQL is unavailable" skips into failures
REQUIRE_VARIABLE = "MEMSTORE_REQUIRE_POSTGRES"
#: the server's user when this process is root
SERVER_USER = "postgres"
_BINARIES = ("initdb", "pg_ctl", "postgres")
#: enough for the fleet test (8 agents), the benchmark (8 agents) and a test session's stores
MAX_CONNECTIONS = 100
_START_ATTEMPTS = 3
_SECONDS = 60
#: a Unix socket's path must fit in 107 bytes (sun_path): ".s.PGSQL.65535" and the folder
_SOCKET_PATH_MAX = 100


class PgClusterError(RuntimeError):
    """The cluster could not be created, started or stopped (the message has the log's tail)."""


def _version_key(folder: str) -> tuple[int, ...]:
    """/usr/lib/postgresql/15/bin -> (15,): so that 15 sorts after 9.6."""
    version = Path(folder).parent.name
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def find_binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: the newest /usr/lib/postgresql/*/bin
    that has all three, else the folder on PATH that does; None when there is none."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    on_path = shutil.which("initdb")
    if on_path is not None:
        candidates.append(str(Path(on_path).resolve().parent))
    for folder in candidates:
        if all(os.access(Path(folder, name), os.X_OK) for name in _BINARIES):
            return Path(folder)
    return None


def _as_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def unavailable_reason() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    binaries = find_binaries()
    if binaries is None:
        return (
            "no PostgreSQL server binaries (initdb, pg_ctl, postgres) under "
            "/usr/lib/postgresql/*/bin or on PATH (Debian: apt-get install postgresql-15)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg (version 3) is not installed: pip install -e '.[dev]'"
    if _as_root():
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return (
                f"running as root, and PostgreSQL refuses to run as root, but there is no "
                f"{SERVER_USER!r} user to run it as"
            )
        if shutil.which("runuser") is None:
            return f"running as root, and there is no runuser to run PostgreSQL as {SERVER_USER!r}"
        probe = subprocess.run(
            ["runuser", "-u", SERVER_USER, "--", str(binaries / "initdb"), "--version"],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=_SECONDS,
        )
        if probe.returncode != 0:
            return (
                f"running as root, and runuser cannot run initdb as {SERVER_USER!r}: "
                f"{(probe.stderr or probe.stdout).strip()}"
            )
    return None


def require_or_skip(reason: str) -> NoReturn:
    """Skip the calling test because PostgreSQL is unavailable, saying why, loudly; fail it
    instead when MEMSTORE_REQUIRE_POSTGRES=1."""
    import pytest

    message = f"PostgreSQL unavailable: {reason}"
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{message} ({REQUIRE_VARIABLE}=1 requires PostgreSQL)", pytrace=False)
    pytest.skip(f"SKIPPING THE POSTGRESQL TESTS: {message} (set {REQUIRE_VARIABLE}=1 to fail)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_command(binaries: Path, name: str, *args: str) -> list[str]:
    """The command running one server binary: as the postgres user when we are root."""
    command = [str(binaries / name), *args]
    if _as_root():
        return ["runuser", "-u", SERVER_USER, "--", *command]
    return command


def _give_to_server_user(*folders: Path) -> None:
    if _as_root():
        user = pwd.getpwnam(SERVER_USER)
        for folder in folders:
            os.chown(folder, user.pw_uid, user.pw_gid)


def _server_can_enter(folder: Path) -> bool:
    """Whether the server's user can reach ``folder`` (pytest's tmp folders are root's 0700)."""
    if not _as_root():
        return True
    probe = ["runuser", "-u", SERVER_USER, "--", "test", "-x", str(folder)]
    return subprocess.run(probe, capture_output=True, cwd="/", timeout=_SECONDS).returncode == 0


class PgCluster:
    """One running PostgreSQL cluster in a folder of its own; ``stop()`` removes it all."""

    def __init__(self, binaries: Path, folder: Path, port: int, *, durable: bool) -> None:
        """Use ``PgCluster.start``."""
        self.binaries = binaries
        self.folder = folder
        self.data = folder / "data"
        self.sockets = folder / "sockets"
        if len(str(self.sockets / ".s.PGSQL.65535")) > _SOCKET_PATH_MAX:  # a deep base folder
            self.sockets = Path(tempfile.mkdtemp(prefix="memstore-pgs-"))
        self.log = folder / "server.log"
        self.port = port
        self.durable = durable
        self.stopped = False
        self.owner = os.getpid()  # a forked child inherits the atexit hook, not the cluster

    # --- starting and stopping --------------------------------------------------------

    @classmethod
    def start(cls, base_dir: str | Path | None = None, *, durable: bool = False) -> PgCluster:
        """initdb a new cluster in a fresh folder under ``base_dir`` (else the system's
        temporary folder) and start it on a free loopback port; PgClusterError if it cannot.

        ``durable`` runs with fsync, synchronous_commit and full_page_writes on (the
        benchmark); by default they are off, which is faster and fine for tests.
        """
        reason = unavailable_reason()
        if reason is not None:
            raise PgClusterError(reason)
        binaries = find_binaries()
        assert binaries is not None  # unavailable_reason said there are
        base = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
        folder = Path(tempfile.mkdtemp(prefix="memstore-pg-", dir=base))
        os.chmod(folder, 0o755)  # mkdtemp's 0700 would keep the server's user out
        if not _server_can_enter(folder):  # inside a folder only root can enter
            shutil.rmtree(folder)
            folder = Path(tempfile.mkdtemp(prefix="memstore-pg-"))
            os.chmod(folder, 0o755)
        cluster = cls(binaries, folder, _free_port(), durable=durable)
        atexit.register(cluster._stop_at_exit)  # a failed test or a forgotten stop leaves nothing
        try:
            cluster._initdb()
            cluster._start_on_a_free_port()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = _server_command(self.binaries, name, *args)
        # cwd: the server's user may not be able to enter ours (root's home)
        return subprocess.run(
            command, capture_output=True, text=True, cwd=self.folder, timeout=_SECONDS
        )

    def _initdb(self) -> None:
        self.data.mkdir(mode=0o700)
        self.sockets.mkdir(mode=0o700, exist_ok=True)
        _give_to_server_user(self.data, self.sockets, self.folder)
        done = self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        if done.returncode != 0:
            raise PgClusterError(f"initdb failed ({done.returncode}): {done.stderr.strip()}")

    def _options(self) -> str:
        durable = "on" if self.durable else "off"
        return " ".join(
            [
                f"-k {self.sockets}",
                "-c listen_addresses='127.0.0.1'",
                f"-p {self.port}",
                f"-c max_connections={MAX_CONNECTIONS}",
                f"-c fsync={durable}",
                f"-c synchronous_commit={durable}",
                f"-c full_page_writes={durable}",
            ]
        )

    def _start_on_a_free_port(self) -> None:
        """pg_ctl start; another process may take the free port first, so try again."""
        for attempt in range(_START_ATTEMPTS):
            done = self._run(
                "pg_ctl",
                "start",
                "-w",
                "-t",
                str(_SECONDS),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                self._options(),
            )
            if done.returncode == 0:
                return
            log = self.log_tail()
            if "could not bind" in log and attempt + 1 < _START_ATTEMPTS:
                self.port = _free_port()
                continue
            raise PgClusterError(
                f"pg_ctl start failed ({done.returncode}): {done.stderr.strip()}\n{log}"
            )

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's log (readable by root, or by us as its owner)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server at once (pg_ctl stop -m immediate) and remove its folder.
        Safe to call twice, and after a failed start."""
        if self.stopped:
            return
        self.stopped = True
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))
            deadline = time.monotonic() + _SECONDS
            while (self.data / "postmaster.pid").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.sockets, ignore_errors=True)  # when it is not inside the folder

    def _stop_at_exit(self) -> None:
        if os.getpid() == self.owner:
            self.stop()

    def __enter__(self) -> PgCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def hot_standby(self, *settings: str) -> Iterator[int]:
        """A hot standby of this cluster (a streaming copy made by pg_basebackup, started
        on a free port with ``settings`` as its ``-c`` options): its port while the block
        runs; stopped at once after it."""
        standby = self.folder / "standby"
        copied = self._run(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"),
            *("-D", str(standby), "-R", "-X", "stream", "-c", "fast"),
        )
        if copied.returncode != 0:
            raise PgClusterError(f"pg_basebackup failed: {copied.stderr.strip()}")
        port = _free_port()
        options = f"-p {port} -k {self.sockets} -c listen_addresses='127.0.0.1'"
        options += "".join(f" -c {setting}" for setting in settings)
        started = self._run(
            "pg_ctl",
            *("start", "-w", "-D", str(standby), "-l", str(self.folder / "standby.log")),
            *("-o", options),
        )
        try:
            if started.returncode != 0:
                raise PgClusterError(f"the standby did not start: {started.stderr.strip()}")
            yield port
        finally:
            if (standby / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(standby))

    # --- databases ----------------------------------------------------------------------

    def url(self, dbname: str) -> str:
        """The SQLAlchemy URL of a database in this cluster."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str) -> str:
        """The libpq connection string (for psycopg.connect) of a database in this cluster."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def _admin(self, statement: str, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(name)))

    def create_database(self, name: str) -> str:
        """CREATE DATABASE ``name`` (empty, UTF8); its URL."""
        self._admin("CREATE DATABASE {}", name)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE ``name``, disconnecting whoever is still connected to it."""
        self._admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    def schema_url(self, dbname: str, *, prefix: str = "s_", query: str = "") -> str:
        """A new empty schema in database ``dbname`` (made if missing), as a memstore URL
        (each schema is a memstore database of its own); ``query`` goes before the
        search path in the URL's query."""
        import psycopg

        try:
            self.create_database(dbname)
        except psycopg.errors.DuplicateDatabase:
            pass
        schema = f"{prefix}{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.conninfo(dbname), autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        return f"{self.url(dbname)}?{query}options=-csearch_path%3D{schema}"


_shared: PgCluster | PgClusterError | None = None


def shared_cluster() -> PgCluster:
    """One fast cluster for this process (a test session), stopped when it exits; a test
    module gives each test a database of its own in it. Raises PgClusterError, every time
    once it failed (the next test does not try again)."""
    global _shared
    if _shared is None:
        try:
            _shared = PgCluster.start()
        except PgClusterError as exc:
            _shared = exc
    if isinstance(_shared, PgClusterError):
        raise _shared
    return _shared
