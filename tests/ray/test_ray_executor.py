"""The coordinator's scenarios through `RayExecutor`, on a local Ray instance.

The subagents are defined in this test file, which the workers cannot import: they
reach the workers by value. Workers are other processes, so what a subagent did is
counted in files under `tmp_path`, not in Python variables.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentmesh import (
    BusinessError,
    Context,
    Coordinator,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    Report,
    RetryBudget,
    RetryPolicy,
    Success,
    Task,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.checkpoints import MemoryStore, SQLiteStore
from agentmesh.coordinator import CoverageStatus
from agentmesh.executors import Dispatch, LocalExecutor, RayExecutor
from agentmesh.executors._ray_pool import WorkerPool, pool_slots
from agentmesh.policies import deny_after_permission_error
from agentmesh.scope import RunScope

RETRY = RetryPolicy(max_attempts=2, initial_delay=0, jitter="none")
# Bounds every wait on a worker, which may be starting up after another test killed one:
# a regression fails the test instead of hanging it.
GUARD = 30.0


@tool(idempotent=True)
async def lookup(query: str) -> list[str]:
    return [f"found {query}"]


@subagent(name="mixed", retry=RETRY)
async def mixed(task: Task, ctx: Context) -> list[str]:
    """Ends the way its query says: ok, empty, flaky, down, invalid, denied or refused."""
    kind = task.query.split("-")[0]
    if kind == "empty":
        return []
    if kind == "flaky" and ctx.attempt == 1:
        raise TransientError("a blip")
    if kind == "down":
        ctx.record_partial([f"half of {task.query}"], completed="first", pending="second")
        raise TransientError("the second source is down")
    if kind == "invalid":
        raise InvalidInput("the query does not parse")
    if kind == "denied":
        raise PermissionDenied("no access to the archive")
    if kind == "refused":
        raise BusinessError("over the plan's limit", user_message="Upgrade to search more.")
    return await ctx.call(lookup, query=task.query)


KINDS = {
    "ok": CoverageStatus.COVERED,
    "empty": CoverageStatus.EMPTY,
    "flaky": CoverageStatus.COVERED,
    "down": CoverageStatus.PARTIAL,
    "invalid": CoverageStatus.GAP,
    "denied": CoverageStatus.ESCALATED,
    "refused": CoverageStatus.ESCALATED,
}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def append(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


async def written(path: Path, expected: set[str]) -> None:
    """Wait until another process has written these lines (a worker may be starting)."""
    async with asyncio.timeout(GUARD):
        # Another process writes the file: there is no event to wait on, only polling.
        while expected - set(lines(path)):  # noqa: ASYNC110  # see above
            await asyncio.sleep(0.05)


def dispatch(timeout: float | None = None) -> Dispatch:
    return Dispatch(RunScope("run"), "task", timeout)


class TestMixedOutcomes:
    async def test_two_hundred_tasks_get_the_same_report_as_on_the_local_executor(
        self, ray_executor: RayExecutor
    ) -> None:
        """Every status comes out right, and the report equals the local executor's."""
        kinds = list(KINDS)
        tasks = [Task(query=f"{kinds[i % len(kinds)]}-{i}", topic=f"topic-{i}") for i in range(200)]

        async def run(executor: LocalExecutor | RayExecutor) -> Report:
            coordinator = Coordinator(
                [mixed], executor=executor, retry_budget=RetryBudget(reserve=1000)
            )
            return await coordinator.run(tasks, run_id="mixed")

        local = await run(LocalExecutor())
        remote = await run(ray_executor)

        assert remote == local
        statuses = Counter(entry.status for entry in remote.coverage)
        expected = Counter(KINDS[task.query.split("-")[0]] for task in tasks)
        assert statuses == expected
        [entry] = [e for e in remote.coverage if e.topic == "topic-3"]
        assert entry.partial is not None
        assert entry.partial.findings == ("half of down-3",)
        assert entry.partial.pending == ("second",)


class TestPlacement:
    async def test_with_other_ray_options_each_dispatch_is_a_ray_task_of_its_own(
        self, ray_executor: RayExecutor
    ) -> None:
        """Options only Ray can apply per task skip the workers; the report is the same."""
        kinds = list(KINDS)
        tasks = [Task(query=f"{kind}-{i}", topic=f"topic-{i}") for i, kind in enumerate(kinds)]
        per_task = RayExecutor(task_options={"memory": 1}).connect()  # joins the session's
        try:
            reports = [
                await Coordinator([mixed], executor=executor).run(tasks, run_id="options")
                for executor in (LocalExecutor(), per_task)
            ]
        finally:
            per_task.close()
        assert reports[1] == reports[0]

    def test_num_cpus_alone_sets_the_tasks_each_worker_runs_at_once(self) -> None:
        """A share of a CPU per task is tasks per worker; other options mean Ray tasks."""
        assert pool_slots({}) == 1
        assert pool_slots({"num_cpus": 0.25}) == 4
        assert pool_slots({"num_cpus": 1}) == 1
        assert pool_slots({"num_cpus": 2}) is None
        assert pool_slots({"num_cpus": 0.5, "resources": {"gpu_box": 1}}) is None


class TestWorkerDeath:
    async def test_a_killed_worker_is_a_transient_unavailable_envelope_with_its_partials(
        self, ray_executor: RayExecutor
    ) -> None:
        """SIGKILL mid-task: the task is not lost, and what it recorded before is kept."""

        @subagent(name="doomed", alternatives=["mirror"])
        async def doomed(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(["first finding"], completed="index", pending="archive")
            ctx.record_partial(["second finding"], completed="archive")
            os.kill(os.getpid(), signal.SIGKILL)
            return ["never"]

        outcome = await ray_executor.execute(doomed, Task(query="q"), dispatch())

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category == "transient"
        assert outcome.error_type == "unavailable"
        assert outcome.is_retryable
        assert "doomed" in outcome.message
        assert outcome.source == "doomed"
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == ("first finding", "second finding")
        assert outcome.partial_results.completed == ("index", "archive")
        assert outcome.partial_results.pending == ()
        assert outcome.alternative_approaches == ("mirror",)

    async def test_through_the_coordinator_the_entry_is_partial_and_the_others_are_covered(
        self, ray_executor: RayExecutor
    ) -> None:
        """One worker dying does not cost the other tasks anything."""

        @subagent(name="sometimes", retry=RetryPolicy.never())
        async def sometimes(task: Task, ctx: Context) -> list[str]:
            if task.query == "kill":
                ctx.record_partial(["kept"], completed="one")
                os.kill(os.getpid(), signal.SIGKILL)
            return [task.query]

        report = await Coordinator([sometimes], executor=ray_executor).run(
            [Task(query=q, topic=q) for q in ("a", "kill", "b")]
        )

        status = {entry.topic: entry.status for entry in report.coverage}
        assert status == {
            "a": CoverageStatus.COVERED,
            "kill": CoverageStatus.PARTIAL,
            "b": CoverageStatus.COVERED,
        }
        [lost] = [entry for entry in report.coverage if entry.topic == "kill"]
        assert lost.is_retryable
        assert "unavailable" in (lost.reason or "")
        assert [f.content for f in report.findings if f.preliminary] == ["kept"]


class TestAFaultReadingAWorker:
    async def test_fails_the_workers_tasks_instead_of_leaving_the_run_waiting(
        self, ray_executor: RayExecutor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bug in the driver's reading of a worker's news (injected here) is raised where
        the task is awaited, not left as a run that waits forever; the next task runs on
        the worker that replaces it."""
        reading = WorkerPool._deliver
        faults: list[str] = []

        async def faulty(pool: WorkerPool, worker: Any, items: list[tuple[Any, ...]]) -> None:
            if not faults and any(item[0] not in ("started", "event") for item in items):
                faults.append("raised")
                raise RuntimeError("a bug reading the worker's news")
            await reading(pool, worker, items)

        monkeypatch.setattr(WorkerPool, "_deliver", faulty)
        with pytest.raises(RuntimeError, match="a bug reading"):
            await asyncio.wait_for(
                ray_executor.execute(mixed, Task(query="ok-1"), dispatch()), GUARD
            )
        assert faults == ["raised"]
        outcome = await asyncio.wait_for(
            ray_executor.execute(mixed, Task(query="ok-2"), dispatch()), GUARD
        )
        assert isinstance(outcome, Success)


class TestDeadline:
    async def test_the_run_deadline_reaches_the_remote_task(
        self, ray_executor: RayExecutor
    ) -> None:
        """A slow remote task is cut at the run's deadline by its own worker, partials kept."""

        @subagent(name="slow", retry=RetryPolicy.never())
        async def slow(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(["early"], completed="fast source", pending="slow source")
            await asyncio.sleep(30)
            return ["late"]

        started = time.monotonic()
        report = await Coordinator([slow], executor=ray_executor, timeout=1.0).run(["q"])
        elapsed = time.monotonic() - started

        assert elapsed < 2.0
        [entry] = report.coverage
        assert entry.status is CoverageStatus.PARTIAL
        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_type == "timeout"
        assert "deadline" in final.message
        assert final.partial_results is not None
        assert final.partial_results.findings == ("early",)

    async def test_a_task_that_ignores_the_deadline_is_stopped_and_cut(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """Blocking code cannot see the deadline: the executor cancels it, keeps its partials."""
        ticks = str(tmp_path / "ticks")

        @subagent(name="stuck", retry=RetryPolicy.never())
        async def stuck(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(["before blocking"])
            for _ in range(300):
                append(ticks, "tick")
                time.sleep(0.02)  # noqa: ASYNC251  # blocking on purpose: no loop turn
            return ["late"]

        started = time.monotonic()
        outcome = await ray_executor.execute(stuck, Task(query="q"), dispatch(timeout=0.5))
        elapsed = time.monotonic() - started

        assert elapsed < 2.0
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "timeout"
        assert outcome.is_retryable
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == ("before blocking",)
        count = len(lines(tmp_path / "ticks"))
        await asyncio.sleep(0.3)
        assert len(lines(tmp_path / "ticks")) == count  # the remote task is gone


class TestCancellation:
    async def test_a_cancelled_run_leaves_no_remote_task_running(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """Cancelling the run cancels every remote task, which unwind before run() returns."""
        ticks = str(tmp_path / "ticks")

        @subagent(name="ticker", retry=RetryPolicy.never())
        async def ticker(task: Task, ctx: Context) -> None:
            try:
                for _ in range(200):
                    append(ticks, task.query)
                    await asyncio.sleep(0.05)
            finally:
                append(ticks, f"{task.query} unwound")

        # The grace bounds a task that refuses to stop; one that unwinds is waited for, so
        # a long grace costs nothing here. The default (1 s) counts from `ray.cancel`, and
        # on a loaded machine the interrupt alone can take longer to reach the worker:
        # the workers were then killed before their `finally` ran.
        executor = RayExecutor(cancel_grace=GUARD).connect()  # joins the session's instance
        try:
            run = asyncio.create_task(
                Coordinator([ticker], executor=executor).run(["a", "b", "c", "d"])
            )
            await written(tmp_path / "ticks", {"a", "b"})  # two workers: two running
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run

            seen = lines(tmp_path / "ticks")
            assert {"a unwound", "b unwound"} <= set(seen)  # cancelled gracefully
            assert not {"c", "d"} & set(seen)  # the queued ones never started
            await asyncio.sleep(0.4)
            assert lines(tmp_path / "ticks") == seen
        finally:
            executor.close()

    async def test_a_task_that_refuses_to_stop_is_killed_after_the_grace(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """A body that swallows the cancellation is killed `cancel_grace` seconds later."""
        ticks = str(tmp_path / "ticks")

        @subagent(name="stubborn", retry=RetryPolicy.never())
        async def stubborn(task: Task, ctx: Context) -> None:
            append(ticks, "started")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                for _ in range(200):  # ignores the cancellation, and blocks
                    append(ticks, "still here")
                    time.sleep(0.02)  # noqa: ASYNC251  # blocking on purpose

        # The grace counts from `ray.cancel`: it must outlast the interrupt's way to a
        # worker on a loaded machine (0.3 s did not), or the kill comes first and the
        # body never sees the cancellation it is meant to swallow.
        grace = 1.5
        executor = RayExecutor(cancel_grace=grace).connect()  # joins the session's instance
        try:
            execution = asyncio.create_task(executor.execute(stubborn, Task(query="q"), dispatch()))
            await written(tmp_path / "ticks", {"started"})
            started = time.monotonic()
            execution.cancel()
            with pytest.raises(asyncio.CancelledError):
                await execution
            assert grace <= time.monotonic() - started < grace + 2.0
            seen = lines(tmp_path / "ticks")
            assert "still here" in seen  # it did swallow the cancellation
            await asyncio.sleep(0.4)
            assert lines(tmp_path / "ticks") == seen
        finally:
            executor.close()


class TestShipping:
    async def test_a_subagent_that_closes_over_a_lock_is_a_usage_error_naming_it(
        self, ray_executor: RayExecutor
    ) -> None:
        """Not a pickling traceback from inside Ray: which subagent, what it holds, what to do."""
        lock = threading.Lock()

        @subagent(name="locked")
        async def locked(task: Task, ctx: Context) -> list[str]:
            with lock:
                return [task.query]

        with pytest.raises(UsageError) as caught:
            await ray_executor.execute(locked, Task(query="q"), dispatch())

        message = str(caught.value)
        assert message.startswith(
            "subagent 'locked' cannot be sent to Ray workers: "
            "TypeError: cannot pickle '_thread.lock' object (its function closes over 'lock'"
        )
        assert "\n" not in message  # one message, no page of Ray's diagnostics
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__
        with pytest.raises(UsageError, match="locked"):  # again, without pickling again
            await ray_executor.execute(locked, Task(query="q"), dispatch())

    async def test_through_the_coordinator_the_error_is_the_entry_s_reason(
        self, ray_executor: RayExecutor
    ) -> None:
        """The run goes on: the subagent's tasks are gaps that say why, the others run."""
        sock = threading.Lock()

        @subagent(name="holder")
        async def holder(task: Task, ctx: Context) -> list[str]:
            with sock:
                return [task.query]

        @subagent(name="fine")
        async def fine(task: Task, ctx: Context) -> list[str]:
            return [task.query]

        report = await Coordinator([holder, fine], executor=ray_executor).run(["q"])

        status = {entry.source: entry for entry in report.coverage}
        assert status["fine"].status is CoverageStatus.COVERED
        assert status["holder"].status is CoverageStatus.GAP
        assert "subagent 'holder' cannot be sent to Ray workers" in (status["holder"].reason or "")


class TestStoreShipping:
    async def test_a_memory_store_is_refused_with_the_reason(
        self, ray_executor: RayExecutor
    ) -> None:
        """This process's memory is not shared storage: a UsageError says so and what to use."""

        @subagent(name="plain")
        async def plain(task: Task, ctx: Context) -> str:
            return task.query

        with pytest.raises(UsageError) as caught:
            await ray_executor.execute(
                plain,
                Task(query="q"),
                Dispatch(RunScope("r", store=MemoryStore()), "t"),
            )

        message = str(caught.value)
        assert "this process's memory" in message
        assert "not storage the workers share" in message
        assert "PostgresStore(dsn)" in message

    def test_a_postgres_store_travels_as_its_dsn_without_showing_the_password(self) -> None:
        """The copy has the same options and no pool; neither's repr shows the password."""
        import pickle

        pytest.importorskip("psycopg", reason="PostgresStore needs the postgres extra")
        from agentmesh.checkpoints import PostgresStore

        dsn = "postgresql://agent:s3cret-pw@db.internal:5433/runs"
        store = PostgresStore(dsn, schema="team", max_connections=3, timeout=5.0)
        copy = pickle.loads(pickle.dumps(store))

        assert isinstance(copy, PostgresStore)
        assert (copy.schema, copy.max_connections, copy.timeout) == ("team", 3, 5.0)
        assert not copy.closed
        assert (
            repr(copy)
            == repr(store)
            == ("<PostgresStore postgresql://agent@db.internal:5433/runs schema=team>")
        )
        assert "s3cret" not in repr(copy)


class TestClusterWideState:
    async def test_the_retry_budget_holds_across_workers(self, ray_executor: RayExecutor) -> None:
        """200 tasks against a dead source, 10 retries allowed for the run: no more happen."""

        @subagent(name="down", retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter="none"))
        async def down(task: Task, ctx: Context) -> None:
            raise TransientError("the source is down")

        budget = RetryBudget(ratio=0, reserve=10)
        report = await Coordinator([down], executor=ray_executor, retry_budget=budget).run(
            [f"q{i}" for i in range(200)], run_id="storm"
        )

        attempts = sum(record.final.attempts for record in report.records)
        assert 200 < attempts <= 210  # locally unlimited: 600
        assert budget.first_attempts == 200
        assert budget.retries == attempts - 200
        held = await ray_executor.budget("storm")
        assert held is not None
        assert held["retries"] <= 10

    async def test_a_permission_error_denies_the_tool_to_later_tasks_on_any_worker(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """deny_after_permission_error: the tool is called once in the whole run."""
        calls = str(tmp_path / "calls")

        @tool(idempotent=True)
        async def vault(query: str) -> str:
            append(calls, query)
            raise PermissionDenied("the vault says no")

        @subagent(name="reader", retry=RetryPolicy.never())
        async def reader(task: Task, ctx: Context) -> str:
            return await ctx.call(vault, query=task.query)

        coordinator = Coordinator(
            [reader],
            executor=ray_executor,
            policies=[deny_after_permission_error()],
            max_concurrency=1,
        )
        report = await coordinator.run([f"q{i}" for i in range(6)])

        assert lines(tmp_path / "calls") == ["q0"]
        first, *later = report.coverage  # as on the local executor:
        assert first.status is CoverageStatus.GAP  # the refusal, not retried
        assert "deny_after_permission_error" in (first.reason or "")
        assert all(entry.status is CoverageStatus.ESCALATED for entry in later)
        denied = [record.final for record in report.records[1:]]
        assert all(isinstance(o, ErrorEnvelope) for o in denied)
        assert {o.error_type for o in denied if isinstance(o, ErrorEnvelope)} == {"policy_blocked"}

    async def test_a_running_task_learns_of_another_worker_s_denial(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The state reaches tasks already running, not only those dispatched later."""
        calls = str(tmp_path / "calls")

        @tool(idempotent=True)
        async def vault(query: str) -> str:
            append(calls, query)
            raise PermissionDenied("the vault says no")

        @subagent(name="reader", retry=RetryPolicy.never())
        async def reader(task: Task, ctx: Context) -> str:
            if task.query == "late":
                await asyncio.sleep(1.0)  # started with the first, calls well after it
            return await ctx.call(vault, query=task.query)

        coordinator = Coordinator(
            [reader], executor=ray_executor, policies=[deny_after_permission_error()]
        )
        await coordinator.run(["early", "late"])

        assert lines(tmp_path / "calls") == ["early"]

    async def test_one_round_trip_to_the_state_actor_is_cheap(
        self, ray_executor: RayExecutor
    ) -> None:
        """Measured, not assumed: well under the cost of any real tool call."""
        seconds = await ray_executor.round_trip(50)
        assert 0 < seconds < 0.05

    async def test_a_rate_limit_holds_for_the_cluster_not_per_worker(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """A tool's `rate_limit` counts the starts of every worker together."""
        starts = str(tmp_path / "starts")

        @tool(idempotent=True, rate_limit=(3, 0.5))
        async def api(query: str) -> str:
            append(starts, repr(time.time()))
            return query

        @subagent(name="caller", retry=RetryPolicy.never())
        async def caller(task: Task, ctx: Context) -> str:
            return await ctx.call(api, query=task.query)

        report = await Coordinator([caller], executor=ray_executor).run([f"q{i}" for i in range(9)])

        assert len(report.findings) == 9
        times = sorted(float(line) for line in lines(tmp_path / "starts"))
        assert len(times) == 9
        # Limited per worker, two workers would start 6 at once: any 4 starts would span
        # about nothing. Cluster-wide, any 4 span the 0.5 s window, less the lag between
        # a grant and its worker's clock reading, which reached 25 ms on a loaded machine.
        assert min(times[i + 3] - times[i] for i in range(len(times) - 3)) >= 0.25

    async def test_a_completed_non_idempotent_call_is_not_repeated_by_a_second_round(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The in-run ledger is cluster-wide: the rewritten task replays the charge."""
        charges = str(tmp_path / "charges")

        @tool  # not idempotent
        async def charge(amount: int) -> str:
            append(charges, str(amount))
            return f"receipt for {amount}"

        @subagent(name="payer", retry=RetryPolicy.never())
        async def payer(task: Task, ctx: Context) -> list[str]:
            receipt = await ctx.call(charge, amount=5)
            if task.query == "first try":
                raise InvalidInput("the query does not parse")
            return [receipt]

        coordinator = Coordinator(
            [payer], executor=ray_executor, rewriter=lambda task, envelope: "second try"
        )
        report = await coordinator.run(["first try"])

        assert [f.content for f in report.findings] == ["receipt for 5"]
        assert lines(tmp_path / "charges") == ["5"]

    async def test_a_second_round_continues_from_the_progress_the_first_saved(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The run lists its saved progress once; a task sent back still reads its own."""
        fetched = str(tmp_path / "fetched")

        @subagent(name="reader", retry=RetryPolicy.never(), checkpoint=True)
        async def reader(task: Task, ctx: Context) -> list[str]:
            for source in ("s1", "s2", "s3"):
                if source in ctx.partials.completed:
                    continue
                append(fetched, source)
                if task.query == "first try" and source == "s3":
                    raise InvalidInput("s3 does not parse the query")
                ctx.record_partial([f"{source} says {task.query}"], completed=source)
            return list(ctx.partials.findings)

        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            coordinator = Coordinator(
                [reader],
                executor=ray_executor,
                store=store,
                rewriter=lambda task, envelope: "second try",
            )
            report = await coordinator.run(["first try"], run_id="rounds")

        assert lines(tmp_path / "fetched") == ["s1", "s2", "s3", "s3"]
        found = [f.content for f in report.findings if not f.preliminary]
        assert found == ["s1 says first try", "s2 says first try", "s3 says second try"]


class TestLimiterShipping:
    def test_a_shipped_limiter_is_rebuilt_from_its_declaration(self) -> None:
        """Its locks and rate log stay behind; its limits travel."""
        import pickle

        from agentmesh.throttle import Limiter

        limiter = Limiter(name="tool search", rate_limit=(5, 1.0), max_concurrency=2)
        copy = pickle.loads(pickle.dumps(limiter))

        assert copy is not limiter
        assert (copy.name, copy.rate_limit, copy.max_concurrency) == (
            "tool search",
            (5, 1.0),
            2,
        )
