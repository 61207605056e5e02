"""One local Ray instance for the session (starting one takes a few seconds).

A process holds one Ray connection at a time: the two-node tests stop the local
instance to start their cluster, and the next test that asks for `ray_executor` starts
it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "ray", reason="RayExecutor needs the ray extra: pip install 'agentmesh-failwell[ray]'"
)

from agentmesh.executors import RayExecutor


class LocalRay:
    """The session's local Ray instance and its warmed-up executor, started on demand."""

    def __init__(self) -> None:
        self.executor: RayExecutor | None = None

    def start(self) -> RayExecutor:
        if self.executor is None:
            import ray

            # The executor would start Ray itself; starting it here keeps workers' output
            # (a killed worker's obituary) off the test log.
            ray.init(
                num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="agentmesh"
            )
            self.executor = RayExecutor().connect()
        return self.executor

    def stop(self) -> None:
        import ray

        executor, self.executor = self.executor, None
        if executor is not None:
            executor.close()
            ray.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The two-node tests after the other Ray tests: their cluster stops the local
    instance, and a Ray test after them would start it again (seconds)."""
    here = Path(__file__).parent
    positions = [i for i, item in enumerate(items) if here in item.path.parents]
    ray_items = [items[i] for i in positions]
    ray_items.sort(key=lambda item: item.path.name == "test_two_nodes.py")  # stable
    for position, item in zip(positions, ray_items, strict=True):
        items[position] = item


@pytest.fixture(scope="session")
def local_ray() -> Iterator[LocalRay]:
    """The session's local instance; stopped at the end of the session."""
    local = LocalRay()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def ray_executor(local_ray: LocalRay) -> RayExecutor:
    """A RayExecutor on a 2-CPU local instance, warmed up (workers started, imports done)."""
    return local_ray.start()
