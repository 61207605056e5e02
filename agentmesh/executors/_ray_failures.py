"""What a Ray task that did not come back becomes, on the driver.

Telling a lost worker or node from the task's own error, waiting until a cancelled task
has ended, the envelopes of a task lost mid-task (`unavailable`) or cut at the deadline
(`timeout`), both keeping the partial results it had recorded, and the state writes
that merge what a lost task wrote into the driver's copy.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, PartialResults
from agentmesh.subagents import Subagent
from agentmesh.task import Task


def _as_defaults(state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Writes that add what `state` has to a copy of it, keeping what the copy has."""
    ops: list[tuple[Any, ...]] = []
    for key, value in state.items():
        if isinstance(value, dict):
            ops += [("default_in", key, item, inner) for item, inner in value.items()]
        else:
            ops.append(("default", key, value))
    return ops


async def _settled(ref: Any, seconds: float) -> bool:
    """Whether the task behind `ref` ended (in any way) within `seconds`."""
    future = asyncio.ensure_future(_wait(ref))
    done, _ = await asyncio.wait({future}, timeout=seconds)
    if not done:
        future.cancel()
    return bool(done)


async def _wait(ref: Any) -> None:
    try:
        await ref
    except Exception:
        return  # cancelled, crashed or failed: ended all the same


def _lost(exc: BaseException) -> bool:
    """True for a Ray failure of the task's worker or node, not of the task's code."""
    from ray import exceptions as rx

    if isinstance(exc, rx.TaskCancelledError):
        return True  # not by us (we were not cancelled): e.g. a node drained
    if isinstance(exc, rx.RayTaskError | rx.RuntimeEnvSetupError):
        return False
    return isinstance(exc, rx.RayError)


def _cause(exc: Exception) -> Exception:
    """The exception the remote code raised, without Ray's wrapper."""
    from ray.exceptions import RayTaskError

    if isinstance(exc, RayTaskError) and isinstance(exc.cause, Exception):
        return exc.cause
    return exc


def _unavailable(
    subagent: Subagent, task: Task, exc: BaseException, partials: PartialResults | None
) -> ErrorEnvelope:
    first_line = (str(exc).strip().splitlines() or [""])[0][:300]
    return ErrorEnvelope(
        error_category=ErrorCategory.TRANSIENT,
        error_type="unavailable",
        is_retryable=True,
        message=(
            f"the Ray worker running {subagent.name} was lost mid-task "
            f"({type(exc).__name__}); the progress it had recorded is kept"
        ),
        attempted_query=task.query,
        source=subagent.name,
        attempts=1,
        partial_results=partials,
        alternative_approaches=subagent.alternatives or None,
        details=f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__,
    )


def _cut(
    subagent: Subagent, task: Task, deadline: float | None, partials: PartialResults | None
) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.TRANSIENT,
        error_type="timeout",
        is_retryable=True,
        message=(
            f"cut at the deadline ({deadline:g}s): the Ray task did not hand back its "
            "outcome in time and was cancelled"
        ),
        attempted_query=task.query,
        source=subagent.name,
        attempts=1,
        partial_results=partials,
        alternative_approaches=subagent.alternatives or None,
    )
