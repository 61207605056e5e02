"""A fake Gemini Developer API on loopback, for driving the real `google-genai` SDK.

`FakeGeminiAPI` answers `POST /v1/models/{model}:generateContent` (JSON) and
`:streamGenerateContent?alt=sse` (server-sent events), under `v1beta` too, from a
per-test script::

    with FakeGeminiAPI(FakeGeminiAPI.rate_limited(2), FakeGeminiAPI.text("hi")) as api:
        client = genai.Client(api_key="test-key", http_options={"base_url": api.base_url})
        ...
    assert api.request_count == 2

Anything the script did not foresee (no reply left, a handler that raised) is answered
500 INTERNAL *and* kept in `problems`, so `check()` can fail the test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from agentmesh._numbers import whole
from agentmesh.testing import _gemini_replies as replies
from agentmesh.testing._fake_messages_api import RawReply
from agentmesh.testing._gemini_replies import (
    GeminiError,
    GeminiReply,
    GeminiSlow,
    GeminiStreamCut,
)
from agentmesh.testing._scripted_server import ScriptedServer

try:
    from werkzeug.wrappers import Request, Response
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentmesh.testing.FakeGeminiAPI serves HTTP with werkzeug, which is not "
        "installed: pip install 'agentmesh-failwell[testing]'"
    ) from missing

__all__ = ["FakeGeminiAPI", "GeminiRequest"]

# The SDK picks the API version (`v1` by default since google-genai 3, `v1beta` before).
_PATH = re.compile(
    r"/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+)"
    r":(?P<method>generateContent|streamGenerateContent)"
)


@dataclass(frozen=True, slots=True)
class GeminiRequest:
    """One request as the server received it: method, path, headers and body."""

    index: int
    """Position in arrival order, from 0."""
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: Any
    """The JSON body (camelCase, as on the wire), or None when it is not JSON."""

    @property
    def model(self) -> str | None:
        """The model named in the path (`gemini-2.5-flash`)."""
        found = _PATH.fullmatch(self.path)
        return found.group("model") if found else None

    @property
    def stream(self) -> bool:
        return self.path.endswith(":streamGenerateContent")

    @property
    def api_key(self) -> str | None:
        """The key the request carried (`x-goog-api-key`, as the SDK sends it)."""
        return self.headers.get("x-goog-api-key")

    @property
    def contents(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return list(body.get("contents") or [])

    @property
    def system(self) -> str | None:
        """The system instruction's text, if any."""
        body = self.body if isinstance(self.body, dict) else {}
        instruction = body.get("systemInstruction") or {}
        texts = [p.get("text", "") for p in instruction.get("parts") or []]
        return "".join(texts) if texts else None

    @property
    def function_declarations(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return [d for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]


Handler: TypeAlias = Callable[[GeminiRequest], GeminiReply]


class FakeGeminiAPI(ScriptedServer[GeminiReply, GeminiRequest]):
    """A scripted Gemini Developer API on `127.0.0.1`, on a free port.

    Replies come from a queue, in order (`FakeGeminiAPI(reply, ...)`, `enqueue(...)`);
    once it is empty, from `handler` (a function of the `GeminiRequest`), if set. Every
    request is recorded in `requests`. A request without `x-goog-api-key` is answered
    403 PERMISSION_DENIED, one with another key than `api_key` (when given) 400
    INVALID_ARGUMENT with ErrorInfo `API_KEY_INVALID`, as the real API does; other
    paths get 404 NOT_FOUND.

    Build replies with the static builders: `text`, `tool_call`, `tool_calls` (of
    `function_call` parts), `safety_stop`, `blocked_prompt`, `error`, `rate_limited`,
    `context_too_long`, `bad_field`, `invalid_key`, `garbage`, `slow` and `stream_cut`.
    `overload(n)` answers the next `n` requests 503 UNAVAILABLE before the script.
    """

    text = staticmethod(replies.text)
    function_call = staticmethod(replies.function_call)
    tool_call = staticmethod(replies.tool_call)
    tool_calls = staticmethod(replies.tool_calls)
    safety_stop = staticmethod(replies.safety_stop)
    blocked_prompt = staticmethod(replies.blocked_prompt)
    error = staticmethod(replies.error)
    rate_limited = staticmethod(replies.rate_limited)
    context_too_long = staticmethod(replies.context_too_long)
    bad_field = staticmethod(replies.bad_field)
    invalid_key = staticmethod(replies.invalid_key)
    garbage = staticmethod(replies.garbage)
    slow = staticmethod(replies.slow)
    stream_cut = staticmethod(replies.stream_cut)

    def __init__(
        self,
        *script: GeminiReply,
        handler: Handler | None = None,
        api_key: str | None = None,
        require_auth: bool = True,
    ) -> None:
        super().__init__("FakeGeminiAPI", script, handler)
        self._api_key = api_key
        self._require_auth = require_auth
        self._overloaded = 0

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (`HttpOptions(base_url=...)`), `http://127.0.0.1:<port>`."""
        return self._server.base_url

    def overload(self, requests: int) -> None:
        """Answer the next `requests` requests 503 UNAVAILABLE ("The model is overloaded"),
        taking no reply from the script; `overload(0)` ends it."""
        count = whole("FakeGeminiAPI.overload(requests=)", requests, at_least=0)
        with self._lock:
            self._overloaded = count

    # serving (runs in werkzeug's request threads)

    def _record(self, http: Request) -> GeminiRequest:
        raw = http.get_data()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in http.headers.items()}
        return self._kept(
            lambda index: GeminiRequest(
                index=index,
                method=http.method,
                path=http.path,
                query=http.query_string.decode("latin-1"),
                headers=MappingProxyType(headers),
                body=body,
            )
        )

    def _server_error(self, problem: str) -> GeminiReply:
        return replies.error(500, problem)

    def _respond(self, http: Request) -> Response:
        request = self._record(http)
        refusal = self._refusal(request)
        if refusal is not None:
            return _error_response(refusal)
        with self._lock:
            overloaded, self._overloaded = self._overloaded > 0, max(0, self._overloaded - 1)
        if overloaded:
            return _error_response(replies.error(503))
        return self._render(request, self._next_reply(request))

    def _refusal(self, request: GeminiRequest) -> GeminiError | None:
        key = request.api_key
        if self._require_auth and key is None:
            return replies.error(
                403,
                "Method doesn't allow unregistered callers (callers without "
                "established identity). Please use API Key or other form of API consumer "
                "identity to call this API.",
            )
        if self._require_auth and self._api_key not in (None, key):
            return replies.invalid_key()
        if request.method != "POST" or request.model is None:
            return replies.error(404, f"{request.method} {request.path} is not served")
        if not isinstance(request.body, dict):
            return replies.error(400, "Invalid JSON payload received.")
        return None

    def _render(self, request: GeminiRequest, reply: GeminiReply) -> Response:
        if isinstance(reply, GeminiSlow):
            if self._server.closing.wait(reply.delay):
                return _error_response(replies.error(503, "server closed"))
            return self._render(request, reply.reply)
        if isinstance(reply, GeminiError):
            return _error_response(reply)
        if isinstance(reply, RawReply):
            raw = Response(reply.body, reply.status, content_type=reply.content_type)
            raw.headers.extend(reply.headers)
            return raw
        answer = reply.answer if isinstance(reply, GeminiStreamCut) else reply
        body = replies.answer_json(
            answer, model=request.model or "gemini-fake", response_id=f"resp-{request.index:06d}"
        )
        if not request.stream:
            if isinstance(reply, GeminiStreamCut):
                self._add_problem(
                    f"FakeGeminiAPI: request #{request.index} does not stream, "
                    "but its scripted reply is a stream_cut"
                )
            return Response(json.dumps(body), 200, content_type="application/json")
        chunks = replies.stream_chunks(body)
        if isinstance(reply, GeminiStreamCut):
            chunks = chunks[: reply.after_chunks]
            if reply.error is not None:
                chunks.append(dict(reply.error.body))
        return _sse_response(chunks)

    def __repr__(self) -> str:
        return f"{repr(self._server)[:-1]}, {self.request_count} requests>"


def _error_response(reply: GeminiError) -> Response:
    response = Response(json.dumps(reply.body), reply.status, content_type="application/json")
    for name, value in reply.headers.items():
        response.headers[name] = value
    return response


def _sse_response(chunks: list[dict[str, Any]]) -> Response:
    def body() -> Iterator[bytes]:
        for chunk in chunks:
            yield replies.sse(chunk)

    return Response(body(), 200, content_type="text/event-stream")
