"""Live runs: the typed events of a run, as `Coordinator.stream` delivers them.

    async with coordinator.stream(tasks, run_id="r1") as events:
        async for event in events:
            match event:
                case TaskStarted(task=task): ...
                case AttemptFailed(envelope=envelope, retry_in=delay): ...
                case ToolCalled(tool=name, result=data, envelope=failure): ...
                case Routed(task=task, decision=decision): ...
                case ApprovalApplied(approval=answered): ...
                case UsageUpdated(usage=call, total=run_so_far): ...
                case TaskFinished(entry=entry): ...
                case RunFinished(report=report): ...

Every event carries `run_id`, `task_id` (None for the run's own), `seq` (1, 2, ... in
the order they happened) and `timestamp`; `to_dict()` / `to_json()` give its JSON form
(secrets masked) and `parse_event` reads it back. `RunStream` is the stream itself;
`EventSink` is where a run's events go (`RunScope.events`).

With a checkpoint store, a run's events are also written to it as they happen (its
event log, bounded by `EventLog`), so that another process can follow the run:
`read_events(store, run_id, after=position, wait=seconds)` gives an `EventLogPage` of
`LoggedEvent`s, and `follow_events` iterates them until `RunFinished`.

`ApprovalApplied` was called `DecisionApplied` until 0.2; the old name still imports,
with a `DeprecationWarning`, for one release, and `parse_event` reads its old JSON.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.events._channel import DEFAULT_BUFFER, EventSink
from agentmesh.events._log import DEFAULT_EVENT_LOG_BYTES, EventLog
from agentmesh.events._reading import EventLogPage, LoggedEvent, follow_events, read_events
from agentmesh.events._stream import RunStream, StreamState
from agentmesh.events._types import (
    ApprovalApplied,
    AttemptFailed,
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
    ToolCalled,
    UsageUpdated,
    parse_event,
)

__all__ = [
    "DEFAULT_BUFFER",
    "DEFAULT_EVENT_LOG_BYTES",
    "ApprovalApplied",
    "AttemptFailed",
    "EscalationPending",
    "Event",
    "EventLog",
    "EventLogPage",
    "EventSink",
    "LoggedEvent",
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
    "ToolCalled",
    "UsageUpdated",
    "follow_events",
    "parse_event",
    "read_events",
]


__getattr__ = kept_for_one_release(
    __name__,
    {
        "DecisionApplied": (
            "is now ApprovalApplied (a person's answer is an approval)",
            lambda: ApprovalApplied,
        )
    },
)
