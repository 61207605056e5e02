"""The `ray` section: small tasks and a CPU-bound fan-out on a local two-node Ray cluster.

    python -m benchmarks --only ray
    python -m benchmarks --only ray --quick      # one round

A head and one more node, one CPU each, on loopback (`ray.cluster_utils.Cluster`), as
the two-node tests start it; the coordinator's `RayExecutor` joins it by address. Each
round runs the local executor and the cluster back to back, alternating which goes
first: 10,000 one-line tasks (the executors' own cost per task, end to end) and 100
tasks that each burn 50 ms of CPU (which the local executor runs one at a time, on
one core). Each of those also times itself: the mean wall time of a 50 ms task says
how much of a core it got (50 ms: a whole one; on a shared machine, more). Skipped,
with a line that says so, when Ray is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks._harness import Samples, rotated, spread, table

TRIVIAL_N = 10_000
CPU_N = 100
CPU_MS = 50.0
NODE: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": "127.0.0.1",
    "object_store_memory": 80 * 1024 * 1024,
}


def available() -> bool:
    return importlib.util.find_spec("ray") is not None


@dataclass
class RayRow:
    name: str
    trivial_us: Samples = field(default_factory=Samples)  # wall µs per one-line task
    cpu_seconds: Samples = field(default_factory=Samples)  # wall s of the fan-out
    cpu_task_ms: Samples = field(default_factory=Samples)  # a 50 ms task's own wall ms

    def to_json(self) -> dict[str, Any]:
        return {
            "trivial_us_per_task": self.trivial_us.to_json(),
            "cpu_fanout_s": self.cpu_seconds.to_json(),
            "cpu_task_wall_ms": self.cpu_task_ms.to_json(),
        }


def timed_spinner(ms: float) -> Any:
    """A subagent body that burns `ms` of CPU and returns its own wall time, in ms."""

    async def spin(task: Any, ctx: Any) -> list[float]:
        started = time.perf_counter()
        until = time.process_time() + ms / 1000
        while time.process_time() < until:
            pass
        return [(time.perf_counter() - started) * 1e3]

    return spin


@contextlib.contextmanager
def two_nodes() -> Iterator[str]:
    """A two-node cluster on loopback, its files in a temporary directory; its address."""
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    temp = tempfile.mkdtemp(prefix="am-bench-")  # short: Ray's socket paths live under it
    saved = {key: os.environ.get(key) for key in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED")}
    saved_flag = os.environ.get(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR)
    os.environ.update({"RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0"})
    # Ray turns 127.0.0.1 into the machine's outward address unless clusters are "off":
    # the nodes' processes read the variable, this process the constant it set.
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    saved_constant = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "include_dashboard": False, "dashboard_host": "127.0.0.1"},
    )
    try:
        cluster.add_node(**NODE)
        yield cluster.address
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]  # unannotated upstream
        ray_constants.ENABLE_RAY_CLUSTER = saved_constant
        for key, value in {**saved, ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: saved_flag}.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(temp, ignore_errors=True)


async def _timed(coordinator: Any, n: int) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    report = await coordinator.run([f"q{i}" for i in range(n)])
    elapsed = time.perf_counter() - started
    assert len(report.findings) == n, "every task must succeed"
    return elapsed, [finding.content for finding in report.findings]


async def _rounds(address: str, rounds: int, n: int) -> list[RayRow]:
    from agentmesh import Coordinator, RetryPolicy, subagent
    from agentmesh.executors import LocalExecutor, RayExecutor
    from benchmarks.ray_executor import echo

    spin = subagent(name="spin", retry=RetryPolicy.never())(timed_spinner(CPU_MS))
    cluster = RayExecutor(address, init_options={"log_to_driver": False}).connect()
    executors = {"local, one core": LocalExecutor(), "Ray, two nodes": cluster}
    rows = {name: RayRow(name) for name in executors}
    try:
        # Warm-up: the workers import agentmesh and take the subagents once.
        await Coordinator([echo], executor=cluster).run([f"w{i}" for i in range(500)])
        await Coordinator([spin], executor=cluster).run(["w0", "w1"])
        for number in range(rounds):
            for name in rotated(list(executors), number):
                executor = executors[name]
                wall, _ = await _timed(Coordinator([echo], executor=executor), n)
                rows[name].trivial_us.add(wall / n * 1e6)
                wall, task_ms = await _timed(Coordinator([spin], executor=executor), CPU_N)
                rows[name].cpu_seconds.add(wall)
                rows[name].cpu_task_ms.add(sum(task_ms) / len(task_ms))
                print(".", end="", flush=True)
    finally:
        cluster.close()
    print()
    return list(rows.values())


def run(rounds: int, n: int = TRIVIAL_N) -> dict[str, Any]:
    """The section's JSON: each executor's figures, or why the section was skipped."""
    if not available():
        return {"skipped": "ray is not installed: pip install 'agentmesh-failwell[ray]'"}
    with two_nodes() as address:
        rows = asyncio.run(_rounds(address, rounds, n))
    return {"n": n, "cpu_n": CPU_N, "cpu_ms": CPU_MS, **{row.name: row.to_json() for row in rows}}


def print_table(results: dict[str, Any]) -> None:
    if "skipped" in results:
        print(f"Ray: skipped ({results['skipped']})\n")
        return
    names = [key for key in results if isinstance(results[key], dict)]
    lines = []
    for name in names:
        cell = results[name]
        lines.append(
            [
                name,
                spread(Samples(cell["trivial_us_per_task"]["samples"]), "{:.0f}"),
                spread(Samples(cell["cpu_fanout_s"]["samples"]), "{:.2f}"),
                spread(Samples(cell["cpu_task_wall_ms"]["samples"]), "{:.0f}"),
            ]
        )
    print(
        table(
            [
                "executor",
                f"{results['n']:,} one-line tasks: µs/task",
                f"{results['cpu_n']} × {results['cpu_ms']:g} ms CPU: s",
                "each task's own wall: ms",
            ],
            lines,
            "Ray: a local two-node cluster (one CPU each) against the local executor",
        )
    )
    print()


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Issue 31's targets, from the section's JSON."""
    if not results or "skipped" in results:
        return []
    local, cluster = results["local, one core"], results["Ray, two nodes"]
    per_task = cluster["trivial_us_per_task"]["median"]
    speedup = local["cpu_fanout_s"]["median"] / cluster["cpu_fanout_s"]["median"]
    return [
        ("Ray: one-line tasks ≤ 200 µs each (two nodes)", f"{per_task:.0f} µs", per_task <= 200),
        ("Ray: CPU fan-out ≥ 1.7× one core (two nodes)", f"{speedup:.2f}×", speedup >= 1.7),
    ]
