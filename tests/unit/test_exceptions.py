"""One root for every exception agentmesh raises, and no name that shadows pydantic's."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import agentmesh
import agentmesh.approvals
import agentmesh.checkpoints
import agentmesh.coordinator
import agentmesh.errors
import agentmesh.events
import agentmesh.executors
import agentmesh.models
import agentmesh.policies
import agentmesh.report
import agentmesh.subagents
import agentmesh.testing
from agentmesh import (
    AgentmeshError,
    Context,
    ErrorEnvelope,
    InvalidInput,
    Task,
    subagent,
    tool,
)
from agentmesh.checkpoints import CheckpointError, MemoryStore
from agentmesh.policies import ToolCallEvent, pre_tool_use

PUBLIC_MODULES = (
    agentmesh,
    agentmesh.checkpoints,
    agentmesh.coordinator,
    agentmesh.approvals,
    agentmesh.errors,
    agentmesh.events,
    agentmesh.executors,
    agentmesh.models,
    agentmesh.policies,
    agentmesh.report,
    agentmesh.subagents,
    agentmesh.testing,
)


class TestOneRoot:
    def test_every_public_exception_derives_from_agentmesh_error(self) -> None:
        """Each exception class a public module exports can be caught as AgentmeshError."""
        exceptions = {
            f"{module.__name__}.{name}": value
            for module in PUBLIC_MODULES
            for name in module.__all__
            if inspect.isclass(value := getattr(module, name)) and issubclass(value, BaseException)
        }
        assert "agentmesh.checkpoints.CheckpointError" in exceptions
        outside = sorted(n for n, cls in exceptions.items() if not issubclass(cls, AgentmeshError))
        assert outside == []

    def test_usage_error_is_still_a_value_error(self) -> None:
        """Code written before the root existed (`except ValueError`) still catches misuse."""
        with pytest.raises(ValueError, match="max_attempts"):
            agentmesh.RetryPolicy(max_attempts=0)

    async def test_a_damaged_store_record_is_caught_by_the_root(self) -> None:
        """A store's runtime failure is an AgentmeshError too, not a bare Exception."""
        store = MemoryStore()
        await store.put("run", "stage", "key", {"a": 1})
        with pytest.raises(AgentmeshError) as caught:
            await store.get("run", "stage", "key", model=int)
        assert isinstance(caught.value, CheckpointError)

    async def test_a_policy_that_returns_nonsense_is_misuse_and_fails_closed(self) -> None:
        """A policy must return a Ruling or None: anything else denies the call as misuse."""
        calls: list[str] = []

        @pre_tool_use
        def sloppy(event: ToolCallEvent) -> Any:
            return "allow"

        @tool(idempotent=True)
        async def refund(order: str) -> str:
            calls.append(order)
            return "paid"

        @subagent(name="desk", policies=[sloppy])
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order=task.query)

        outcome = await desk.run(Task(query="A1"))
        assert isinstance(outcome, ErrorEnvelope)
        assert calls == []
        assert "UsageError" in outcome.message
        assert "sloppy" in outcome.message


class TestNoShadowing:
    async def test_the_validation_signal_is_invalid_input(self) -> None:
        """Raising InvalidInput in a subagent gives a validation envelope, never retried."""

        @subagent(name="orders")
        async def orders(task: Task, ctx: Context) -> list[str]:
            raise InvalidInput("order_id must match #NNNNN", field="order_id")

        outcome = await orders.run(Task(query="last one"))
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is agentmesh.ErrorCategory.VALIDATION
        assert not outcome.is_retryable
        assert outcome.attempts == 1

    def test_star_import_leaves_pydantics_validation_error_alone(self) -> None:
        """`from agentmesh import *` after pydantic's ValidationError keeps pydantic's."""
        code = textwrap.dedent(
            """
            import warnings
            warnings.simplefilter("error")
            from pydantic import ValidationError
            from agentmesh import *
            import pydantic
            assert ValidationError is pydantic.ValidationError
            """
        )
        subprocess.run([sys.executable, "-c", code], check=True)

    @pytest.mark.parametrize("module", [agentmesh, agentmesh.errors])
    def test_the_old_name_still_imports_with_a_warning(self, module: object) -> None:
        """`ValidationError` is InvalidInput for one more release, with a DeprecationWarning."""
        with pytest.warns(DeprecationWarning, match="InvalidInput"):
            old = module.ValidationError  # type: ignore[attr-defined]
        assert old is InvalidInput
