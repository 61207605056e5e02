"""The built-in mappings every `Classifier` starts with: Python's, asyncio's, pydantic's
and agentmesh's own exceptions (the table in `agentmesh.classify`'s docstring).

The anthropic and httpx2 mappings are in `_sdk`; the classifier loads them once their
SDK has been imported.
"""

from __future__ import annotations

import asyncio
import errno
import socket

import pydantic

from agentmesh.classify._mappers import Mapper, describe, text, timeout, unavailable
from agentmesh.errors import AgentError, CallFailed, InvalidInput, PermissionDenied, TransientError

# Plain OSErrors (no ConnectionError subclass exists for them) that mean "no network path".
_NETWORK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENETDOWN", "ENETUNREACH", "ENETRESET", "EHOSTDOWN", "EHOSTUNREACH")
    if hasattr(errno, name)
)


def _unexpected(exc: BaseException) -> AgentError:
    return AgentError(text(exc), error_type="unexpected_error", details=describe(exc))


def _itself(exc: AgentError) -> AgentError:
    return exc


def _stray_cancel(exc: asyncio.CancelledError) -> AgentError:
    # A cancellation of the task itself propagates before it gets here (see _attempts):
    # this one was raised by the body without the task being cancelled.
    said = str(exc)
    message = f"cancelled: {said}" if said else "the work raised CancelledError"
    return TransientError(message, error_type="cancelled", details=describe(exc))


def _final(exc: CallFailed) -> AgentError:
    envelope = exc.envelope
    return AgentError(
        envelope.message,
        category=envelope.error_category,
        error_type=envelope.error_type,
        retryable=False,  # retried where it happened: retries never multiply across layers
        alternative_approaches=envelope.alternative_approaches or (),
        user_message=envelope.user_message,
        retry_after=envelope.retry_after,
        details="; ".join(filter(None, [f"from {envelope.source}", envelope.details])),
    )


def _os_error(exc: OSError) -> AgentError:
    if isinstance(exc, socket.gaierror | socket.herror) or exc.errno in _NETWORK_ERRNOS:
        return unavailable(exc)
    return _unexpected(exc)


def _permission(exc: PermissionError) -> AgentError:
    return PermissionDenied(text(exc), error_type="permission_denied", details=describe(exc))


def _pydantic(exc: pydantic.ValidationError) -> AgentError:
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in error["loc"])
        problems.append(f"{field}: {error['msg']}" if field else error["msg"])
    return InvalidInput(
        f"invalid input: {'; '.join(problems)}",
        error_type="invalid_input",
        details=f"{exc.title}: {exc.error_count()} validation error(s)",
    )


_BUILTIN_MAPPERS: dict[type[BaseException], Mapper] = {
    AgentError: _itself,
    asyncio.CancelledError: _stray_cancel,
    CallFailed: _final,
    # asyncio.TimeoutError and socket.timeout are aliases of TimeoutError.
    TimeoutError: timeout,
    ConnectionError: unavailable,
    OSError: _os_error,
    PermissionError: _permission,
    pydantic.ValidationError: _pydantic,
}
