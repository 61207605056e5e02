"""What `FakeChatCompletionsAPI` answers with, and how each answer looks on the wire.

The shapes are OpenAI's: a `chat.completion` object (or its `chat.completion.chunk`
stream, `data: [DONE]` last), and errors as `{"error": {message, type, param, code}}`
with `x-request-id`, `retry-after(-ms)` and `x-ratelimit-*` headers, as the API sends them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentmesh.errors import UsageError

__all__ = [
    "ChatCompletionReply",
    "ChatErrorReply",
    "ChatRawReply",
    "ChatReply",
    "ChatSlowReply",
    "ChatStreamCut",
    "completion_json",
    "error_json",
    "stream_chunks",
]


@dataclass(frozen=True, slots=True)
class ChatCompletionReply:
    """A chat completion; sent as JSON, or as chunks when the request streams."""

    content: str | None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    finish_reason: str = "stop"
    refusal: str | None = None
    model: str | None = None
    usage: Mapping[str, Any] | None = None
    """The `usage` object as sent; None sends none (as a stream without include_usage)."""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatErrorReply:
    """An API error: `{"error": {message, type, param, code}}`, a status and headers."""

    status: int
    message: str
    type: str | None
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatRawReply:
    """Bytes sent as they are, for bodies that are not what the SDK expects."""

    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatSlowReply:
    """`reply`, sent after `delay` seconds (cut short when the server closes)."""

    delay: float
    reply: ChatReply


@dataclass(frozen=True, slots=True)
class ChatStreamCut:
    """The first `after_chunks` chunks of `reply`'s stream, then `error` as a data event,
    or nothing more (the connection ends without a finish reason or `[DONE]`)."""

    reply: ChatCompletionReply
    after_chunks: int
    error: ChatErrorReply | None = None


ChatReply: TypeAlias = (
    ChatCompletionReply | ChatErrorReply | ChatRawReply | ChatSlowReply | ChatStreamCut
)
"""Anything a `FakeChatCompletionsAPI` script may answer with; build one with its builders."""

# What OpenAI says, by status, when a test names no type, code or message.
_BY_STATUS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: (
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model does not exist or you do not have access to it.",
    ),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
# ... and by error code, which decides over the status's defaults.
_BY_CODE: dict[str, tuple[str, str | None, str]] = {
    "context_length_exceeded": (
        "invalid_request_error",
        "messages",
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages.",
    ),
    "content_policy_violation": (
        "invalid_request_error",
        None,
        "Your request was rejected as a result of our safety system.",
    ),
    "invalid_prompt": (
        "invalid_request_error",
        None,
        "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
    ),
    "insufficient_quota": (
        "insufficient_quota",
        None,
        "You exceeded your current quota, please check your plan and billing details.",
    ),
}


def json_copy(value: Any, what: str) -> Any:
    """A JSON round trip: a copy, and an early failure on values JSON cannot carry."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise UsageError(f"{what} must be JSON-serialisable: {error}") from None


def usage_json(
    prompt_tokens: int = 10,
    completion_tokens: int = 10,
    *,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """A `usage` object as OpenAI reports it (cached and reasoning tokens in details)."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def tool_call_json(
    name: str, arguments: Mapping[str, Any] | str, id: str | None = None
) -> dict[str, Any]:
    """One entry of `message.tool_calls`; `arguments` a mapping, or JSON text as sent."""
    text = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(json_copy(dict(arguments), "arguments"))
    )
    return {
        "id": id if id is not None else f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def error_reply(
    status: int,
    message: str | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ChatErrorReply:
    """An error whose unset fields are what OpenAI says for `code`, else for `status`."""
    if not 400 <= status <= 599:
        raise UsageError(f"status must be an HTTP error status (400-599), got {status}")
    known_type, known_code, known_message = _BY_STATUS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error.")
    )
    known_param = None
    if code in _BY_CODE:
        known_type, known_param, known_message = _BY_CODE[code]
        known_code = code
    return ChatErrorReply(
        status,
        message if message is not None else known_message,
        type if type is not None else known_type,
        code if code is not None else known_code,
        param if param is not None else known_param,
        dict(headers or {}),
    )


def error_json(reply: ChatErrorReply) -> dict[str, Any]:
    return {
        "error": {
            "message": reply.message,
            "type": reply.type,
            "param": reply.param,
            "code": reply.code,
        }
    }


def completion_json(reply: ChatCompletionReply, *, id: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content,
        "refusal": reply.refusal,
        "annotations": [],
    }
    if reply.tool_calls:
        message["tool_calls"] = [dict(call) for call in reply.tool_calls]
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model if reply.model is not None else model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
        ],
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    if reply.usage is not None:
        body["usage"] = json_copy(dict(reply.usage), "usage")
    return body


def stream_chunks(
    reply: ChatCompletionReply, *, id: str, model: str, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed answer, as OpenAI sends them (without `[DONE]`).

    The role first, the text in two pieces, each tool call's id and name then its
    arguments in two pieces, the finish reason, and the usage in a last chunk without
    choices when the request asked for it (`usage: null` on every other chunk then).
    """
    top = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model if reply.model is not None else model,
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        body = {**top, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return {**body, "usage": None} if include_usage else body

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for text, key in ((reply.content, "content"), (reply.refusal, "refusal")):
        for piece in _halves(text or ""):
            yield chunk({key: piece})
    for index, call in enumerate(reply.tool_calls):
        function = call["function"]
        opening = {"name": function["name"], "arguments": ""}
        yield chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": opening}
                ]
            }
        )
        for piece in _halves(function["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {**top, "choices": [], "usage": json_copy(dict(reply.usage or {}), "usage") or None}


def _halves(text: str) -> Sequence[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]
