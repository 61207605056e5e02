"""`RunStream`: one run of the coordinator, as the events it emits while it goes on.

The run works in an asyncio task of its own and the stream hands its events over
in order; `Coordinator.run()` is the same run drained (`drain()`), with no task and no
event built, since nobody reads them. A resume is a stream too
(`Coordinator.resume_stream`, drained by `resume()`): it opens from the store first.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol, Self

from agentmesh._logging import get_logger
from agentmesh.errors import UsageError
from agentmesh.events._channel import EventChannel, EventSink
from agentmesh.events._log import EventLog, LoggedSink, log_target, opened
from agentmesh.events._types import Event
from agentmesh.report import Report, TaskRecord
from agentmesh.task import Task

if TYPE_CHECKING:
    from agentmesh._engine._human import DecisionBook
    from agentmesh.subagents import Subagent

__all__ = ["RunStream", "Runnable", "StreamState"]

# `Subagent` for type checking only: the subagents import the task engine, which imports
# these events at run time.
Jobs = Sequence[tuple[str, Task, "Subagent"]]

Opening = Callable[[], Awaitable[tuple[Jobs, "DecisionBook | None", dict[str, TaskRecord] | None]]]
"""A resume's start, taken at its first iteration: it reads the run's plan and gives its
approvals, and returns the jobs, the run's approvals and the records of finished tasks."""


@dataclass(frozen=True, slots=True)
class _Start:
    """What a run starts from: its jobs; for a resume, its approvals and saved records."""

    jobs: Jobs
    book: DecisionBook | None = None
    saved: dict[str, TaskRecord] | None = None


class Runnable(Protocol):
    """What a stream drives: one run (the coordinator's `Run` meets it).

    A protocol, so that the events sit below the hub they report on.
    """

    run_id: str

    def begin(self, events: EventSink | None, book: DecisionBook | None = None) -> None:
        """Make the run's shared parts, its deadline counted from now."""

    async def execute(self, jobs: Jobs, saved: dict[str, TaskRecord] | None) -> Report:
        """Run every job to its end; the report."""

    async def stopped_report(self, jobs: Jobs, reason: str) -> Report:
        """The report of the run stopped early, every unfinished task a gap for `reason`."""


STOPPED: Final = "the run was stopped: its event stream was closed before this task finished"


class StreamState(enum.Enum):
    """Where a `RunStream` is in its life."""

    NEW = "new"  # not iterated yet: the run has not started
    RUNNING = "running"
    FINISHED = "finished"  # the run ended; `report` is its report
    STOPPED = "stopped"  # closed early; `report` is the partial report
    FAILED = "failed"  # the run raised (a bug in strict mode): no report


class RunStream:
    """The events of one run, in order: `async for event in coordinator.stream(tasks)`.

    The run starts at the first iteration and works in a task of its own; the stream
    holds up to `buffer` unread events, and past that the run waits for the consumer
    at its next dispatch or tool call: no event is ever dropped. The last event is
    `RunFinished(report)`; `report` holds the same report afterwards.

    Leaving early: `break` (or an exception) inside `async with coordinator.stream(...)
    as events:`, or `await events.aclose()`, cancels the run and returns once none of
    its tasks runs any more. `report` is then the partial report: the tasks that
    finished as they finished, each unfinished one a gap (or `partial`, with the
    progress it had recorded) whose reason says the stream was closed. A stream that
    is simply dropped after a `break` cancels its run too, as soon as it is collected,
    without waiting for it: use `async with` to be sure nothing runs on.

    The stream of a resume reads the run's plan and checks and saves the approvals at
    its first iteration (a `UsageError` for bad ones is raised there); closed before
    that, it has resumed nothing and has no report.
    """

    def __init__(
        self,
        run: Runnable,
        start: Jobs | Opening,
        buffer: int,
        *,
        store: object = None,
        event_log: EventLog | None = None,
    ) -> None:
        self.run_id = run.run_id
        self.buffer = buffer
        self.report: Report | None = None
        self.state = StreamState.NEW
        self._run = run
        self._start_from: Jobs | Opening | None = start
        self._jobs: Jobs | None = None
        self._channel: EventChannel | None = None
        self._task: asyncio.Task[Report] | None = None
        # Where the run's events are written as they happen: its store (`EventLog`).
        self._log = log_target(store, event_log)
        self._logged: LoggedSink | None = None

    @property
    def unread(self) -> int:
        """Events emitted and not read yet (the backlog the `buffer` bounds)."""
        return 0 if self._channel is None else self._channel.unread

    async def drain(self) -> Report:
        """Run to the end in the caller's task, reading no event; the report."""
        start = await self._open()
        self._run.begin(await self._sink(None), start.book)
        try:
            self.report = await self._run.execute(start.jobs, start.saved)
        except BaseException:
            self.state = StreamState.FAILED
            raise
        finally:
            if self._logged is not None:
                await self._logged.flush()
        self.state = StreamState.FINISHED
        return self.report

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        if self._task is None:
            start = await self._open()
            self._begin(start, await self._sink(EventChannel(self.run_id, self.buffer)))
        task, channel = self._task, self._channel
        assert task is not None
        assert channel is not None
        event = await channel.next()
        if event is not None:
            return event  # type: ignore[return-value]  # the channel holds only Events
        if self.state is StreamState.RUNNING:
            self._settle(task)
        raise StopAsyncIteration

    def _begin(self, start: _Start, sink: EventSink | None) -> None:
        self._jobs = start.jobs  # kept for the partial report
        channel = self._channel
        assert channel is not None
        self._run.begin(sink, start.book)
        # The task holds the run, never this stream: a stream dropped after a `break` is
        # collected at once, and cancels its run (see `__del__`).
        self._task = asyncio.create_task(_produce(self._run, start, channel, self._logged))

    async def _sink(self, channel: EventChannel | None) -> EventSink | None:
        """Where the run's events go: `channel` (a stream's), and its store's event log."""
        self._channel = channel
        if self._log is None:
            return channel
        store, table, log = self._log
        await opened(store)  # the log's appends are queued from plain functions
        self._logged = LoggedSink(self.run_id, store, table, log, channel)
        return self._logged

    async def _open(self) -> _Start:
        """What the run starts from, taken once: the stream is running from here on."""
        start_from = self._start_from
        if self.state is not StreamState.NEW or start_from is None:
            raise UsageError(f"this stream of run {self.run_id} is {self.state.value}")
        self._start_from = None
        self.state = StreamState.RUNNING
        if not callable(start_from):
            return _Start(start_from)
        try:
            jobs, book, saved = await start_from()
        except BaseException:
            self.state = StreamState.FAILED
            raise
        return _Start(jobs, book, saved)

    def _settle(self, task: asyncio.Task[Report]) -> None:
        """The run's task ended: its report, or its exception raised here."""
        exc = task.exception()
        if exc is not None:
            self.state = StreamState.FAILED
            raise exc
        self.report = task.result()
        self.state = StreamState.FINISHED

    async def aclose(self) -> None:
        """Stop the run if it still goes on, and return once nothing of it runs.

        A no-op for a stream that finished. `report` is the partial report afterwards;
        a stream closed before it was iterated reports every task as not started.
        """
        task = self._task
        if self.state is StreamState.NEW:
            start_from, self._start_from = self._start_from, None
            self.state = StreamState.STOPPED
            if start_from is not None and not callable(start_from):
                self._run.begin(None)
                self.report = await self._run.stopped_report(start_from, STOPPED)
            return
        if task is None or self.state is not StreamState.RUNNING:
            return
        task.cancel()
        interrupted = await _wait_out(task)
        failure: BaseException | None = None
        if self.state is StreamState.RUNNING:
            if task.cancelled():
                assert self._jobs is not None
                self.state = StreamState.STOPPED
                self.report = await self._run.stopped_report(self._jobs, STOPPED)
                if self._logged is not None:
                    await self._logged.flush()  # what it did before it stopped, kept
                get_logger(run_id=self.run_id).info(
                    "run_stopped", reason="event stream closed", entries=len(self.report.coverage)
                )
            elif task.exception() is not None:
                # The run failed before the consumer left: its caller gets the exception,
                # as from run(), never a stream that quietly ends.
                self.state, failure = StreamState.FAILED, task.exception()
            else:
                self.report, self.state = task.result(), StreamState.FINISHED
        if self._channel is not None:
            self._channel.close()
        if interrupted:
            raise asyncio.CancelledError  # the caller's own cancellation goes on
        if failure is not None:
            raise failure

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # Dropped while its run goes on (a `break` without `async with`): stop the run,
        # which nobody can read any more.
        task = self._task
        if task is not None and not task.done():
            # A loop that is closed already runs nothing any more.
            with contextlib.suppress(RuntimeError):
                task.cancel()

    def __repr__(self) -> str:
        return f"<RunStream {self.run_id} {self.state.value}>"


async def _produce(
    run: Runnable, start: _Start, channel: EventChannel, logged: LoggedSink | None
) -> Report:
    try:
        report = await run.execute(start.jobs, start.saved)
        if logged is not None:
            await logged.flush()  # the run's log complete before its stream ends
        return report
    finally:
        channel.close()  # the consumer reads what is left, then the stream ends


async def _wait_out(task: asyncio.Task[Report]) -> bool:
    """Wait until `task` is done, even through a cancellation; whether there was one."""
    interrupted = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            interrupted = True
    return interrupted
