"""The local executor against a local Ray instance: what one task costs on each.

    python -m benchmarks.ray_executor                # 10,000 trivial tasks, 3 rounds
    python -m benchmarks.ray_executor --n 2000 --rounds 1

Trivial tasks (the subagent returns its query) measure the executors' own cost per
task; CPU-bound tasks (each spins the CPU for `--cpu-ms`) show where spreading them
over Ray's worker processes pays off. Every round runs every contender once, in
alternating order, after a warm-up that starts Ray's workers; the table gives the median
with the min-max of the rounds. Also measured: Ray's start-up and one round trip to the
run-state actor (the cluster-wide retry budget and policy state).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

from agentmesh import Context, Coordinator, RetryPolicy, Task, subagent
from agentmesh.executors import LocalExecutor, RayExecutor


@subagent(name="echo", retry=RetryPolicy.never())
async def echo(task: Task, ctx: Context) -> list[str]:
    return [task.query]


def spinner(ms: float) -> Callable[..., Awaitable[list[str]]]:
    async def spin(task: Task, ctx: Context) -> list[str]:
        until = time.process_time() + ms / 1000
        while time.process_time() < until:
            pass
        return [task.query]

    return spin


async def timed(coordinator: Coordinator, n: int) -> float:
    started = time.perf_counter()
    report = await coordinator.run([f"q{i}" for i in range(n)])
    elapsed = time.perf_counter() - started
    assert len(report.findings) == n, "every task must succeed"
    return elapsed


def row(name: str, n: int, samples: list[float]) -> str:
    median = statistics.median(samples)
    spread = f"{min(samples):.2f}-{max(samples):.2f}"
    return (
        f"| {name} | {n:,} | {median:.2f} s ({spread}) | {n / median:,.0f} "
        f"| {median / n * 1e6:,.0f} µs |"
    )


async def main(n: int, rounds: int, cpu_n: int, cpu_ms: float, num_cpus: int) -> None:
    started = time.perf_counter()
    ray_executor = RayExecutor(num_cpus=num_cpus).connect()
    startup = time.perf_counter() - started
    local = LocalExecutor()
    spin = subagent(name="spin", retry=RetryPolicy.never())(spinner(cpu_ms))
    try:
        # Warm-up: starts the workers, which import agentmesh, and ships the subagents.
        await Coordinator([echo], executor=ray_executor).run([f"w{i}" for i in range(200)])
        await Coordinator([spin], executor=ray_executor).run(["w0", "w1"])
        trip = await ray_executor.round_trip(200)
        trivial: dict[str, list[float]] = {"local": [], "ray": []}
        cpu: dict[str, list[float]] = {"local": [], "ray": []}
        executors = {"local": local, "ray": ray_executor}
        for number in range(rounds):
            order = ["local", "ray"] if number % 2 == 0 else ["ray", "local"]
            for name in order:
                executor = executors[name]
                trivial[name].append(await timed(Coordinator([echo], executor=executor), n))
                cpu[name].append(await timed(Coordinator([spin], executor=executor), cpu_n))
    finally:
        ray_executor.close()

    print(f"machine: {os.cpu_count()} CPUs; Ray local instance with num_cpus={num_cpus}")
    print(f"Ray start-up (ray.init + state actor): {startup:.1f} s")
    print(f"one round trip to the run-state actor: {trip * 1e3:.2f} ms")
    print()
    print("| executor | tasks | wall time (median, min-max) | tasks/s | per task |")
    print("| --- | --- | --- | --- | --- |")
    print(row("local, trivial", n, trivial["local"]))
    print(row("Ray, trivial", n, trivial["ray"]))
    print(row(f"local, {cpu_ms:g} ms CPU each", cpu_n, cpu["local"]))
    print(row(f"Ray, {cpu_ms:g} ms CPU each", cpu_n, cpu["ray"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="trivial tasks per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-n", type=int, default=100, help="CPU-bound tasks per round")
    parser.add_argument("--cpu-ms", type=float, default=50.0, help="CPU time of each")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the Ray instance")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds, args.cpu_n, args.cpu_ms, args.num_cpus))
