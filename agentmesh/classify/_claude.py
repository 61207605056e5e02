"""What Claude's errors mean where the HTTP status alone does not say (see `_sdk`).

    400 "prompt is too long: N tokens > M maximum", "input length and `max_tokens`
      exceed context limit", Bedrock's "Input is too long for requested model"
                                     validation  context_too_long
    a 4xx neither its status nor its body's type names
                                     other       provider_error (provider, status,
                                                   type in details)

Claude on Amazon Bedrock (the SDK's `AsyncAnthropicBedrock`) answers with errors of its
own shape: `{"message": ...}` and the exception's name in the `x-amzn-errortype` header
(inside a stream: the frame's `:exception-type`, which the SDK makes the error event's
`type`, in lower camel case). By name:

    ThrottlingException              transient   rate_limited (as a Messages API 429)
    ServiceUnavailableException,
      ModelNotReadyException         transient   unavailable
    ModelTimeoutException            transient   timeout
    ModelErrorException,
      InternalServerException,
      ModelStreamErrorException      transient   server_error
    ServiceQuotaExceededException    business    quota_exhausted (tokens per day)
    ValidationException              validation  invalid_request
    ResourceNotFoundException        validation  not_found
    AccessDeniedException            permission  permission_denied
    UnrecognizedClientException,
      ExpiredTokenException,
      InvalidSignatureException      permission  authentication_failed

Claude on Google Vertex AI (`AsyncAnthropicVertex`) needs no table: its own errors are
Google API errors whose HTTP status says what they are (429 a quota per minute, 503
unavailable), and Claude's own pass through it in the Messages API's shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from agentmesh.envelope import ErrorCategory, ErrorType
from agentmesh.errors import AgentError, BusinessError

__all__ = ["claude_error", "plain_message"]

_TOO_LONG: Final = re.compile(
    r"prompt is too long|input is too long|exceed context limit", re.IGNORECASE
)
# The statuses the Messages API and Bedrock give their meaning to; any other 4xx with a
# body type outside `known_types` is one this table does not know.
_KNOWN_4XX: Final = frozenset({400, 401, 402, 403, 404, 408, 409, 413, 422, 424, 429})

_TRANSIENT = ErrorCategory.TRANSIENT
_BEDROCK: Final[dict[str, tuple[ErrorCategory, str]]] = {
    "serviceunavailableexception": (_TRANSIENT, "unavailable"),
    "modelnotreadyexception": (_TRANSIENT, "unavailable"),
    "modeltimeoutexception": (_TRANSIENT, "timeout"),
    "modelerrorexception": (_TRANSIENT, "server_error"),
    "internalserverexception": (_TRANSIENT, "server_error"),
    "modelstreamerrorexception": (_TRANSIENT, "server_error"),
    "validationexception": (ErrorCategory.VALIDATION, "invalid_request"),
    "resourcenotfoundexception": (ErrorCategory.VALIDATION, "not_found"),
    "accessdeniedexception": (ErrorCategory.PERMISSION, "permission_denied"),
    "unrecognizedclientexception": (ErrorCategory.PERMISSION, "authentication_failed"),
    "expiredtokenexception": (ErrorCategory.PERMISSION, "authentication_failed"),
    "invalidsignatureexception": (ErrorCategory.PERMISSION, "authentication_failed"),
}
# Left to the Messages API's rule for a 429: a wait, or a quota when the reset is far.
_THROTTLED: Final = "throttlingexception"
_QUOTA: Final = "servicequotaexceededexception"


def claude_error(
    status: int,
    body_type: str | None,
    headers: Mapping[str, str],
    message: str,
    *,
    known_types: frozenset[str],
) -> AgentError | None:
    """The error for a Claude answer this module decides; None leaves it to the status.

    Its `details`, when set, are facts to add to the caller's (status, request id).
    """
    exception = _bedrock_exception(headers, body_type)
    if status in (400, 413, 424) and _TOO_LONG.search(message):
        return AgentError(message, category=ErrorCategory.VALIDATION, error_type="context_too_long")
    if exception == _QUOTA:
        return BusinessError(
            message,
            error_type=ErrorType.QUOTA_EXHAUSTED,
            retryable=False,
            details=_bedrock_facts(headers, exception),
            user_message="The model's quota on Amazon Bedrock is spent.",
        )
    if exception == _THROTTLED and status != 429:
        # Throttled in the middle of a stream: the 429 rule needs the headers of a 429.
        return AgentError(
            message,
            category=_TRANSIENT,
            error_type="rate_limited",
            details=_bedrock_facts(headers, exception),
        )
    if exception is not None and exception in _BEDROCK:
        category, error_type = _BEDROCK[exception]
        return AgentError(
            message,
            category=category,
            error_type=error_type,
            details=_bedrock_facts(headers, exception),
        )
    if 400 <= status < 500 and status not in _KNOWN_4XX and body_type not in known_types:
        provider = "aws.bedrock" if exception is not None else "anthropic"
        facts = [f"provider: {provider}", f"status: {status}"]
        if body_type or exception:
            facts.append(f"code: {exception or body_type}")
        return AgentError(
            message,
            category=ErrorCategory.OTHER,
            error_type="provider_error",
            details="; ".join(facts),
        )
    return None


def plain_message(body: object) -> str | None:
    """The message of an error body that is `{"message": ...}` (Bedrock's shape)."""
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None


def _bedrock_exception(headers: Mapping[str, str], body_type: str | None) -> str | None:
    """Bedrock's exception name for an error, in lower case; None when not Bedrock's.

    The header's value is `Name:namespace`; a stream's error event carries the name as
    its type instead.
    """
    named = headers.get("x-amzn-errortype", "").partition(":")[0].strip()
    if named:
        return named.lower()
    if body_type is not None and body_type.lower().endswith("exception"):
        return body_type.lower()
    return None


def _bedrock_facts(headers: Mapping[str, str], exception: str) -> str:
    # The name as Bedrock spells it (the lookup's is in lower case).
    return headers.get("x-amzn-errortype", "").partition(":")[0].strip() or exception
