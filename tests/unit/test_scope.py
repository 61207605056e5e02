"""The run scope: what the tasks of one run share, kept out of the user's state dict."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    RetryPolicy,
    Success,
    Task,
    subagent,
    tool,
)
from agentmesh.envelope import ErrorType
from agentmesh.errors import ToolCallFailed, UsageError
from agentmesh.policies import (
    Ruling,
    ToolCallEvent,
    ToolPolicy,
    deny_after_permission_error,
    pre_tool_use,
)
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope

NO_RETRY = RetryPolicy.never()


class Charges:
    """A non-idempotent charge whose gateway never answers (it may have charged)."""

    def __init__(self) -> None:
        self.made = 0

        @tool(impact="financial")
        async def charge(amount: int) -> str:
            self.made += 1
            raise TimeoutError("gateway did not answer")

        self.tool = charge


def charging_agent(name: str, charges: Charges) -> Any:
    @subagent(name=name, retry=NO_RETRY)
    async def agent(task: Task, ctx: Context) -> str:
        return await ctx.call(charges.tool, amount=100)

    return agent


class CountingMemory(ToolPolicy):
    """Counts, in its run memory, the calls it saw."""

    def __init__(self, name: str) -> None:
        self.name = name

    def before(self, event: ToolCallEvent) -> Ruling | None:
        memory = event.scope.memory_for(self)
        memory["calls"] = memory.get("calls", 0) + 1
        return None


class TestForbiddenCalls:
    async def test_an_ambiguous_failure_forbids_the_call_to_other_subagents_of_the_run(
        self,
    ) -> None:
        """A charge that may have happened is not made again by another subagent of the run."""
        charges = Charges()
        scope = RunScope("run")
        first = await charging_agent("a", charges).run("charge", scope=scope)
        second = await charging_agent("b", charges).run("charge", scope=scope)
        assert isinstance(first, ErrorEnvelope)
        assert isinstance(second, ErrorEnvelope)
        assert charges.made == 1
        assert second.error_type == ErrorType.POLICY_BLOCKED
        assert second.policy is not None
        assert second.policy.policy == "agentmesh.idempotency"

    async def test_the_coordinator_shares_forbidden_calls_within_a_run_only(self) -> None:
        """Within one coordinator run the charge is made once; a new run may make it again."""
        charges = Charges()
        coordinator = Coordinator(
            [charging_agent("a", charges), charging_agent("b", charges)], max_concurrency=1
        )
        tasks = [Task(query="charge", subagent="a"), Task(query="charge", subagent="b")]
        await coordinator.run(tasks)
        assert charges.made == 1
        await coordinator.run(tasks)
        assert charges.made == 2

    async def test_a_failure_whose_text_mentions_no_retry_forbids_nothing(self) -> None:
        """Only the framework's own finding forbids a call; words in a tool's details do not."""
        calls = 0

        @tool
        async def submit(form: str) -> str:
            nonlocal calls
            calls += 1
            raise InvalidInput("bad form", details="not retried automatically")

        @subagent(retry=NO_RETRY)
        async def agent(task: Task, ctx: Context) -> list[str]:
            types = []
            for _ in range(2):
                try:
                    await ctx.call(submit, form="x")
                except ToolCallFailed as failed:
                    types.append(failed.envelope.error_type)
            return types

        outcome = await agent.run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == ["invalid_query", "invalid_query"]
        assert calls == 2


class TestPolicyMemory:
    def test_each_policy_name_has_its_own_memory(self) -> None:
        """Two policies of different names never see each other's memory."""
        scope = RunScope()
        scope.memory_for(CountingMemory("one"))["calls"] = 1
        assert scope.memory_for(CountingMemory("two")) == {}
        assert scope.memory_for(CountingMemory("one")) == {"calls": 1}

    async def test_memory_lasts_for_the_run_and_starts_empty_in_the_next(self) -> None:
        """A stateful policy remembers across the tasks of one run, not into another run."""
        counter = CountingMemory("counter")
        seen: list[int] = []

        @tool(idempotent=True)
        async def lookup(key: str) -> str:
            return key

        @subagent(policies=[counter])
        async def agent(task: Task, ctx: Context) -> str:
            result = await ctx.call(lookup, key=task.query)
            seen.append(ctx.scope.memory_for(counter)["calls"])
            return result

        coordinator = Coordinator([agent], max_concurrency=1)
        await coordinator.run(["a", "b"])
        await coordinator.run(["c"])
        assert seen == [1, 2, 1]

    async def test_a_permission_denial_holds_in_its_run_only(self) -> None:
        """deny_after_permission_error denies the tool later in the run, not in a new one."""
        calls = 0

        @tool(idempotent=True)
        async def admin(op: str) -> str:
            nonlocal calls
            calls += 1
            raise PermissionDenied("no admin scope")

        @subagent(policies=[deny_after_permission_error()])
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(admin, op=task.query)

        scope = RunScope()
        await agent.run("list", scope=scope)
        denied = await agent.run("delete", scope=scope)
        fresh = await agent.run("delete")
        assert isinstance(denied, ErrorEnvelope)
        assert denied.error_type == ErrorType.POLICY_BLOCKED
        assert isinstance(fresh, ErrorEnvelope)
        assert fresh.error_type == "permission_denied"
        assert calls == 2


class TestUserState:
    async def test_the_state_dict_holds_only_the_user_s_keys_after_a_run(self) -> None:
        """Ledger, forbidden calls and policy memory never appear in the user's state."""
        charges = Charges()

        @tool(idempotent=True)
        async def admin(op: str) -> str:
            raise PermissionDenied("no admin scope")

        @tool  # not idempotent: recorded in the run's ledger
        async def note(text: str) -> str:
            return text

        @pre_tool_use
        def mark(event: ToolCallEvent) -> None:
            event.state["seen"] = True

        @subagent(retry=NO_RETRY, policies=[mark, deny_after_permission_error()])
        async def agent(task: Task, ctx: Context) -> str:
            await ctx.call(note, text="hi")
            with contextlib.suppress(ToolCallFailed):
                await ctx.call(admin, op="x")
            with contextlib.suppress(ToolCallFailed):
                await ctx.call(charges.tool, amount=1)
            return "done"

        state: dict[str, Any] = {}
        scope = RunScope()
        assert isinstance(await agent.run("q", state=state, scope=scope), Success)
        assert state == {"seen": True}


class TestRateReservations:
    async def test_a_rate_limited_call_asks_the_scope_s_reservations(self) -> None:
        """A scope that counts starts elsewhere is asked for every rate-limited start."""
        asked: list[tuple[str, int, float]] = []

        class Elsewhere:
            async def reserve_start(self, name: str, n: int, per_seconds: float) -> float:
                asked.append((name, n, per_seconds))
                return 0.0

        @tool(idempotent=True, rate_limit=(1, 60.0))
        async def search(query: str) -> str:
            return query

        @subagent
        async def agent(task: Task, ctx: Context) -> list[str]:
            return [await ctx.call(search, query=task.query) for _ in range(3)]

        outcome = await agent.run("q", scope=RunScope(rates=Elsewhere()))
        assert isinstance(outcome, Success)
        assert [name for name, _, _ in asked] == [search.limiter.name] * 3


class TestSubagentRunWithAScope:
    async def test_the_run_id_and_budget_come_from_the_scope(self) -> None:
        """A task run in a scope takes its run id and retry budget."""
        budget = RetryBudget()
        scope = RunScope("r-7", budget=budget)

        @subagent
        async def agent(task: Task, ctx: Context) -> tuple[str, bool]:
            return ctx.run_id, ctx.budget is budget

        outcome = await agent.run("q", scope=scope)
        assert isinstance(outcome, Success)
        assert outcome.data == ("r-7", True)
        assert budget.first_attempts == 1

    async def test_a_run_id_that_is_not_the_scope_s_is_a_usage_error(self) -> None:
        """Two different run ids for one task are a mistake, named in the error."""

        @subagent
        async def agent(task: Task, ctx: Context) -> str:
            return "ok"

        with pytest.raises(UsageError, match="run_id"):
            await agent.run("q", run_id="other", scope=RunScope("r-7"))


class TestErrorType:
    def test_the_framework_s_error_types_are_their_wire_strings(self) -> None:
        """`ErrorType` members are the `errorType` strings on the wire."""
        wire: str = "policy_blocked"
        assert wire == ErrorType.POLICY_BLOCKED
        assert ErrorType("timeout") is ErrorType.TIMEOUT


class TestTypedParts:
    async def test_a_forbidden_call_and_policy_memory_are_typed_fields_of_the_scope(self) -> None:
        """What the run learned is read from `forbidden_calls` and `policy_memory`, no keys."""
        charges = Charges()
        memory = CountingMemory("counter")
        scope = RunScope("run", policies=[memory])
        await charging_agent("a", charges).run("charge", scope=scope)
        assert next(iter(scope.forbidden_calls.values())).policy == "agentmesh.idempotency"
        assert scope.policy_memory == {"counter": {"calls": 1}}

    def test_the_old_shared_mapping_still_builds_a_scope_with_a_warning(self) -> None:
        """`RunScope(shared=)` keeps working for one release and says what replaces it."""
        with pytest.warns(DeprecationWarning, match="forbidden_calls= and policy_memory="):
            scope = RunScope("run", shared={"policy:counter": {"calls": 2}})
        assert scope.memory_for(CountingMemory("counter")) == {"calls": 2}


class TestOneRunObject:
    async def test_a_subagent_run_takes_its_policies_state_and_store_from_the_scope(
        self,
    ) -> None:
        """`Subagent.run(task, scope=...)` alone gets the run's policies, state and store."""
        from agentmesh.checkpoints import MemoryStore

        seen: dict[str, Any] = {}

        @pre_tool_use
        def note(event: ToolCallEvent) -> Ruling | None:
            event.state["seen"] = event.tool
            return None

        @tool
        async def look(q: str) -> str:
            return q

        @subagent(name="docs", retry=NO_RETRY)
        async def docs(task: Task, ctx: Context) -> str:
            seen["scope"] = ctx.scope
            return await ctx.call(look, q=task.query)

        store, state = MemoryStore(), {"mine": 1}
        scope = RunScope("run", policies=[note], state=state, store=store)
        outcome = await docs.run("q", scope=scope, task_id="t")
        assert isinstance(outcome, Success)
        assert state == {"mine": 1, "seen": "look"}
        assert seen["scope"] is scope
        # The non-idempotent call was claimed in the ledger of the scope's store.
        assert [c.key for c in await store.list("run") if c.key.startswith("call/")]

    async def test_an_executor_gets_the_scope_the_task_id_and_the_time_only(self) -> None:
        """A custom executor places a task from `Dispatch(scope, task_id, timeout)`."""
        from agentmesh.executors import Dispatch

        seen: list[Dispatch] = []

        class Watching:
            async def execute(self, subagent: Any, task: Task, dispatch: Dispatch) -> Any:
                seen.append(dispatch)
                return await subagent.run(
                    task, scope=dispatch.scope, task_id=dispatch.task_id, timeout=dispatch.timeout
                )

        @pre_tool_use
        def allow(event: ToolCallEvent) -> Ruling | None:
            return None

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            return ctx.run_id

        coordinator = Coordinator([docs], executor=Watching(), policies=[allow], timeout=30)
        report = await coordinator.run(["q"], run_id="r1")
        assert report.findings[0].content == "r1"
        (dispatch,) = seen
        assert (dispatch.scope.run_id, dispatch.task_id) == ("r1", "task-0")
        assert dispatch.scope.policies == (allow,)
        assert dispatch.timeout is not None
        assert 0 < dispatch.timeout <= 30
