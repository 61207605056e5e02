"""The research agent's bound on a search call: a stuck source is given up, a source that
answered is not, however long other tasks hold the event loop.

In process, with real concurrency: the real search subagent over the real `pydoc`
source, run by a Coordinator, while another task does synchronous work on the loop (as
the relevance scoring of other searches does, for tens to hundreds of milliseconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import suppress
from functools import cache
from typing import Any

from agentmesh import Context, Coordinator, Report, Task
from agentmesh.events import AttemptFailed, Event, TaskStarted, ToolCalled
from agentmesh.policies import PreToolUse, ToolCallEvent, pre_tool_use
from examples.research_agent.agents import search_agent
from examples.research_agent.faults import Fault
from examples.research_agent.injection import FaultInjector
from examples.research_agent.sources import Passage, PydocCorpus

BOUND = 0.05  # seconds a search call may wait for its source
QUERY = "with statement"


@cache
def pydoc() -> PydocCorpus:
    return PydocCorpus.load()


class PromptBackend(FaultInjector):
    """A source reached through the event loop (a socket, a worker thread) that answers
    `delay` seconds after it is asked; `waiting` is set while it has a call to answer."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.waiting = asyncio.Event()

    async def strike(self, source: str, call: str, *, plain_query: bool) -> bool:
        self.waiting.set()
        await asyncio.sleep(self.delay)
        self.waiting.clear()
        return await super().strike(source, call, plain_query=plain_query)


def hold_the_loop(seconds: float) -> None:
    """Synchronous work on the event loop's thread, as scoring passages is: no task runs
    meanwhile, and every timer that falls due waits for it."""
    time.sleep(seconds)


async def keep_all(ctx: Context, query: str, passages: Sequence[Passage]) -> list[Passage]:
    return list(passages)


async def search(
    faults: FaultInjector,
    *,
    busy: Callable[[], Coroutine[Any, Any, None]] | None = None,
    documents: int = 2,
    bound: float = BOUND,
    policies: Sequence[PreToolUse] = (),
) -> tuple[Report, list[Event]]:
    """One search of pydoc for QUERY, each call bounded at `bound`; `busy()` runs beside
    it until the search ends."""
    agent = search_agent(pydoc(), faults, analyse=keep_all, documents=documents, call_timeout=bound)
    task = Task(id="1-pydoc", query=QUERY, topic="with", subagent="pydoc")
    beside = asyncio.create_task(busy()) if busy else None
    seen: list[Event] = []
    try:
        async with Coordinator([agent], policies=policies).stream([task]) as events:
            async for event in events:
                seen.append(event)
    finally:
        if beside is not None:
            beside.cancel()
            with suppress(asyncio.CancelledError):
                await beside
    assert events.report is not None
    return events.report, seen


def calls(events: list[Event]) -> dict[str, int]:
    """How many attempts each tool call took, by tool and arguments."""
    return {f"{e.tool} {e.arguments}": e.attempts for e in events if isinstance(e, ToolCalled)}


class TestAnsweredSourceIsNotGivenUp:
    def test_while_one_long_scoring_holds_the_loop(self) -> None:
        """The source answers in a millisecond, but the loop is busy elsewhere for five
        times the bound from the moment it is asked: the answer is taken, first attempt."""
        backend = PromptBackend(delay=0.001)

        async def score_synchronously() -> None:
            await backend.waiting.wait()
            hold_the_loop(5 * BOUND)

        report, events = asyncio.run(search(backend, busy=score_synchronously))
        assert [e for e in events if isinstance(e, AttemptFailed)] == []
        assert set(calls(events).values()) == {1}
        assert len(calls(events)) == 3  # the find, then two documents read
        assert report.coverage[0].status == "covered"

    def test_while_other_work_holds_the_loop_again_and_again(self) -> None:
        """Other searches' scoring holds the loop for twice the bound at every turn of the
        loop, for the whole search, so a source is asked late too, and answers in half the
        bound after it is asked: no call is given up, none is retried. (A small bound
        keeps the test short.)"""
        bound = 0.01
        backend = PromptBackend(delay=bound / 2)

        async def score_again_and_again() -> None:
            while True:
                hold_the_loop(2 * bound)
                await asyncio.sleep(0)

        report, events = asyncio.run(search(backend, busy=score_again_and_again, bound=bound))
        assert [e for e in events if isinstance(e, AttemptFailed)] == []
        assert set(calls(events).values()) == {1}
        assert report.coverage[0].status == "covered"

    def test_when_the_loop_was_busy_before_the_source_was_asked(self) -> None:
        """The loop is busy for five times the bound as each call is made, before the
        source is even asked; the source answers in half the bound: its time counts
        from when it was asked, and the answer is taken, first attempt."""
        bound = 0.02
        backend = PromptBackend(delay=bound / 2)
        calling = asyncio.Event()

        @pre_tool_use
        def note_the_call(event: ToolCallEvent) -> None:
            calling.set()

        async def score_as_each_call_is_made() -> None:
            while True:
                await calling.wait()
                calling.clear()
                hold_the_loop(5 * bound)

        report, events = asyncio.run(
            search(backend, busy=score_as_each_call_is_made, bound=bound, policies=[note_the_call])
        )
        assert [e for e in events if isinstance(e, AttemptFailed)] == []
        assert set(calls(events).values()) == {1}
        assert report.coverage[0].status == "covered"


class TestStuckSourceIsGivenUp:
    def test_a_hang_is_given_up_at_the_bound_and_retried(self) -> None:
        """Seed 10: the find hangs on its first attempt only; the read answers. The hang is
        given up after the bound (not before), with the source named, and retried."""
        faults = FaultInjector([Fault("pydoc", "timeout", 0.5)], seed=10)
        report, events = asyncio.run(search(faults, documents=1))
        (started,) = [e for e in events if isinstance(e, TaskStarted)]
        (failed,) = [e for e in events if isinstance(e, AttemptFailed)]
        assert failed.source == "pydoc/find_pydoc"
        assert failed.envelope.error_type == "timeout"
        assert failed.envelope.message == f"pydoc did not answer within {BOUND:g}s"
        # Given up at the bound, not at the hang's end (an hour) nor the run's deadline:
        # generous slack for a starved CI core.
        assert BOUND <= failed.timestamp - started.timestamp < BOUND + 2.0
        assert sorted(calls(events).values()) == [1, 2]  # the read, the find retried once
        assert report.coverage[0].status == "covered"
