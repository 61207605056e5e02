"""What the A2A SDK's (`a2a-sdk`) client exceptions mean.

    a2a.client.A2AClientTimeoutError    transient   timeout
    A2AClientError or AgentCardResolutionError from HTTP:
      401/403                           permission  permission_denied
      408 / 429 / 5xx                   transient   timeout / rate_limited / unavailable
                                        (retry_after: the response's Retry-After)
      another status                    other       a2a_error (the status in details)
      a transport error                 transient   unavailable (timeout for a timeout)
    InvalidParamsError (JSON-RPC)       validation  invalid_params
    any other A2AError                  other       a2a_error

A message may have acted unless it never left (a refused connection, the card's GET) or
the server refused it before acting (408, 429, 503, a JSON-RPC error answer).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from agentmesh._redaction import redact_text
from agentmesh.classify._mappers import Mapper
from agentmesh.classify._sdk import _retry_after
from agentmesh.envelope import ErrorCategory, ErrorType
from agentmesh.errors import AgentError, InvalidInput, PermissionDenied, TransientError

__all__ = ["mappers", "may_have_taken_effect"]

_REFUSED_BEFORE_ACTING: Final = frozenset({408, 429, 503})
_MAX_TEXT: Final = 2000


def _a2a_error(exc: Any) -> AgentError:
    import httpx
    from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError
    from a2a.utils.errors import InvalidParamsError

    message = redact_text(str(exc) or type(exc).__name__)[:_MAX_TEXT]
    status = _status(exc)
    if status in (401, 403):
        # The same words as every model provider's table: who you are, then what you may.
        error_type = "authentication_failed" if status == 401 else "permission_denied"
        return PermissionDenied(message, error_type=error_type, details=f"HTTP {status}")
    if status is not None and (status in _REFUSED_BEFORE_ACTING or status >= 500):
        error_type = {408: ErrorType.TIMEOUT, 429: "rate_limited"}.get(status, "unavailable")
        return TransientError(
            message,
            error_type=error_type,
            details=f"HTTP {status}",
            retry_after=_retry_after(_headers(exc)),
        )
    if status is not None:
        return AgentError(
            message, category=ErrorCategory.OTHER, error_type="a2a_error", details=f"HTTP {status}"
        )
    cause = exc.__cause__
    if isinstance(exc, A2AClientTimeoutError) or isinstance(cause, httpx.TimeoutException):
        return TransientError(message, error_type=ErrorType.TIMEOUT)
    if isinstance(cause, httpx.TransportError) or isinstance(exc, AgentCardResolutionError):
        return TransientError(message, error_type=ErrorType.UNAVAILABLE)
    if isinstance(exc, InvalidParamsError):
        return InvalidInput(message, error_type="invalid_params")
    return AgentError(message, category=ErrorCategory.OTHER, error_type="a2a_error")


def may_have_taken_effect(exc: BaseException) -> bool | None:
    """Whether an A2A SDK failure may have reached the remote agent; None for any other."""
    errors = sys.modules.get("a2a.utils.errors")
    if errors is None or not isinstance(exc, errors.A2AError):
        return None
    import httpx
    from a2a.client.errors import A2AClientError, AgentCardResolutionError

    if isinstance(exc, AgentCardResolutionError):
        return False  # reading the card acts on nothing
    if not isinstance(exc, A2AClientError):
        return False  # the server answered with a JSON-RPC error: it refused
    status = _status(exc)
    if status is not None:
        return status not in _REFUSED_BEFORE_ACTING
    return not isinstance(exc.__cause__, httpx.ConnectError)


def _status(exc: BaseException) -> int | None:
    import httpx

    code = getattr(exc, "status_code", None)
    if isinstance(code, int):
        return code
    for error in (exc, exc.__cause__):
        if isinstance(error, httpx.HTTPStatusError):
            return error.response.status_code
    return None


def _headers(exc: BaseException) -> Mapping[str, str]:
    """The HTTP response's headers, when the SDK kept the response (as its error's cause)."""
    import httpx

    for error in (exc, exc.__cause__):
        if isinstance(error, httpx.HTTPStatusError):
            return error.response.headers
    return {}


def mappers() -> dict[type[BaseException], Mapper]:
    """The mappings, built once the SDK is imported."""
    from a2a.utils.errors import A2AError

    return {A2AError: _a2a_error}
