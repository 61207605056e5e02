"""What the SDKs' exceptions mean: `httpx2`, the `anthropic` SDK and the MCP SDK.

`agentmesh.classify` loads these mappings only once the SDK itself has been imported by
someone (an exception of the SDK cannot exist before), so importing agentmesh costs
none of them: the anthropic SDK alone takes about a second to import.

    anthropic.APIStatusError            by HTTP status, then by the body's error type;
                                          a 429 by how far its limit's reset is:
      reset within QUOTA_RESET_AFTER    transient   rate_limited (retry_after: the reset)
      reset later, or a spend limit     business    quota_exhausted, not retryable,
                                          retry_after and `resumeAt` the reset
      prompt too long, Bedrock's errors, unknown 4xx: see `_claude`
    anthropic.APIResponseValidationError transient  invalid_response
    anthropic.APITimeoutError           transient   timeout
    anthropic.APIConnectionError        transient   unavailable
    anthropic.RetryableError            transient   unavailable
    anthropic.CredentialsError          permission  authentication_failed
    httpx2.TimeoutException             transient   timeout
    httpx2.TransportError               transient   unavailable
    httpx2.HTTPStatusError              by HTTP status (a 429 as above)
    mcp.MCPError by its JSON-RPC code:
      -32000 connection closed          transient   unavailable
      -32001 request timeout            transient   timeout
      -32602 invalid params             validation  invalid_params
      any other code                    other       mcp_error (the code in details)

The tool path of `agentmesh.mcp` raises its other failures itself (a lost connection,
a result with `isError: true`).

A provider's own rows are in a module of its own (`_google`: the `google-genai` SDK),
building on the shared HTTP meaning below; the classifier loads them beside these.
"""

from __future__ import annotations

import json
import math
import socket
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from agentmesh.classify._claude import claude_error, plain_message
from agentmesh.classify._mappers import Mapper, describe, text, timeout, unavailable
from agentmesh.envelope import ErrorCategory, ErrorType
from agentmesh.errors import (
    AgentError,
    BusinessError,
    InvalidInput,
    PermissionDenied,
    TransientError,
)

if TYPE_CHECKING:
    import anthropic
    import httpx2
    import mcp

__all__ = [
    "QUOTA_RESET_AFTER",
    "SDK_MAPPINGS",
    "SERVER_MAY_HAVE_ACTED",
    "may_have_taken_effect",
    "request_of",
]


# An MCP error's data can be large; its details keep the start.
_MAX_DATA: Final = 2000

_TRANSIENT = ErrorCategory.TRANSIENT
_VALIDATION = ErrorCategory.VALIDATION
_PERMISSION = ErrorCategory.PERMISSION

# What an HTTP status means. It is checked before the body's error type because the
# status is reliable even when the body is a proxy's HTML page.
_BY_STATUS: Final[dict[int, tuple[ErrorCategory, str]]] = {
    400: (_VALIDATION, "invalid_request"),
    401: (_PERMISSION, "authentication_failed"),
    402: (_PERMISSION, "billing_error"),
    403: (_PERMISSION, "permission_denied"),
    404: (_VALIDATION, "not_found"),
    408: (_TRANSIENT, "timeout"),
    409: (_TRANSIENT, "conflict"),
    413: (_VALIDATION, "request_too_large"),
    422: (_VALIDATION, "invalid_request"),
    429: (_TRANSIENT, "rate_limited"),
    503: (_TRANSIENT, "unavailable"),
    529: (_TRANSIENT, "overloaded"),
}

# The Messages API's `error.type` decides when the status does not: an overloaded_error
# behind a 500, or an error event in the middle of a streamed 200 response.
_BY_BODY_TYPE: Final[dict[str, tuple[ErrorCategory, str]]] = {
    "overloaded_error": (_TRANSIENT, "overloaded"),
    "rate_limit_error": (_TRANSIENT, "rate_limited"),
    "timeout_error": (_TRANSIENT, "timeout"),
    "api_error": (_TRANSIENT, "server_error"),
    "conflict_error": (_TRANSIENT, "conflict"),
    "invalid_request_error": (_VALIDATION, "invalid_request"),
    "not_found_error": (_VALIDATION, "not_found"),
    "request_too_large": (_VALIDATION, "request_too_large"),
    "authentication_error": (_PERMISSION, "authentication_failed"),
    "permission_error": (_PERMISSION, "permission_denied"),
    "billing_error": (_PERMISSION, "billing_error"),
}

QUOTA_RESET_AFTER: Final = 15 * 60.0
"""Seconds: a 429 whose limit resets further away than this is a spent quota, not a rate
limit. A rate limit is replenished within a minute; waiting a quarter of an hour or more
inside one task is never what a caller wants, and retrying sooner is refused anyway."""

# Error codes (`error.details.error_code`) of a 429 that is a spent quota whatever the
# headers say: the organisation's monthly tier limit, or its contract's.
_SPEND_LIMIT_CODES: Final = frozenset(
    {"enforced_spend_limit_reached", "contract_spend_limit_reached"}
)
# The Messages API's rate-limit header families (`anthropic-ratelimit-<family>-reset`).
_RATE_LIMIT_FAMILIES: Final = ("requests", "tokens", "input-tokens", "output-tokens")

# Statuses after which the server may already have acted on the request (every
# provider's HTTP API alike: the Messages API, Chat Completions, Gemini).
SERVER_MAY_HAVE_ACTED: Final = frozenset({500, 502, 504})
_MAX_BODY_MESSAGE: Final = 500


# --- httpx2 ----------------------------------------------------------------------------


def _httpx_status(exc: httpx2.HTTPStatusError) -> AgentError:
    response = exc.response
    # The URL's query string may hold a token: name the endpoint without it.
    url = exc.request.url.copy_with(query=None)
    facts = [f"HTTP {response.status_code}", f"{exc.request.method} {url}"]
    message = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    if response.status_code == 429:
        return _limit_reached(response.headers, None, message, facts)
    return _http_error(response.status_code, None, response.headers, message, facts)


def _httpx2_mappers() -> dict[type[BaseException], Mapper]:
    import httpx2

    return {
        httpx2.TimeoutException: timeout,
        httpx2.TransportError: unavailable,
        httpx2.HTTPStatusError: _httpx_status,
    }


# --- anthropic -------------------------------------------------------------------------


def _anthropic_status(exc: anthropic.APIStatusError) -> AgentError:
    # The body is whatever the server sent: only trust fields of the expected type.
    body_type = exc.type if isinstance(exc.type, str) else None
    api_message = exc.api_message if isinstance(exc.api_message, str) else None
    facts = [f"HTTP {exc.status_code} {body_type}" if body_type else f"HTTP {exc.status_code}"]
    if exc.error_code:
        facts.append(f"error_code: {exc.error_code}")
    message = api_message or plain_message(exc.body) or exc.message[:_MAX_BODY_MESSAGE]
    # Context too long, Claude on Bedrock's own errors, a 4xx no table knows.
    known = frozenset(_BY_BODY_TYPE)
    decided = claude_error(
        exc.status_code, body_type, exc.response.headers, message, known_types=known
    )
    if decided is not None:
        facts += [decided.details] if decided.details else []
        return _with_request_id(decided, exc.response.headers, facts)
    if exc.status_code == 429:
        return _limit_reached(exc.response.headers, exc.error_code, message, facts)
    return _http_error(exc.status_code, body_type, exc.response.headers, message, facts)


def _anthropic_bad_response(exc: anthropic.APIResponseValidationError) -> AgentError:
    return _with_request_id(
        TransientError(exc.message, error_type="invalid_response"),
        exc.response.headers,
        [f"HTTP {exc.status_code}, body not as expected"],
    )


def _anthropic_connection(exc: anthropic.APIConnectionError) -> AgentError:
    import anthropic

    # The SDK's message is generic; the cause says what happened on the wire.
    cause = exc.__cause__
    details = describe(cause) if cause is not None else None
    error_type = "timeout" if isinstance(exc, anthropic.APITimeoutError) else "unavailable"
    return TransientError(exc.message, error_type=error_type, details=details)


def _anthropic_credentials(exc: anthropic.CredentialsError) -> AgentError:
    return PermissionDenied(
        text(exc), error_type="authentication_failed", details=type(exc).__qualname__
    )


def _anthropic_mappers() -> dict[type[BaseException], Mapper]:
    import anthropic

    return {
        anthropic.APIStatusError: _anthropic_status,
        anthropic.APIResponseValidationError: _anthropic_bad_response,
        anthropic.APIConnectionError: _anthropic_connection,
        # Raised by SDK middleware to ask for a retry; with the SDK's retries off it
        # reaches us.
        anthropic.RetryableError: unavailable,
        anthropic.CredentialsError: _anthropic_credentials,
    }


def _mcp_error(exc: mcp.MCPError) -> AgentError:
    # The SDK is imported by now (an exception of it exists): its codes, fixed by JSON-RPC.
    from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

    details = f"JSON-RPC error {exc.code}"
    if exc.data is not None:
        data = json.dumps(exc.data, separators=(",", ":"), default=repr)
        details += f"; data: {data[:_MAX_DATA]}"
    message = exc.message or f"JSON-RPC error {exc.code}"
    if exc.code == CONNECTION_CLOSED:
        return TransientError(message, error_type="unavailable", details=details)
    if exc.code == REQUEST_TIMEOUT:
        return TransientError(message, error_type="timeout", details=details)
    if exc.code == INVALID_PARAMS:
        return InvalidInput(message, error_type="invalid_params", details=details)
    return AgentError(
        message, category=ErrorCategory.OTHER, error_type="mcp_error", details=details
    )


def _mcp_mappers() -> dict[type[BaseException], Mapper]:
    import mcp

    return {mcp.MCPError: _mcp_error}


SDK_MAPPINGS: Final[dict[str, Callable[[], dict[type[BaseException], Mapper]]]] = {
    "httpx2": _httpx2_mappers,
    "anthropic": _anthropic_mappers,
    "mcp": _mcp_mappers,
}
"""The SDK's module name -> its mappings, built when the SDK is already imported."""


# --- shared HTTP meaning ---------------------------------------------------------------


def _http_error(
    status: int,
    body_type: str | None,
    headers: Mapping[str, str],
    message: str,
    facts: list[str],
) -> AgentError:
    if status in _BY_STATUS:
        category, error_type = _BY_STATUS[status]
    elif body_type in _BY_BODY_TYPE:
        category, error_type = _BY_BODY_TYPE[body_type]
    elif 400 <= status < 500:
        category, error_type = _VALIDATION, "invalid_request"
    else:
        # 5xx, or a failure the server reported after it had started a 2xx response.
        category, error_type = _TRANSIENT, "server_error"
    # The server knows best whether trying again can work (the SDK obeys this header too).
    should_retry = headers.get("x-should-retry", "").strip().lower()
    error = AgentError(
        message,
        category=category,
        error_type=error_type,
        retryable={"true": True, "false": False}.get(should_retry),
        retry_after=_retry_after(headers),
    )
    return _with_request_id(error, headers, facts)


def _limit_reached(
    headers: Mapping[str, str],
    error_code: str | None,
    message: str,
    facts: list[str],
    *,
    reset: float | None = None,
    spent: bool = False,
) -> AgentError:
    """A 429: a rate limit to wait out, or a quota spent until a reset far away.

    The wait is the server's `retry-after`, else `reset` (seconds the caller read from
    the body, as Google's RetryInfo), else the reset of the rate limits its headers say
    are used up. A spend-limit error code, or `spent`, is a quota whatever the wait; the
    monthly one (`enforced_spend_limit_reached`) resets, as Anthropic documents, on the
    first of the next month at 00:00 UTC when no header says otherwise.
    """
    now = time.time()
    wait = _retry_after(headers)
    if wait is None:
        wait = reset
    spend_limit = spent or error_code in _SPEND_LIMIT_CODES
    # The rate-limit headers tell when the per-minute limits return, not a spent quota.
    if wait is None and not spend_limit:
        wait = reset if reset is not None else _rate_limit_reset(headers, now)
    if wait is None and error_code == "enforced_spend_limit_reached":
        wait = _until_next_month(now)
    if not spend_limit and (wait is None or wait <= QUOTA_RESET_AFTER):
        should_retry = headers.get("x-should-retry", "").strip().lower()
        error = AgentError(
            message,
            category=_TRANSIENT,
            error_type="rate_limited",
            retryable={"true": True, "false": False}.get(should_retry),
            retry_after=wait,
        )
        return _with_request_id(error, headers, facts)
    user_message = "The model's usage limit is reached"
    if wait is not None:
        # Whole seconds, rounded up (past float noise): never before the server's reset.
        resume_at = datetime.fromtimestamp(math.ceil(round(now + wait, 3)), UTC)
        facts = [*facts, f"resumeAt: {resume_at:%Y-%m-%dT%H:%M:%SZ}"]
        user_message += f"; it resets at {resume_at:%Y-%m-%d %H:%M} UTC"
    quota = BusinessError(
        message,
        error_type=ErrorType.QUOTA_EXHAUSTED,
        retryable=False,
        retry_after=wait,
        user_message=user_message + ".",
    )
    return _with_request_id(quota, headers, facts)


def _rate_limit_reset(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds until every rate limit the headers say is used up is replenished.

    The latest of their resets: a call needs all of them back. None when no limit is
    reported as used up (the 429 then says nothing certain about when).
    """
    waits = []
    for family in _RATE_LIMIT_FAMILIES:
        prefix = f"anthropic-ratelimit-{family}"
        try:
            remaining = float(headers.get(f"{prefix}-remaining", ""))
            reset = datetime.fromisoformat(headers.get(f"{prefix}-reset", ""))
        except ValueError:
            continue
        if remaining < 1 and reset.tzinfo is not None:
            waits.append(max(0.0, reset.timestamp() - now))
    return max(waits) if waits else None


def _until_next_month(now: float) -> float:
    today = datetime.fromtimestamp(now, UTC)
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return datetime(year, month, 1, tzinfo=UTC).timestamp() - now


def _with_request_id(error: AgentError, headers: Mapping[str, str], facts: list[str]) -> AgentError:
    # The Messages API's `request-id`, OpenAI's `x-request-id`, Bedrock's its own.
    request_id = (
        headers.get("request-id") or headers.get("x-request-id") or headers.get("x-amzn-requestid")
    )
    error.details = "; ".join([f"request-id: {request_id}", *facts] if request_id else facts)
    return error


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait: `retry-after-ms`, then `retry-after` as seconds or an HTTP date."""
    for name, per_second in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) / per_second
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    try:
        import email.utils  # only for an HTTP-date Retry-After: most runs never parse one

        date = email.utils.parsedate_tz(headers.get("retry-after", ""))
        if date is None:
            return None
        # A date already past means "now".
        return max(0.0, email.utils.mktime_tz(date) - time.time())
    except (ValueError, OverflowError, IndexError):
        return None


def _never_sent() -> tuple[type[BaseException], ...]:
    """Failures before the request left this machine: nothing can have taken effect."""
    kinds: tuple[type[BaseException], ...] = (ConnectionRefusedError, socket.gaierror)
    httpx2 = sys.modules.get("httpx2")
    if httpx2 is not None:
        kinds += (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
    return kinds


def may_have_taken_effect(exc: BaseException) -> bool | None:
    """For the failures whose answer is known here, whether the call may have acted.

    None when `exc` says nothing either way (the classifier decides by its meaning).
    """
    never_sent = _never_sent()
    anthropic = sys.modules.get("anthropic")
    httpx2 = sys.modules.get("httpx2")
    if anthropic is not None and isinstance(exc, anthropic.APIConnectionError):
        return not isinstance(exc.__cause__, never_sent)  # APITimeoutError too
    if isinstance(exc, never_sent):
        return False
    if anthropic is not None and isinstance(exc, anthropic.APIStatusError):
        # A status below 400 is an error event in a stream the server had started.
        return bool(
            exc.status_code in SERVER_MAY_HAVE_ACTED
            or exc.status_code < 400
            or exc.error_code == "change_outcome_unknown"
        )
    if httpx2 is not None and isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code in SERVER_MAY_HAVE_ACTED
    if anthropic is not None and isinstance(exc, anthropic.APIResponseValidationError):
        return True  # the server answered with a success: it has acted
    if isinstance(exc, ConnectionError) or (
        httpx2 is not None and isinstance(exc, httpx2.TransportError)
    ):
        return True  # dropped mid-request: reset, broken pipe, read timeout
    return None


def request_of(exc: BaseException) -> httpx2.Request | None:
    """The httpx2 request an exception carries, if any (its headers may hold secrets)."""
    httpx2 = sys.modules.get("httpx2")
    if httpx2 is None:
        return None
    try:
        # httpx2's `request` property raises RuntimeError while it is unset; any other
        # exception's `request` is foreign code, which must not break the error path.
        request = getattr(exc, "request", None)
        if request is None:
            # google-genai's errors carry only their response, which holds the request.
            request = getattr(getattr(exc, "response", None), "request", None)
    except Exception:
        return None
    return request if isinstance(request, httpx2.Request) else None
