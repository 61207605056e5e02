"""Dispatch: N trivial tasks through each contender, the same failures for every one.

Every contender runs the same work, `Workload.step(query, attempt)`: it returns the
query, except that the first attempt of every tenth query raises a `TransientError`.
A contender with retries retries it (at most 3 attempts, backoff computed but never
slept: the sleep is injected and returns at once, except LangGraph's, which cannot be
injected and sleeps 0 s, a bare yield to the loop). Raw `asyncio.gather` has no retry:
it collects the exceptions and is the floor every other contender is compared with.
With `suspend`, every attempt yields to the loop once first, for every contender alike.
"""

from __future__ import annotations

import asyncio
import operator
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

# Full jitter: `wait_random_exponential(multiplier=)` reads alike in every tenacity 9
# (`wait_exponential_jitter` renamed its first argument in 9.2; google-genai pins < 9.2).
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from agentmesh import Coordinator, RetryBudget, RetryPolicy, Task, TransientError, subagent
from agentmesh.context import Context

MAX_ATTEMPTS = 3
LANGGRAPH_MAX_N = 10_000  # its fan-out grows with N squared: 100,000 would take many minutes


async def no_sleep(seconds: float) -> None:
    """The injected sleep: backoff is computed, never waited for."""


class Workload:
    """The work every contender does, and what it saw: attempts, failures injected.

    Args:
        n: how many tasks (queries "0" .. "n-1").
        failure_rate: share of queries whose first attempt fails (every k-th query).
        blocking: hold every successful attempt until `release()`, to measure memory
            with all tasks in flight.
        retried: whether the contender retries; a raw gather's failed tasks never wait.
        suspend: every attempt first yields to the loop once (`await asyncio.sleep(0)`),
            as a real subagent awaiting I/O does: more tasks are alive at once, and the
            garbage collector walks them (issue 18).
    """

    def __init__(
        self,
        n: int,
        failure_rate: float,
        *,
        blocking: bool = False,
        retried: bool = True,
        suspend: bool = False,
    ) -> None:
        self.n = n
        self.suspend = suspend
        self.queries = [str(i) for i in range(n)]
        every = round(1 / failure_rate) if failure_rate > 0 else 0
        self.failing = frozenset(self.queries[::every]) if every else frozenset[str]()
        self.attempts = 0
        self.blocking = blocking
        self.waiting = 0
        self.expected_waiting = n if retried else n - len(self.failing)
        self.all_waiting = asyncio.Event() if blocking else None
        self.gate = asyncio.Event() if blocking else None

    async def step(self, query: str, attempt: int) -> str:
        self.attempts += 1
        if self.suspend:
            await asyncio.sleep(0)
        if attempt == 1 and query in self.failing:
            raise TransientError("injected", error_type="unavailable")
        if self.gate is not None and self.all_waiting is not None:
            self.waiting += 1
            if self.waiting == self.expected_waiting:
                self.all_waiting.set()
            await self.gate.wait()
        return query

    def release(self) -> None:
        assert self.gate is not None
        self.gate.set()


Prepare = Callable[[Workload], Callable[[], Awaitable[Any]]]


@dataclass(frozen=True)
class Contender:
    """One way of running the workload; `prepare` does the setup that is not timed."""

    key: str
    name: str
    prepare: Prepare
    max_n: int | None = None
    retries: bool = True

    def runs_at(self, n: int) -> bool:
        return self.max_n is None or n <= self.max_n


def raw_gather(workload: Workload) -> Callable[[], Awaitable[Any]]:
    step, queries = workload.step, workload.queries

    async def run() -> list[Any]:
        return await asyncio.gather(*(step(q, 1) for q in queries), return_exceptions=True)

    return run


def retry_loop(workload: Workload) -> Callable[[], Awaitable[Any]]:
    step, queries = workload.step, workload.queries

    async def call(query: str) -> str:
        attempt = 1
        while True:
            try:
                return await step(query, attempt)
            except TransientError:
                if attempt >= MAX_ATTEMPTS:
                    raise
                await no_sleep(random.uniform(0, min(10.0, 0.5 * 2 ** (attempt - 1))))
                attempt += 1

    async def run() -> list[str]:
        return await asyncio.gather(*(call(q) for q in queries))

    return run


def tenacity_gather(workload: Workload) -> Callable[[], Awaitable[Any]]:
    step, queries = workload.step, workload.queries

    async def call(query: str) -> str:
        attempt = 0

        async def once() -> str:
            nonlocal attempt
            attempt += 1
            return await step(query, attempt)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(MAX_ATTEMPTS),
            wait=wait_random_exponential(multiplier=0.5, max=10.0),
            retry=retry_if_exception_type(TransientError),
            sleep=no_sleep,
            reraise=True,
        )
        result: str = await retrying(once)
        return result

    async def run() -> list[str]:
        return await asyncio.gather(*(call(q) for q in queries))

    return run


def _agent(workload: Workload) -> Any:
    step = workload.step

    @subagent(name="worker", retry=RetryPolicy(max_attempts=MAX_ATTEMPTS, sleep=no_sleep))
    async def worker(task: Task, ctx: Context) -> str:
        return await step(task.query, ctx.attempt)

    return worker


def agentmesh_subagent(workload: Workload) -> Callable[[], Awaitable[Any]]:
    worker = _agent(workload)
    tasks = [Task(query=q) for q in workload.queries]

    async def run() -> list[Any]:
        return await asyncio.gather(
            *(worker.run(t, run_id="bench", task_id=t.query) for t in tasks)
        )

    return run


def agentmesh_coordinator(workload: Workload) -> Callable[[], Awaitable[Any]]:
    # The default max_concurrency (64) never makes a trivial task wait: each runs to its
    # end without yielding. With every task held in flight, the limit must allow them all,
    # and the budget must stay out of it: a first attempt deposits into it when it ends,
    # so attempts held open would fund no retry and the failed tenth would not all retry.
    agent = _agent(workload)
    coordinator = (
        Coordinator([agent], max_concurrency=workload.n, retry_budget=RetryBudget.unlimited())
        if workload.blocking
        else Coordinator([agent])
    )
    tasks = [Task(query=q) for q in workload.queries]

    async def run() -> Any:
        return await coordinator.run(tasks, run_id="bench")

    return run


class GraphState(TypedDict):
    """The graph's state: the queries in, the results reduced with `operator.add`."""

    queries: list[str]
    results: Annotated[list[str], operator.add]


class GraphItem(TypedDict):
    """What one `Send` hands to the work node."""

    query: str


def langgraph_send(workload: Workload) -> Callable[[], Awaitable[Any]]:
    """LangGraph's map-reduce idiom: `Send` per item, a list reducer, a node RetryPolicy."""
    from langgraph.graph import START, StateGraph
    from langgraph.types import RetryPolicy as GraphRetryPolicy
    from langgraph.types import Send

    step, queries = workload.step, workload.queries
    attempts: dict[str, int] = {}

    async def work(item: GraphItem) -> dict[str, Any]:
        query = item["query"]
        attempt = attempts[query] = attempts.get(query, 0) + 1
        return {"results": [await step(query, attempt)]}

    def fan_out(state: GraphState) -> list[Any]:  # Sends; LangGraph reads these hints
        return [Send("work", {"query": q}) for q in state["queries"]]

    builder = StateGraph(GraphState)
    builder.add_node(
        "work",
        work,  # type: ignore[call-overload]  # a TypedDict input node, as in LangGraph's docs
        retry_policy=GraphRetryPolicy(
            max_attempts=MAX_ATTEMPTS,
            initial_interval=0.0,
            jitter=False,
            retry_on=TransientError,
        ),
    )
    builder.add_conditional_edges(START, fan_out, ["work"])
    graph = builder.compile()

    async def run() -> Any:
        attempts.clear()
        return await graph.ainvoke({"queries": queries, "results": []})

    return run


def langgraph_available() -> bool:
    try:
        import langgraph.graph  # noqa: F401  # only probing
    except ImportError:
        return False
    return True


CONTENDERS: tuple[Contender, ...] = (
    Contender("raw", "asyncio.gather (no retry)", raw_gather, retries=False),
    Contender("loop", "gather + hand-written retry loop", retry_loop),
    Contender("tenacity", "gather + tenacity AsyncRetrying", tenacity_gather),
    Contender("subagent", "agentmesh Subagent.run (gather)", agentmesh_subagent),
    Contender("coordinator", "agentmesh Coordinator.run", agentmesh_coordinator),
    Contender("langgraph", "LangGraph Send + RetryPolicy", langgraph_send, LANGGRAPH_MAX_N),
)
BY_KEY = {contender.key: contender for contender in CONTENDERS}


def check(key: str, result: Any, workload: Workload) -> None:
    """Every contender must have done the same work: no benchmark of a broken run."""
    n, failed = workload.n, len(workload.failing)
    if key == "raw":
        errors = sum(isinstance(item, BaseException) for item in result)
        assert len(result) == n, (key, len(result))
        assert errors == failed, (key, errors, failed)
        return
    expected_attempts = n + failed
    assert workload.attempts == expected_attempts, (key, workload.attempts, expected_attempts)
    if key == "coordinator":
        assert len(result.coverage) == n, key
        assert result.coverage_ratio == 1.0, key
    elif key == "subagent":
        assert all(outcome.is_error is False for outcome in result), key
    elif key == "langgraph":
        assert sorted(result["results"]) == sorted(workload.queries), key
    else:
        assert result == workload.queries, key
