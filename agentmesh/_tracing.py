"""Optional OpenTelemetry spans: one per coordinator run, task, attempt and tool call.

Off until `configure_tracing()` is called, so the dispatch path pays one `is None` test
per span site and nothing else; `opentelemetry-api` is needed only then
(`pip install agentmesh-failwell[otel]`).

Besides the `agentmesh.*` spans, the GenAI semantic conventions' spans and metric, so
back-ends that read those see model calls, tool calls and agents: `chat {model}`,
`execute_tool {name}`, `invoke_agent {name}`, and `gen_ai.client.token.usage`. The
attribute names are string literals here (the conventions package stays a test-only
dependency); the tests check them against its constants.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentmesh._redaction import redact
from agentmesh.envelope import ErrorEnvelope, Success
from agentmesh.errors import UsageError

if TYPE_CHECKING:
    from agentmesh.models import ModelResponse

__all__ = [
    "agent_span",
    "chat_span",
    "configure_tracing",
    "outcome_attributes",
    "record_outcome",
    "record_response",
    "span",
    "tool_span",
    "tracing",
]

_lock = threading.Lock()
_tracer: Any = None  # an opentelemetry Tracer while tracing is on
_token_usage: Any = None  # the gen_ai.client.token.usage histogram while tracing is on

# The conventions' advised buckets for token counts: powers of 4 from 1 to 4^13.
_TOKEN_BUCKETS = tuple(4**n for n in range(14))


def configure_tracing(
    enabled: bool = True, *, tracer_provider: Any = None, meter_provider: Any = None
) -> None:
    """Turn agentmesh's OpenTelemetry spans and metrics on (or off with `enabled=False`).

    Args:
        enabled: emit spans and record metrics from now on.
        tracer_provider: the provider to use; by default the global one
            (`opentelemetry.trace.set_tracer_provider`).
        meter_provider: the provider of the token-usage histogram; by default the
            global one (`opentelemetry.metrics.set_meter_provider`).
    """
    global _tracer, _token_usage
    if not enabled:
        with _lock:
            _tracer = _token_usage = None
        return
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise UsageError(
            "configure_tracing() needs OpenTelemetry: pip install 'agentmesh-failwell[otel]'"
        ) from None
    from agentmesh import __name__ as package

    tracer = trace.get_tracer(package, tracer_provider=tracer_provider)
    histogram = metrics.get_meter(package, meter_provider=meter_provider).create_histogram(
        "gen_ai.client.token.usage",
        unit="{token}",
        description="Number of input and output tokens used.",
        explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
    )
    with _lock:
        _tracer, _token_usage = tracer, histogram


_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()  # reusable, stateless


def tracing() -> bool:
    """Whether spans are emitted now (`configure_tracing()` was called)."""
    return _tracer is not None


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A span named `agentmesh.<name>` when tracing is on; a no-op otherwise."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    # A topic or an id is the caller's text: masked as in logs, for spans leave the process.
    clean = redact({f"agentmesh.{k}": v for k, v in attributes.items() if v is not None})
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


def record_outcome(current: Any, outcome: Success[Any] | ErrorEnvelope) -> None:
    """Put the outcome on a span; a failure also sets `error.type` and status ERROR."""
    if current is None:
        return
    current.set_attributes(outcome_attributes(outcome))
    if isinstance(outcome, ErrorEnvelope):
        _failed(
            current, outcome.error_type, f"{outcome.error_category.value}: {outcome.error_type}"
        )


def _failed(current: Any, error_type: str, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, description))


# --- the GenAI semantic conventions --------------------------------------------------------


def chat_span(
    *, provider: str, model: str, max_tokens: int | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A `chat {model}` client span around one model call; a no-op while tracing is off.

    An exception leaving it marks the span failed, with the exception's `error_type`
    (an `AgentError`'s) or its class name as `error.type`.
    """
    if _tracer is None:
        return _NO_SPAN
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
    }
    return _gen_ai_span(f"chat {model}", attributes, client=True)


def record_response(current: Any, response: ModelResponse, *, provider: str, model: str) -> None:
    """The answer's model, finish reason and tokens on the chat span, and in the metric."""
    if current is None:
        return
    usage = response.usage
    # The conventions count every prompt token as input, cached ones included; the API
    # reports those written to and read from the cache apart.
    input_tokens = usage.total_input_tokens
    # Counts the answer got wrong are unknown: no token attribute or metric, never a 0.
    tokens = (
        {"agentmesh.usage.unusable": list(usage.unusable)}
        if usage.unusable
        else {
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        }
    )
    current.set_attributes(
        {
            "gen_ai.response.model": response.model or model,
            **tokens,
            **(
                {"gen_ai.response.finish_reasons": [response.stop_reason]}
                if response.stop_reason
                else {}
            ),
            **({"gen_ai.response.id": response.id} if response.id else {}),
        }
    )
    histogram = _token_usage
    if histogram is None or usage.unusable:
        return
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.response.model": response.model or model,
    }
    histogram.record(input_tokens, {**common, "gen_ai.token.type": "input"})
    histogram.record(usage.output_tokens, {**common, "gen_ai.token.type": "output"})


def tool_span(name: str, call_id: str | None) -> contextlib.AbstractContextManager[Any]:
    """An `execute_tool {name}` span around one tool call a model asked for."""
    if _tracer is None:
        return _NO_SPAN
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    return _gen_ai_span(f"execute_tool {name}", attributes, client=False)


def agent_span(name: str) -> contextlib.AbstractContextManager[Any]:
    """An `invoke_agent {name}` span around one run of a subagent."""
    if _tracer is None:
        return _NO_SPAN
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    return _gen_ai_span(f"invoke_agent {name}", attributes, client=False)


@contextlib.contextmanager
def _gen_ai_span(name: str, attributes: dict[str, Any], *, client: bool) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    clean = {k: v for k, v in attributes.items() if v is not None}
    # Our own status on failure, without the exception's text: that may hold what the
    # secret-masking envelopes and reports never show.
    with _tracer.start_as_current_span(
        name, kind=kind, attributes=clean, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except Exception as exc:
            error_type = getattr(exc, "error_type", None)
            if not isinstance(error_type, str):
                error_type = type(exc).__qualname__
            _failed(current, error_type, type(exc).__qualname__)
            raise
