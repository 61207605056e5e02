"""Schemas a hostile MCP server lists: no schema can freeze the loop or break every call.

One server process (`tests.mcp.fixtures.hostile_server`) for the module; a heartbeat task
shows whether the event loop kept running while arguments were checked.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from agentmesh import Context, ErrorCategory, ErrorEnvelope, RetryPolicy, Success, Task, subagent
from agentmesh.mcp import MCPServer, MCPTool
from tests.mcp.conftest import REPO

pytestmark = pytest.mark.asyncio(loop_scope="module")

T = TypeVar("T")
HOSTILE_MODULE = "tests.mcp.fixtures.hostile_server"
# Python's backtracking `re` spends more than 12 s on this against "^(a+)+$".
NEARLY_A_RUN = "a" * 41 + "!"
# The loop is said to keep running when no heartbeat waits longer than this: far below the
# >12 s a backtracking check froze it for, far above what a loaded 2-core machine adds.
FROZEN = 2.0


@pytest.fixture(scope="module")
def calls_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile") / "calls"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hostile(calls_file: Path) -> AsyncIterator[MCPServer]:
    server = MCPServer.stdio(
        sys.executable,
        "-m",
        HOSTILE_MODULE,
        name="hostile",
        env={"HOSTILE_CALLS": str(calls_file)},
        cwd=REPO,
        breaker=None,
    )
    async with server:
        yield server


def called(calls_file: Path) -> list[str]:
    return calls_file.read_text().split() if calls_file.exists() else []


async def run(tool: MCPTool, **arguments: Any) -> Any:
    @subagent(name="caller", retry=RetryPolicy.never())
    async def caller(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, **arguments)

    return await caller.run(Task(query=tool.name))


async def with_heartbeat(work: Awaitable[T]) -> tuple[T, float, int]:
    """`work`'s result, and the longest wait and the number of ticks of a task that ticks
    every 10 ms meanwhile."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def beat() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last)
            last = now

    beating = asyncio.create_task(beat())
    await asyncio.sleep(0.03)
    try:
        result = await work
    finally:
        done.set()
        await beating
    return result, max(gaps), len(gaps)


class TestBacktrackingPatterns:
    async def test_a_catastrophic_pattern_does_not_freeze_the_loop(
        self, hostile: MCPServer, calls_file: Path
    ) -> None:
        """`^(a+)+$` against 41 a's and a "!" is refused at once; other tasks keep running."""
        outcome, longest_wait, _ = await with_heartbeat(
            run(hostile.tool("catastrophic"), value=NEARLY_A_RUN)
        )
        assert longest_wait < FROZEN
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert "does not match '^(a+)+$'" in outcome.message
        assert "catastrophic" not in called(calls_file)

    async def test_a_matching_value_is_sent(self, hostile: MCPServer) -> None:
        """The pattern is still checked, not dropped: a value that matches goes through."""
        outcome = await run(hostile.tool("catastrophic"), value="a" * 41)
        assert isinstance(outcome, Success)

    async def test_a_catastrophic_pattern_of_property_names_does_not_freeze_the_loop(
        self, hostile: MCPServer
    ) -> None:
        """`patternProperties` (and `additionalProperties` beside it) run bounded too."""
        outcome, longest_wait, _ = await with_heartbeat(
            run(hostile.tool("catastrophic_keys"), **{NEARLY_A_RUN: 5})
        )
        assert longest_wait < FROZEN
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert "5 is not of type 'object'" in outcome.message

    async def test_a_pattern_no_linear_engine_runs_is_left_to_the_server(
        self, hostile: MCPServer, calls_file: Path
    ) -> None:
        """A look-ahead is not checked here (nor refused): the server checks its own input."""
        outcome = await run(hostile.tool("lookahead"), value="short")
        assert isinstance(outcome, Success)
        assert "lookahead" in called(calls_file)


class TestCostlySchemas:
    async def test_a_schema_too_costly_to_evaluate_is_refused_without_blocking(
        self, hostile: MCPServer, calls_file: Path
    ) -> None:
        """2**40 `anyOf` branches: the check gives up in bounded time, off the loop."""
        outcome, _, ticks = await with_heartbeat(run(hostile.tool("exponential"), value=1))
        # The check runs for its whole second: on the loop, nothing else would tick meanwhile.
        assert ticks >= 10
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert "could not be checked against hostile's input schema" in outcome.message
        assert "too costly" in outcome.message
        assert "exponential" not in called(calls_file)

    async def test_input_nested_too_deeply_to_check_is_refused(self, hostile: MCPServer) -> None:
        """A 3,000-deep tree against a recursive schema: a validation envelope, not a crash."""
        node: dict[str, Any] = {"value": "leaf", "children": []}
        for _ in range(3000):
            node = {"value": "node", "children": [node]}
        outcome = await run(hostile.tool("tree"), **node)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert "nested too deeply to be checked" in outcome.message


class TestUnusableSchemas:
    async def test_a_self_referencing_schema_is_not_offered(self, hostile: MCPServer) -> None:
        """`{"$ref": "#"}` beside `type` loops forever: left out at listing."""
        offered = {tool.name for tool in await hostile.list_tools()}
        assert "self_reference" not in offered
        assert "remote_reference" not in offered
        assert {"catastrophic", "tree", "lookahead"} <= offered

    async def test_calling_it_anyway_is_invalid_schema_not_a_crash(
        self, hostile: MCPServer, calls_file: Path
    ) -> None:
        """Not `unexpected_error` "maximum recursion depth": `invalid_schema`, never sent."""
        outcome = await run(hostile.tool("self_reference"), value="x")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.OTHER
        assert outcome.error_type == "invalid_schema"
        assert "loop without going into the input" in outcome.message
        assert "self_reference" not in called(calls_file)

    async def test_a_reference_that_cannot_be_resolved_is_invalid_schema(
        self, hostile: MCPServer
    ) -> None:
        """A remote `$ref` is never fetched: the schema cannot be used, and says why."""
        outcome = await run(hostile.tool("remote_reference"), value="x")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "invalid_schema"
        assert "'https://schemas.invalid/tool.json' cannot be resolved" in outcome.message

    async def test_a_recursive_schema_that_goes_into_the_input_is_used(
        self, hostile: MCPServer
    ) -> None:
        """A tree's schema refers to itself through `items`: offered, and checked deep down."""
        tree = {"value": "root", "children": [{"value": "leaf", "children": []}]}
        assert isinstance(await run(hostile.tool("tree"), **tree), Success)
        bad = {"value": "root", "children": [{"value": 5}]}
        outcome = await run(hostile.tool("tree"), **bad)
        assert isinstance(outcome, ErrorEnvelope)
        assert "children.0.value" in outcome.message
