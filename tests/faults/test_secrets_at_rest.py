"""Secrets never reach a checkpoint store in clear, and resuming still works.

The side-effect ledger keeps a tool's arguments and result, saved progress keeps what
`ctx.record_partial` was given: both are masked as envelopes and logs are. A call is
found again by a digest of its clear arguments, so a resumed run still does not act
twice; what it reads back has its secrets masked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentmesh import (
    Context,
    ErrorEnvelope,
    PermissionDenied,
    Pipeline,
    RetryPolicy,
    Subagent,
    Success,
    Task,
    subagent,
    tool,
)
from agentmesh.checkpoints import CheckpointStore

from .conftest import PLANTED_KEY, PLANTED_PASSWORD, PLANTED_TOKEN, leaks

DSN = f"postgresql://bob:{PLANTED_PASSWORD}@db.internal/crm"


async def at_rest(store: CheckpointStore, run_id: str, tmp_path: Path) -> str:
    """Everything the store keeps for `run_id`, and for SQLite every byte of its files."""
    texts = [
        json.dumps([checkpoint.stage, checkpoint.key, checkpoint.value])
        for checkpoint in await store.list(run_id)
    ]
    assert texts, "the run stored nothing: the test would prove nothing"
    return "\n".join([*texts, sqlite_bytes(tmp_path)])


def sqlite_bytes(tmp_path: Path) -> str:
    """The database, its write-ahead log and its index: wherever SQLite put the bytes."""
    return "\n".join(
        path.read_bytes().decode("latin-1") for path in tmp_path.glob("checkpoints.sqlite*")
    )


class Crm:
    """Counts the accounts the outside world saw created."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.fail_after_create = True


def onboarding_agent(crm: Crm) -> Subagent:
    @tool
    async def create_account(
        email: str, password: str, api_key: str, dsn: str, note: str
    ) -> dict[str, Any]:
        crm.created.append(email)
        return {
            "account_id": "acc-7",
            "email": email,
            "access_token": PLANTED_TOKEN,
            "log": f"created with Authorization: Bearer {PLANTED_KEY}",
        }

    @subagent(name="onboarding", retry=RetryPolicy.never())
    async def onboarding(task: Task, ctx: Context) -> dict[str, Any]:
        account: dict[str, Any] = await ctx.call(
            create_account,
            email="bob@example.com",
            password=PLANTED_PASSWORD,
            api_key=PLANTED_KEY,
            dsn=DSN,
            note=f"token={PLANTED_TOKEN}",
        )
        if crm.fail_after_create:
            raise PermissionDenied("the mailer refused the welcome mail")
        return account

    return onboarding


class TestLedgerAtRest:
    async def test_tool_arguments_and_results_are_stored_masked(
        self, store: CheckpointStore, tmp_path: Path
    ) -> None:
        """A password, an API key, a DSN password and a token in the result are not stored."""
        crm = Crm()
        first = await onboarding_agent(crm).run(
            Task(query="bob", id="t1"), run_id="r1", store=store
        )
        assert isinstance(first, ErrorEnvelope)
        stored = await at_rest(store, "r1", tmp_path)
        assert not leaks(stored)
        assert "bob@example.com" in stored  # what is not a secret is kept
        assert "postgresql://bob:[REDACTED]@db.internal/crm" in stored

    async def test_a_resumed_run_still_does_not_repeat_the_call(
        self, store: CheckpointStore
    ) -> None:
        """Calls are matched by a digest of the clear arguments: the replay is found."""
        crm = Crm()
        agent = onboarding_agent(crm)
        await agent.run(Task(query="bob", id="t1"), run_id="r1", store=store)
        crm.fail_after_create = False
        second = await agent.run(Task(query="bob", id="t1"), run_id="r1", store=store)
        assert isinstance(second, Success)
        assert crm.created == ["bob@example.com"]
        # The replayed result is usable: its plain fields exact, its secrets masked.
        assert second.data["account_id"] == "acc-7"
        assert second.data["email"] == "bob@example.com"
        assert second.data["access_token"] == "[REDACTED]"
        assert not leaks(json.dumps(second.data))


class Notes(Subagent):
    """Records a finding holding a bearer token, then fails on the second source."""

    def __init__(self) -> None:
        super().__init__("notes", retry=RetryPolicy.never(), checkpoint=True)
        self.fail = True
        self.fetched: list[str] = []

    async def handle(self, task: Task, ctx: Context) -> list[Any]:
        ctx.record_partial(pending=["headers", "body"])
        if "headers" not in ctx.partials.completed:
            self.fetched.append("headers")
            ctx.record_partial(
                [f"Authorization: Bearer {PLANTED_KEY}", {"password": PLANTED_PASSWORD}],
                completed="headers",
            )
        self.fetched.append("body")
        if self.fail:
            raise PermissionDenied("body refused")
        return list(ctx.partials.findings)


class TestProgressAtRest:
    async def test_recorded_progress_is_stored_masked(
        self, store: CheckpointStore, tmp_path: Path
    ) -> None:
        """A bearer key and a password given to record_partial are not stored in clear."""
        agent = Notes()
        outcome = await agent.run(Task(query="q", id="t1"), run_id="r1", store=store)
        assert isinstance(outcome, ErrorEnvelope)
        assert not leaks(await at_rest(store, "r1", tmp_path))

    async def test_a_resumed_run_continues_with_the_masked_progress(
        self, store: CheckpointStore
    ) -> None:
        """The completed source is not fetched again; its finding comes back masked."""
        agent = Notes()
        await agent.run(Task(query="q", id="t1"), run_id="r1", store=store)
        agent.fail = False
        outcome = await agent.run(Task(query="q", id="t1"), run_id="r1", store=store)
        assert isinstance(outcome, Success)
        assert agent.fetched == ["headers", "body", "body"]
        assert outcome.data == ["Authorization: Bearer [REDACTED]", {"password": "[REDACTED]"}]


class TestPipelineAtRest:
    async def test_the_pipeline_input_is_stored_as_a_digest_only(
        self, store: CheckpointStore, tmp_path: Path
    ) -> None:
        """A DSN given as a pipeline's input is compared by digest, never stored."""

        async def count(dsn: str) -> int:
            return len(dsn)

        pipeline = Pipeline([("count", count)], store=store)
        outcome = await pipeline.run(DSN, run_id="r1")
        assert isinstance(outcome, Success)
        assert not leaks(await at_rest(store, "r1", tmp_path))
