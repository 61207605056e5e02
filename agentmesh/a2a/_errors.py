"""What an A2A exchange that broke means, and whether trying again is safe.

What an SDK failure means is the classifier's (`agentmesh.classify`, its `a2a-sdk`
mappings): permission for 401/403, transient for timeouts, transport errors, 408, 429 and
5xx, `other` `a2a_error` for the rest. What only this exchange knows is whether the
message was sent: a transient failure is retried by the subagent's `RetryPolicy` only
when the message cannot have reached the remote agent (the card could not be read, the
connection was refused, the server refused before acting: 408, 429, 503). Once it may
have been received, a retry could start the task twice, so the failure says so and is
not retryable (a dropped stream of a task whose id we know is followed by polling). Once
the remote agent told us its task (`delivered`), no failure after it is retried locally,
whatever it was: polling that task could not reach the agent, yet the task is there.
"""

from __future__ import annotations

from typing import Final

import httpx
from a2a.client.errors import A2AClientError

from agentmesh.classify import Classifier
from agentmesh.envelope import ErrorType
from agentmesh.errors import AgentError, TransientError

__all__ = ["MAY_HAVE_ACTED", "exchange_error", "timed_out"]

MAY_HAVE_ACTED: Final = "the message may have reached the remote agent: not sent twice"


def exchange_error(
    exc: Exception, *, sent: bool, delivered: bool, classifier: Classifier
) -> AgentError:
    """The failure `exc` (an A2A SDK or httpx error) of an exchange, `sent` or not yet,
    `delivered` when the remote agent acknowledged the task."""
    if isinstance(exc, httpx.HTTPError):  # one the SDK did not wrap: read as it would be
        wrapped = A2AClientError(f"Network communication error: {exc}")
        wrapped.__cause__ = exc
        exc = wrapped
    error = classifier.to_agent_error(exc)
    if error.retryable and sent and (delivered or classifier.may_have_taken_effect(exc)):
        error.retryable = False
        error.details = "; ".join(filter(None, [error.details, MAY_HAVE_ACTED]))
    return error


def timed_out(seconds: float, *, sent: bool, agent: str) -> TransientError:
    """The exchange with `agent` did not end within `seconds`."""
    return TransientError(
        f"the A2A agent {agent} did not finish within timeout={seconds:g}s",
        error_type=ErrorType.TIMEOUT,
        retryable=not sent,
        details=MAY_HAVE_ACTED if sent else None,
    )
