"""Secrets in dictionary KEYS are masked wherever secrets in values are.

A result keyed by connection string (`{"postgresql://bob:<password>@db/x": "reachable"}`)
is as common as one holding it as a value. Here secrets are planted only in keys (of a
tool's result, of recorded progress, of a subagent's answer) and every output of the run
is scanned: the report as JSON and Markdown, every event as JSON, the SQLite file's bytes,
the captured log (see conftest) and the OpenTelemetry spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentmesh import (
    Context,
    Coordinator,
    PermissionDenied,
    RetryPolicy,
    Task,
    UsageError,
    configure_tracing,
    redact_secrets,
    subagent,
    tool,
)
from agentmesh.approvals import Edit
from agentmesh.checkpoints import SQLiteStore
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

from .conftest import PLANTED_KEY, PLANTED_PASSWORD, PLANTED_TOKEN, Captured, leaks

DSN = f"postgresql://bob:{PLANTED_PASSWORD}@db.internal/crm"
MASKED_DSN = "postgresql://bob:[REDACTED]@db.internal/crm"
TOKEN_KEY = f"token={PLANTED_TOKEN}"
BEARER_KEY = f"Authorization: Bearer {PLANTED_KEY}"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(tracer_provider=provider)
    yield exporter
    configure_tracing(enabled=False)
    provider.shutdown()


@tool
async def probe(hosts: list[str]) -> dict[str, Any]:
    """Which databases answer, keyed by their connection string (recorded in the ledger)."""
    return {DSN: "reachable", TOKEN_KEY: {"nested": {BEARER_KEY: 1}}}


@subagent(name="probe", retry=RetryPolicy.never(), checkpoint=True)
async def probing(task: Task, ctx: Context) -> dict[str, Any]:
    found: dict[str, Any] = await ctx.call(probe, hosts=["db.internal"])
    ctx.record_partial({DSN: "reachable"}, completed=TOKEN_KEY)
    if task.topic == "fails":
        raise PermissionDenied("the second probe was refused")
    return found


def spans_text(spans: InMemorySpanExporter) -> str:
    return "\n".join(
        json.dumps([s.name, dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events]])
        for s in spans.get_finished_spans()
    )


def sqlite_bytes(tmp_path: Path) -> str:
    return "\n".join(
        path.read_bytes().decode("latin-1") for path in tmp_path.glob("checkpoints.sqlite*")
    )


class TestSecretKeysInARun:
    async def test_no_output_of_the_run_shows_a_secret_planted_in_a_key(
        self, captured: Captured, spans: InMemorySpanExporter, tmp_path: Path
    ) -> None:
        """Report JSON and Markdown, events, the SQLite file, the log and spans mask keys."""
        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            coordinator = Coordinator([probing], store=store)
            tasks = [Task(query="probe", topic="works"), Task(query="probe", topic="fails")]
            async with coordinator.stream(tasks, run_id="r1") as stream:
                events = [event async for event in stream]
        report = stream.report
        assert report is not None
        as_json = report.to_json()
        outputs = {
            "report JSON": as_json,
            "report Markdown": report.to_markdown(),
            "events": "\n".join(event.to_json() for event in events),
            "SQLite file": sqlite_bytes(tmp_path),
            "log": captured.log.getvalue(),
            "spans": spans_text(spans),
        }
        assert spans.get_finished_spans(), "tracing saw nothing: the scan would prove nothing"
        assert {name: leaks(text) for name, text in outputs.items() if leaks(text)} == {}
        # The key stays readable: its user and host, with only the password masked.
        assert MASKED_DSN in as_json
        assert MASKED_DSN in outputs["SQLite file"]
        assert MASKED_DSN in outputs["events"]

    async def test_a_resumed_run_reads_back_the_masked_keys(
        self, captured: Captured, tmp_path: Path
    ) -> None:
        """The ledger's replayed result has its keys masked and its values kept."""
        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            failed = Task(query="p", topic="fails", id="t1")
            await probing.run(failed, run_id="r", store=store)
            again = await probing.run(Task(query="p", id="t1"), run_id="r", store=store)
        captured.add(again)
        assert again.data == {  # type: ignore[union-attr]
            MASKED_DSN: "reachable",
            "token=[REDACTED]": {"nested": {"Authorization: Bearer [REDACTED]": 1}},
        }


def redact(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """`mapping` as a log event would show it."""
    return dict(redact_secrets(None, "info", mapping))


class TestKeyCollisions:
    def test_two_keys_that_mask_alike_keep_both_values(self) -> None:
        """Two DSNs differing only in their password stay two entries."""
        other = DSN.replace(PLANTED_PASSWORD, "another-password")
        masked = redact({DSN: "up", other: "down"})
        assert masked == {MASKED_DSN: "up", f"{MASKED_DSN} (2)": "down"}

    def test_a_clean_key_keeps_its_name_when_a_masked_one_would_take_it(self) -> None:
        """A key already showing the masked text is not overwritten by a masked twin."""
        masked = redact({DSN: "up", MASKED_DSN: "known"})
        assert masked == {f"{MASKED_DSN} (2)": "up", MASKED_DSN: "known"}

    def test_a_key_named_like_a_secret_still_conceals_its_value(self) -> None:
        """Masking the key does not stop a `password`-like key from hiding its value."""
        assert redact({"password": "pw", f"secret={PLANTED_PASSWORD}": "x"}) == {
            "password": "[REDACTED]",
            "secret=[REDACTED]": "x",
        }

    def test_masking_keys_is_idempotent(self) -> None:
        """A mapping already masked comes back unchanged."""
        other = DSN.replace(PLANTED_PASSWORD, "another-password")
        once = redact({DSN: "up", other: "down", b"x-api-key=raw": 1})
        assert redact(once) == once
        assert once[b"x-api-key=[REDACTED]"] == 1


class TestSpans:
    async def test_span_attributes_are_masked_like_log_values(
        self, spans: InMemorySpanExporter
    ) -> None:
        """A task's topic holding a DSN reaches its span with the password masked."""

        @subagent(name="plain", retry=RetryPolicy.never())
        async def plain(task: Task, ctx: Context) -> str:
            return "ok"

        await Coordinator([plain]).run([Task(query="q", topic=f"check {DSN}")])
        text = spans_text(spans)
        assert MASKED_DSN in text
        assert not leaks(text)


class TestEditedArguments:
    async def test_an_edit_with_a_secret_in_a_key_is_refused(self, tmp_path: Path) -> None:
        """An Edit is stored as given: a secret in one of its keys is refused, as in a value."""
        calls: list[dict[str, Any]] = []

        @tool(impact="financial")
        async def connect(targets: dict[str, str]) -> str:
            calls.append(targets)
            return "connected"

        @pre_tool_use(tool="connect", asks=True)
        def ask(event: ToolCallEvent) -> Ruling:
            return Ruling.ask("a person checks every connection")

        @subagent(name="ops", retry=RetryPolicy.never())
        async def ops(task: Task, ctx: Context) -> str:
            return await ctx.call(connect, targets={"db": "db.internal"})

        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            coordinator = Coordinator([ops], policies=[ask], store=store)
            (pending,) = (await coordinator.run(["connect"], run_id="r1")).pending_approvals
            edit = Edit(arguments={"targets": {DSN: "primary"}})
            with pytest.raises(UsageError, match="holds a secret"):
                await coordinator.resume("r1", approvals={pending.id: edit})
        assert calls == []
        assert not leaks(sqlite_bytes(tmp_path))
