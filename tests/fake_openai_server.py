"""A scripted, OpenAI-compatible chat-completions server for tests (stdlib only).

    with FakeOpenAIServer() as server:
        server.enqueue(FakeReply(content='{"should_remember": false, "reasoning": "x"}'))
        ... api_base=server.api_base ...
        server.requests[0].body["temperature"]

Each POST to /v1/chat/completions (or /chat/completions) takes the next scripted reply; an
empty queue answers 500. Every request is recorded. A reply can also misbehave: ``delay``
(answer late, or never: the wait ends when the server stops), ``trickle`` (send the whole
HTTP response one byte at a time) or ``close`` (read the request, close the connection).
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass(frozen=True)
class FakeReply:
    """One scripted reply: ``content`` becomes an assistant message; ``body`` (a dict or a
    raw string) replaces the whole JSON body; ``delay`` seconds pass before answering;
    ``trickle`` seconds pass between the bytes of the response; ``close`` closes the
    connection without a response."""

    status: int = 200
    content: str | None = None
    body: dict[str, Any] | str | None = None
    delay: float = 0.0
    trickle: float = 0.0
    close: bool = False
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    )


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


def completion_body(content: str, usage: dict[str, int], model: str, number: int) -> dict:
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


def error_body(status: int) -> dict:
    kinds = {429: "rate_limit_exceeded", 500: "server_error", 503: "service_unavailable"}
    return {
        "error": {
            "message": f"scripted error {status}",
            "type": kinds.get(status, "invalid_request_error"),
            "code": kinds.get(status),
        }
    }


class FakeOpenAIServer:
    """The server in a daemon thread on 127.0.0.1, an ephemeral port; a context manager."""

    def __init__(self, replies: list[FakeReply] | None = None) -> None:
        self._replies: deque[FakeReply] = deque(replies or ())
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting
    def enqueue(self, *replies: FakeReply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next(self, request: RecordedRequest) -> tuple[FakeReply | None, int]:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            return (self._replies.popleft() if self._replies else None), number

    # -- lifecycle
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def _trickle(self, status: int, payload: bytes, interval: float) -> None:
                head = (
                    f"HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n"
                ).encode()
                self.close_connection = True
                data = head + payload
                for index in range(len(data)):
                    try:
                        self.wfile.write(data[index : index + 1])
                    except OSError:
                        return  # the client gave up
                    if server._stopping.wait(interval):
                        return

            def _hang_up(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body: Any = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw
                path = self.path.split("?", 1)[0]
                if path not in PATHS:
                    self._send(404, json.dumps(error_body(404)).encode())
                    return
                reply, number = server._next(RecordedRequest(path, dict(self.headers), body))
                if reply is None:
                    reply = FakeReply(status=500, body=error_body(500))
                if reply.close:
                    self._hang_up()
                    return
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                if reply.body is not None:
                    payload = reply.body
                elif reply.status >= 400:
                    payload = error_body(reply.status)
                else:
                    model = body.get("model", "fake-model") if isinstance(body, dict) else ""
                    payload = completion_body(reply.content or "", reply.usage, model, number)
                data = payload if isinstance(payload, str) else json.dumps(payload)
                if reply.trickle:
                    self._trickle(reply.status, data.encode("utf-8"), reply.trickle)
                    return
                self._send(reply.status, data.encode("utf-8"))

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
