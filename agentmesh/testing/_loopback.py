"""`LoopbackServer`: the HTTP server every fake API of `agentmesh.testing` runs on.

werkzeug's threaded WSGI server on `127.0.0.1` and a free port, serving from a thread of
its own (so it never depends on a test's event loop), each request in its own thread.
A fake API gives it a WSGI app and a place to keep problems (an exception that escaped
the app); the server owns binding, serving, a bounded close and the `closing` event that
cuts a slow reply short.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from agentmesh.errors import UsageError

try:
    from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentmesh.testing's fake APIs serve HTTP with werkzeug, which is not "
        "installed: pip install 'agentmesh-failwell[testing]'"
    ) from missing

__all__ = ["LoopbackServer"]

_log = logging.getLogger("agentmesh.testing.loopback")

# How long close() waits for in-flight request threads before leaving them (daemons) behind.
_CLOSE_JOIN_TIMEOUT = 2.0


class _RequestHandler(WSGIRequestHandler):
    """werkzeug's handler with its access log sent to our logger at debug level."""

    def log(self, type: str, message: str, *args: Any) -> None:
        _log.debug(message.rstrip(), *args)


class _Server(ThreadedWSGIServer):
    """werkzeug's threaded server that remembers its request threads.

    socketserver would join them without a deadline on close; a slow reply or a client
    that never sends its request must not hang a test's teardown.
    """

    block_on_close = False

    def __init__(self, name: str, app: Callable[..., Any], on_error: Callable[[str], None]) -> None:
        super().__init__("127.0.0.1", 0, app, _RequestHandler)
        self._name = name
        self._on_error = on_error
        self._request_threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"{self._name}-request",
            daemon=True,
        )
        with self._threads_lock:
            self._request_threads = [t for t in self._request_threads if t.is_alive()]
            self._request_threads.append(thread)
        thread.start()

    def join_request_threads(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._threads_lock:
            threads = list(self._request_threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def log(self, type: str, message: str, *args: Any) -> None:
        # werkzeug reports an exception that escaped the app here; keep it as a problem.
        self._on_error(message % args if args else message)

    def handle_error(self, request: Any, client_address: Any) -> None:
        self._on_error(f"connection from {client_address} failed")


class LoopbackServer:
    """One fake API's server: started once, closed once (idempotently).

    Args:
        name: the fake's name, in thread names and errors (`"FakeMessagesAPI"`).
        app: the WSGI app that answers every request.
        on_error: where a failure the app could not answer itself is kept.
    """

    def __init__(self, name: str, app: Callable[..., Any], on_error: Callable[[str], None]) -> None:
        self.name = name
        self._app = app
        self._on_error = on_error
        self._lock = threading.Lock()
        self.closing = threading.Event()
        """Set once close() begins: a reply that waits should wait on it and give up."""
        self.state: Literal["new", "started", "closed"] = "new"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        with self._lock:
            if self.state != "new":
                raise UsageError(f"{self.name} can be started once; it is {self.state}")
            self._server = _Server(self.name, self._app, self._on_error)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.01},
                name=self.name,
                daemon=True,
            )
            self._thread.start()
            self.state = "started"

    def close(self) -> None:
        """Stop serving; slow replies still waiting are cut short. Idempotent."""
        with self._lock:
            server, thread = self._server, self._thread
            already_closing = self.closing.is_set()
            self.closing.set()
            self.state = "closed"
        if server is None or thread is None or already_closing:
            return
        server.shutdown()
        thread.join()
        server.join_request_threads(_CLOSE_JOIN_TIMEOUT)

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`, once started."""
        if self._server is None:
            raise UsageError(f"{self.name} has no base_url before start()")
        return f"http://127.0.0.1:{self._server.port}"

    def __repr__(self) -> str:
        where = self.base_url if self._server is not None else "not started"
        return f"<{self.name} {where} {self.state}>"
