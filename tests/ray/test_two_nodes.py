"""RayExecutor on a two-node Ray cluster on this machine, reached on loopback only.

The test starts the cluster itself (`ray.cluster_utils.Cluster`: a head and one more
node, one CPU each) and stops it when the module is done. Every task first waits until
tasks are running on both nodes: with one CPU per node, two tasks at once must be on
different nodes, so what a test asserts held across nodes, not within one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmesh import (
    Context,
    Coordinator,
    RetryBudget,
    RetryPolicy,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh._engine._answer_checks import MAY_HAVE_RUN
from agentmesh._engine._human import DecisionBook
from agentmesh.approvals import Approve
from agentmesh.coordinator import (
    CoverageStatus,
    Report,
    RetryWithFeedback,
    Route,
    RouteContext,
    Router,
)
from agentmesh.executors import RayExecutor
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import Subagent
from tests.ray.conftest import LocalRay

GUARD = 30.0  # bounds every wait on the cluster: a regression fails instead of hanging
LOOPBACK = "127.0.0.1"
NODE: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": LOOPBACK,
    "object_store_memory": 80 * 1024 * 1024,
}


@pytest.fixture(scope="module")
def cluster(local_ray: LocalRay) -> Iterator[tuple[RayExecutor, set[str]]]:
    """A two-node cluster bound to 127.0.0.1, and an executor connected to it by address."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    local_ray.stop()  # one Ray connection per process
    temp = tempfile.mkdtemp(prefix="am-ray-")  # short: Ray's socket paths live under it
    with pytest.MonkeyPatch.context() as patch:
        # Ray's files (the "current cluster" address among them) stay out of /tmp/ray,
        # so no other Ray user on this machine joins this cluster by accident.
        patch.setenv("RAY_TMPDIR", temp)
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")  # no report to Ray's servers
        # Ray turns "127.0.0.1" in an address into the machine's outward address, found
        # by routing towards a public DNS server; with clusters "off" it keeps loopback.
        # The nodes' processes read the variable, this process the constant it set.
        patch.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        nodes = Cluster(
            initialize_head=True,
            head_node_args={**NODE, "include_dashboard": False, "dashboard_host": LOOPBACK},
        )
        executor = None
        try:
            nodes.add_node(**NODE)
            executor = RayExecutor(
                nodes.address, init_options={"log_to_driver": False}, cancel_grace=GUARD
            ).connect()
            ids = {node["NodeID"] for node in ray.nodes() if node["Alive"]}  # type: ignore[no-untyped-call]  # unannotated upstream
            yield executor, ids
        finally:
            if executor is not None:
                executor.close()  # it started the connection: it shuts it down
            nodes.shutdown()  # type: ignore[no-untyped-call]  # unannotated upstream
            shutil.rmtree(temp, ignore_errors=True)


def node_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def append(path: str, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


async def on_both_nodes(path: str) -> str:
    """Note this worker's node, then wait until tasks run on both nodes; the node's id."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    append(path, node)
    async with asyncio.timeout(GUARD):
        # Another node's worker writes the file: there is no event to wait on, only polling.
        while len(set(node_lines(Path(path)))) < 2:  # noqa: ASYNC110  # see above
            await asyncio.sleep(0.02)
    return node


class TestTwoNodes:
    def test_the_cluster_has_two_nodes_on_loopback_only(
        self, cluster: tuple[RayExecutor, set[str]]
    ) -> None:
        """Both nodes are alive and reached at 127.0.0.1, not at an outward address."""
        import ray

        _, ids = cluster
        assert len(ids) == 2
        addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}  # type: ignore[no-untyped-call]  # unannotated upstream
        assert addresses == {LOOPBACK}
        assert ray.get_runtime_context().gcs_address.startswith(f"{LOOPBACK}:")

    async def test_tasks_land_on_both_nodes(
        self, cluster: tuple[RayExecutor, set[str]], tmp_path: Path
    ) -> None:
        """A coordinator's tasks run on both nodes, and the report has every one."""
        executor, ids = cluster
        seen = str(tmp_path / "nodes")

        @subagent(name="where", retry=RetryPolicy.never())
        async def where(task: Task, ctx: Context) -> list[str]:
            return [await on_both_nodes(seen)]

        report = await Coordinator([where], executor=executor).run(["a", "b", "c", "d"])

        assert [entry.status for entry in report.coverage] == [CoverageStatus.COVERED] * 4
        assert {finding.content for finding in report.findings} == ids

    async def test_the_retry_budget_holds_across_nodes(
        self, cluster: tuple[RayExecutor, set[str]], tmp_path: Path
    ) -> None:
        """40 tasks on two nodes against a dead source, 5 retries for the run: no more."""
        executor, ids = cluster
        seen = str(tmp_path / "nodes")

        @subagent(name="down", retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter="none"))
        async def down(task: Task, ctx: Context) -> None:
            await on_both_nodes(seen)
            raise TransientError("the source is down")

        budget = RetryBudget(ratio=0, reserve=5)
        report = await Coordinator([down], executor=executor, retry_budget=budget).run(
            [f"q{i}" for i in range(40)], run_id="storm on two nodes"
        )

        assert set(node_lines(tmp_path / "nodes")) == ids
        attempts = sum(record.final.attempts for record in report.records)
        assert 40 < attempts <= 45  # locally unlimited: 120
        held = await executor.budget("storm on two nodes")
        assert held is not None
        assert held["retries"] <= 5

    async def test_a_rate_limit_holds_for_both_nodes_together(
        self, cluster: tuple[RayExecutor, set[str]], tmp_path: Path
    ) -> None:
        """A tool's `rate_limit` counts the starts on both nodes together."""
        executor, ids = cluster
        seen = str(tmp_path / "nodes")
        starts = str(tmp_path / "starts")

        @tool(idempotent=True, rate_limit=(2, 0.4))
        async def api(query: str) -> str:
            append(starts, repr(time.time()))
            return query

        @subagent(name="caller", retry=RetryPolicy.never())
        async def caller(task: Task, ctx: Context) -> str:
            await on_both_nodes(seen)
            return await ctx.call(api, query=task.query)

        report = await Coordinator([caller], executor=executor).run([f"q{i}" for i in range(6)])

        assert len(report.findings) == 6
        assert set(node_lines(tmp_path / "nodes")) == ids
        times = sorted(float(line) for line in node_lines(tmp_path / "starts"))
        # Any 3 starts span about the window. Counted per node, two starts on each node
        # would come at once (a span near 0); a worker waking late from its reserved
        # start only narrows a span by its lateness, which a loaded machine makes tens
        # of milliseconds: 0.3 s tells the two apart without timing the scheduler.
        assert min(times[i + 2] - times[i] for i in range(len(times) - 2)) >= 0.3

    async def test_a_postgres_store_is_used_by_the_workers_of_both_nodes(
        self,
        cluster: tuple[RayExecutor, set[str]],
        tmp_path: Path,
        postgres_dsn: str,
        postgres_schema: str,
    ) -> None:
        """The store goes to the workers as its DSN; both nodes' checkpoints reach it."""
        from agentmesh.checkpoints import PostgresStore

        executor, ids = cluster
        seen = str(tmp_path / "nodes")

        @tool  # not idempotent: its completed calls are checkpointed in the store
        async def stamp(node: str) -> str:
            return f"stamped on {node}"

        @subagent(name="stamper", retry=RetryPolicy.never())
        async def stamper(task: Task, ctx: Context) -> str:
            return await ctx.call(stamp, node=await on_both_nodes(seen))

        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            report = await Coordinator([stamper], executor=executor, store=store).run(
                ["a", "b"], run_id="stamps"
            )
            saved = await store.list("stamps")

        stamps = {f"stamped on {node}" for node in ids}
        assert {finding.content for finding in report.findings} == stamps
        # Each worker recorded its completed call in the store: both nodes wrote to it.
        # (The run's own plan and task records are there too, under agentmesh's stages.)
        calls = [c for c in saved if not c.stage.startswith("agentmesh.")]
        recorded = {c.value["result"] for c in calls if isinstance(c.value, dict)}
        assert recorded == stamps


# -- a person's approvals on the cluster, the store in PostgreSQL ---------------------------

REFUND_LIMIT = 100
BIG_REFUND = Task(id="B-2", query="refund B-2", metadata={"order": "B-2", "amount": 900})
SMALL_REFUND = Task(id="A-1", query="refund A-1", metadata={"order": "A-1", "amount": 40})


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > REFUND_LIMIT:
        return Ruling.ask(f"a refund over {REFUND_LIMIT}")
    return None


class RetryLostWorker(Router):
    """Runs a task whose worker was lost once more (the default records a gap)."""

    async def on_transient(self, ctx: RouteContext) -> Route:
        if ctx.envelope.error_type == "unavailable":
            return RetryWithFeedback(ctx.task.with_query(ctx.task.query + " (again)"))
        return await super().on_transient(ctx)


def refund_desk(refunds: str, kill: str | None = None, in_tool: bool = False) -> Subagent:
    """A desk whose refunds append to `refunds` (the side effect, seen by every node).

    `kill`: the first worker to make a refund dies right after it (`in_tool`: inside the
    tool, before the ledger records the result), noted in that file.
    """

    def die_once() -> None:
        if kill is not None and not Path(kill).exists():
            append(kill, "killed")
            os.kill(os.getpid(), signal.SIGKILL)

    @tool(impact="financial")
    async def refund(order: str, amount: int) -> str:
        append(refunds, f"{order} {amount}")
        if in_tool:
            die_once()
        return f"refunded {amount} on {order}"

    @subagent(name="desk", retry=RetryPolicy.never())
    async def desk(task: Task, ctx: Context) -> str:
        done = await ctx.call(refund, **task.metadata)
        die_once()
        return done

    return desk


class TestApprovalsOnTwoNodes:
    async def run_and_resume(
        self, executor: RayExecutor, dsn: str, schema: str, tmp_path: Path, *, in_tool: bool
    ) -> tuple[Report, Report, Report]:
        """A run on the cluster that asks, the same run locally, and the cluster's resume."""
        from agentmesh.checkpoints import PostgresStore

        refunds, kill = str(tmp_path / "refunds"), str(tmp_path / "killed")
        async with PostgresStore(dsn, schema=schema) as store:
            local = await Coordinator(
                [refund_desk(str(tmp_path / "local"))], policies=[refund_limit], store=store
            ).run([SMALL_REFUND, BIG_REFUND], run_id="desk, locally")
            asked = await Coordinator(
                [refund_desk(refunds)], policies=[refund_limit], store=store, executor=executor
            ).run([SMALL_REFUND, BIG_REFUND], run_id="desk")
        # Another process's store object, as a resume elsewhere would open it.
        async with PostgresStore(dsn, schema=schema) as store:
            again = Coordinator(
                [refund_desk(refunds, kill, in_tool)],
                policies=[refund_limit],
                store=store,
                executor=executor,
                router=RetryLostWorker(),
            )
            resumed = await again.resume(
                "desk", approvals={asked.pending_approvals[0].id: Approve()}
            )
        return local, asked, resumed

    async def test_an_ask_on_a_worker_pends_and_the_approved_call_is_made_once(
        self,
        cluster: tuple[RayExecutor, set[str]],
        tmp_path: Path,
        postgres_dsn: str,
        postgres_schema: str,
    ) -> None:
        """A policy's ask on a worker pends as locally; resumed on the cluster, the approved
        refund is made once, though its worker is killed right after making it."""
        executor, _ = cluster
        local, asked, resumed = await self.run_and_resume(
            executor, postgres_dsn, postgres_schema, tmp_path, in_tool=False
        )

        def question(report: Report) -> list[tuple[Any, ...]]:
            # Not the id: it names the run, and the two runs have ids of their own.
            return [(p.kind, p.task_id, p.tool, p.arguments) for p in report.pending_approvals]

        assert question(asked) == question(local) != []
        assert [e.status for e in asked.coverage] == [e.status for e in local.coverage]
        assert node_lines(tmp_path / "killed") == ["killed"]  # the worker was killed
        assert node_lines(tmp_path / "refunds") == ["A-1 40", "B-2 900"]  # B-2 once
        assert [e.status for e in resumed.coverage] == [CoverageStatus.COVERED] * 2
        assert resumed.pending_approvals == ()
        assert "refunded 900 on B-2" in {f.content for f in resumed.findings}

    async def test_a_worker_killed_inside_the_approved_call_leaves_it_to_a_person(
        self,
        cluster: tuple[RayExecutor, set[str]],
        tmp_path: Path,
        postgres_dsn: str,
        postgres_schema: str,
    ) -> None:
        """Killed before the ledger has the call's result, the call may have run: the task
        run anew asks a person again rather than making it a second time."""
        executor, _ = cluster
        _, _, resumed = await self.run_and_resume(
            executor, postgres_dsn, postgres_schema, tmp_path, in_tool=True
        )

        assert node_lines(tmp_path / "refunds") == ["A-1 40", "B-2 900"]  # B-2 once
        [waiting] = resumed.pending_approvals
        assert waiting.policy == MAY_HAVE_RUN
        assert waiting.tool == "refund"

    async def test_two_resumes_at_once_on_both_nodes_make_the_approved_call_once(
        self,
        cluster: tuple[RayExecutor, set[str]],
        tmp_path: Path,
        postgres_dsn: str,
        postgres_schema: str,
    ) -> None:
        """Two processes resume an answered run at once (here two coordinators); the task
        runs on both nodes together, and the ledger's claim lets one make the refund."""
        from agentmesh.checkpoints import PostgresStore

        executor, ids = cluster
        refunds, seen = str(tmp_path / "refunds"), str(tmp_path / "nodes")
        desk = refund_desk(refunds)

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk_at_the_barrier(task: Task, ctx: Context) -> Any:
            await on_both_nodes(seen)  # both resumes' tasks are running: on both nodes
            return await desk.handle(task, ctx)

        def coordinator(store: PostgresStore, spoke: Subagent) -> Coordinator:
            return Coordinator([spoke], policies=[refund_limit], store=store, executor=executor)

        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            asked = await coordinator(store, desk).run([BIG_REFUND], run_id="desk")
            book = await DecisionBook.load(store, "desk")  # as a person on the console
            await book.give({asked.pending_approvals[0].id: Approve()})
            reports = await asyncio.gather(
                *(coordinator(store, desk_at_the_barrier).resume("desk") for _ in range(2))
            )

        assert set(node_lines(tmp_path / "nodes")) == ids
        assert node_lines(tmp_path / "refunds") == ["B-2 900"]  # once, by one of them
        for report in reports:  # the other replays it, or asks: it may be under way
            [entry] = report.coverage
            waiting = [p.policy for p in report.pending_approvals]
            assert entry.status is CoverageStatus.COVERED or waiting == [MAY_HAVE_RUN]
