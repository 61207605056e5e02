"""Optional OpenTelemetry spans: one per coordinator run, task, attempt and tool call.

Off until `configure_tracing()` is called, so the dispatch path pays one `is None` test
per span site and nothing else; `opentelemetry-api` is needed only then
(`pip install agentmesh[otel]`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from agentmesh.envelope import ErrorEnvelope, Success
from agentmesh.errors import UsageError

__all__ = ["configure_tracing", "outcome_attributes", "span", "tracing"]

_lock = threading.Lock()
_tracer: Any = None  # an opentelemetry Tracer while tracing is on


def configure_tracing(enabled: bool = True, *, tracer_provider: Any = None) -> None:
    """Turn agentmesh's OpenTelemetry spans on (or off with `enabled=False`).

    Args:
        enabled: emit spans from now on.
        tracer_provider: the provider to use; by default the global one
            (`opentelemetry.trace.set_tracer_provider`).
    """
    global _tracer
    if not enabled:
        with _lock:
            _tracer = None
        return
    try:
        from opentelemetry import trace
    except ImportError:
        raise UsageError(
            "configure_tracing() needs OpenTelemetry: pip install 'agentmesh[otel]'"
        ) from None
    from agentmesh import __name__ as package

    tracer = trace.get_tracer(package, tracer_provider=tracer_provider)
    with _lock:
        _tracer = tracer


_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()  # reusable, stateless


def tracing() -> bool:
    """Whether spans are emitted now (`configure_tracing()` was called)."""
    return _tracer is not None


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span named `agentmesh.<name>` when tracing is on; a no-op otherwise."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    clean = {f"agentmesh.{k}": v for k, v in attributes.items() if v is not None}
    return tracer.start_as_current_span(f"agentmesh.{name}", attributes=clean)  # type: ignore[no-any-return]


def outcome_attributes(outcome: Success[Any] | ErrorEnvelope) -> dict[str, Any]:
    """The envelope's fields as span attributes (`agentmesh.error.category`, ...)."""
    if isinstance(outcome, Success):
        return {"agentmesh.outcome": "empty" if outcome.is_empty else "success"}
    return {
        "agentmesh.outcome": "error",
        "agentmesh.error.category": outcome.error_category.value,
        "agentmesh.error.type": outcome.error_type,
        "agentmesh.error.retryable": outcome.is_retryable,
        "agentmesh.attempts": outcome.attempts,
    }
