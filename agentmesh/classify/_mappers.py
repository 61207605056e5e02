"""The smallest built-in mappers, shared by `classify` and the SDK mappings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from agentmesh.errors import AgentError, TransientError

__all__ = ["Mapper", "describe", "text", "timeout", "unavailable"]

Mapper: TypeAlias = Callable[[Any], AgentError]
"""Builds the `AgentError` that describes one exception."""


def describe(exc: BaseException) -> str:
    """`Type: message`, for an envelope's details."""
    return f"{type(exc).__qualname__}: {exc}"


def text(exc: BaseException) -> str:
    """The exception's message, or its type's name when it has none."""
    return str(exc) or type(exc).__name__


def timeout(exc: BaseException) -> AgentError:
    return TransientError(text(exc), error_type="timeout", details=describe(exc))


def unavailable(exc: BaseException) -> AgentError:
    return TransientError(text(exc), error_type="unavailable", details=describe(exc))
