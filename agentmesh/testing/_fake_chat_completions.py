"""A fake OpenAI Chat Completions API on loopback, for driving the real `openai` SDK.

`FakeChatCompletionsAPI` answers `POST /v1/chat/completions` in OpenAI's wire format, JSON
or a stream of chunks, from a per-test script, on a `LoopbackServer`::

    with FakeChatCompletionsAPI(F.error(503), F.text("hi")) as api:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=api.base_url)
        ...
    assert api.request_count == 2

Anything the script did not foresee (no reply left, a handler that raised) is answered
with an HTTP 500 *and* kept in `problems`, so `check()` can fail the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TypeAlias

from agentmesh._numbers import number, whole
from agentmesh.testing import _chat_builders as builders
from agentmesh.testing._chat_limits import ChatLimits
from agentmesh.testing._chat_replies import (
    ChatCompletionReply,
    ChatErrorReply,
    ChatRawReply,
    ChatReply,
    ChatSlowReply,
    ChatStreamCut,
    completion_json,
    error_json,
    stream_chunks,
)
from agentmesh.testing._fake_messages_api import RecordedRequest
from agentmesh.testing._scripted_server import ScriptedServer

try:
    from werkzeug.wrappers import Request, Response
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentmesh.testing.FakeChatCompletionsAPI serves HTTP with werkzeug, which is not "
        "installed: pip install 'agentmesh-failwell[testing]'"
    ) from missing

__all__ = [
    "ChatCompletionReply",
    "ChatErrorReply",
    "ChatRawReply",
    "ChatReply",
    "ChatSlowReply",
    "ChatStreamCut",
    "FakeChatCompletionsAPI",
]

_DEFAULT_MODEL = "gpt-fake"
_PATH = "/v1/chat/completions"

ChatHandler: TypeAlias = Callable[[RecordedRequest], ChatReply]


class FakeChatCompletionsAPI(ScriptedServer[ChatReply, RecordedRequest]):
    """A scripted OpenAI Chat Completions API on `127.0.0.1`, on a free port.

    Give the SDK `base_url=api.base_url` (it ends in `/v1`). Each request takes the
    oldest queued reply, else the `handler`'s; requests are recorded (`requests`). Every
    answer carries `x-request-id` and the `headers` given here (say, `x-ratelimit-*`).

    Args:
        *replies: the script, in order.
        handler: answers once the queue is empty.
        api_key: the only key accepted (None: any non-empty bearer token).
        require_auth: answer 401 `invalid_api_key` to a request without a key.
        model: the model answers name when the request names none.
        headers: headers sent with every answer.
    """

    completion = staticmethod(builders.completion)
    text = staticmethod(builders.text)
    tool_call = staticmethod(builders.tool_call)
    tool_calls = staticmethod(builders.tool_calls)
    refusal = staticmethod(builders.refusal)
    content_filter = staticmethod(builders.content_filter)
    error = staticmethod(builders.error)
    garbage = staticmethod(builders.garbage)
    slow = staticmethod(builders.slow)
    stream_cut = staticmethod(builders.stream_cut)

    def __init__(
        self,
        *replies: ChatReply,
        handler: ChatHandler | None = None,
        api_key: str | None = None,
        require_auth: bool = True,
        model: str = _DEFAULT_MODEL,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__("FakeChatCompletionsAPI", replies, handler)
        self._api_key = api_key
        self._require_auth = require_auth
        self._model = model
        self._headers = dict(headers or {})
        self._limits = ChatLimits()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as `base_url`, e.g. `http://127.0.0.1:54321/v1`."""
        return f"{self._server.base_url}/v1"

    def rate_limit(
        self,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        model: str | None = None,
        minute: float = 60.0,
    ) -> None:
        """Limit `model`'s requests and tokens per minute (when None: one set of limits
        every model without its own shares), as
        OpenAI does: token buckets refilled continuously, `x-ratelimit-*` headers on every
        answer, 429 `rate_limit_exceeded` for a request that does not fit (its tokens:
        the prompt estimated from its JSON, plus its `max_completion_tokens`; what the
        reply did not use comes back). `minute`: the seconds a minute lasts."""
        per_minute = {
            family: whole(f"FakeChatCompletionsAPI.rate_limit({option}=)", value, at_least=1)
            for family, option, value in (
                ("requests", "requests_per_minute", requests_per_minute),
                ("tokens", "tokens_per_minute", tokens_per_minute),
            )
            if value is not None
        }
        number("FakeChatCompletionsAPI.rate_limit(minute=)", minute, above=True, unit="seconds")
        self._limits.set(model or "*", per_minute, minute)

    # serving (runs in werkzeug's request threads)

    def _record(self, http: Request) -> RecordedRequest:
        raw = http.get_data()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in http.headers.items()}
        return self._kept(
            lambda index: RecordedRequest(
                index=index,
                request_id=f"req_fake{index + 1:06d}",
                method=http.method,
                path=http.path,
                query=http.query_string.decode("latin-1"),
                headers=MappingProxyType(headers),
                raw_body=raw,
                body=body,
            )
        )

    def _server_error(self, problem: str) -> ChatReply:
        return builders.error(500, problem)

    def _respond(self, http: Request) -> Response:
        request = self._record(http)
        key = request.api_key
        if self._require_auth and (key is None or self._api_key not in (None, key)):
            return self._render(request, builders.error(401))
        if (request.method, request.path) != ("POST", _PATH):
            message = f"Invalid URL ({request.method} {request.path})"
            return self._render(request, builders.error(404, message, code="unknown_url"))
        if not isinstance(request.body, dict):
            return self._render(
                request, builders.error(400, "We could not parse the JSON body of your request.")
            )
        model = request.model or self._model
        ticket, limit_headers, refused = self._limits.admit(model, request.body)
        if refused is not None:
            message = f"Rate limit reached for {model} on {refused} per min. Please try again."
            limited = builders.error(429, message, type=refused, headers=limit_headers)
            return self._render(request, limited)
        reply = self._next_reply(request)
        response = self._render(request, reply)
        for name, value in self._limits.settle(ticket, _completion_tokens(reply)).items():
            response.headers.setdefault(name, value)  # a scripted reply's own headers win
        return response

    def _render(self, request: RecordedRequest, reply: ChatReply) -> Response:
        if isinstance(reply, ChatSlowReply):
            if self._server.closing.wait(reply.delay):
                return self._render(request, builders.error(503, "server closed"))
            return self._render(request, reply.reply)
        if isinstance(reply, ChatErrorReply):
            body = json.dumps(error_json(reply))
            response = Response(body, reply.status, content_type="application/json")
            return self._with_headers(response, request, reply.headers)
        if isinstance(reply, ChatRawReply):
            response = Response(reply.body, reply.status, content_type=reply.content_type)
            return self._with_headers(response, request, reply.headers)
        completion = reply.reply if isinstance(reply, ChatStreamCut) else reply
        answer_id = request.request_id.replace("req_", "chatcmpl-", 1)
        model = request.model or self._model
        if not request.stream:
            if isinstance(reply, ChatStreamCut):
                problem = f"request #{request.index} does not stream, but its reply is a stream_cut"
                self._add_problem(problem)
                return self._render(request, builders.error(500, problem))
            body = json.dumps(completion_json(completion, id=answer_id, model=model))
            response = Response(body, 200, content_type="application/json")
            return self._with_headers(response, request, completion.headers)
        options = request.body.get("stream_options") if isinstance(request.body, dict) else None
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = list(
            stream_chunks(completion, id=answer_id, model=model, include_usage=include_usage)
        )
        events = [json.dumps(chunk) for chunk in chunks]
        if isinstance(reply, ChatStreamCut):
            events = events[: reply.after_chunks]
            if reply.error is not None:
                events.append(json.dumps(error_json(reply.error)))
        else:
            events.append("[DONE]")
        return self._with_headers(_event_stream(events), request, completion.headers)

    def _with_headers(
        self, response: Response, request: RecordedRequest, headers: Mapping[str, str]
    ) -> Response:
        response.headers["x-request-id"] = request.request_id
        response.headers["openai-processing-ms"] = "1"
        for name, value in {**self._headers, **headers}.items():
            response.headers[name] = value
        return response

    def __repr__(self) -> str:
        return f"{repr(self._server)[:-1]}, {self.request_count} requests>"


def _event_stream(events: list[str]) -> Response:
    def body() -> Iterator[bytes]:
        for data in events:
            yield f"data: {data}\n\n".encode()

    response = Response(body(), 200, content_type="text/event-stream; charset=utf-8")
    response.headers["cache-control"] = "no-cache"
    return response


def _completion_tokens(reply: ChatReply) -> int:
    """The completion tokens a reply reports using (0 for an error or a raw body)."""
    if isinstance(reply, ChatSlowReply | ChatStreamCut):
        return _completion_tokens(reply.reply)
    if not isinstance(reply, ChatCompletionReply) or reply.usage is None:
        return 0
    used = reply.usage.get("completion_tokens")
    return used if isinstance(used, int) else 0
