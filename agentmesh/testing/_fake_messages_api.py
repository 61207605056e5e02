"""A fake Anthropic Messages API on loopback, for driving the real SDK in tests.

`FakeMessagesAPI` is a real HTTP server (werkzeug's threaded WSGI server, in a thread of
its own, so it never depends on the test's event loop) that answers `POST /v1/messages`
in the Anthropic wire format, JSON or server-sent events, from a per-test script::

    with FakeMessagesAPI(FakeMessagesAPI.error(529), FakeMessagesAPI.text("hi")) as api:
        client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=api.base_url)
        ...
    assert api.request_count == 2

Anything the script did not foresee (no reply left, a handler that raised) is answered
with an HTTP 500 *and* kept in `problems`, so `check()` can fail the test instead of
letting agent code quietly absorb it.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from agentmesh._numbers import number, whole
from agentmesh.errors import UsageError
from agentmesh.testing._cloud_routes import (
    GOOGLE_TOKEN_PATH,
    bedrock_error,
    bedrock_exception_for,
    cloud_route,
    event_stream,
    google_token,
    sigv4_access_key,
    vertex_error,
)
from agentmesh.testing._overload import Load, Refusal
from agentmesh.testing._scripted_server import ScriptedServer

try:
    from werkzeug.wrappers import Request, Response
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentmesh.testing.FakeMessagesAPI serves HTTP with werkzeug, which is not "
        "installed: pip install 'agentmesh-failwell[testing]'"
    ) from missing

__all__ = [
    "ErrorReply",
    "FakeMessagesAPI",
    "MessageReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "SlowReply",
    "StreamErrorReply",
]

_DEFAULT_MODEL = "claude-fake"

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request.",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "The requested resource could not be found.",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of requests has exceeded your rate limit.",
    "api_error": "Internal server error.",
    "overloaded_error": "Overloaded",
}


# --- replies -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageReply:
    """A successful message; sent as JSON, or as SSE events when the request streams."""

    content: tuple[Mapping[str, Any], ...]
    stop_reason: str
    model: str | None = None
    input_tokens: int = 10
    output_tokens: int = 10
    id: str | None = None
    cache_creation_input_tokens: int | None = None
    """Prompt tokens the answer says it wrote to the prompt cache (null when None)."""
    cache_read_input_tokens: int | None = None
    """Prompt tokens the answer says it read from the prompt cache (null when None)."""
    usage: Mapping[str, Any] | None = None
    """The `usage` block sent as it is, in place of the counts above (None: built from them)."""


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An API error: `{"type": "error", "error": {...}}` with an HTTP status and headers."""

    status: int
    type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    error_code: str | None = None
    """Sent as `error.details.error_code` (the SDK's `error_code`) when set."""


@dataclass(frozen=True, slots=True)
class RawReply:
    """Bytes sent as they are, for bodies that are not what the SDK expects."""

    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SlowReply:
    """`reply`, sent after `delay` seconds (cut short when the server closes)."""

    delay: float
    reply: Reply


@dataclass(frozen=True, slots=True)
class StreamErrorReply:
    """The first `after_events` SSE events of `reply`, then an `error` event."""

    reply: MessageReply
    after_events: int
    type: str
    message: str


Reply: TypeAlias = MessageReply | ErrorReply | RawReply | SlowReply | StreamErrorReply
"""Anything a script may answer with; build one with the `FakeMessagesAPI` builders."""


# --- recorded requests -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it: method, path, headers and body."""

    index: int
    """Position in arrival order, from 0."""
    request_id: str
    """The `request-id` header of the answer (the SDK exposes it as `request_id`)."""
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    raw_body: bytes
    body: Any
    """The parsed JSON body, or None when the body is not JSON."""

    @property
    def stream(self) -> bool:
        """Whether the request asked for a stream (Bedrock's says so by its path)."""
        route = cloud_route(self.path)
        if route is not None and route.stream:
            return True
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def model(self) -> str | None:
        """The model the body names, or the path does (on Bedrock and Vertex)."""
        model = self.body.get("model") if isinstance(self.body, dict) else None
        route = cloud_route(self.path)
        if not isinstance(model, str) and route is not None:
            return route.model
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's `messages`, or an empty list when there are none."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return list(messages) if isinstance(messages, list) else []

    @property
    def cache_breakpoints(self) -> list[str]:
        """Where the body carries `cache_control` markers: `system[0]`, `tools[2]`, ..."""
        return _marker_paths(self.body, "")

    @property
    def auth_scheme(self) -> Literal["x-api-key", "bearer", "sigv4"] | None:
        """Which credential the request carried; `x-api-key` wins when both are present."""
        if self.headers.get("x-api-key"):
            return "x-api-key"
        if _bearer_token(self.headers.get("authorization", "")):
            return "bearer"
        if sigv4_access_key(self.headers.get("authorization", "")):
            return "sigv4"
        return None

    @property
    def api_key(self) -> str | None:
        """The credential sent as `x-api-key` or as `Authorization: Bearer`, if any; for
        an AWS SigV4 signature, the access key id it names."""
        authorization = self.headers.get("authorization", "")
        return (
            self.headers.get("x-api-key")
            or _bearer_token(authorization)
            or sigv4_access_key(authorization)
        )


def _marker_paths(value: Any, path: str) -> list[str]:
    if isinstance(value, dict):
        own = [path] if value.get("cache_control") is not None else []
        return own + [
            found
            for key, item in value.items()
            for found in _marker_paths(item, f"{path}.{key}" if path else key)
        ]
    if isinstance(value, list):
        return [
            found for i, item in enumerate(value) for found in _marker_paths(item, f"{path}[{i}]")
        ]
    return []


def _bearer_token(authorization: str) -> str | None:
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


Handler: TypeAlias = Callable[[RecordedRequest], Reply]


# --- builders ----------------------------------------------------------------------------


def _json_copy(value: Any, what: str) -> Any:
    # A round trip both copies and fails early, at build time, on values JSON cannot carry.
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise UsageError(f"{what} must be JSON-serialisable: {error}") from None


def _tool_use_block(
    name: str, input: Mapping[str, Any], *, id: str | None = None
) -> dict[str, Any]:
    """A `tool_use` content block; the id is made up when not given."""
    return {
        "type": "tool_use",
        "id": id if id is not None else f"toolu_fake_{uuid.uuid4().hex[:20]}",
        "name": name,
        "input": _json_copy(dict(input), "input"),
    }


def _message(
    content: Sequence[str | Mapping[str, Any]],
    *,
    stop_reason: str | None = None,
    model: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 10,
    id: str | None = None,
    cache_creation_input_tokens: int | None = None,
    cache_read_input_tokens: int | None = None,
    usage: Mapping[str, Any] | None = None,
) -> MessageReply:
    """A message from content blocks; a plain string is a text block.

    `stop_reason` defaults to `tool_use` when a block is a tool use, else `end_turn`;
    `model` defaults to the model the request named. The `cache_*` counts are what the
    usage reports for the prompt cache (null, as for a request that used none, if None).
    `usage` is a raw usage block sent as it is instead, for answers whose counts are
    wrong: `usage={"input_tokens": -5, "output_tokens": 10**400}`.
    """
    blocks = tuple(
        {"type": "text", "text": block}
        if isinstance(block, str)
        else _json_copy(dict(block), "content block")
        for block in content
    )
    if stop_reason is None:
        uses_tool = any(block.get("type") == "tool_use" for block in blocks)
        stop_reason = "tool_use" if uses_tool else "end_turn"
    return MessageReply(
        blocks,
        stop_reason,
        model,
        input_tokens,
        output_tokens,
        id,
        cache_creation_input_tokens,
        cache_read_input_tokens,
        None if usage is None else _json_copy(dict(usage), "usage"),
    )


def _text(
    text: str,
    *,
    stop_reason: str = "end_turn",
    model: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 10,
    cache_creation_input_tokens: int | None = None,
    cache_read_input_tokens: int | None = None,
    usage: Mapping[str, Any] | None = None,
) -> MessageReply:
    """A message with one text block (`usage`: a raw usage block, as for `message`)."""
    return _message(
        [text],
        stop_reason=stop_reason,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_creation_input_tokens=cache_creation_input_tokens,
        cache_read_input_tokens=cache_read_input_tokens,
        usage=usage,
    )


def _tool_use(
    name: str,
    input: Mapping[str, Any],
    *,
    id: str | None = None,
    text: str | None = None,
    model: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 10,
    cache_creation_input_tokens: int | None = None,
    cache_read_input_tokens: int | None = None,
    usage: Mapping[str, Any] | None = None,
) -> MessageReply:
    """A message that calls one tool, after an optional text block (`usage` as for
    `message`)."""
    blocks: list[str | Mapping[str, Any]] = [] if text is None else [text]
    blocks.append(_tool_use_block(name, input, id=id))
    return _message(
        blocks,
        stop_reason="tool_use",
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_creation_input_tokens=cache_creation_input_tokens,
        cache_read_input_tokens=cache_read_input_tokens,
        usage=usage,
    )


def _error(
    status: int,
    type: str | None = None,
    message: str | None = None,
    *,
    retry_after: float | str | None = None,
    retry_after_ms: float | None = None,
    should_retry: bool | None = None,
    headers: Mapping[str, str] | None = None,
    error_code: str | None = None,
) -> ErrorReply:
    """An API error; `type` and `message` default to what the real API says for `status`.

    `retry_after`, `retry_after_ms` and `should_retry` set the `retry-after`,
    `retry-after-ms` and `x-should-retry` headers the SDK reads; `error_code` the body's
    `error.details.error_code` (`error(429, error_code="enforced_spend_limit_reached")`
    is a spent monthly quota).
    """
    if not 400 <= status <= 599:
        raise UsageError(f"status must be an HTTP error status (400-599), got {status}")
    error_type = type if type is not None else _ERROR_TYPES.get(status, "api_error")
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["retry-after"] = (
            retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        )
    if retry_after_ms is not None:
        all_headers["retry-after-ms"] = f"{retry_after_ms:g}"
    if should_retry is not None:
        all_headers["x-should-retry"] = "true" if should_retry else "false"
    text = message if message is not None else _ERROR_MESSAGES.get(error_type, error_type)
    return ErrorReply(status, error_type, text, all_headers, error_code)


def _garbage(
    body: str | bytes = "<html><body><h1>502 Bad Gateway</h1></body></html>",
    *,
    status: int = 502,
    content_type: str = "text/html",
    headers: Mapping[str, str] | None = None,
) -> RawReply:
    """A body that is not the JSON the SDK expects: by default a proxy's HTML 502.

    `FakeMessagesAPI.garbage("{not json", status=200, content_type="application/json")`
    is a success status with an unparseable body.
    """
    raw = body.encode() if isinstance(body, str) else body
    return RawReply(status, raw, content_type, dict(headers or {}))


def _slow(delay: float, reply: Reply) -> SlowReply:
    """`reply`, held back for `delay` seconds: for client timeout tests."""
    if delay < 0:
        raise UsageError(f"delay must be >= 0, got {delay}")
    return SlowReply(delay, reply)


def _stream_error(
    reply: MessageReply | None = None,
    *,
    after_events: int = 4,
    type: str = "overloaded_error",
    message: str = "Overloaded",
) -> StreamErrorReply:
    """A stream that breaks: the first `after_events` events of `reply`, then `error`.

    With the defaults the client sees `message_start`, `ping`, `content_block_start` and
    one text delta of "partial answer" before the `overloaded_error`. Only a streaming
    request can be answered this way.
    """
    if after_events < 0:
        raise UsageError(f"after_events must be >= 0, got {after_events}")
    return StreamErrorReply(
        reply if reply is not None else _text("partial answer"), after_events, type, message
    )


def _bedrock_error(
    exception: str, message: str | None = None, *, status: int | None = None
) -> RawReply:
    """Claude on Bedrock's own error: `error("ThrottlingException")` is its 429, with
    the `x-amzn-errortype` header and `{"message": ...}` body (`status` for a name not
    in `BEDROCK_EXCEPTIONS`)."""
    code, body, headers = bedrock_error(exception, message, status=status)
    return RawReply(code, body, "application/json", headers)


def _vertex_error(status: int, message: str | None = None) -> RawReply:
    """Vertex AI's own error (a Google API error): `vertex_error(429)` is its quota 429."""
    return RawReply(status, vertex_error(status, message), "application/json")


# --- wire format -------------------------------------------------------------------------


def _message_json(reply: MessageReply, *, message_id: str, model: str) -> dict[str, Any]:
    return {
        "id": reply.id if reply.id is not None else message_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model if reply.model is not None else model,
        "content": [copy.deepcopy(dict(block)) for block in reply.content],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": copy.deepcopy(dict(reply.usage))
        if reply.usage is not None
        else {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": reply.cache_creation_input_tokens,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
        },
    }


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _stream_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events the real API sends for `message`, in order."""
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        # The real API reports the prompt's tokens, cached ones included, at the start.
        "usage": {**message["usage"], "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        deltas: list[dict[str, Any]] = []
        if block.get("type") == "text":
            first = {**block, "text": ""}
            # Word-sized pieces, as a model streams them.
            pieces = re.findall(r"\s*\S+\s*", block["text"]) or [block["text"]]
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        elif block.get("type") == "tool_use":
            first = {**block, "input": {}}
            pieces = _chunks(json.dumps(block["input"]), 16)
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        else:
            first = block
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": first},
            )
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"].get("output_tokens")},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _output_tokens(reply: Reply) -> int:
    """The output tokens a reply charges to its model's rate limit."""
    if isinstance(reply, SlowReply):
        return _output_tokens(reply.reply)
    message = reply.reply if isinstance(reply, StreamErrorReply) else reply
    if not isinstance(message, MessageReply):
        return 0
    # A raw usage block may say anything: only a count is charged.
    counted = message.output_tokens if message.usage is None else message.usage.get("output_tokens")
    return counted if isinstance(counted, int) and counted >= 0 else 0


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _error_body(error_type: str, message: str, error_code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": error_type, "message": message}
    if error_code is not None:
        error["details"] = {"error_code": error_code}
    return {"type": "error", "error": error}


class FakeMessagesAPI(ScriptedServer[Reply, RecordedRequest]):
    """A scripted Anthropic Messages API on `127.0.0.1`, on a free port.

    Replies come from a queue, in order (`FakeMessagesAPI(reply, ...)`, `enqueue(...)`);
    once it is empty, from `handler` (a function of the `RecordedRequest`), if set.
    Every request is recorded in `requests`. Requests must carry an API key, as
    `x-api-key` or `Authorization: Bearer` (or exactly `api_key` when given), or they are
    answered 401 `authentication_error`; other paths than `POST /v1/messages` (and the
    Bedrock and Vertex AI paths of Claude, `/model/{model}/invoke...` and
    `.../publishers/anthropic/models/{model}:rawPredict`) get 404. `POST /oauth2/token`
    sells a Google access token, for a service account key whose `token_uri` points here.

    Build replies with the static builders: `text`, `tool_use`, `tool_use_block`,
    `message`, `error`, `garbage`, `slow` and `stream_error`; `bedrock_error` and
    `vertex_error` for those platforms' own error shapes.

    Requests are served concurrently, each in its own thread; the script and the records
    are guarded by one lock, so tests may enqueue and read while requests are in flight.

    It can also play a crowded server, before the script answers: `rate_limit` (token
    buckets per model, with the real rate-limit headers on every answer and 429 with
    `retry-after` when a request does not fit), `overload` (529 bursts) and
    `exhaust_quota` (429 with the spend-limit error code until a reset hours away);
    `advance` moves the fake's clock so a recorded sleep "waits" without waiting. A
    request refused this way takes no reply from the script. On a Bedrock path these
    refusals are Bedrock's: `ThrottlingException`, `ServiceUnavailableException`,
    `ServiceQuotaExceededException`.
    """

    text = staticmethod(_text)
    tool_use = staticmethod(_tool_use)
    tool_use_block = staticmethod(_tool_use_block)
    message = staticmethod(_message)
    error = staticmethod(_error)
    garbage = staticmethod(_garbage)
    slow = staticmethod(_slow)
    stream_error = staticmethod(_stream_error)
    bedrock_error = staticmethod(_bedrock_error)
    vertex_error = staticmethod(_vertex_error)

    def __init__(
        self,
        *replies: Reply,
        handler: Handler | None = None,
        api_key: str | None = None,
        require_auth: bool = True,
        model: str = _DEFAULT_MODEL,
    ) -> None:
        super().__init__("FakeMessagesAPI", replies, handler)
        self._api_key = api_key
        self._require_auth = require_auth
        self._model = model
        self._load = Load()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as `base_url`, e.g. `http://127.0.0.1:54321`."""
        return self._server.base_url

    # load: rate limits, overload bursts, a spent quota

    def rate_limit(
        self,
        requests_per_minute: int | None = None,
        input_tokens_per_minute: int | None = None,
        output_tokens_per_minute: int | None = None,
        *,
        model: str | None = None,
        minute: float = 60.0,
    ) -> None:
        """Limit `model` (every model when None, each with buckets of its own) per minute.

        Token buckets replenished continuously, as the real API's: every answer for the
        model carries `anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-`
        `{limit,remaining,reset}` (reset: the RFC 3339 time the bucket is full again), and
        a request that does not fit is answered 429 `rate_limit_error` with `retry-after`.
        Input tokens are estimated as the JSON of `system`, `messages` and `tools` over
        four; `max_tokens` is reserved from the output bucket, then the reply's own
        output tokens are charged. `minute` is how many seconds a minute lasts, so a
        benchmark can run one in half a second (`retry-after` and resets are fractional
        then). Called again, it replaces the model's limits with full buckets; with no
        limit, it lifts them.
        """
        per_minute = {
            family: whole(f"FakeMessagesAPI.rate_limit({option}=)", value, at_least=1)
            for family, option, value in (
                ("requests", "requests_per_minute", requests_per_minute),
                ("input-tokens", "input_tokens_per_minute", input_tokens_per_minute),
                ("output-tokens", "output_tokens_per_minute", output_tokens_per_minute),
            )
            if value is not None
        }
        number("FakeMessagesAPI.rate_limit(minute=)", minute, above=True, unit="seconds")
        self._load.set_limits(model, per_minute, minute)

    def overload(
        self,
        requests: int | None = None,
        *,
        share: float = 1.0,
        seconds: float | None = None,
        model: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer 529 `overloaded_error` to `model`'s requests (any model's when None).

        `overload(3)`: the next 3 requests. `overload(share=0.5, seconds=2)`: every
        other request for the next 2 seconds (spread evenly, never at random). With
        neither a count nor a window, until `overload(0)` ends it. `retry_after` adds
        that header to the 529s. Called again, it replaces the model's burst.
        """
        if requests is not None:
            whole("FakeMessagesAPI.overload(requests=)", requests, at_least=0)
        number("FakeMessagesAPI.overload(share=)", share, at_most=1.0)
        if seconds is not None:
            number("FakeMessagesAPI.overload(seconds=)", seconds, unit="seconds")
        if retry_after is not None:
            number("FakeMessagesAPI.overload(retry_after=)", retry_after, unit="seconds")
        self._load.set_burst(model, requests, share, seconds, retry_after)

    def exhaust_quota(
        self,
        resets_in: float = 4 * 3600,
        *,
        model: str | None = None,
        error_code: str | None = "enforced_spend_limit_reached",
        retry_after: bool = True,
    ) -> None:
        """Answer every request for `model` (any model's when None) as a spent quota,
        until it resets `resets_in` seconds from now (`resets_in=0` ends it at once).

        The answer is the real one for a spent monthly quota: 429 `rate_limit_error` with
        `error.details.error_code` (`enforced_spend_limit_reached`; None leaves the
        details out, a bare 429 whose only sign is its far reset) and a message saying
        when access returns. `retry-after` carries the seconds to the reset unless
        `retry_after=False` (the real API sends none with a spend limit).
        """
        number("FakeMessagesAPI.exhaust_quota(resets_in=)", resets_in, unit="seconds")
        self._load.set_quota(model, resets_in, error_code, retry_after)

    def advance(self, seconds: float) -> None:
        """Move the fake's clock forward: buckets refill and bursts and quotas end as if
        `seconds` had passed. `RecordingSleep(advance=api.advance)` is a sleep the
        server sees without the test waiting."""
        number("FakeMessagesAPI.advance(seconds=)", seconds, unit="seconds")
        self._load.advance(seconds)

    def assert_authenticated(self, api_key: str | None = None) -> None:
        """Assert that requests were made and every one carried a key (`api_key`, if given)."""
        requests = self.requests
        if not requests:
            raise AssertionError("FakeMessagesAPI received no requests")
        for request in requests:
            if request.api_key is None:
                raise AssertionError(f"request #{request.index} carried no API key")
            if api_key is not None and request.api_key != api_key:
                raise AssertionError(f"request #{request.index} carried another API key")

    # serving (runs in werkzeug's request threads)

    def _record(self, http: Request) -> RecordedRequest:
        raw = http.get_data()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers: dict[str, str] = {}
        for name, value in http.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return self._kept(
            lambda index: RecordedRequest(
                index=index,
                request_id=f"req_fake_{index + 1:06d}",
                method=http.method,
                path=http.path,
                query=http.query_string.decode("latin-1"),
                headers=MappingProxyType(headers),
                raw_body=raw,
                body=body,
            )
        )

    def _server_error(self, problem: str) -> Reply:
        return _error(500, "api_error", problem)

    def _respond(self, http: Request) -> Response:
        request = self._record(http)
        if (request.method, request.path) == ("POST", GOOGLE_TOKEN_PATH):
            # Google's credentials buy their token here before they call Vertex.
            token = google_token(request.index)
            return self._with_headers(
                Response(token, 200, mimetype="application/json"), request, {}
            )
        key = request.api_key
        if self._require_auth and (key is None or (self._api_key not in (None, key))):
            message = "invalid x-api-key" if key is not None else "x-api-key header is required"
            return self._error_response(request, _error(401, message=message))
        served = request.path == "/v1/messages" or cloud_route(request.path) is not None
        if request.method != "POST" or not served:
            return self._error_response(
                request, _error(404, message=f"{request.method} {request.path} is not served")
            )
        if not isinstance(request.body, dict):
            return self._error_response(request, _error(400, message="body must be JSON"))
        ticket = self._load.admit(request.model or self._model, request.body)
        route = cloud_route(request.path)
        if isinstance(ticket, Refusal) and route is not None and route.platform == "bedrock":
            exception = bedrock_exception_for(ticket.status, ticket.error_code)
            code, body, headers = bedrock_error(exception, ticket.message)
            bedrock = RawReply(code, body, "application/json", {**ticket.headers, **headers})
            return self._render(request, bedrock)
        if isinstance(ticket, Refusal):
            refusal = ErrorReply(
                ticket.status, ticket.type, ticket.message, ticket.headers, ticket.error_code
            )
            return self._error_response(request, refusal)
        reply = self._next_reply(request)
        response = self._render(request, reply)
        for name, value in self._load.settle(ticket, _output_tokens(reply)).items():
            # A scripted reply's own headers win over the buckets'.
            response.headers.setdefault(name, value)
        return response

    def _render(self, request: RecordedRequest, reply: Reply) -> Response:
        if isinstance(reply, SlowReply):
            if self._server.closing.wait(reply.delay):
                return self._error_response(request, _error(503, message="server closed"))
            return self._render(request, reply.reply)
        if isinstance(reply, ErrorReply):
            return self._error_response(request, reply)
        if isinstance(reply, RawReply):
            response = Response(reply.body, reply.status, content_type=reply.content_type)
            return self._with_headers(response, request, reply.headers)
        message = _message_json(
            reply if isinstance(reply, MessageReply) else reply.reply,
            message_id=request.request_id.replace("req_", "msg_", 1),
            model=request.model or self._model,
        )
        if isinstance(reply, StreamErrorReply):
            if not request.stream:
                problem = (
                    f"FakeMessagesAPI: request #{request.index} does not stream, "
                    "but its scripted reply is a stream_error"
                )
                self._add_problem(problem)
                return self._error_response(request, _error(500, "api_error", problem))
            events = _stream_events(message)[: reply.after_events]
            events.append(("error", _error_body(reply.type, reply.message)))
            return self._sse_response(request, events)
        if request.stream:
            return self._sse_response(request, _stream_events(message))
        response = Response(json.dumps(message), 200, content_type="application/json")
        return self._with_headers(response, request, {})

    def _sse_response(
        self, request: RecordedRequest, events: list[tuple[str, dict[str, Any]]]
    ) -> Response:
        def body() -> Iterator[bytes]:
            for name, data in events:
                yield _sse(name, data)

        route = cloud_route(request.path)
        if route is not None and route.platform == "bedrock":
            frames = event_stream(events)
            response = Response(frames, 200, content_type="application/vnd.amazon.eventstream")
            return self._with_headers(response, request, {})
        response = Response(body(), 200, content_type="text/event-stream; charset=utf-8")
        response.headers["cache-control"] = "no-cache"
        return self._with_headers(response, request, {})

    def _error_response(self, request: RecordedRequest, reply: ErrorReply) -> Response:
        response = Response(
            json.dumps(_error_body(reply.type, reply.message, reply.error_code)),
            reply.status,
            content_type="application/json",
        )
        return self._with_headers(response, request, reply.headers)

    @staticmethod
    def _with_headers(
        response: Response, request: RecordedRequest, headers: Mapping[str, str]
    ) -> Response:
        response.headers["request-id"] = request.request_id
        for name, value in headers.items():
            response.headers[name] = value
        return response

    def __repr__(self) -> str:
        return f"{repr(self._server)[:-1]}, {self.request_count} requests>"
