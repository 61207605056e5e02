"""What an A2A exchange that broke means, and whether trying again is safe.

    HTTP 401/403                        permission  permission_denied
    a timeout (ours or the SDK's)       transient   timeout
    HTTP 429                            transient   rate_limited
    any other HTTP or transport error   transient   unavailable
    another A2A error (JSON-RPC)        other       a2a_error

A transient failure is retried by the subagent's `RetryPolicy` only when the message
cannot have reached the remote agent: the card could not be read, the connection was
refused, or the server refused before acting (408, 429, 503). Once the message may have
been received, a retry could start the task twice, so the envelope says so and is not
retryable (a dropped stream of a task whose id we know is followed by polling instead).
"""

from __future__ import annotations

from typing import Final

import httpx
from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError

from agentmesh._redaction import redact_text
from agentmesh.envelope import ErrorCategory, ErrorType
from agentmesh.errors import AgentError, PermissionDenied, TransientError

__all__ = ["MAY_HAVE_ACTED", "exchange_error", "timed_out"]

MAY_HAVE_ACTED: Final = "the message may have reached the remote agent: not sent twice"

# A refusal before acting: the remote did not take the message in.
_REFUSED_BEFORE_ACTING: Final = frozenset({408, 429, 503})
_MAX_TEXT: Final = 2000


def exchange_error(exc: Exception, *, sent: bool, agent: str) -> AgentError:
    """The failure `exc` (an A2A SDK or httpx error) of the exchange with `agent`."""
    status = _status(exc)
    message = redact_text(f"A2A agent {agent}: {exc}")[:_MAX_TEXT]
    if status in (401, 403):
        return PermissionDenied(message, details=f"HTTP {status}")
    transport = isinstance(exc, httpx.HTTPError) or isinstance(exc.__cause__, httpx.HTTPError)
    if not transport and not isinstance(exc, AgentCardResolutionError):
        return AgentError(message, category=ErrorCategory.OTHER, error_type="a2a_error")
    timeout = isinstance(exc, A2AClientTimeoutError | httpx.TimeoutException) or isinstance(
        exc.__cause__, httpx.TimeoutException
    )
    not_received = (
        not sent
        or isinstance(exc.__cause__, httpx.ConnectError)
        or status in _REFUSED_BEFORE_ACTING
    )
    if timeout:
        error_type: str = ErrorType.TIMEOUT
    elif status == 429:
        error_type = "rate_limited"
    else:
        error_type = ErrorType.UNAVAILABLE
    return TransientError(
        message,
        error_type=error_type,
        retryable=not_received,
        details=None if not_received else MAY_HAVE_ACTED,
    )


def timed_out(seconds: float, *, sent: bool, agent: str) -> TransientError:
    """The exchange with `agent` did not end within `seconds`."""
    return TransientError(
        f"the A2A agent {agent} did not finish within timeout={seconds:g}s",
        error_type=ErrorType.TIMEOUT,
        retryable=not sent,
        details=MAY_HAVE_ACTED if sent else None,
    )


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, AgentCardResolutionError) and exc.status_code is not None:
        return exc.status_code
    for error in (exc, exc.__cause__):
        if isinstance(error, httpx.HTTPStatusError):
            return error.response.status_code
    return None
