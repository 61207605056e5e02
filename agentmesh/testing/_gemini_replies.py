"""What `FakeGeminiAPI` answers: scripted replies and their Gemini API wire shapes.

The bodies are the Gemini Developer API's (camelCase JSON): a `GenerateContentResponse`
with candidates, usage metadata, a model version and a response id, or Google's error
object `{"error": {"code", "message", "status", "details": [...]}}` whose details carry
`type.googleapis.com/google.rpc.*` messages (RetryInfo, QuotaFailure, ErrorInfo,
BadRequest) as the real API sends them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from agentmesh.testing._fake_messages_api import RawReply

__all__ = [
    "GeminiAnswer",
    "GeminiError",
    "GeminiReply",
    "GeminiSlow",
    "GeminiStreamCut",
]

_RPC: Final = "type.googleapis.com/google.rpc."
STATUS_NAMES: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_MESSAGES: Final[dict[str, str]] = {
    "INVALID_ARGUMENT": "Request contains an invalid argument.",
    "UNAUTHENTICATED": "Request had invalid authentication credentials.",
    "PERMISSION_DENIED": "The caller does not have permission",
    "NOT_FOUND": "Requested entity was not found.",
    "ABORTED": "The operation was aborted.",
    "RESOURCE_EXHAUSTED": (
        "You exceeded your current quota, please check your plan and billing details."
    ),
    "CANCELLED": "The operation was cancelled.",
    "INTERNAL": "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    "UNAVAILABLE": "The model is overloaded. Please try again later.",
    "DEADLINE_EXCEEDED": "Deadline expired before operation could complete.",
}


@dataclass(frozen=True, slots=True)
class GeminiAnswer:
    """A `GenerateContentResponse`: JSON, or SSE chunks when the request streams."""

    parts: tuple[Mapping[str, Any], ...]
    finish_reason: str | None = "STOP"
    prompt_tokens: int = 10
    output_tokens: int = 10
    cached_tokens: int | None = None
    thoughts_tokens: int | None = None
    tool_use_prompt_tokens: int | None = None
    model_version: str | None = None
    finish_message: str | None = None
    prompt_feedback: Mapping[str, Any] | None = None
    """Sent as `promptFeedback`; with a `blockReason`, the answer has no candidate."""
    usage: Mapping[str, Any] | None = None
    """The `usageMetadata` sent as it is, in place of the counts above."""


@dataclass(frozen=True, slots=True)
class GeminiError:
    """An API error: Google's error object with an HTTP status and headers."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GeminiSlow:
    """`reply`, sent after `delay` seconds (cut short when the server closes)."""

    delay: float
    reply: GeminiReply


@dataclass(frozen=True, slots=True)
class GeminiStreamCut:
    """The first `after_chunks` SSE chunks of `answer`, then `error` or the end of the body.

    With no error, the stream ends without a finish reason: a dropped connection.
    """

    answer: GeminiAnswer
    after_chunks: int
    error: GeminiError | None = None


GeminiReply: TypeAlias = GeminiAnswer | GeminiError | RawReply | GeminiSlow | GeminiStreamCut
"""Anything a `FakeGeminiAPI` script may answer with; built with its static builders."""


# --- builders ----------------------------------------------------------------------------


def text(reply: str, *, finish_reason: str = "STOP", **counts: Any) -> GeminiAnswer:
    """A text answer (`**counts`: `prompt_tokens`, `cached_tokens`, `thoughts_tokens`, ...)."""
    return GeminiAnswer(parts=({"text": reply},), finish_reason=finish_reason, **counts)


def function_call(
    name: str,
    args: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    thought_signature: str | None = None,
) -> dict[str, Any]:
    """One `functionCall` part (the Developer API sends no `id` unless given here)."""
    call: dict[str, Any] = {"name": name, "args": dict(args or {})}
    if id is not None:
        call["id"] = id
    part: dict[str, Any] = {"functionCall": call}
    if thought_signature is not None:
        part["thoughtSignature"] = thought_signature
    return part


def tool_call(name: str, args: Mapping[str, Any] | None = None, **counts: Any) -> GeminiAnswer:
    """An answer asking for one function call."""
    return GeminiAnswer(parts=(function_call(name, args),), **counts)


def tool_calls(*parts: Mapping[str, Any], text: str = "", **counts: Any) -> GeminiAnswer:
    """An answer of `function_call(...)` parts, after an optional text."""
    lead = ({"text": text},) if text else ()
    return GeminiAnswer(parts=(*lead, *parts), **counts)


def safety_stop(
    finish_reason: str = "SAFETY", *, message: str | None = None, partial: str = ""
) -> GeminiAnswer:
    """An answer the safety filters stopped (finish reason `SAFETY`, `RECITATION`, ...)."""
    parts = ({"text": partial},) if partial else ()
    return GeminiAnswer(parts=parts, finish_reason=finish_reason, finish_message=message)


def blocked_prompt(block_reason: str = "SAFETY", *, message: str | None = None) -> GeminiAnswer:
    """A 200 with no candidate: the prompt itself was blocked (`promptFeedback`)."""
    feedback: dict[str, Any] = {"blockReason": block_reason}
    if message is not None:
        feedback["blockReasonMessage"] = message
    return GeminiAnswer(parts=(), finish_reason=None, output_tokens=0, prompt_feedback=feedback)


def error(
    status: int,
    message: str | None = None,
    *,
    status_name: str | None = None,
    details: Sequence[Mapping[str, Any]] = (),
    headers: Mapping[str, str] | None = None,
) -> GeminiError:
    """Google's error body for `status` (its canonical `status_name` unless given)."""
    name = status_name or STATUS_NAMES.get(status, "UNKNOWN")
    body = {
        "error": {
            "code": status,
            "message": message or _MESSAGES.get(name, "Unknown error."),
            "status": name,
            **({"details": [dict(d) for d in details]} if details else {}),
        }
    }
    return GeminiError(status, body, dict(headers or {}))


def rate_limited(
    retry_delay: float | None = 30.0,
    *,
    quota_id: str = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
    quota_value: str = "10",
    model: str = "gemini-2.5-flash",
) -> GeminiError:
    """429 RESOURCE_EXHAUSTED as the API sends it: QuotaFailure, Help and RetryInfo.

    A per-day `quota_id` (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`) is a
    spent daily quota.
    """
    details: list[dict[str, Any]] = [
        {
            "@type": _RPC + "QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/"
                    "generate_content_free_tier_requests",
                    "quotaId": quota_id,
                    "quotaDimensions": {"location": "global", "model": model},
                    "quotaValue": quota_value,
                }
            ],
        },
        {
            "@type": _RPC + "Help",
            "links": [
                {
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                }
            ],
        },
    ]
    if retry_delay is not None:
        details.append({"@type": _RPC + "RetryInfo", "retryDelay": f"{retry_delay:g}s"})
    message = (
        "You exceeded your current quota, please check your plan and billing details. "
        f"Quota exceeded for metric: {quota_id}, limit: {quota_value}, model: {model}"
    )
    return error(429, message, details=details)


def context_too_long(tokens: int = 1_048_577, limit: int = 1_048_576) -> GeminiError:
    """400 INVALID_ARGUMENT for a prompt over the model's context window."""
    return error(
        400,
        f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
    )


def bad_field(field_path: str, description: str) -> GeminiError:
    """400 INVALID_ARGUMENT naming the offending field (google.rpc.BadRequest)."""
    violation = {"field": field_path, "description": description}
    return error(
        400,
        f"Invalid value at '{field_path}': {description}",
        details=[{"@type": _RPC + "BadRequest", "fieldViolations": [violation]}],
    )


def invalid_key() -> GeminiError:
    """400 INVALID_ARGUMENT with ErrorInfo API_KEY_INVALID: what a wrong key gets."""
    info = {
        "@type": _RPC + "ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }
    return error(400, "API key not valid. Please pass a valid API key.", details=[info])


def garbage(
    status: int = 200, body: bytes = b"<html>Bad Gateway</html>", content_type: str = "text/html"
) -> RawReply:
    """A body that is no Gemini answer (a proxy's page)."""
    return RawReply(status, body, content_type)


def slow(delay: float, reply: GeminiReply) -> GeminiSlow:
    """`reply` after `delay` seconds."""
    return GeminiSlow(delay, reply)


def stream_cut(
    answer: GeminiAnswer, after_chunks: int = 1, *, error: GeminiError | None = None
) -> GeminiStreamCut:
    """A stream cut after `after_chunks` chunks, ending there or with `error`'s object."""
    return GeminiStreamCut(answer, after_chunks, error)


# --- wire shapes -------------------------------------------------------------------------


def usage_json(answer: GeminiAnswer) -> dict[str, Any]:
    if answer.usage is not None:
        return dict(answer.usage)
    usage: dict[str, Any] = {
        "promptTokenCount": answer.prompt_tokens,
        "candidatesTokenCount": answer.output_tokens,
        "totalTokenCount": answer.prompt_tokens
        + answer.output_tokens
        + (answer.thoughts_tokens or 0)
        + (answer.tool_use_prompt_tokens or 0),
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": answer.prompt_tokens}],
    }
    for key, value in (
        ("cachedContentTokenCount", answer.cached_tokens),
        ("thoughtsTokenCount", answer.thoughts_tokens),
        ("toolUsePromptTokenCount", answer.tool_use_prompt_tokens),
    ):
        if value is not None:
            usage[key] = value
    return usage


def answer_json(answer: GeminiAnswer, *, model: str, response_id: str) -> dict[str, Any]:
    """The `GenerateContentResponse` body of one answer."""
    body: dict[str, Any] = {}
    if answer.prompt_feedback is None or "blockReason" not in answer.prompt_feedback:
        candidate: dict[str, Any] = {"index": 0}
        if answer.parts:
            candidate["content"] = {"parts": [dict(p) for p in answer.parts], "role": "model"}
        if answer.finish_reason is not None:
            candidate["finishReason"] = answer.finish_reason
        if answer.finish_message is not None:
            candidate["finishMessage"] = answer.finish_message
        body["candidates"] = [candidate]
    if answer.prompt_feedback is not None:
        body["promptFeedback"] = dict(answer.prompt_feedback)
    body["usageMetadata"] = usage_json(answer)
    body["modelVersion"] = answer.model_version or model
    body["responseId"] = response_id
    return body


def stream_chunks(body: Mapping[str, Any], piece: int = 8) -> list[dict[str, Any]]:
    """The answer as the SSE chunks of `streamGenerateContent`: text in pieces, each
    function call whole, the finish reason and the full usage on the last chunk."""
    candidates = body.get("candidates") or [{}]
    candidate = candidates[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    pieces: list[dict[str, Any]] = []
    for part in parts:
        said = part.get("text")
        if isinstance(said, str) and len(said) > piece and len(part) == 1:
            pieces.extend({"text": said[i : i + piece]} for i in range(0, len(said), piece))
        else:
            pieces.append(dict(part))
    usage = body.get("usageMetadata") or {}
    head = {k: v for k, v in body.items() if k not in ("candidates", "usageMetadata")}
    chunks = [
        {
            "candidates": [{"content": {"parts": [p], "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": usage.get("promptTokenCount", 0)},
            **head,
        }
        for p in pieces
    ]
    last = {k: v for k, v in candidate.items() if k != "content"}
    if chunks:
        chunks[-1]["candidates"][0].update(last)
        chunks[-1]["usageMetadata"] = usage
    else:
        chunks.append(dict(body))  # no part to stream (a blocked prompt, a safety stop)
    return chunks


def sse(chunk: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\r\n\r\n".encode()
