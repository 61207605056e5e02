"""One local Ray instance for the whole session: starting one takes a few seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("ray", reason="RayExecutor needs the ray extra: pip install 'agentmesh[ray]'")

from agentmesh.executors import RayExecutor


@pytest.fixture(scope="session")
def ray_executor() -> Iterator[RayExecutor]:
    """A RayExecutor on a 2-CPU local instance, warmed up (workers started, imports done)."""
    import ray

    # The executor would start Ray itself; starting it here keeps workers' output (a
    # killed worker's obituary) off the test log.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="agentmesh")
    executor = RayExecutor().connect()
    try:
        yield executor
    finally:
        executor.close()
        ray.shutdown()
