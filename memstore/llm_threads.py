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
``connections=True``) is made to end at once: the sockets its thread is using are shut down
(it fails as if the server hung up), found in its frames' variables, so a keep-alive
connection taken from a pool is found as well as one it opened; and it opens no more (a
ConnectionAbortedError from an audit hook, ``sys.addaudithook``, added only then: a hook
cannot be removed, and one slows every audited event of the process). A call still running
at exit starts no new attempt and makes no retry (``ending``). Its answer was abandoned (or
its caller is a daemon thread, frozen at exit too): nothing is lost. Calls started after
the handler ran (by an exit handler registered before memstore's first call) are left
alone. A thread still running after EXIT_WAIT (one of the caller's own callables, say) is
left to the interpreter, logged. Ctrl-C during the wait ends the process at once, as an
interrupt does, without a traceback.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, ModuleType

log = logging.getLogger("memstore.llm")

#: at exit, how long to wait in all for the calls still running (seconds)
EXIT_WAIT = 3.0
#: at exit, how often the connections of the calls still running are shut down again
_SWEEP = 0.05


class _Call:
    """One call's thread: whether the exit handler is ending it, and whether it is a
    litellm attempt (``connections``: its connections are shut down at exit)."""

    def __init__(self, parent: _Call | None, connections: bool) -> None:
        self.parent = parent
        self.connections = connections
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
        """Shut down the sockets its thread is using now (``_sockets_in_use``)."""
        thread = self.thread
        if not self.connections:
            return  # a caller's own callable: only waited for
        frame = sys._current_frames().get(thread.ident) if thread and thread.ident else None
        for sock in _sockets_in_use(frame):
            try:  # the plain socket's shutdown, under a TLS one too: wakes a blocked read
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass  # closed, not connected yet, or already shut down


_lock = threading.Lock()
#: the calls whose thread has not finished
_live: set[_Call] = set()
#: the same calls, by the id of their thread (once it runs): what ``ending`` looks up
_by_thread: dict[int, _Call] = {}
_installed = False
#: whether the audit hook that refuses an ending attempt's connections is installed
_hooked = False
#: the audit events of a connection being opened (the hook ignores every other event)
_OPENING = frozenset({"socket.connect", "socket.getaddrinfo"})


def _sockets_in_use(frame: FrameType | None) -> list[socket.socket]:
    """The connected sockets a thread stopped at ``frame`` is using: those its frames' own
    variables hold (not a closure's, which are another frame's), directly or as an
    attribute (``self._sock`` in httpcore's stream, ``self`` in ssl's). Such a socket is
    found however the thread got it: opened, or taken from a pool of keep-alive
    connections. Read only at exit, from the exit handler's thread."""
    found: dict[int, socket.socket] = {}

    def look(value: object) -> bool:
        if not isinstance(value, socket.socket):
            return False
        try:
            if not value.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                found[id(value)] = value  # a listening socket is not a connection
        except (OSError, ValueError, AttributeError):
            pass  # closed, or no such option here
        return True

    while frame is not None:
        code = frame.f_code
        try:
            variables = frame.f_locals
            values = [variables.get(name) for name in code.co_varnames + code.co_cellvars]
        except Exception:  # noqa: BLE001 - a frame that cannot be read holds nothing found
            values = []
        for value in values:
            if look(value) or isinstance(value, type | ModuleType):
                continue
            try:
                attributes = list(vars(value).values())
            except TypeError:  # no __dict__
                continue
            for attribute in attributes:
                look(attribute)
        frame = frame.f_back
    return list(found.values())


def _audit(event: str, args: tuple[object, ...]) -> None:
    """At exit, refuses the connections an ending litellm attempt's thread opens (installed
    only then: a process-wide audit hook slows every audited event down, ``id()`` and
    ``copy.deepcopy`` among them)."""
    if event not in _OPENING:
        return
    try:
        call = _by_thread.get(threading.get_ident())
        refused = call is not None and call.connections and call.ending()
    except Exception:  # noqa: BLE001 - a hook never fails an operation (late in finalization)
        return
    if refused:
        raise ConnectionAbortedError(
            "the process is exiting: a model call abandoned at its deadline opens no connection"
        )


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
    atexit.register(_exit_handler)


def _exit_handler() -> None:
    """``end_calls_at_exit``; Ctrl-C during its wait ends the process at once, quietly."""
    try:
        end_calls_at_exit()
    except KeyboardInterrupt:
        _die_of_interrupt()


def _die_of_interrupt() -> None:
    """End the process as an unhandled Ctrl-C does (killed by SIGINT: 130 in a shell)
    without a traceback: the remaining exit handlers and the interpreter's finalization
    are skipped, since a thread frozen inside an import may hang them. stdout and stderr
    are flushed first. Where a process cannot signal itself, the exit goes on."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream: nothing to flush
            pass
    if sys.platform == "win32" or not hasattr(signal, "SIGINT"):
        return
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except (OSError, ValueError):
        return


def _hook() -> None:
    """Install the audit hook that refuses an ending attempt's connections (``_audit``),
    once a process: only at exit, since it cannot be removed."""
    global _hooked
    with _lock:
        if _hooked:
            return
        _hooked = True
    sys.addaudithook(_audit)


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
        attempts = any(call.connections for call in _live)
    if attempts:
        _hook()
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
