"""OpenTelemetry spans: one per run, task, attempt and tool call, with the envelope's fields."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentmesh import (
    Context,
    Coordinator,
    PermissionDenied,
    Task,
    configure_tracing,
    subagent,
    tool,
)
from tests.retrying import fast_retry


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(tracer_provider=provider)
    yield exporter
    configure_tracing(enabled=False)
    provider.shutdown()


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


class TestTracing:
    async def test_a_run_has_nested_spans_with_the_envelope_fields(
        self, spans: InMemorySpanExporter
    ) -> None:
        """run > task > attempt, tool calls inside; failures carry category and retryability."""
        flaky = iter([TimeoutError("slow")])

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            error = next(flaky, None)
            if error is not None:
                raise error
            return [query]

        @subagent(
            name="docs",
            retry=fast_retry(),
        )
        async def docs(task: Task, ctx: Context) -> list[str]:
            if task.query == "secret":
                raise PermissionDenied("no access")
            return await ctx.call(search, query=task.query)

        await Coordinator([docs]).run([Task(query="ok", topic="t1"), Task(query="secret")])

        [run] = named(spans, "agentmesh.run")
        tasks = named(spans, "agentmesh.task")
        assert len(tasks) == 2
        assert all(t.parent is not None and t.parent.span_id == run.context.span_id for t in tasks)
        statuses = sorted(str(t.attributes["agentmesh.coverage.status"]) for t in tasks)  # type: ignore[index]
        assert statuses == ["covered", "escalated"]
        # A task that ended in an envelope is a failed span, with the envelope's type.
        failed_tasks = [t for t in tasks if t.status.status_code is StatusCode.ERROR]
        assert [t.attributes["error.type"] for t in failed_tasks] == ["permission_denied"]  # type: ignore[index]
        attempts = named(spans, "agentmesh.attempt")
        failed = [a for a in attempts if a.attributes.get("agentmesh.outcome") == "error"]  # type: ignore[union-attr]
        categories = sorted(str(a.attributes["agentmesh.error.category"]) for a in failed)  # type: ignore[index]
        assert categories == ["permission", "transient"]
        transient = next(
            a for a in failed if a.attributes["agentmesh.error.category"] == "transient"
        )  # type: ignore[index]
        assert transient.attributes["agentmesh.error.retryable"] is True  # type: ignore[index]
        [tool_span] = named(spans, "agentmesh.tool")
        assert tool_span.attributes["agentmesh.tool"] == "search"  # type: ignore[index]
        assert run.attributes["agentmesh.coverage.ratio"] == 0.5  # type: ignore[index]

    async def test_no_spans_until_tracing_is_configured(self) -> None:
        """Tracing is opt-in: without configure_tracing nothing is recorded."""
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))

        @subagent
        async def agent(task: Task, ctx: Context) -> str:
            return "x"

        await Coordinator([agent]).run(["q"])
        assert exporter.get_finished_spans() == ()
        provider.shutdown()
