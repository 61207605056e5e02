"""What the `google-genai` SDK's errors mean (the Gemini API's failures).

The SDK raises `google.genai.errors.APIError` (`ClientError` for 4xx, `ServerError` for
5xx) with the HTTP `code` and the body `{"error": {"code", "message", "status",
"details": [...]}}`; the body's `status` (Google's canonical code) decides first, then
the HTTP status (a proxy's page has no Google body):

    RESOURCE_EXHAUSTED 429               by its details:
      a per-day quota (QuotaFailure)    business    quota_exhausted, not retryable,
                                          retry_after: midnight Pacific time, when
                                          daily quotas reset (resumeAt in details)
      RetryInfo retryDelay > 15 min     business    quota_exhausted
      otherwise                         transient   rate_limited (retry_after: retryDelay)
    INVALID_ARGUMENT 400                validation  invalid_request (the fields the
                                          BadRequest details name, in details);
      "exceeds the maximum number      validation  context_too_long
       of tokens"
      ErrorInfo API_KEY_INVALID         permission  authentication_failed
    FAILED_PRECONDITION 400             permission  billing_error (free tier not
                                          available in the region: enable billing)
    UNAUTHENTICATED 401                 permission  authentication_failed
    PERMISSION_DENIED 403               permission  permission_denied
    NOT_FOUND 404                       validation  not_found
    ABORTED 409                         transient   conflict
    INTERNAL 500                        transient   server_error
    UNAVAILABLE 503                     transient   overloaded ("The model is
                                          overloaded. Please try again later.")
    DEADLINE_EXCEEDED 504               transient   timeout
    no Google status: by HTTP status as for any HTTP API (`_sdk._http_error`)
    any other                           other       provider_error (provider,
                                          status and code in details)
    google.genai.errors.UnknownApiResponseError  transient  invalid_response

Timeouts and connection failures reach us as `httpx2` exceptions (the SDK's transport),
classified in `_sdk`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from agentmesh._numbers import duration_seconds
from agentmesh.classify._mappers import Mapper, describe, text
from agentmesh.classify._sdk import (
    QUOTA_RESET_AFTER,
    SERVER_MAY_HAVE_ACTED,
    _http_error,
    _limit_reached,
    _with_request_id,
)
from agentmesh.envelope import ErrorCategory
from agentmesh.errors import AgentError, TransientError

if TYPE_CHECKING:
    from google.genai import errors

__all__ = ["mappers", "may_have_taken_effect"]

_PROVIDER: Final = "google"
_TYPE: Final = "type.googleapis.com/google.rpc."
_TRANSIENT = ErrorCategory.TRANSIENT
_VALIDATION = ErrorCategory.VALIDATION
_PERMISSION = ErrorCategory.PERMISSION

# Google's canonical status -> what it means for us; RESOURCE_EXHAUSTED and
# INVALID_ARGUMENT read their details first.
_BY_STATUS: Final[dict[str, tuple[ErrorCategory, str]]] = {
    "INVALID_ARGUMENT": (_VALIDATION, "invalid_request"),
    "FAILED_PRECONDITION": (_PERMISSION, "billing_error"),
    "OUT_OF_RANGE": (_VALIDATION, "invalid_request"),
    "UNAUTHENTICATED": (_PERMISSION, "authentication_failed"),
    "PERMISSION_DENIED": (_PERMISSION, "permission_denied"),
    "NOT_FOUND": (_VALIDATION, "not_found"),
    "ABORTED": (_TRANSIENT, "conflict"),
    "INTERNAL": (_TRANSIENT, "server_error"),
    "UNAVAILABLE": (_TRANSIENT, "overloaded"),
    "DEADLINE_EXCEEDED": (_TRANSIENT, "timeout"),
}
# ErrorInfo reasons of a key the API does not take (sent as 400 INVALID_ARGUMENT).
_BAD_KEY_REASONS: Final = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_NOT_FOUND"})
# Google gives a prompt over the context window no code of its own, only this message:
# "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
_TOO_LONG: Final = re.compile(r"exceeds the maximum number of tokens", re.IGNORECASE)
# HTTP statuses whose meaning holds without a Google body (a proxy's page).
_KNOWN_HTTP: Final = frozenset({400, 401, 403, 404, 408, 409, 413, 422, 429, 503, 529})
# Daily quotas of the Gemini API reset at midnight Pacific time (its rate-limit docs).
_PACIFIC_STANDARD: Final = timedelta(hours=-8)


def _error_of(exc: errors.APIError) -> Mapping[str, Any]:
    """The body's `error` object; {} when the body is no Google error."""
    body = exc.details
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, Mapping) else {}


def _details(error: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The `details` entries of one type (`RetryInfo`, `QuotaFailure`, ...)."""
    found = error.get("details")
    if not isinstance(found, list):
        return []
    return [d for d in found if isinstance(d, Mapping) and d.get("@type") == _TYPE + kind]


def _api_error(exc: errors.APIError) -> AgentError:
    error = _error_of(exc)
    status = error.get("status") if isinstance(error.get("status"), str) else None
    said = error.get("message")
    message = said if isinstance(said, str) and said else text(exc)[:500]
    facts = [f"provider: {_PROVIDER}", f"HTTP {exc.code}" + (f" {status}" if status else "")]
    headers = exc.response.headers if exc.response is not None else {}
    if status == "RESOURCE_EXHAUSTED" or (status is None and exc.code == 429):
        return _exhausted(error, headers, message, facts)
    if status == "INVALID_ARGUMENT":
        return _invalid_argument(error, headers, message, facts)
    if status in _BY_STATUS:
        category, error_type = _BY_STATUS[status]
        return _with_request_id(
            AgentError(message, category=category, error_type=error_type), headers, facts
        )
    code = exc.code if isinstance(exc.code, int) else 0
    if status is None and (code in _KNOWN_HTTP or 500 <= code < 600):
        return _http_error(code, None, headers, message, facts)
    unknown = AgentError(message, category=ErrorCategory.OTHER, error_type="provider_error")
    return _with_request_id(unknown, headers, [*facts, f"code: {error.get('code', exc.code)}"])


def _exhausted(
    error: Mapping[str, Any], headers: Mapping[str, str], message: str, facts: list[str]
) -> AgentError:
    """A 429: rate limited until RetryInfo's delay, or a daily quota spent until midnight."""
    delay = _retry_delay(error)
    quota_ids = [
        str(violation.get("quotaId"))
        for failure in _details(error, "QuotaFailure")
        for violation in failure.get("violations") or []
        if isinstance(violation, Mapping) and violation.get("quotaId")
    ]
    if quota_ids:
        facts = [*facts, "quota: " + ", ".join(quota_ids)]
    daily = any("PerDay" in quota for quota in quota_ids)
    if daily:
        delay = max(delay or 0.0, _until_pacific_midnight(datetime.now(UTC)))
    spent = daily or (delay is not None and delay > QUOTA_RESET_AFTER)
    return _limit_reached(headers, None, message, facts, reset=delay, spent=spent)


def _retry_delay(error: Mapping[str, Any]) -> float | None:
    """RetryInfo's `retryDelay` ("30s", "1.5s") in seconds, if the error has one."""
    for info in _details(error, "RetryInfo"):
        delay = duration_seconds(str(info.get("retryDelay", "")))
        if delay is not None:
            return delay
    return None


def _until_pacific_midnight(now: datetime) -> float:
    try:
        from zoneinfo import ZoneInfo

        pacific: Any = ZoneInfo("America/Los_Angeles")
    except (ImportError, KeyError, OSError):  # no time zone database: standard time
        from datetime import timezone

        pacific = timezone(_PACIFIC_STANDARD)
    local = now.astimezone(pacific)
    midnight = datetime(local.year, local.month, local.day, tzinfo=pacific) + timedelta(days=1)
    return (midnight.astimezone(UTC) - now).total_seconds()


def _invalid_argument(
    error: Mapping[str, Any], headers: Mapping[str, str], message: str, facts: list[str]
) -> AgentError:
    reasons = {str(info.get("reason")) for info in _details(error, "ErrorInfo")}
    if reasons & _BAD_KEY_REASONS:
        facts = [*facts, "reason: " + ", ".join(sorted(reasons & _BAD_KEY_REASONS))]
        failure = AgentError(message, category=_PERMISSION, error_type="authentication_failed")
        return _with_request_id(failure, headers, facts)
    violations = [
        violation
        for request in _details(error, "BadRequest")
        for violation in request.get("fieldViolations") or []
        if isinstance(violation, Mapping) and violation.get("field")
    ]
    if violations:
        named = (f"{v['field']}: {v.get('description', '')}".rstrip(": ") for v in violations)
        facts = [*facts, "fields: " + "; ".join(named)]
    error_type = "context_too_long" if _TOO_LONG.search(message) else "invalid_request"
    failure = AgentError(
        message,
        category=_VALIDATION,
        error_type=error_type,
        field=str(violations[0]["field"]) if violations else None,
    )
    return _with_request_id(failure, headers, facts)


def _unknown_response(exc: errors.UnknownApiResponseError) -> AgentError:
    return TransientError(
        "unparseable response from the Gemini API",
        error_type="invalid_response",
        details=describe(exc)[:500],
    )


def mappers() -> dict[type[BaseException], Mapper]:
    from google.genai import errors

    return {
        errors.APIError: _api_error,
        errors.UnknownApiResponseError: _unknown_response,
    }


def may_have_taken_effect(exc: BaseException) -> bool | None:
    """Whether the Gemini API may have acted on a request that failed with `exc`; None
    when `exc` is none of the SDK's (it cannot be one before the SDK is imported)."""
    errors = sys.modules.get("google.genai.errors")
    if errors is not None and isinstance(exc, errors.APIError):
        # Below 400: an error object in the middle of a stream the server had started.
        code = exc.code if isinstance(exc.code, int) else 0
        return code in SERVER_MAY_HAVE_ACTED or code < 400
    return None
