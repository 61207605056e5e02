"""Passwords in URLs (`scheme://user:password@host`) are masked wherever API keys are.

The user and the host stay readable (`postgresql://bob:[REDACTED]@db.internal/x`): they
are what a person needs to find the failing connection. Everything here also runs under
the fault suite's log scan (see conftest).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentmesh import (
    BusinessError,
    Context,
    Coordinator,
    ErrorEnvelope,
    Task,
    redact_secrets,
    subagent,
    tool,
)
from tests.retrying import fast_retry

from .conftest import PLANTED_PASSWORD, Captured, leaks

REDACTED = "[REDACTED]"

DSN = f"postgresql://bob:{PLANTED_PASSWORD}@db.internal:5432/orders"
MASKED_DSN = "postgresql://bob:[REDACTED]@db.internal:5432/orders"
WEBHOOK = f"https://deploy:{PLANTED_PASSWORD}@hooks.example.com/notify?x=1"
MASKED_WEBHOOK = "https://deploy:[REDACTED]@hooks.example.com/notify?x=1"


@tool(idempotent=True)
async def query_orders(dsn: str, webhook: str) -> list[str]:
    """Query the orders database."""
    raise RuntimeError(f"could not connect to {dsn}: password authentication failed")


@tool(idempotent=True)
async def refund(order: str) -> str:
    """Refund an order."""
    raise BusinessError(
        f"refund refused by {WEBHOOK}",
        error_type="refund_refused",
        details=f"ledger at {DSN} is read-only",
        user_message=f"Please retry later ({DSN})",
    )


async def run_one(body_tool: Any, **arguments: Any) -> tuple[Any, ErrorEnvelope]:
    @subagent(name="orders", retry=fast_retry(attempts=1))
    async def orders(task: Task, ctx: Context) -> Any:
        return await ctx.call(body_tool, **arguments)

    report = await Coordinator([orders]).run([Task(query="orders of bob", topic="orders")])
    final = report.records[0].final
    assert isinstance(final, ErrorEnvelope)
    return report, final


class TestUrlCredentials:
    async def test_a_dsn_in_an_exception_message_is_masked_keeping_user_and_host(
        self, captured: Captured
    ) -> None:
        """The envelope's message shows the DSN with only its password masked."""
        report, envelope = await run_one(query_orders, dsn=DSN, webhook=WEBHOOK)
        captured.add(report, envelope)
        assert MASKED_DSN in envelope.to_dict()["message"]
        assert not leaks(json.dumps(envelope.to_dict()))
        assert not leaks(captured.everything())

    async def test_urls_in_tool_arguments_are_masked_in_attempted_query(
        self, captured: Captured
    ) -> None:
        """attemptedQuery keeps every argument, each URL with its password masked."""
        report, envelope = await run_one(query_orders, dsn=DSN, webhook=WEBHOOK)
        captured.add(report, envelope)
        arguments = envelope.to_dict()["attemptedQuery"]["arguments"]
        assert arguments == {"dsn": MASKED_DSN, "webhook": MASKED_WEBHOOK}

    async def test_details_and_user_message_are_masked_too(self, captured: Captured) -> None:
        """Every text field an error fills is masked: message, details, userMessage."""
        report, envelope = await run_one(refund, order="o-1")
        captured.add(report, envelope)
        wire = envelope.to_dict()
        assert MASKED_WEBHOOK in wire["message"]
        assert MASKED_DSN in wire["details"]
        assert MASKED_DSN in wire["userMessage"]
        assert not leaks(json.dumps(wire))

    async def test_the_report_and_the_log_never_show_the_password(self, captured: Captured) -> None:
        """Report.to_json(), to_markdown() and the DEBUG log mask it, and keep the host."""
        report, _ = await run_one(query_orders, dsn=DSN, webhook=WEBHOOK)
        as_json, as_markdown = report.to_json(), report.to_markdown()
        assert MASKED_DSN in as_json
        assert "db.internal" in as_markdown
        assert not leaks(as_json + as_markdown)
        assert "db.internal" in captured.log.getvalue()
        assert not leaks(captured.log.getvalue())


def redact_text(text: str) -> str:
    """`text` as a log line would show it."""
    masked: str = redact_secrets(None, "info", {"event": "x", "text": text})["text"]
    return masked


class TestUrlShapes:
    @pytest.mark.parametrize(
        ("text", "masked"),
        [
            ("postgresql://bob:pw1@db/x", "postgresql://bob:[REDACTED]@db/x"),
            ("redis://:pw1@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
            (
                "mysql+pymysql://root:p@ss:w@10.0.0.1/db",
                "mysql+pymysql://root:[REDACTED]@10.0.0.1/db",
            ),
            ("a https://u:p@h/x?to=a@b c", "a https://u:[REDACTED]@h/x?to=a@b c"),
            ("postgresql://bob:pa#ss@db/x", "postgresql://bob:[REDACTED]@db/x"),
            ("postgresql://bob:pa?ss@db/x", "postgresql://bob:[REDACTED]@db/x"),
        ],
    )
    def test_the_password_part_is_masked(self, text: str, masked: str) -> None:
        """Only the password goes; an unescaped "@" in it goes with it; masking is stable."""
        assert redact_text(text) == masked
        assert redact_text(masked) == masked

    @pytest.mark.parametrize(
        "text",
        ["https://bob@h/x", "http://host:8080/a@b", "http://[::1]:8080/x@y", "mailto:bob@x.org"],
    )
    def test_urls_without_a_password_are_left_alone(self, text: str) -> None:
        """A user without a password, a port, or an "@" in the path is not a secret."""
        assert redact_text(text) == text

    def test_the_log_processor_masks_a_dsn_under_any_key(self) -> None:
        """`redact_secrets` masks a DSN in an event whatever its key is called."""
        event = redact_secrets(None, "info", {"event": "connect", "target": DSN})
        assert event["target"] == MASKED_DSN


class TestCamelCaseSecretNames:
    @pytest.mark.parametrize("key", ["accessToken", "clientSecret", "dbPassword", "refreshToken"])
    def test_camel_case_keys_are_masked_like_snake_case_ones(self, key: str) -> None:
        """A JSON-style key (`clientSecret`) is as secret as `client_secret`."""
        event = redact_secrets(None, "info", {"event": "x", key: "s3cr3t-value", "sortKey": "k"})
        assert event[key] == REDACTED
        assert event["sortKey"] == "k"

    def test_camel_case_names_in_text_are_masked(self) -> None:
        """`accessToken=...` in a message loses its value; other words stay."""
        text = "retry with accessToken=abc123 and clientSecret: xyz, sortKey=name"
        assert redact_text(text) == (
            f"retry with accessToken={REDACTED} and clientSecret: {REDACTED}, sortKey=name"
        )


class TestQueriesInOutcomes:
    async def test_an_envelope_built_from_a_raw_query_masks_it(self) -> None:
        """Whoever builds the envelope from a task's query, its password is masked in it."""

        class Broken:
            async def execute(self, subagent: Any, task: Task, dispatch: Any) -> Any:
                raise RuntimeError("executor down")

        @subagent(name="db")
        async def db(task: Task, ctx: Context) -> list[str]:
            return []

        report = await Coordinator([db], executor=Broken()).run([Task(query=DSN)])
        (record,) = report.records
        assert isinstance(record.final, ErrorEnvelope)
        assert record.final.attempted_query == MASKED_DSN

    def test_an_envelope_from_outside_masks_its_query(self) -> None:
        """An envelope read from JSON (a model's report, another service) is masked too."""
        envelope = ErrorEnvelope.model_validate(
            {
                "errorCategory": "transient",
                "errorType": "timeout",
                "isRetryable": True,
                "message": "slow",
                "attemptedQuery": {"dsn": DSN, "password": PLANTED_PASSWORD},
                "source": "remote",
                "attempts": 1,
            }
        )
        assert envelope.attempted_query == {"dsn": MASKED_DSN, "password": REDACTED}
