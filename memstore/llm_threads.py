"""The daemon threads model calls run in (``memstore.llm.call_with_deadline``), and the
process's exit.

A call's caller stops waiting at its deadline and leaves the thread to finish on its own.
At exit the interpreter freezes daemon threads wherever they are: one frozen inside an
import (litellm and httpx import lazily during a call) or holding a lock keeps it forever,
and the interpreter's finalization, which imports and closes clients in ``__del__``
methods, then waits for it forever: the process hangs at exit.

So the first call registers an exit handler (``atexit``: it runs before the handlers
registered earlier, litellm's among them when litellm was imported first, as a
LiteLLMCompletion does). At exit it ends the calls still running: it waits for their
threads, up to EXIT_WAIT seconds in all, and a litellm attempt (started with
``connections=True``) is made to end at once: the connections it opened are shut down (it
fails as if the server hung up) and it opens no more (a ConnectionAbortedError; an audit
hook, ``sys.addaudithook``, sees each connection its thread opens). A call still running at
exit starts no new attempt and makes no retry (``ending``). Its answer was abandoned (or
its caller is a daemon thread, frozen at exit too): nothing is lost. Calls started after
the handler ran (by an exit handler registered before memstore's first call) are left
alone. A thread still running after EXIT_WAIT (one of the caller's own callables, say) is
left to the interpreter, logged.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("memstore.llm")

#: at exit, how long to wait in all for the calls still running (seconds)
EXIT_WAIT = 3.0
#: at exit, how often the connections of the calls still running are shut down again
_SWEEP = 0.05


class _Call:
    """One call's thread: whether the exit handler is ending it, and (when it is a litellm
    attempt) the connections it opened, each as (fd, device, inode): a socket's fd number
    may be handed to another object (TLS) or reused, its inode names it."""

    def __init__(self, parent: _Call | None, connections: bool) -> None:
        self.parent = parent
        self.connections: list[tuple[int, int, int]] | None = [] if connections else None
        self.ended = False
        self.thread: threading.Thread | None = None

    def ending(self) -> bool:
        call: _Call | None = self
        while call is not None:
            if call.ended:
                return True
            call = call.parent
        return False

    def shut_down_connections(self) -> None:
        for fd, device, inode in list(self.connections or ()):
            _shut_down(fd, device, inode)


_lock = threading.Lock()
#: the calls whose thread has not finished
_live: set[_Call] = set()
#: the same calls, by the id of their thread (once it runs): what the audit hook looks up
_by_thread: dict[int, _Call] = {}
_installed = False


def _shut_down(fd: int, device: int, inode: int) -> None:
    """Shut down the socket on ``fd`` if it is still the one recorded (same inode)."""
    try:
        duplicate = os.dup(fd)
    except OSError:
        return  # closed since
    try:
        status = os.fstat(duplicate)
        if not stat.S_ISSOCK(status.st_mode) or (status.st_dev, status.st_ino) != (
            device,
            inode,
        ):
            return  # closed, and the number reused by another file
        with socket.socket(fileno=duplicate) as sock:
            duplicate = -1  # the socket object closes it
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a read or a write blocked on it
            except OSError:
                pass  # not connected yet, or already shut down
    except OSError:
        pass
    finally:
        if duplicate >= 0:
            os.close(duplicate)


def _audit(event: str, args: tuple[object, ...]) -> None:
    """Records each connection a litellm attempt's thread opens; at exit, refuses them."""
    if event != "socket.connect" and event != "socket.getaddrinfo":
        return
    try:
        refused = _opening(event, args)
    except Exception:  # noqa: BLE001 - a hook never fails an operation (late in finalization)
        return
    if refused:
        raise ConnectionAbortedError(
            "the process is exiting: a model call abandoned at its deadline opens no connection"
        )


def _opening(event: str, args: tuple[object, ...]) -> bool:
    """Whether the calling thread's connection is refused; records it otherwise."""
    call = _by_thread.get(threading.get_ident())
    if call is None or call.connections is None:
        return False
    if call.ending():
        return True
    sock = args[0] if event == "socket.connect" else None
    if isinstance(sock, socket.socket):
        try:
            status = os.fstat(sock.fileno())
        except (OSError, ValueError):
            return False  # a platform whose sockets are no files: not recorded
        if status.st_ino:
            call.connections.append((sock.fileno(), status.st_dev, status.st_ino))
    return False


def _forget_in_child() -> None:
    """After a fork: the parent's other threads do not run in the child."""
    global _lock
    _lock = threading.Lock()  # another thread may have held it
    ident = threading.get_ident()
    mine = _by_thread.get(ident)
    _by_thread.clear()
    _live.clear()
    if mine is not None:
        _by_thread[ident] = mine
        _live.add(mine)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    sys.addaudithook(_audit)
    atexit.register(end_calls_at_exit)


def ending() -> bool:
    """Whether the calling thread runs a call the exit handler is ending: it should start
    nothing new (no attempt, no retry)."""
    call = _by_thread.get(threading.get_ident())
    return call is not None and call.ending()


def start_daemon(target: Callable[[], None], *, connections: bool = False) -> None:
    """``target()`` in a daemon thread, ended at the process's exit (see the module's
    docstring): waited for, and with ``connections`` (a litellm attempt) its connections
    shut down."""
    _install()
    call = _Call(_by_thread.get(threading.get_ident()), connections)

    def run() -> None:
        ident = threading.get_ident()
        with _lock:
            _by_thread[ident] = call  # before target() opens any connection
        try:
            target()
        finally:
            with _lock:
                _by_thread.pop(ident, None)
                _live.discard(call)

    thread = threading.Thread(target=run, name="memstore-llm-call", daemon=True)
    call.thread = thread
    with _lock:
        _live.add(call)
    try:
        thread.start()
    except BaseException:
        with _lock:
            _live.discard(call)
        raise


def end_calls_at_exit(wait: float | None = None) -> int:
    """End the calls still running (the exit handler; see the module's docstring), waiting
    for them up to ``wait`` seconds (default EXIT_WAIT); how many are still running."""
    with _lock:
        for call in _live:
            call.ended = True
    deadline = time.monotonic() + (EXIT_WAIT if wait is None else wait)
    running: set[_Call] = set()
    while True:
        with _lock:  # a call's retry may have started one more attempt, refused at once
            running.update(call for call in _live if call.ending())
        running = {call for call in running if call.thread and call.thread.is_alive()}
        left = deadline - time.monotonic()
        if not running or left <= 0:
            break
        for call in running:
            call.shut_down_connections()
        thread = next(iter(running)).thread
        if thread is not None:
            thread.join(min(left, _SWEEP))
    if running:
        log.warning(
            "%d model call%s abandoned at %s deadline still running at exit: left to the "
            "interpreter",
            len(running),
            "s" if len(running) > 1 else "",
            "their" if len(running) > 1 else "its",
        )
    return len(running)
