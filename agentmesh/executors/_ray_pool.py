"""The driver's side of the Ray executor's pool of long-lived workers (`_ray_actor`).

One `TaskWorker` per CPU of the cluster, placed on that CPU's node, started when the
executor connects. A dispatch becomes a `Job` in the pool's queue; at the next turn of
the event loop the queue is sent out, one batch per worker, as far as each worker's
*window* allows; each worker's poller takes what the worker says (its tasks' events
as they come, each task's end), delivers it in order and sends more work.

A worker holds its `slots` running tasks and one queued behind them, so that it
starts its next task at once rather than a round trip later; for a subagent whose
tasks are short (measured on the workers, a running mean per subagent), up to about
`_AHEAD` seconds of them queued. The price: a task queued behind a long one waits for
it while another worker may have gone idle (at most one task per worker at the end of
a run). A subagent not measured yet counts as long. A worker that dies is
replaced, and its tasks are dealt with as with one Ray task per dispatch: a task seen
running (the worker says when each starts) or that recorded progress becomes an
`unavailable` envelope with its partial results; a short one that had not (queued
behind the others, or done and not reported yet) is sent to another worker, once. It
may have run: what it did through tools is in the run's ledger, so a non-idempotent
call is replayed, not made again. A task in the pool's queue is never lost.

Back-pressure: a worker's events are forwarded to the run's sink only once it has
room (`EventSink.room`), so a consumer that is behind stops the poller, the worker's
mailbox fills up to its bound, and the worker's tasks wait at their next tool call.
Events are never dropped. One consumer that is behind holds the other runs' tasks on
the same workers too.
"""

from __future__ import annotations

import asyncio
import pickle
from collections import Counter, deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from agentmesh.executors._ray_jobs import Job, Worker, load

if TYPE_CHECKING:
    from agentmesh.events import EventSink
    from agentmesh.executors._ray_spec import Spec

__all__ = ["Job", "WorkerPool", "pool_slots"]

# Seconds of short tasks a worker may hold queued behind its running ones: about four
# round trips to it, so that it has work while its finished tasks travel and more comes.
_AHEAD: Final = 0.008
# The most tasks queued on one worker, however short they are; the fewest, however long.
_MOST_AHEAD: Final = 128
_LEAST_AHEAD: Final = 1
# How long `start` waits for the workers to be up.
_START_WAIT: Final = 60.0
# How long a killed worker may take to be confirmed gone.
_KILL_WAIT: Final = 10.0
# Weight of a finished task's duration in its subagent's running mean.
_WEIGHT: Final = 0.2


def pool_slots(task_options: Mapping[str, Any]) -> int | None:
    """Tasks each worker runs at once for these Ray options; None: a Ray task each.

    The pool places one worker per CPU; `{"num_cpus": 0.25}` asks for four tasks per
    CPU, so four slots. Any other option (resources, memory, a scheduling strategy) is
    Ray's to apply per task: each dispatch is then a Ray task of its own.
    """
    if set(task_options) - {"num_cpus"}:
        return None
    share = task_options.get("num_cpus", 1)
    if not isinstance(share, int | float) or share <= 0 or share > 1:
        return None
    return max(1, round(1 / share))


class WorkerPool:
    """The executor's long-lived workers, and the jobs queued for them."""

    def __init__(self, slots: int, state: Any) -> None:
        self.slots = slots
        self._state = state  # the run-state actor: who recorded progress
        self._workers: list[Worker] = []
        self._pending: deque[Job] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._epoch = 0
        self._flush_soon = False
        self._pollers: set[asyncio.Task[None]] = set()
        self._closed = False
        # The object refs of the shipments the specs name by key (the executor's `_ship`
        # puts them here): each worker is sent each once, apart from the specs.
        self.refs: dict[str, Any] = {}
        # By subagent (its shipment's key): the running mean of its tasks' seconds, and
        # how many of its tasks a worker may hold queued beyond its slots.
        self._means: dict[str, float] = {}
        self._ahead: dict[str, int] = {}

    def start(self) -> WorkerPool:
        """Start one worker per CPU of each live node, on that node, and wait until they
        are up (a few seconds, each imports agentmesh), so that a run does not pay for it."""
        import ray

        self._grow()
        if not self._workers:
            self._workers.append(self._spawn(None))
        # Not waited for past this: a worker still starting then takes its batches later.
        ray.wait(
            [w.actor.ping.remote() for w in self._workers],
            num_returns=len(self._workers),
            timeout=_START_WAIT,
        )
        return self

    def _grow(self) -> None:
        """Start workers for the CPUs of live nodes that have none yet: a node that joined
        later, or whose resources the cluster did not know yet when the pool started."""
        import ray

        have = Counter(worker.node for worker in self._workers)
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # unannotated upstream
        for node in nodes:
            if node.get("Alive"):
                cpus = int(node.get("Resources", {}).get("CPU", 0))
                for _ in range(cpus - have[node["NodeID"]]):
                    self._workers.append(self._spawn(node["NodeID"]))

    def _spawn(self, node: str | None, *, soft: bool = False) -> Worker:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from agentmesh.executors._ray_actor import TaskWorker

        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0}
        if node is not None:
            # Its CPU is the node's: placed there, reserving nothing (a Ray task of
            # another executor on this cluster still finds the CPU free).
            # Hard: a node that just joined may not take actors yet, and a soft affinity
            # would put its worker on another node. Soft only when the node is gone.
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=soft)
        actor = ray.remote(TaskWorker).options(**options).remote(self.slots)
        worker = Worker(actor, node)
        if self._loop is not None and not self._loop.is_closed():
            self._watch(worker)
        return worker

    # -- the driver's side ---------------------------------------------------------------

    def submit(self, spec: Spec, sink: EventSink | None) -> Job:
        """Queue a dispatch; it goes out at the next turn of the loop, with others."""
        loop = self._bind()
        job = Job(spec, sink, loop.create_future())
        self._pending.append(job)
        if not self._flush_soon:
            self._flush_soon = True
            loop.call_soon(self._flush)
        return job

    def _bind(self) -> asyncio.AbstractEventLoop:
        """This event loop's pollers: a new loop (a new `asyncio.run`) starts its own."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._epoch += 1
            self._pending.clear()
            self._flush_soon = False
            self._pollers.clear()  # an old loop's: gone with it
            for worker in self._workers:
                worker.jobs.clear()
                worker.has -= set(worker.out_refs)  # never sent: the old loop's batch
                worker.terms = None
                worker.out, worker.out_refs = {}, {}
                worker.cancels = []  # the old loop's, which may never send them
                worker.dead = None
                self._watch(worker)
            self._grow()
        return loop

    def _watch(self, worker: Worker) -> None:
        assert self._loop is not None
        worker.dead = self._loop.create_future()
        poller = self._loop.create_task(self._poll(worker, self._epoch))
        self._pollers.add(poller)
        poller.add_done_callback(self._pollers.discard)

    def _flush(self, polling: Worker | None = None) -> None:
        """Send queued jobs out, one batch per worker, each worker up to its window
        (`polling`'s goes with the poll its poller is about to send)."""
        self._flush_soon = False
        pending = self._pending
        idle = {worker for worker in self._workers if not worker.jobs and worker is not polling}
        workers = self._workers
        while pending and workers:
            # The polling worker while it has room: its batch goes now, with its poll
            # (another's would wait for that one's poll to come back). Else the least
            # loaded worker with room: an even split of a burst of long tasks.
            window = self.slots + self._ahead.get(pending[0].spec.subagent.key, _LEAST_AHEAD)
            worker = min(workers, key=load) if polling is None else polling
            if load(worker) >= window:
                roomy = [w for w in workers if load(w) < window]
                if not roomy:
                    break
                worker = min(roomy, key=load)
            job = pending.popleft()
            job.worker = worker
            worker.jobs[job.spec.call] = job
            worker.out[job.spec.call] = spec = job.spec
            if spec.subagent.key not in worker.has or spec.terms is not worker.terms:
                self._add_refs(spec, worker)
        for worker in idle:
            # Its poll waits for news that will not come: the batch goes now. A busy
            # worker's poll comes back soon, and the next one takes the batch along.
            if worker.out:
                worker.actor.submit.remote(self._epoch, *_outgoing(worker))

    def _add_refs(self, spec: Spec, worker: Worker) -> None:
        """The refs of `spec`'s shipments that `worker` lacks go with its next message."""
        worker.terms = spec.terms
        for box in (spec.subagent, *spec.terms.shipments()):
            if box.key not in worker.has:
                worker.has.add(box.key)
                worker.out_refs[box.key] = self.refs[box.key]

    async def _poll(self, worker: Worker, epoch: int) -> None:
        """Deliver what `worker` says, in order, until it is lost or replaced."""
        while True:
            try:
                packed = await worker.actor.poll.remote(epoch, *_outgoing(worker))
            except Exception as exc:  # its process or node is gone
                self._lost(worker, exc)
                return
            if packed is None:
                return  # a poll of a newer event loop took over
            try:
                await self._deliver(worker, pickle.loads(packed))
            except Exception as exc:  # a fault of ours: it must not leave the run waiting
                self._broken(worker, exc)
                return
            # One turn of the loop: the tasks that ended free their slots, and the
            # dispatches that take them ride on the next poll, not on the one after it.
            await asyncio.sleep(0)
            self._flush(worker)

    async def _deliver(self, worker: Worker, items: list[tuple[Any, ...]]) -> None:
        jobs = worker.jobs
        for item in items:
            job = jobs.get(item[1])
            if job is None:
                continue  # stopped by force, or a job of an event loop gone
            if item[0] == "started":
                job.started = True
                continue
            if item[0] == "event":
                if job.sink is not None:
                    await job.sink.room()  # a consumer that is behind holds the worker
                    job.sink.forward(item[2])  # numbered in the driver's run, in order
                continue
            del jobs[item[1]]
            self._measured(job.spec.subagent.key, item[3])
            kind, value = item[2]
            job.end(kind, value)

    def _broken(self, worker: Worker, exc: Exception) -> None:
        """Reading `worker`'s news failed: the tasks sent to it fail with the error (raised
        where the run awaits them, as a bug should be), the worker is killed and replaced,
        and those not sent yet go back to the queue."""
        import ray

        for call, job in list(worker.jobs.items()):
            if call not in worker.out:
                del worker.jobs[call]
                job.end("error", exc)
        self._lost(worker, exc)
        ray.kill(worker.actor, no_restart=True)

    def _measured(self, subagent: str, seconds: float) -> None:
        """A task of `subagent` ran `seconds`: how many of its tasks a worker may hold."""
        mean = self._means.get(subagent)
        mean = self._means[subagent] = (
            seconds if mean is None else (1 - _WEIGHT) * mean + _WEIGHT * seconds
        )
        ahead = int(self.slots * _AHEAD / max(mean, 1e-6))
        self._ahead[subagent] = max(_LEAST_AHEAD, min(_MOST_AHEAD, ahead))

    def _lost(self, worker: Worker, exc: Exception) -> None:
        """A worker died: a new one takes its place, and its jobs are seen to."""
        if worker in self._workers:
            self._workers.remove(worker)
        jobs, worker.jobs = list(worker.jobs.values()), {}
        if worker.dead is not None and not worker.dead.done():
            worker.dead.set_result(None)
        unsent = [job for job in jobs if job.spec.call in worker.out]
        jobs = [job for job in jobs if job.spec.call not in worker.out]
        for job in reversed(unsent):  # never sent: back to the front of the queue
            job.worker = None
            self._pending.appendleft(job)
        if not self._closed:
            # On its node while that node lives (a soft affinity could put two workers on
            # one node and leave the other's CPU idle); anywhere once the node is gone.
            self._workers.append(self._spawn(worker.node, soft=not _alive(worker.node)))
            self._flush()
        if jobs:
            assert self._loop is not None
            # Held by the loop until done: the loop keeps only weak references to tasks.
            sorting = self._loop.create_task(self._sort_lost(jobs, exc))
            self._pollers.add(sorting)
            sorting.add_done_callback(self._pollers.discard)

    async def _sort_lost(self, jobs: list[Job], exc: Exception) -> None:
        """A dead worker's jobs: lost (`exc`) if they ran, else sent out again, once."""
        unsure = [job for job in jobs if not (job.started or job.again or job.future.done())]
        recorded = [True] * len(unsure)
        if unsure:
            calls = [(job.spec.run_id, job.spec.call) for job in unsure]
            try:
                recorded = await asyncio.wait_for(self._state.recorded.remote(calls), _KILL_WAIT)
            except Exception:  # the actor is gone too: none is known not to have run
                recorded = [True] * len(unsure)
        again = [job for job, ran in zip(unsure, recorded, strict=True) if not ran]
        for job in jobs:
            if job not in again:
                job.end("error", exc)
        for job in reversed(again):
            job.again, job.worker = True, None
            self._pending.appendleft(job)
        self._flush()

    async def stop(self, job: Job, *, force: bool, grace: float) -> None:
        """Stop a job and return once it no longer runs.

        Graceful first (the worker cancels it: a queued one never starts, a running one
        unwinds), by force after `grace` seconds (its worker is killed, and replaced);
        cancelled again meanwhile, by force at once.
        """
        if job.over:
            return
        worker = job.worker
        if worker is None or worker.out.pop(job.spec.call, None) is not None:
            if worker is None:
                self._pending.remove(job)
            else:
                del worker.jobs[job.spec.call]
            job.over = True
            return
        try:
            if not force:
                self._cancel_soon(worker, job.spec.call)
                if await _within(self._settled(job), grace):
                    return
        except asyncio.CancelledError:
            await self._kill(worker)
            raise
        await self._kill(worker)

    def _cancel_soon(self, worker: Worker, call: str) -> None:
        """Cancel `call` on `worker` at the end of this turn, with the others of the turn:
        a run's tasks stopped together are cancelled there together, so a task queued
        there never takes the slot a running one frees as it unwinds."""
        if not worker.cancels:
            assert self._loop is not None
            self._loop.call_soon(self._send_cancels, worker)
        worker.cancels.append(call)

    def _send_cancels(self, worker: Worker) -> None:
        calls, worker.cancels = worker.cancels, []
        if calls and worker in self._workers:
            worker.actor.cancel.remote(calls)

    def _settled(self, job: Job) -> asyncio.Future[None]:
        if job.settled is None:
            assert self._loop is not None
            job.settled = self._loop.create_future()
            if job.over:
                job.settled.set_result(None)
        return job.settled

    async def _kill(self, worker: Worker) -> None:
        import ray

        ray.kill(worker.actor, no_restart=True)
        if worker.dead is not None:
            await _within(worker.dead, _KILL_WAIT)

    def close(self) -> None:
        """Kill every worker; nothing is replaced any more."""
        import ray

        self._closed = True
        for poller in list(self._pollers):
            if not poller.get_loop().is_closed():
                poller.cancel()
        for worker in self._workers:
            ray.kill(worker.actor, no_restart=True)
        self._workers.clear()
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._workers)


def _outgoing(worker: Worker) -> tuple[bytes | None, dict[str, Any]]:
    """What is to go to `worker` with the next message (taken: it goes now): its specs,
    packed, and the refs it lacks."""
    from agentmesh.executors._ray_actor import pack

    if not worker.out:
        return None, {}
    packed, refs = pack(list(worker.out.values())), worker.out_refs
    worker.out, worker.out_refs = {}, {}
    return packed, refs


def _alive(node: str | None) -> bool:
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # unannotated upstream
    return any(n["NodeID"] == node and n.get("Alive") for n in nodes)


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Whether `future` is done within `seconds` (waiting does not cancel it)."""
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)
