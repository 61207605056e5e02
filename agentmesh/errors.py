"""Exceptions of agentmesh: every one derives from `AgentmeshError`.

::

    AgentmeshError
    ├── AgentError              a signal: a subagent or tool says how it failed
    │   ├── TransientError      transient, retryable: timeouts, rate limits, outages
    │   ├── InvalidInput        validation: the input was malformed; fix it, don't retry blindly
    │   ├── BusinessError       business: a domain rule blocked the action
    │   └── PermissionDenied    permission: the caller may not do this
    ├── CallFailed              an outcome in flight: carries a final envelope
    │   └── ToolCallFailed      raised by `ctx.call` when a tool failed for good
    ├── UsageError              misuse of the API (also a `ValueError`)
    └── CheckpointError         a store or stored record cannot be used (agentmesh.checkpoints)

Three kinds, kept apart (as pydantic-ai keeps `ModelRetry`, `UserError` and its runtime
errors apart):

* **Signals** that user code raises on purpose. Each becomes an `ErrorEnvelope` of its
  category; none escapes a subagent's run.
* **An outcome in flight**: `CallFailed` carries an envelope that is already final;
  catch `ToolCallFailed` to go on with other sources, or let it propagate and it
  becomes the subagent's outcome, unchanged.
* **Failures of the library's use**: `UsageError`, raised at definition or call time with
  a message naming the offending argument, and `CheckpointError` for a store whose
  contents cannot be used (the code may be right and the file wrong).

`InvalidInput` was called `ValidationError` until 0.2; the old name still imports, with
a `DeprecationWarning`, for one release: it shadowed pydantic's `ValidationError` in
code that used both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from agentmesh._signatures import kept_for_one_release
from agentmesh.envelope import ErrorCategory

if TYPE_CHECKING:
    from pathlib import Path

    from agentmesh.envelope import ErrorEnvelope

__all__ = [
    "AgentError",
    "AgentmeshError",
    "BusinessError",
    "CallFailed",
    "CheckpointError",
    "InvalidInput",
    "PermissionDenied",
    "ToolCallFailed",
    "TransientError",
    "UsageError",
]


class AgentmeshError(Exception):
    """The root of every exception agentmesh raises: `except AgentmeshError` catches them all."""


class AgentError(AgentmeshError):
    """A failure a subagent or tool reports on purpose, with what the coordinator needs.

    Args:
        message: human-readable, for the developer and the model.
        category: decides the recovery strategy.
        error_type: the specific failure (`timeout`, `rate_limited`, `not_found`, ...).
        retryable: whether trying again can succeed; defaults to the category's rule
            (only transient failures are retryable).
        alternative_approaches: named approaches the coordinator may try instead.
        user_message: customer-friendly text, for business errors.
        retry_after: seconds the server asked us to wait before trying again. A value
            that is not a finite number >= 0 (NaN, a string) is no hint: the envelope
            leaves `retryAfter` out and says so in `details`. It is not refused here,
            where a refusal would replace the failure being reported.
        details: free text, e.g. for `other` failures not yet classified.
        field: the input field at fault (e.g. `"date"`); the envelope's `details`
            starts with `field: date`.
    """

    default_category: ErrorCategory = ErrorCategory.OTHER
    default_error_type: str = "error"

    def __init__(
        self,
        message: str,
        *,
        category: ErrorCategory | str | None = None,
        error_type: str | None = None,
        retryable: bool | None = None,
        alternative_approaches: Iterable[str] = (),
        user_message: str | None = None,
        retry_after: float | None = None,
        details: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        try:
            self.category = ErrorCategory(category or self.default_category)
        except ValueError:
            allowed = ", ".join(c.value for c in ErrorCategory)
            raise UsageError(f"category={category!r} is not one of: {allowed}") from None
        if isinstance(alternative_approaches, str):
            raise UsageError("alternative_approaches must be a list of names, not one string")
        self.message = message
        self.error_type = error_type or self.default_error_type
        self.retryable = self.category.retryable_by_default if retryable is None else retryable
        self.alternative_approaches = tuple(alternative_approaches)
        self.user_message = user_message
        self.retry_after = retry_after
        self.details = details
        self.field = field


class TransientError(AgentError):
    """A temporary failure (timeout, rate limit, outage): trying again may succeed."""

    default_category = ErrorCategory.TRANSIENT
    default_error_type = "unavailable"


class InvalidInput(AgentError):
    """The input was malformed: correct the request rather than retrying it unchanged."""

    default_category = ErrorCategory.VALIDATION
    default_error_type = "invalid_query"


class BusinessError(AgentError):
    """A domain rule blocked the action (e.g. the order has already shipped)."""

    default_category = ErrorCategory.BUSINESS
    default_error_type = "business_rule"


class PermissionDenied(AgentError):
    """The caller is not allowed to do this: retrying does not help; escalate."""

    default_category = ErrorCategory.PERMISSION
    default_error_type = "permission_denied"


class CallFailed(AgentmeshError):
    """A call failed for good, after its own local retries; `envelope` says how.

    Raise it (with an envelope you already have) to end a subagent or a tool with that
    envelope as its final outcome: it is passed on as is and never retried again, so
    retries do not multiply across layers.
    """

    def __init__(self, envelope: ErrorEnvelope) -> None:
        super().__init__(envelope.message)
        self.envelope = envelope


class ToolCallFailed(CallFailed):
    """A tool failed for good; raised by `Context.call`."""


class UsageError(AgentmeshError, ValueError):
    """agentmesh was used in a way it does not support; the message names the argument.

    Also a `ValueError`, as it was before `AgentmeshError` existed.
    """


class CheckpointError(AgentmeshError):
    """A checkpoint store or record cannot be used: a foreign or corrupt file, a schema
    version this agentmesh does not read, a record that no longer fits its type, or a
    failed read or write.

    A runtime failure, not misuse of the API (that is `UsageError`): the code may be
    right and the file on disk wrong. `path` names the file when there is one; it is
    never overwritten. For one damaged record, `store` (its repr), `run_id`, `stage`
    and `key` say which. Also importable from `agentmesh.checkpoints`.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        store: str | None = None,
        run_id: str | None = None,
        stage: str | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.store = store
        self.run_id = run_id
        self.stage = stage
        self.key = key


__getattr__ = kept_for_one_release(
    __name__,
    {
        "ValidationError": (
            "is now InvalidInput (it shadowed pydantic's ValidationError)",
            lambda: InvalidInput,
        )
    },
)
