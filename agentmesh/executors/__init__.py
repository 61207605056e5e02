"""Where subagents run: `LocalExecutor` (this event loop, the default) and `RayExecutor`.

`RayExecutor` needs the `ray` extra (`pip install 'agentmesh-failwell[ray]'`); Ray itself is
imported only when one is created. The seam they implement, `Executor` (what the
`Coordinator` calls) and `Dispatch` (how to run one task), is here too.
"""

from agentmesh.executors._local import Dispatch, Executor, LocalExecutor
from agentmesh.executors._ray import RayExecutor

__all__ = ["Dispatch", "Executor", "LocalExecutor", "RayExecutor"]
