"""A process whose model call was abandoned at its deadline exits promptly.

The call's daemon thread was left running: at exit the interpreter froze it wherever it
was, and one frozen inside an import (litellm imports hundreds of modules during its first
call) held the import lock forever, so the finalization's next import (litellm's client
``__del__``) hung the process (about one run in two). memstore.llm_threads ends those
threads at exit: their connections shut down, new ones refused, waited for briefly.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memstore import llm_threads
from memstore.llm import LLMDeadlineExceeded, call_with_deadline

#: how long after its call timed out a process may take to exit (EXIT_WAIT and a margin)
EXIT_BOUND = llm_threads.EXIT_WAIT + 10.0  # a loaded host exits litellm slowly
#: processes run, and at once
PROCESSES = 6
AT_ONCE = 2

#: a process that calls litellm through memstore against a server that never answers,
#: with a deadline that passes during litellm's first-call imports, then exits
CHILD = textwrap.dedent(
    """
    import faulthandler, socket, sys
    from memstore.config import MemstoreConfig
    from memstore.llm import LiteLLMCompletion, LLMDeadlineExceeded

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel accepts; nobody ever reads or answers
    config = MemstoreConfig(
        model="openai/fake-model",
        api_base=f"http://127.0.0.1:{listener.getsockname()[1]}/v1",
        api_key="test",
        timeout=float(sys.argv[1]),
        num_retries=0,
    )
    llm = LiteLLMCompletion(config)
    try:
        llm([{"role": "user", "content": "Location: Clearing (ID: 3)"}])
    except LLMDeadlineExceeded:
        print("timed out", flush=True)
    # a hung exit prints every thread's stack and ends the process
    faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
    """
)


def exit_seconds(folder: Path, timeout: float) -> tuple[float | None, str]:
    """Run CHILD; the seconds from its call's timeout to its exit (None: it never exited),
    and its stderr."""
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(timeout), str(EXIT_BOUND + 1)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        timed_out = time.monotonic()
        try:
            process.wait(EXIT_BOUND + 10)  # a hung child dumps its stacks and exits first
            seconds: float | None = time.monotonic() - timed_out
        except subprocess.TimeoutExpired:
            seconds = None
    finally:
        process.kill()
        _, stderr = process.communicate()
    assert line == "timed out\n", f"the call did not time out: {line!r}\n{stderr}"
    return seconds, stderr


@pytest.mark.slow
def test_a_process_whose_call_timed_out_mid_import_exits_promptly(tmp_path: Path) -> None:
    with ThreadPoolExecutor(AT_ONCE) as pool:
        runs = list(pool.map(lambda _: exit_seconds(tmp_path, 0.02), range(PROCESSES)))
    hung = [stderr for seconds, stderr in runs if seconds is None or seconds > EXIT_BOUND]
    assert not hung, f"{len(hung)} of {PROCESSES} processes hung at exit:\n{hung[0][-3000:]}"


# --- the exit handler itself, in this process ----------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[socket.socket]:
    """A server on 127.0.0.1 that accepts and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener


def abandoned(function: object, *, connections: bool) -> None:
    """``function`` started as a call and abandoned at its deadline."""
    with pytest.raises(LLMDeadlineExceeded):
        call_with_deadline(function, {}, 0.05, connections=connections)


def test_at_exit_an_abandoned_attempts_connection_is_shut_down(
    silent_server: socket.socket,
) -> None:
    read: list[bytes] = []
    finished = threading.Event()

    def attempt() -> None:
        try:
            with socket.create_connection(silent_server.getsockname(), timeout=30) as sock:
                read.append(sock.recv(1))  # blocks: the server never answers
        finally:
            finished.set()

    abandoned(attempt, connections=True)
    started = time.monotonic()
    llm_threads.end_calls_at_exit(wait=2.0)
    assert finished.wait(2.0)
    assert time.monotonic() - started < 1.0  # not the socket's 30 s timeout
    assert read == [b""]  # the connection was shut down under the blocked read


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a certificate")
def test_at_exit_an_abandoned_attempts_tls_connection_is_shut_down(tmp_path: Path) -> None:
    """A TLS socket takes over the connected socket's file descriptor (``detach``)."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        + ["-nodes", "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-keyout", "key.pem", "-out", "cert.pem"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_context = ssl.create_default_context()
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    stop = threading.Event()
    read: list[bytes] = []
    connected = threading.Event()
    finished = threading.Event()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)

        def serve() -> None:  # the handshake, then silence
            connection, _ = listener.accept()
            with server_context.wrap_socket(connection, server_side=True):
                stop.wait(10)

        def attempt() -> None:
            try:
                plain = socket.create_connection(listener.getsockname(), timeout=30)
                with client_context.wrap_socket(plain) as sock:
                    connected.set()
                    read.append(sock.recv(1))  # blocks: the server never answers
            finally:
                finished.set()

        threading.Thread(target=serve, daemon=True).start()
        try:
            abandoned(attempt, connections=True)
            assert connected.wait(5.0)  # the handshake is over
            llm_threads.end_calls_at_exit(wait=2.0)
            assert finished.wait(2.0)
        finally:
            stop.set()
    assert read == [b""]


def test_at_exit_an_abandoned_attempt_opens_no_connection(silent_server: socket.socket) -> None:
    go = threading.Event()
    errors: list[BaseException] = []

    def attempt() -> None:
        go.wait(5)
        try:
            socket.create_connection(silent_server.getsockname(), timeout=5).close()
        except OSError as exc:
            errors.append(exc)

    abandoned(attempt, connections=True)
    ender = threading.Thread(target=llm_threads.end_calls_at_exit, kwargs={"wait": 2.0})
    ender.start()
    time.sleep(0.1)  # the handler has marked the call
    go.set()
    ender.join(5)
    assert len(errors) == 1 and isinstance(errors[0], ConnectionAbortedError)


def test_an_abandoned_call_starts_no_other_once_the_process_exits() -> None:
    go = threading.Event()
    outcome: list[BaseException | str] = []

    def call() -> None:
        go.wait(5)
        try:
            outcome.append(call_with_deadline(lambda: "answer", {}, 5.0))
        except LLMDeadlineExceeded as exc:
            outcome.append(exc)

    abandoned(call, connections=False)
    ender = threading.Thread(target=llm_threads.end_calls_at_exit, kwargs={"wait": 2.0})
    ender.start()
    time.sleep(0.1)
    go.set()
    ender.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], LLMDeadlineExceeded)
    assert "exiting" in str(outcome[0])


def test_a_call_of_someone_elses_is_waited_for_never_cut(silent_server: socket.socket) -> None:
    """Only a litellm attempt's connections are shut down; a caller's own callable is only
    waited for, up to the bound."""
    read: list[bytes] = []
    release = threading.Event()

    def callable_of_the_caller() -> None:
        with socket.create_connection(silent_server.getsockname(), timeout=5) as sock:
            sock.settimeout(0.05)
            while not release.is_set():
                try:
                    read.append(sock.recv(1))
                except TimeoutError:
                    continue
                break

    abandoned(callable_of_the_caller, connections=False)
    started = time.monotonic()
    still_running = llm_threads.end_calls_at_exit(wait=0.3)
    assert 0.25 <= time.monotonic() - started < 2.0
    assert still_running >= 1 and read == []  # its connection is untouched
    release.set()
