"""The builders of `FakeChatCompletionsAPI`'s replies (its static methods)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentmesh.errors import UsageError
from agentmesh.testing._chat_replies import (
    ChatCompletionReply,
    ChatErrorReply,
    ChatRawReply,
    ChatReply,
    ChatSlowReply,
    ChatStreamCut,
    error_reply,
    json_copy,
    tool_call_json,
    usage_json,
)

__all__ = [
    "completion",
    "content_filter",
    "error",
    "garbage",
    "refusal",
    "slow",
    "stream_cut",
    "text",
    "tool_call",
    "tool_calls",
]


def completion(
    content: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    *,
    finish_reason: str | None = None,
    refusal: str | None = None,
    model: str | None = None,
    prompt_tokens: int = 10,
    completion_tokens: int = 10,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
    usage: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ChatCompletionReply:
    """A chat completion. `finish_reason` defaults to `tool_calls` when there are tool
    calls, else `stop`; `usage` is a raw usage object sent as it is, instead of the one
    built from the counts (`cached_tokens` and `reasoning_tokens` go in its details)."""
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    counts = usage_json(
        prompt_tokens,
        completion_tokens,
        cached_tokens=cached_tokens,
        reasoning_tokens=reasoning_tokens,
    )
    return ChatCompletionReply(
        content,
        tuple(json_copy(dict(call), "tool call") for call in tool_calls),
        finish_reason,
        refusal,
        model,
        counts if usage is None else json_copy(dict(usage), "usage"),
        dict(headers or {}),
    )


def text(text: str, **options: Any) -> ChatCompletionReply:
    """An answer of plain text (options as for `completion`)."""
    return completion(text, **options)


def tool_calls(
    *calls: tuple[str, Mapping[str, Any] | str], text: str | None = None, **options: Any
) -> ChatCompletionReply:
    """An answer calling tools: `tool_calls(("search", {"q": "x"}), ("fetch", {...}))`;
    arguments given as a string are sent as they are (malformed JSON, say)."""
    return completion(text, [tool_call_json(name, args) for name, args in calls], **options)


def tool_call(
    name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None, **options: Any
) -> ChatCompletionReply:
    """An answer calling one tool (`id`: the call id, made up when None)."""
    return completion(options.pop("text", None), [tool_call_json(name, arguments, id)], **options)


def refusal(
    text: str = "I'm sorry, I can't help with that.", **options: Any
) -> ChatCompletionReply:
    """The model's refusal: `message.refusal` set, `content` null."""
    return completion(None, refusal=text, **options)


def content_filter(text: str | None = None, **options: Any) -> ChatCompletionReply:
    """An answer the content filter stopped: `finish_reason: content_filter`."""
    return completion(text, finish_reason="content_filter", **options)


def error(
    status: int,
    message: str | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    retry_after: float | str | None = None,
    retry_after_ms: float | None = None,
    ratelimit: Mapping[str, str | int] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ChatErrorReply:
    """An API error; what is unset is what OpenAI says for `code`, else for `status`.

    `error(429)` is a rate limit, `error(429, code="insufficient_quota")` a spent quota,
    `error(400, code="context_length_exceeded")` a prompt too long, `error(400,
    param="messages[0].content")` a bad field. `retry_after`, `retry_after_ms` set those
    headers; `ratelimit={"remaining-requests": 0, "reset-requests": "20s"}` the
    `x-ratelimit-*` ones.
    """
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["retry-after"] = (
            retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        )
    if retry_after_ms is not None:
        all_headers["retry-after-ms"] = f"{retry_after_ms:g}"
    for name, value in (ratelimit or {}).items():
        all_headers[f"x-ratelimit-{name}"] = str(value)
    return error_reply(status, message, type=type, code=code, param=param, headers=all_headers)


def garbage(
    body: str | bytes = "<html><body><h1>502 Bad Gateway</h1></body></html>",
    *,
    status: int = 502,
    content_type: str = "text/html",
) -> ChatRawReply:
    """A body that is not the JSON the SDK expects: by default a proxy's HTML 502."""
    raw = body.encode() if isinstance(body, str) else body
    return ChatRawReply(status, raw, content_type)


def slow(delay: float, reply: ChatReply) -> ChatSlowReply:
    """`reply`, held back for `delay` seconds: for timeout tests."""
    if delay < 0:
        raise UsageError(f"delay must be >= 0, got {delay}")
    return ChatSlowReply(delay, reply)


def stream_cut(
    reply: ChatCompletionReply | None = None,
    *,
    after_chunks: int = 2,
    error: ChatErrorReply | None = None,
) -> ChatStreamCut:
    """A stream that breaks after `after_chunks` chunks of `reply`: with `error` sent as
    a data event (as OpenAI reports a failure mid-stream), or just ended."""
    if after_chunks < 0:
        raise UsageError(f"after_chunks must be >= 0, got {after_chunks}")
    return ChatStreamCut(
        reply if reply is not None else text("partial answer"), after_chunks, error
    )
