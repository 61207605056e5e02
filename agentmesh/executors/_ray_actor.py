"""The worker side of the Ray executor's pool: long-lived actors that run many tasks.

A Ray task per dispatch costs about a millisecond of scheduling, serializing and a
fresh event loop, more than a small subagent's whole run. A `TaskWorker` is started
once per CPU of the cluster and stays: the driver sends it dispatches in batches
(`submit`), it runs them on its own event loop, `slots` at a time and in the order
they came, and it tells the driver what happened (`poll`): the events of its tasks as
they are emitted, and each task's end. One long poll carries everything the worker
had to say since the last one, so a thousand small tasks cost a few messages, not
thousands.

Events wait in the worker's `Mailbox` until the driver takes them. Nothing is ever
dropped: when `bound` events wait there (the driver's consumer is behind, so the
driver stopped polling), each task waits at its next `room()` (before its next tool
call), as a local run waits for its stream's consumer. A worker's memory stays
bounded however slow the consumer is.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import time
from typing import Any, Final

from agentmesh.events import EventSink, RunEvent
from agentmesh.executors._ray_spec import Spec
from agentmesh.executors._ray_worker import REFS, run_spec

__all__ = ["BOUND", "Mailbox", "TaskWorker", "WorkerEvents", "pack"]

BOUND: Final = 1024
"""Events a worker holds for the driver before its tasks wait for room."""

# After the first news, a poll waits up to this long for more before it answers,
# unless this many items are there already or every task sent has ended: small tasks'
# ends travel in batches (each message costs both sides a few hundred µs of CPU).
_LINGER: Final = 0.005
_ENOUGH: Final = 256

Item = tuple[Any, ...]
"""("started", call), ("event", call, RunEvent) or ("ended", call, (kind, value), seconds)."""


class Mailbox:
    """What a worker has to tell the driver, in the order it happened."""

    __slots__ = ("_hurry", "_news", "_room", "bound", "events", "items", "running")

    def __init__(self, bound: int = BOUND) -> None:
        self.bound = bound
        self.items: list[Item] = []
        self.events = 0  # events among `items`: what `bound` counts
        self.running = 0  # tasks sent to this worker and not ended
        self._news = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._hurry: asyncio.Future[None] | None = None  # a lingering poll's

    def event(self, call: str, event: RunEvent) -> None:
        self.events += 1
        if self.events >= self.bound:
            self._room.clear()
        self._post(("event", call, event))

    def started(self, call: str) -> None:
        self._post(("started", call))

    def ended(self, call: str, kind: str, value: Any, seconds: float) -> None:
        """A task ended: how (`"ok"`, `"error"`, `"cancelled"`), after its events. The end
        of a task that ran longer than a poll lingers goes at once: batching it gains
        nothing, and the driver sends the next task sooner."""
        self.running -= 1
        self._post(("ended", call, (kind, value), seconds))
        if seconds >= _LINGER and self._hurry is not None:
            _resolve(self._hurry)

    def _post(self, item: Item) -> None:
        self.items.append(item)
        self._news.set()
        if self._hurry is not None and self._ready():
            _resolve(self._hurry)

    def _ready(self) -> bool:
        """Whether a poll should answer now: nothing more is coming soon, or enough is here."""
        return self.running <= 0 or len(self.items) >= _ENOUGH

    async def room(self) -> None:
        """Return once the driver has taken enough events for more to wait here."""
        while self.events >= self.bound:
            await self._room.wait()

    async def news(self) -> None:
        """Return once there is something to take (or a `wake`): at once when every task
        sent here has ended or enough waits, else a little after, when more has come."""
        await self._news.wait()
        if self._ready():
            return
        loop = asyncio.get_running_loop()
        hurry = self._hurry = loop.create_future()
        timer = loop.call_later(_LINGER, _resolve, hurry)
        try:
            await hurry
        finally:
            timer.cancel()
            self._hurry = None

    def take(self) -> list[Item]:
        """Everything said since the last take."""
        items, self.items = self.items, []
        self.events = 0
        self._news.clear()
        self._room.set()
        return items

    def wake(self) -> None:
        """Wake a waiting poll (a newer one replaces it)."""
        self._news.set()
        if self._hurry is not None:
            _resolve(self._hurry)


class WorkerEvents(EventSink):
    """One task's events in a worker, posted to the worker's mailbox as they come."""

    __slots__ = ("_call", "_mailbox")

    def __init__(self, run_id: str, call: str, mailbox: Mailbox) -> None:
        super().__init__(run_id)
        self._call = call
        self._mailbox = mailbox

    def _put(self, event: RunEvent) -> None:
        self._mailbox.event(self._call, event)

    async def room(self) -> None:
        await self._mailbox.room()


class TaskWorker:
    """A long-lived worker (an async Ray actor): runs dispatches, `slots` at a time."""

    def __init__(self, slots: int, bound: int = BOUND) -> None:
        # The engine's claims are one step without an await: a blocking `ray.get` on
        # this loop is by design, and Ray's warning about it would only mislead.
        os.environ["RAY_WARN_BLOCKING_GET_INSIDE_ASYNC"] = "0"
        self._slots = asyncio.Semaphore(slots)
        self._mailbox = Mailbox(bound)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._epoch = 0

    async def submit(self, epoch: int, packed: bytes, refs: dict[str, Any]) -> None:
        """Queue dispatches (`pack`ed specs) of the driver's event loop `epoch`; they
        start in this order as slots come free. `refs`: the object refs of shipments new
        to this worker, by key."""
        self._newer(epoch)  # before their news can come: an older poll must not take it
        REFS.update(refs)
        specs: list[Spec] = pickle.loads(packed)
        self._mailbox.running += len(specs)
        for spec in specs:
            self._tasks[spec.call] = asyncio.create_task(self._run(spec))

    async def _run(self, spec: Spec) -> None:
        started = time.perf_counter()
        mailbox = self._mailbox
        try:
            async with self._slots:
                started = time.perf_counter()
                mailbox.started(spec.call)
                events = spec.terms.events
                sink = WorkerEvents(spec.run_id, spec.call, mailbox) if events else None
                result = await run_spec(spec, sink)
                # Said before the slot frees: a long task's end then goes before the next
                # task (which may hold this loop for long) starts.
                mailbox.ended(spec.call, "ok", result, time.perf_counter() - started)
        except asyncio.CancelledError:
            # Cancelled by the driver (`cancel`), queued or running: it has unwound.
            mailbox.ended(spec.call, "cancelled", None, time.perf_counter() - started)
        except Exception as exc:  # a bug the engine let through: the driver raises it
            mailbox.ended(spec.call, "error", _portable(exc), time.perf_counter() - started)
        finally:
            self._tasks.pop(spec.call, None)

    async def cancel(self, calls: list[str]) -> None:
        """Cancel these dispatches: a queued one never starts, a running one unwinds."""
        for call in calls:
            task = self._tasks.get(call)
            if task is not None:
                task.cancel()

    async def poll(self, epoch: int, packed: bytes | None, refs: dict[str, Any]) -> bytes | None:
        """Queue `specs` (as `submit`), then what happened since the last poll; None to a
        poll a newer one replaced.

        The driver polls once at a time per event loop; a driver on a new event loop
        polls with a higher `epoch`, and the older poll, whose caller is gone, must
        not take what the new one is owed.
        """
        self._newer(epoch)
        if packed is not None:
            await self.submit(epoch, packed, refs)
        await self._mailbox.news()
        return None if epoch < self._epoch else pack(self._mailbox.take())

    def _newer(self, epoch: int) -> None:
        """A call of the driver's event loop `epoch`: from a newer loop, the older loop's
        poll answers None from now on. Said by the dispatches too, not only by the new
        loop's poll: Ray does not order an async actor's calls, and a worker still
        starting when the driver's loop changed may run the old loop's poll, then the
        new loop's dispatches, then its poll; the old poll would take their ends, and
        the new loop would wait for them for ever."""
        if epoch > self._epoch:
            self._epoch = epoch
            self._mailbox.wake()

    def ping(self) -> int:
        """This worker's process id (it is up)."""
        return os.getpid()


def pack(obj: object) -> bytes:
    """`obj` pickled for the other side: by the standard pickler, which costs a fraction
    of Ray's per-object way, or by cloudpickle for what only it can write."""
    try:
        return pickle.dumps(obj, protocol=5)
    except Exception:
        from ray import cloudpickle

        packed: bytes = cloudpickle.dumps(obj, protocol=5)  # type: ignore[no-untyped-call]  # unannotated upstream
        return packed


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _portable(exc: Exception) -> Exception:
    """`exc` if it can travel to the driver, else a RuntimeError that says what it was."""
    from ray import cloudpickle

    try:
        cloudpickle.dumps(exc)  # type: ignore[no-untyped-call]  # unannotated upstream
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc
