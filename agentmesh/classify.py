"""Exception -> `AgentError` -> `ErrorEnvelope`.

A `Classifier` turns whatever a tool or subagent raised into our vocabulary (category,
error type, retryability, the server's retry-after hint), then into an envelope. Mappers
are looked up along the exception's MRO, so the most specific registered type wins; a
user's `register` for a type replaces the built-in mapping of that type.

Built-in mappings::

    AgentError                          itself
    TimeoutError (asyncio, socket)      transient   timeout
    ConnectionError                     transient   unavailable
    OSError from the network (DNS,      transient   unavailable
      unreachable host); other OSError  other       unexpected_error
    PermissionError                     permission  permission_denied
    pydantic.ValidationError            validation  invalid_input, naming the fields
    anthropic.APIStatusError            by HTTP status, then by the body's error type
    anthropic.APIResponseValidationError transient  invalid_response
    anthropic.APITimeoutError           transient   timeout
    anthropic.APIConnectionError        transient   unavailable
    httpx2.TimeoutException             transient   timeout
    httpx2.TransportError               transient   unavailable
    httpx2.HTTPStatusError              by HTTP status
    anything else                       other       unexpected_error (never hidden)
"""

from __future__ import annotations

import copy as _copy
import email.utils
import errno
import math
import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias, TypeVar

import anthropic
import httpx2
import pydantic

from agentmesh._logging import REDACTED, redact_text
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, PartialResults
from agentmesh.errors import (
    AgentError,
    PermissionDenied,
    TransientError,
    UsageError,
    ValidationError,
)

__all__ = ["Classifier", "classify", "default_classifier"]

E = TypeVar("E", bound=BaseException)
Mapper: TypeAlias = Callable[[Any], AgentError]

_TRANSIENT = ErrorCategory.TRANSIENT
_VALIDATION = ErrorCategory.VALIDATION
_PERMISSION = ErrorCategory.PERMISSION

# What an HTTP status means. It is checked before the body's error type because the
# status is reliable even when the body is a proxy's HTML page.
_BY_STATUS: dict[int, tuple[ErrorCategory, str]] = {
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
_BY_BODY_TYPE: dict[str, tuple[ErrorCategory, str]] = {
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

# Statuses after which the server may already have acted on the request.
_SERVER_MAY_HAVE_ACTED = frozenset({500, 502, 504})

# Failures before the request left this machine: nothing can have taken effect.
_NEVER_SENT = (
    ConnectionRefusedError,
    socket.gaierror,
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.PoolTimeout,
)

# Plain OSErrors (no ConnectionError subclass exists for them) that mean "no network path".
_NETWORK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENETDOWN", "ENETUNREACH", "ENETRESET", "EHOSTDOWN", "EHOSTUNREACH")
    if hasattr(errno, name)
)

# The same marker and key shape as the log redaction, so a secret reads the same everywhere.
_API_KEY = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")
_SECRET_HEADERS = ("x-api-key", "authorization")
_MAX_BODY_MESSAGE = 500


class Classifier:
    """exception -> AgentError -> ErrorEnvelope; extensible registry.

    A new classifier starts with the built-in mappings (see the module docstring).
    """

    def __init__(self) -> None:
        self._mappers: dict[type[BaseException], Mapper] = dict(_BUILTIN_MAPPERS)

    def register(self, exc_type: type[E], mapper: Callable[[E], AgentError]) -> None:
        """Map `exc_type` (and its subclasses) into our vocabulary.

        Args:
            exc_type: the exception class to map; a more specific registered class in an
                exception's MRO still wins over it.
            mapper: builds the `AgentError` for an instance; replaces any earlier mapping
                of `exc_type`, built-in ones included.
        """
        if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
            raise UsageError(f"exc_type must be an exception class, got {exc_type!r}")
        if not callable(mapper):
            raise UsageError(f"mapper must be callable, got {mapper!r}")
        self._mappers[exc_type] = mapper

    def copy(self) -> Classifier:
        """An independent classifier with the same mappings, to register more without sharing."""
        clone = _copy.copy(self)
        clone._mappers = dict(self._mappers)
        return clone

    def to_agent_error(self, exc: BaseException) -> AgentError:
        """The `AgentError` that describes `exc`. Never raises, even if a mapper does."""
        for klass in type(exc).__mro__:
            mapper = self._mappers.get(klass)
            if mapper is None:
                continue
            # A broken mapper must not turn one failure into a crash of the error path.
            try:
                error = mapper(exc)
            except Exception as failure:
                problem = f"raised {_describe(failure)}"
            else:
                if isinstance(error, AgentError):
                    return error
                problem = f"returned {type(error).__qualname__}, not an AgentError"
            fallback = _unexpected(exc)
            fallback.details = f"{fallback.details} (the mapper for {klass.__qualname__} {problem})"
            return fallback
        return _unexpected(exc)

    def may_have_taken_effect(self, exc: BaseException) -> bool:
        """Whether the failed call may have acted anyway, so that repeating it could act twice.

        Used to refuse the automatic retry of a non-idempotent tool after an ambiguous
        failure: a timeout, a connection dropped mid-request, a 500/502/504. A failure that
        happened before the request was sent, or a server's refusal before acting
        (429, 503, 529, 408, validation, permission), is not ambiguous.
        """
        if isinstance(exc, anthropic.APIConnectionError):  # APITimeoutError too
            return not isinstance(exc.__cause__, _NEVER_SENT)
        if isinstance(exc, _NEVER_SENT):
            return False
        if isinstance(exc, anthropic.APIStatusError):
            # A status below 400 is an error event in a stream the server had started.
            return (
                exc.status_code in _SERVER_MAY_HAVE_ACTED
                or exc.status_code < 400
                or exc.error_code == "change_outcome_unknown"
            )
        if isinstance(exc, httpx2.HTTPStatusError):
            return exc.response.status_code in _SERVER_MAY_HAVE_ACTED
        if isinstance(exc, anthropic.APIResponseValidationError):
            return True  # the server answered with a success: it has acted
        if isinstance(exc, ConnectionError | httpx2.TransportError):
            return True  # dropped mid-request: reset, broken pipe, read timeout
        return self.to_agent_error(exc).error_type == "timeout"

    def classify(
        self,
        exc: BaseException,
        *,
        source: str,
        attempted_query: str | dict[str, Any],
        attempts: int,
        partial_results: PartialResults | None = None,
        alternative_approaches: Iterable[str] = (),
    ) -> ErrorEnvelope:
        """The envelope for `exc`.

        Args:
            exc: what was raised.
            source: the subagent or tool that produced it.
            attempted_query: exactly what was tried.
            attempts: attempts made locally before giving up.
            partial_results: work done before the failure; left out when empty.
            alternative_approaches: approaches the coordinator may try instead, put before
                the error's own (order kept, duplicates dropped).
        """
        if isinstance(alternative_approaches, str):
            raise UsageError("alternative_approaches must be a list of names, not one string")
        if attempts < 0:
            raise UsageError(f"attempts must be >= 0, got {attempts!r}")
        error = self.to_agent_error(exc)
        alternatives = tuple(
            dict.fromkeys([*alternative_approaches, *error.alternative_approaches])
        )
        redact = _redactor(exc)
        return ErrorEnvelope(
            error_category=error.category,
            error_type=error.error_type,
            is_retryable=error.retryable,
            message=redact(error.message or error.error_type),
            attempted_query=attempted_query,
            source=source,
            attempts=attempts,
            partial_results=(
                None if partial_results is None or partial_results.is_empty else partial_results
            ),
            alternative_approaches=alternatives or None,
            details=redact(error.details) if error.details else None,
            user_message=redact(error.user_message) if error.user_message else None,
            retry_after=error.retry_after,
        )


def classify(
    exc: BaseException,
    *,
    source: str,
    attempted_query: str | dict[str, Any],
    attempts: int,
    partial_results: PartialResults | None = None,
    alternative_approaches: Iterable[str] = (),
) -> ErrorEnvelope:
    """`Classifier.classify` with `default_classifier`."""
    return default_classifier.classify(
        exc,
        source=source,
        attempted_query=attempted_query,
        attempts=attempts,
        partial_results=partial_results,
        alternative_approaches=alternative_approaches,
    )


# --- built-in mappers -------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__qualname__}: {exc}"


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _unexpected(exc: BaseException) -> AgentError:
    return AgentError(_text(exc), error_type="unexpected_error", details=_describe(exc))


def _itself(exc: AgentError) -> AgentError:
    return exc


def _timeout(exc: BaseException) -> AgentError:
    return TransientError(_text(exc), error_type="timeout", details=_describe(exc))


def _unavailable(exc: BaseException) -> AgentError:
    return TransientError(_text(exc), error_type="unavailable", details=_describe(exc))


def _os_error(exc: OSError) -> AgentError:
    if isinstance(exc, socket.gaierror | socket.herror) or exc.errno in _NETWORK_ERRNOS:
        return _unavailable(exc)
    return _unexpected(exc)


def _permission(exc: PermissionError) -> AgentError:
    return PermissionDenied(_text(exc), error_type="permission_denied", details=_describe(exc))


def _pydantic(exc: pydantic.ValidationError) -> AgentError:
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in error["loc"])
        problems.append(f"{field}: {error['msg']}" if field else error["msg"])
    return ValidationError(
        f"invalid input: {'; '.join(problems)}",
        error_type="invalid_input",
        details=f"{exc.title}: {exc.error_count()} validation error(s)",
    )


def _anthropic_status(exc: anthropic.APIStatusError) -> AgentError:
    # The body is whatever the server sent: only trust fields of the expected type.
    body_type = exc.type if isinstance(exc.type, str) else None
    api_message = exc.api_message if isinstance(exc.api_message, str) else None
    facts = [f"HTTP {exc.status_code} {body_type}" if body_type else f"HTTP {exc.status_code}"]
    if exc.error_code:
        facts.append(f"error_code: {exc.error_code}")
    message = api_message or exc.message[:_MAX_BODY_MESSAGE]
    return _http_error(exc.status_code, body_type, exc.response.headers, message, facts)


def _anthropic_bad_response(exc: anthropic.APIResponseValidationError) -> AgentError:
    return _with_request_id(
        TransientError(exc.message, error_type="invalid_response"),
        exc.response.headers,
        [f"HTTP {exc.status_code}, body not as expected"],
    )


def _anthropic_connection(exc: anthropic.APIConnectionError) -> AgentError:
    # The SDK's message is generic; the cause says what happened on the wire.
    cause = exc.__cause__
    details = _describe(cause) if cause is not None else None
    error_type = "timeout" if isinstance(exc, anthropic.APITimeoutError) else "unavailable"
    return TransientError(exc.message, error_type=error_type, details=details)


def _anthropic_credentials(exc: anthropic.CredentialsError) -> AgentError:
    return PermissionDenied(
        _text(exc), error_type="authentication_failed", details=type(exc).__qualname__
    )


def _httpx_status(exc: httpx2.HTTPStatusError) -> AgentError:
    response = exc.response
    # The URL's query string may hold a token: name the endpoint without it.
    url = exc.request.url.copy_with(query=None)
    facts = [f"HTTP {response.status_code}", f"{exc.request.method} {url}"]
    message = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    return _http_error(response.status_code, None, response.headers, message, facts)


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


def _with_request_id(error: AgentError, headers: Mapping[str, str], facts: list[str]) -> AgentError:
    request_id = headers.get("request-id")
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
        date = email.utils.parsedate_tz(headers.get("retry-after", ""))
        if date is None:
            return None
        # A date already past means "now".
        return max(0.0, email.utils.mktime_tz(date) - time.time())
    except (ValueError, OverflowError, IndexError):
        return None


def _redactor(exc: BaseException) -> Callable[[str], str]:
    """Removes credentials from text copied out of `exc` into an envelope.

    We never read the request's credential headers, but an exception's text may echo
    them; their values (from any request in the cause chain) and anything shaped like an
    Anthropic API key are replaced.
    """
    secrets: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # Read the attribute directly: httpx2's `request` property raises when unset.
        attrs = getattr(current, "__dict__", {})
        request = attrs.get("request", attrs.get("_request"))
        if isinstance(request, httpx2.Request):
            for name in _SECRET_HEADERS:
                value = request.headers.get(name, "")
                # "Bearer <token>": the token may appear on its own.
                secrets.update(part for part in (value, *value.split()[1:]) if len(part) >= 8)
        current = current.__cause__ or current.__context__
    ordered = sorted(secrets, key=len, reverse=True)

    def redact(text: str) -> str:
        for secret in ordered:
            text = text.replace(secret, REDACTED)
        return redact_text(_API_KEY.sub(REDACTED, text))

    return redact


_BUILTIN_MAPPERS: dict[type[BaseException], Mapper] = {
    AgentError: _itself,
    # asyncio.TimeoutError and socket.timeout are aliases of TimeoutError.
    TimeoutError: _timeout,
    ConnectionError: _unavailable,
    OSError: _os_error,
    PermissionError: _permission,
    pydantic.ValidationError: _pydantic,
    anthropic.APIStatusError: _anthropic_status,
    anthropic.APIResponseValidationError: _anthropic_bad_response,
    anthropic.APIConnectionError: _anthropic_connection,
    # Raised by SDK middleware to ask for a retry; with the SDK's retries off it reaches us.
    anthropic.RetryableError: _unavailable,
    anthropic.CredentialsError: _anthropic_credentials,
    httpx2.TimeoutException: _timeout,
    httpx2.TransportError: _unavailable,
    httpx2.HTTPStatusError: _httpx_status,
}

default_classifier: Classifier = Classifier()
"""The classifier `classify` uses, with the built-in mappings."""
