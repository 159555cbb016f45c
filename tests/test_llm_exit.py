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
import signal
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


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
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


def test_at_exit_an_attempt_on_a_pooled_connection_is_shut_down() -> None:
    """An attempt that reuses a keep-alive connection opened earlier (litellm's cached
    client, ``litellm.client_session``) opens none: its connection is still shut down."""
    httpx = pytest.importorskip("httpx")
    from tests.fake_openai_server import FakeOpenAIServer, FakeReply

    outcome: list[object] = []
    with FakeOpenAIServer([FakeReply(content="first"), FakeReply(content="late", delay=30)]) as s:
        with httpx.Client(timeout=30) as client:  # one keep-alive connection, reused
            url = f"{s.api_base}/chat/completions"
            assert client.post(url, json={"model": "m"}).status_code == 200

            def attempt() -> None:
                try:
                    outcome.append(client.post(url, json={"model": "m"}))
                except Exception as exc:  # noqa: BLE001 - what the shutdown makes of it
                    outcome.append(exc)

            abandoned(attempt, connections=True)
            assert len(s.requests) == 2  # the second request is waiting for its answer
            started = time.monotonic()
            assert llm_threads.end_calls_at_exit(wait=2.0) == 0
            assert time.monotonic() - started < 1.0
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.TransportError)


def test_an_attempts_timeout_is_one_of_a_few(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm keeps a client (and its keep-alive connection) for each timeout it is
    given: the time left, to the microsecond, made one a call."""
    from memstore.llm import TIMEOUT_STEPS, attempt_timeout

    assert attempt_timeout(59.99999, 60.0) == 60.0  # a first attempt: all of it
    assert attempt_timeout(0.98, 2.0) == 1.0 and attempt_timeout(0.93, 2.0) == 0.9375
    assert attempt_timeout(1e-6, 2.0) == 2.0 / TIMEOUT_STEPS
    given = {attempt_timeout(i / 1000, 60.0) for i in range(1, 60001)}
    assert len(given) == TIMEOUT_STEPS


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


@pytest.mark.slow  # litellm's import, the first in a process
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts sockets in /proc")
def test_calls_leave_no_socket_open_each() -> None:
    from memstore.config import MemstoreConfig
    from memstore.llm import LiteLLMCompletion
    from tests.fake_openai_server import FakeOpenAIServer, FakeReply

    with FakeOpenAIServer([FakeReply(content="ok")] * 40) as server:
        config = MemstoreConfig(
            model="openai/fake-model",
            api_base=server.api_base,
            api_key="test",
            timeout=5.0,
            num_retries=0,
        )
        llm = LiteLLMCompletion(config, use_response_format=False)
        llm([{"role": "user", "content": "hi"}])
        before = _sockets()
        for _ in range(30):
            assert llm([{"role": "user", "content": "hi"}]) == "ok"
        grown = _sockets() - before
    assert grown <= 4, f"{grown} sockets more after 30 calls"


#: a process that makes one litellm attempt (answered), then says how many audit hooks
#: were added
HOOKS = textwrap.dedent(
    """
    import sys
    added = []
    sys.addaudithook(lambda event, args: event == "sys.addaudithook" and added.append(1))
    from memstore.llm import call_with_deadline
    assert call_with_deadline(lambda: "answer", {}, 5.0, connections=True) == "answer"
    print(len(added), flush=True)
    """
)


def test_a_call_adds_no_audit_hook() -> None:
    """A process-wide audit hook cannot be removed and slows every audited event (``id()``
    4.4 times): it is added only at exit, when an attempt is still running."""
    done = subprocess.run(
        [sys.executable, "-c", HOOKS], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


#: a process whose call (a caller's callable that sleeps) was abandoned, then exits
SLEEPER = textwrap.dedent(
    """
    import time
    from memstore.llm import LLMDeadlineExceeded, with_deadline
    llm = with_deadline(lambda messages: time.sleep(60) or "late", 0.1)
    try:
        llm([{"role": "user", "content": "x"}])
    except LLMDeadlineExceeded:
        print("timed out", flush=True)
    """
)


@pytest.mark.slow  # a subprocess or a migration round trip: CI runs it
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_the_exit_wait_ends_the_process_quietly_as_an_interrupt() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "timed out\n"
        time.sleep(0.3)  # in the exit handler's wait
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(10)
        seconds = time.monotonic() - interrupted
    finally:
        process.kill()
        _, stderr = process.communicate()
    assert seconds < 1.0  # not the rest of EXIT_WAIT
    assert process.returncode == -signal.SIGINT, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
