"""What the fake provider APIs share: a script of replies, a record of requests, problems.

Each fake (Messages, Chat Completions, Gemini) renders its own wire format; the script,
the records, the lifecycle and the bookkeeping of what went wrong are this one class.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from werkzeug.wrappers import Request, Response

from agentmesh.testing._loopback import LoopbackServer

__all__ = ["ScriptedServer"]


class _Indexed(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...


ReplyT = TypeVar("ReplyT")
RequestT = TypeVar("RequestT", bound=_Indexed)


class ScriptedServer(Generic[ReplyT, RequestT]):
    """A loopback HTTP server answering from a script: queued replies, then a handler.

    Requests are served concurrently, each in its own thread; the script and the records
    are guarded by one lock, so tests may enqueue and read while requests are in flight.
    """

    def __init__(
        self,
        name: str,
        replies: Iterable[ReplyT],
        handler: Callable[[RequestT], ReplyT] | None,
    ) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._queue: deque[ReplyT] = deque(replies)
        self._handler = handler
        self._requests: list[RequestT] = []
        self._problems: list[str] = []
        self._server = LoopbackServer(name, self._wsgi_app, self._add_problem)

    # what each fake says in its own wire format

    def _respond(self, http: Request) -> Response:
        raise NotImplementedError

    def _server_error(self, problem: str) -> ReplyT:
        """The reply for a request the script cannot answer: a 500 in the API's shape."""
        raise NotImplementedError

    # lifecycle

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        self._server.start()
        return self

    def close(self) -> None:
        """Stop serving; slow replies still waiting are cut short. Idempotent."""
        self._server.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # script

    def enqueue(self, *replies: ReplyT) -> None:
        """Append replies to the queue; each request takes the oldest one."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def handler(self) -> Callable[[RequestT], ReplyT] | None:
        """Answers requests once the queue is empty; None means the script is exhausted."""
        return self._handler

    @handler.setter
    def handler(self, handler: Callable[[RequestT], ReplyT] | None) -> None:
        with self._lock:
            self._handler = handler

    @property
    def pending(self) -> int:
        """How many queued replies no request has taken yet."""
        with self._lock:
            return len(self._queue)

    # records

    @property
    def requests(self) -> list[RequestT]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests were received so far."""
        with self._lock:
            return len(self._requests)

    @property
    def problems(self) -> list[str]:
        """What went wrong on the server's side so far: exhausted script, failed handler."""
        with self._lock:
            return list(self._problems)

    def check(self) -> None:
        """Raise AssertionError listing the problems seen since the last check, if any."""
        with self._lock:
            problems, self._problems = self._problems, []
        if problems:
            raise AssertionError(f"{self._name}: " + "; ".join(problems))

    # serving (runs in werkzeug's request threads)

    def _add_problem(self, problem: str) -> None:
        with self._lock:
            self._problems.append(problem)

    def _kept(self, build: Callable[[int], RequestT]) -> RequestT:
        """The request `build` makes of the next index, recorded."""
        with self._lock:
            request = build(len(self._requests))
            self._requests.append(request)
        return request

    def _wsgi_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self._respond(Request(environ))(environ, start_response)

    def _next_reply(self, request: RequestT) -> ReplyT:
        with self._lock:
            reply = self._queue.popleft() if self._queue else None
            handler = self._handler
        if reply is not None:
            return reply
        where = f"request #{request.index} ({request.method} {request.path})"
        if handler is None:
            problem = f"{self._name} script exhausted: {where} had no scripted reply"
            self._add_problem(problem)
            return self._server_error(problem)
        try:
            return handler(request)
        except Exception as error:
            problem = f"{self._name} handler raised on {where}: {error!r}"
            self._add_problem(problem)
            return self._server_error(problem)
