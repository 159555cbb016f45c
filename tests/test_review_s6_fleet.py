"""Review S6 D: fleets of agents on one database.

Was: an agent paused past its answer timeout (SIGSTOP, a debugger, a suspend) while the
server's answer sat unread in its socket had its healthy connection cut by the answer
watch when it resumed, losing its ephemeral memories with it (F2).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from memstore.pg_connection import AnswerWatch


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A client socket and the server's end of its connection, on loopback."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def watched(client: socket.socket, seconds: float) -> AnswerWatch:
    watch = AnswerWatch(0.2)
    watch.begin(client.fileno())
    time.sleep(seconds)
    watch.close()
    return watch


def test_an_answer_that_came_while_the_client_did_not_read_is_not_cut_off(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = tcp_pair
    server.sendall(b"the answer")  # it arrives at once; nothing reads it for a while

    watch = watched(client, 0.5)

    assert not watch.fired
    assert client.recv(100) == b"the answer"
    client.sendall(b"still connected")
    assert server.recv(100) == b"still connected"


def test_a_server_silent_past_the_limit_is_still_cut_off(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    client, _ = tcp_pair

    watch = watched(client, 0.5)

    assert watch.fired
    assert client.recv(100) == b""  # shut down
