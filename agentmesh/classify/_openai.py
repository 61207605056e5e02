"""What the `openai` SDK's exceptions mean (OpenAI, and any OpenAI-compatible server).

Loaded, like the other SDKs' mappings, only once the SDK itself has been imported.

    openai.APIStatusError               by the body's error code, then by HTTP status:
      code context_length_exceeded      validation  context_too_long
      code content_policy_violation,    business    refused (the provider's reason)
        invalid_prompt
      429 code insufficient_quota       business    quota_exhausted, not retryable
      429, limits back within           transient   rate_limited (retry_after: retry-after(-ms),
        QUOTA_RESET_AFTER                             else x-ratelimit-reset-requests/-tokens
                                                      of the limit used up)
      429, limits back later            business    quota_exhausted (retry_after, resumeAt)
      400/422 naming error.param        validation  invalid_request (the field named)
      503 "overloaded"                  transient   overloaded
      400, 401, 402, 403, 404, 408,     as for the Messages API: 401 authentication_failed,
        409, 413, 422, 5xx                403 permission_denied, 404 not_found, 5xx ...
      any other status                  other       provider_error (status, code in details)
    openai.APIError (mid-stream error)  by its type: server_error -> transient server_error,
                                          otherwise other provider_error (type, code in details)
    openai.APIResponseValidationError   transient   invalid_response
    openai.APITimeoutError              transient   timeout
    openai.APIConnectionError           transient   unavailable
    openai.ContentFilterFinishReasonError business  refused
    openai.OpenAIError without a key    permission  authentication_failed

The details of each name `x-request-id`, the status, the error's type, code and param.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from agentmesh._numbers import duration_seconds
from agentmesh.classify._mappers import Mapper, describe, text
from agentmesh.classify._sdk import (
    SERVER_MAY_HAVE_ACTED,
    _http_error,
    _limit_reached,
    _never_sent,
    _with_request_id,
)
from agentmesh.envelope import ErrorCategory
from agentmesh.errors import (
    AgentError,
    BusinessError,
    InvalidInput,
    PermissionDenied,
    TransientError,
)

if TYPE_CHECKING:
    import openai

__all__ = ["mappers", "may_have_taken_effect"]

_CONTEXT_TOO_LONG: Final = frozenset({"context_length_exceeded", "string_above_max_length"})
_REFUSED: Final = frozenset({"content_policy_violation", "invalid_prompt", "content_filter"})
_QUOTA: Final = "insufficient_quota"
# The statuses below 500 whose meaning is known (as for the Messages API, in `_sdk`).
_KNOWN_STATUSES: Final = frozenset({400, 401, 402, 403, 404, 408, 409, 413, 422, 429})
_MAX_MESSAGE: Final = 500


def _rate_limit_reset(headers: Mapping[str, str]) -> float | None:
    """Seconds until the limits a 429 ran out of are back.

    The latest reset of the limits reported used up (a call needs all of them); when none
    reads 0, the token limit's: a request can be refused for more tokens than remain.
    """
    resets: dict[str, float] = {}
    exhausted: list[float] = []
    for family in ("requests", "tokens"):
        reset = duration_seconds(headers.get(f"x-ratelimit-reset-{family}"))
        if reset is None:
            continue
        resets[family] = reset
        try:
            if float(headers.get(f"x-ratelimit-remaining-{family}", "")) < 1:
                exhausted.append(reset)
        except ValueError:
            continue
    if exhausted:
        return max(exhausted)
    return resets.get("tokens")


def _field(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _facts(status: int | None, exc: openai.APIError) -> list[str]:
    facts = ["provider: openai"] if status is None else [f"HTTP {status}", "provider: openai"]
    for name in ("type", "code", "param"):
        value = _field(getattr(exc, name, None))
        if value is not None:
            facts.append(f"{name}: {value}")
    return facts


def _api_message(exc: openai.APIError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, Mapping) else None
    return _field(message) or exc.message[:_MAX_MESSAGE]


def _openai_status(exc: openai.APIStatusError) -> AgentError:
    headers = exc.response.headers
    status = exc.status_code
    code = _field(exc.code)
    body_type = _field(exc.type)
    message = _api_message(exc)
    facts = _facts(status, exc)
    if code in _CONTEXT_TOO_LONG:
        error: AgentError = InvalidInput(message, error_type="context_too_long")
        return _with_request_id(error, headers, facts)
    if code in _REFUSED:
        refused = BusinessError(message, error_type="refused", user_message=message)
        return _with_request_id(refused, headers, facts)
    if status == 429:
        quota = _QUOTA in (code, body_type)
        reset = None if quota else _rate_limit_reset(headers)
        return _limit_reached(headers, None, message, facts, reset=reset, spent=quota)
    param = _field(exc.param)
    if status in (400, 422) and param is not None:
        named = message if param in message else f"{message} (field: {param})"
        invalid = InvalidInput(named, error_type="invalid_request", field=param)
        return _with_request_id(invalid, headers, facts)
    if status == 503 and "overload" in message.lower():
        return _with_request_id(TransientError(message, error_type="overloaded"), headers, facts)
    if status < 500 and status not in _KNOWN_STATUSES:
        # A status the table does not know (418, 451, ...): named, not guessed at.
        unknown = AgentError(message, category=ErrorCategory.OTHER, error_type="provider_error")
        return _with_request_id(unknown, headers, facts)
    return _http_error(status, body_type, headers, message, facts)


def _openai_stream_error(exc: openai.APIError) -> AgentError:
    """An error event inside a streamed 200: the server failed after it began to answer."""
    kind = _field(exc.type)
    facts = "; ".join(_facts(None, exc))
    message = _api_message(exc)
    if kind in ("server_error", "api_error"):
        return TransientError(message, error_type="server_error", details=facts)
    if kind in ("rate_limit_error", "rate_limit_exceeded", "tokens", "requests"):
        return TransientError(message, error_type="rate_limited", details=facts)
    return AgentError(
        message, category=ErrorCategory.OTHER, error_type="provider_error", details=facts
    )


def _openai_bad_response(exc: openai.APIResponseValidationError) -> AgentError:
    return _with_request_id(
        TransientError(exc.message, error_type="invalid_response"),
        exc.response.headers,
        [f"HTTP {exc.status_code}, body not as expected", "provider: openai"],
    )


def _openai_connection(exc: openai.APIConnectionError) -> AgentError:
    import openai

    # The SDK's message is generic; the cause says what happened on the wire.
    cause = exc.__cause__
    details = describe(cause) if cause is not None else None
    error_type = "timeout" if isinstance(exc, openai.APITimeoutError) else "unavailable"
    return TransientError(exc.message, error_type=error_type, details=details)


def _openai_filtered(exc: openai.ContentFilterFinishReasonError) -> AgentError:
    return BusinessError(text(exc), error_type="refused", details=type(exc).__qualname__)


def _openai_other(exc: openai.OpenAIError) -> AgentError:
    message = text(exc)
    if "api_key" in message:
        # The client was built with no key: no request can be made.
        return PermissionDenied(message, error_type="authentication_failed", details="openai")
    return AgentError(
        message, category=ErrorCategory.OTHER, error_type="provider_error", details=describe(exc)
    )


def mappers() -> dict[type[BaseException], Mapper]:
    """The `openai` SDK's exceptions -> their mappers (the SDK is already imported)."""
    import openai

    return {
        openai.APIStatusError: _openai_status,
        openai.APIError: _openai_stream_error,
        openai.APIResponseValidationError: _openai_bad_response,
        openai.APIConnectionError: _openai_connection,
        openai.ContentFilterFinishReasonError: _openai_filtered,
        openai.OpenAIError: _openai_other,
    }


def may_have_taken_effect(exc: BaseException) -> bool | None:
    """Whether an `openai` SDK failure may have let the call act; None when not one."""
    openai = sys.modules.get("openai")
    if openai is None or not isinstance(exc, openai.OpenAIError):
        return None
    if isinstance(exc, openai.APIConnectionError):
        return not isinstance(exc.__cause__, _never_sent())  # APITimeoutError too
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in SERVER_MAY_HAVE_ACTED
    if isinstance(exc, openai.APIError):
        return True  # a body that did not parse, an error mid-stream: the server answered
    return None
