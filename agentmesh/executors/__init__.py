"""Where subagents run: `LocalExecutor` (this event loop, the default) and `RayExecutor`.

`RayExecutor` needs the `ray` extra (`pip install 'agentmesh[ray]'`); Ray itself is
imported only when one is created. The seam they implement, `Executor` and `Dispatch`,
is in `agentmesh.coordinator`.
"""

from agentmesh.coordinator import LocalExecutor
from agentmesh.executors._ray import RayExecutor

__all__ = ["LocalExecutor", "RayExecutor"]
