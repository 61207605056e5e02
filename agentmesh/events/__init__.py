"""Live runs: the typed events of a run, as `Coordinator.stream` delivers them.

    async with coordinator.stream(tasks, run_id="r1") as events:
        async for event in events:
            match event:
                case TaskStarted(task=task): ...
                case AttemptFailed(envelope=envelope, retry_in=delay): ...
                case Routed(task=task, decision=decision): ...
                case DecisionApplied(decision=answered): ...
                case UsageUpdated(usage=call, total=run_so_far): ...
                case TaskFinished(entry=entry): ...
                case RunFinished(report=report): ...

Every event carries `run_id`, `task_id` (None for the run's own), `seq` (1, 2, ... in
the order they happened) and `timestamp`; `to_dict()` / `to_json()` give its JSON form
(secrets masked) and `parse_event` reads it back. `RunStream` is the stream itself.
"""

from agentmesh.events._channel import DEFAULT_BUFFER
from agentmesh.events._stream import RunStream, StreamState
from agentmesh.events._types import (
    AttemptFailed,
    DecisionApplied,
    EscalationPending,
    Event,
    PartialRecorded,
    PolicyRuling,
    Routed,
    RunEvent,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
    UsageUpdated,
    parse_event,
)

__all__ = [
    "DEFAULT_BUFFER",
    "AttemptFailed",
    "DecisionApplied",
    "EscalationPending",
    "Event",
    "PartialRecorded",
    "PolicyRuling",
    "Routed",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "RunStream",
    "StreamState",
    "TaskFinished",
    "TaskStarted",
    "UsageUpdated",
    "parse_event",
]
