"""Memory: resident bytes per task while N tasks are all in flight, one process per run.

Run by ``python -m benchmarks``; alone::

    python -m benchmarks.memory coordinator 100000

Each run is a fresh process (peak RSS only grows), so contenders cannot share a heap.
The workload is the dispatch one (10% first-attempt failures, retried) with every
successful attempt held on an `asyncio.Event` until all N tasks are waiting: the RSS
growth from just before the run starts to that moment, divided by N, is what one
in-flight task costs. Peak RSS is the whole process's, imports included.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from typing import Any

from benchmarks._harness import peak_rss_bytes, rss_bytes
from benchmarks.dispatch import BY_KEY, Workload


async def _measure(key: str, n: int, failure_rate: float) -> dict[str, Any]:
    contender = BY_KEY[key]
    workload = Workload(n, failure_rate, blocking=True, retried=contender.retries)
    run = contender.prepare(workload)
    gc.collect()
    before = rss_bytes()
    job = asyncio.ensure_future(run())
    assert workload.all_waiting is not None
    try:
        await asyncio.wait_for(workload.all_waiting.wait(), timeout=600)
    except TimeoutError:
        raise RuntimeError(
            f"{key}: only {workload.waiting} of {workload.expected_waiting} tasks ever waited"
        ) from None
    in_flight = rss_bytes()
    workload.release()
    await job
    per_task = None if before is None or in_flight is None else (in_flight - before) / n
    return {
        "rss_before": before,
        "rss_in_flight": in_flight,
        "bytes_per_task": per_task,
        "peak_rss": peak_rss_bytes(),
    }


def measure_in_subprocess(key: str, n: int, failure_rate: float) -> dict[str, Any]:
    """One measurement in a fresh interpreter; its JSON line is the result."""
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", key, str(n), str(failure_rate)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"memory run {key} n={n} failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    key, n, *rest = argv if argv is not None else sys.argv[1:]
    failure_rate = float(rest[0]) if rest else 0.1
    print(json.dumps(asyncio.run(_measure(key, int(n), failure_rate))))


if __name__ == "__main__":
    main()
