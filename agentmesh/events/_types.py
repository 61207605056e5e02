"""The typed events of a run: what `Coordinator.stream` yields, in the order it happened.

Every event is a frozen, slotted dataclass with the run's id, the task's id (None for
the run's own events), a sequence number that grows by one per event of the run, and
the wall-clock time it happened. `to_dict()` / `to_json()` give its JSON form with
camelCase keys (as the report's), the event's class under "event", and secrets masked;
`parse_event` reads that form back.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, TypeAlias

from pydantic import ConfigDict, Field, PlainSerializer, PlainValidator, TypeAdapter
from pydantic.alias_generators import to_camel

from agentmesh._redaction import redact_data
from agentmesh.approvals import AnsweredApproval
from agentmesh.envelope import CarriedRuling, ErrorEnvelope
from agentmesh.errors import UsageError
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    CoverageEntry,
    Escalate,
    RecordGap,
    Report,
    RetryWithFeedback,
    Route,
    TryAlternative,
)
from agentmesh.task import Task
from agentmesh.usage import ModelUsage, UsageSummary

__all__ = [
    "ApprovalApplied",
    "AttemptFailed",
    "EscalationPending",
    "Event",
    "PartialRecorded",
    "PolicyRuling",
    "Routed",
    "RunFinished",
    "RunStarted",
    "TaskFinished",
    "TaskStarted",
    "ToolCalled",
    "UsageUpdated",
    "parse_event",
]

_CONFIG: Final = ConfigDict(
    arbitrary_types_allowed=True, alias_generator=to_camel, populate_by_name=True
)

_ROUTES: Final[dict[str, type[Any]]] = {
    cls.__name__: cls
    for cls in (Accept, AcceptEmpty, RetryWithFeedback, TryAlternative, Escalate, RecordGap)
}
_TASK: Final = TypeAdapter(Task)


def _route_to_json(decision: Route) -> dict[str, Any]:
    """The route with its class named: `Accept` and `AcceptEmpty` have no fields."""
    data: dict[str, Any] = {"type": type(decision).__name__}
    if isinstance(decision, RetryWithFeedback):
        data["task"] = _TASK.dump_python(decision.task, mode="json", by_alias=True)
    elif isinstance(decision, TryAlternative):
        data["name"] = decision.name
    elif isinstance(decision, Escalate | RecordGap):
        data["reason"] = decision.reason
    return data


def _route_from_json(value: Any) -> Route:
    if isinstance(value, Accept | AcceptEmpty | RetryWithFeedback | TryAlternative):
        return value
    if isinstance(value, Escalate | RecordGap):
        return value
    kind = value.get("type") if isinstance(value, Mapping) else None
    if not isinstance(kind, str) or kind not in _ROUTES:
        raise ValueError(f"not a routing decision: {value!r}")
    fields = {key: item for key, item in value.items() if key != "type"}
    # An unknown field is refused, not dropped: a decision read from outside must be one
    # the coordinator could have taken.
    unknown = sorted(map(str, fields.keys() - {f.name for f in dataclasses.fields(_ROUTES[kind])}))
    if unknown:
        raise ValueError(f"{kind} has no field {', '.join(unknown)}")
    # A ValidationError is a ValueError: pydantic reports it under the event's field.
    decision: Route = _route_adapter(kind).validate_python(fields)
    return decision


@functools.cache
def _route_adapter(kind: str) -> TypeAdapter[Any]:
    return TypeAdapter(_ROUTES[kind])


_WireRoute = Annotated[
    Route,
    PlainValidator(_route_from_json),
    PlainSerializer(_route_to_json, when_used="json"),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    """What every event of a run carries.

    Attributes:
        run_id: the run.
        task_id: the task (a task id of the report's records); None for run-level events.
        seq: 1 for the run's first event, then one more per event: the order they happened.
        timestamp: when it happened, in seconds since the epoch (`time.time()`); for an
            event of a remote task (the Ray executor), the worker's clock.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _CONFIG

    run_id: str
    task_id: str | None
    seq: int
    timestamp: float

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data: camelCase keys, the class under "event", secrets masked.

        Values JSON cannot hold (a subagent's own objects) become their `str()`.
        """
        data: dict[str, Any] = _adapter(type(self)).dump_python(
            self, mode="json", by_alias=True, fallback=str
        )
        # Screened as one JSON text first: an event seldom holds a secret, and one that
        # holds no secret word needs no walk through its parts (a run with a store
        # writes every event: this is most of its cost).
        return redact_data({"event": type(self).__name__, **data})  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """One line of JSON (as `--events FILE` writes them)."""
        return json.dumps(self.to_dict(), default=str)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(RunEvent):
    """The run began: how many tasks it has (one per task x subagent) and its subagents."""

    tasks: int
    subagents: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(RunEvent):
    """The run ended: its report, the one `Coordinator.run` returns. Always the last event."""

    report: Report

    def to_dict(self) -> dict[str, Any]:
        # The report's own JSON form (with coverageRatio and sufficient), as to_json
        # writes it; the rest by hand, so that the report is not dumped twice.
        head = {"runId": self.run_id, "taskId": self.task_id, "seq": self.seq}
        return {
            "event": "RunFinished",
            **redact_data(head),
            "timestamp": self.timestamp,
            "report": self.report.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStarted(RunEvent):
    """A task (one task for one subagent) was taken up: its first dispatch is next."""

    task: Task
    subagent: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFailed(RunEvent):
    """An attempt of a call (a tool call, a subagent's body, a model turn) failed.

    `retry_in` is the delay scheduled before the next attempt, in seconds; None when
    no attempt follows (the call failed for good: its envelope says why).
    """

    source: str
    attempt: int
    envelope: ErrorEnvelope
    retry_in: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyRuling(RunEvent):
    """A policy ruled on a tool call (deny, forbid_retry, escalate or ask); `ruling.tool`
    names it.

    The attribute was `verdict` until issue 25; its JSON key still is (`"verdict"`), and
    `event.verdict` still reads, with a `DeprecationWarning`, for one release.
    """

    subagent: str
    # The JSON key is the one events have always been written with.
    ruling: Annotated[CarriedRuling, Field(alias="verdict")]

    @property
    def verdict(self) -> CarriedRuling:
        """Deprecated: `ruling`; the old name goes in the next release."""
        _renamed("PolicyRuling.verdict", "PolicyRuling.ruling", "(a policy's ruling)")
        return self.ruling


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(RunEvent):
    """A subagent's tool call was made (or its recorded result replayed) and settled.

    `arguments` are the call's as it was made (after a person's edit), secrets masked;
    `result` is the tool's data and `envelope` None, or `envelope` is why the call failed
    (after its local retries, or withheld by a post-tool policy) and `result` None.
    `attempts` counts the attempts made (0 for a result replayed from the ledger). A call
    that was never made (refused by a policy, invalid, waiting for a person) has no such
    event: its ruling, failure or pending approval says why.
    """

    subagent: str
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    envelope: ErrorEnvelope | None = None
    attempts: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Routed(RunEvent):
    """The coordinator routed an outcome of the task (its `subagent` at that step).

    `decision` holds the `Route` taken (the name its JSON key has always had).
    """

    subagent: str
    task: Task
    decision: _WireRoute
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartialRecorded(RunEvent):
    """A subagent recorded progress (`ctx.record_partial`): what this call added.

    `restored` is True for the progress a previous run of the task saved, read back
    from the checkpoint store when the task starts (all of it, in one event).
    """

    subagent: str
    findings: tuple[Any, ...]
    completed: tuple[str, ...]
    pending: tuple[str, ...]
    restored: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationPending(RunEvent):
    """A task was escalated: it waits for a person.

    `approval_id` names the pending approval a person can answer, when the run has one
    (a run with a checkpoint store); None otherwise. It was `decision_id` until 0.2.
    """

    subagent: str
    task: Task
    reason: str
    approval_id: str | None = None

    @property
    def decision_id(self) -> str | None:
        """Deprecated: `approval_id`; the old name goes in the next release."""
        _renamed("EscalationPending.decision_id", "EscalationPending.approval_id", _APPROVAL)
        return self.approval_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalApplied(RunEvent):
    """A person's answer (approve, reject or edit) was used by its task.

    Emitted when the task that used it reaches its final state (or, for an escalation
    approved or rejected, when a resume settles it), before its `TaskFinished`.
    `approval` says what was asked, the answer, and the arguments before and after an
    edit, masked: what `Report.answered_approvals` holds. The event was `DecisionApplied`,
    its field `decision`, until 0.2.
    """

    subagent: str
    approval: AnsweredApproval

    @property
    def decision(self) -> AnsweredApproval:
        """Deprecated: `approval`; the old name goes in the next release."""
        _renamed("ApprovalApplied.decision", "ApprovalApplied.approval", _APPROVAL)
        return self.approval


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated(RunEvent):
    """A model call was settled (answered, failed or cut): what it used, and the run so far.

    `usage` is this call's line (one model call; no tokens for a failed one); `total` is
    what every model call of the run used up to and including it, as counted where the
    call was made (a Ray worker counts its own). `subagent` is the caller: a subagent's
    name, or "rewriter" / "synthesizer" for the coordinator's own model helpers.
    """

    subagent: str
    model: str
    usage: ModelUsage
    total: UsageSummary


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFinished(RunEvent):
    """A task reached its final state: its coverage entry, as the report will hold it."""

    entry: CoverageEntry


Event: TypeAlias = (
    RunStarted
    | TaskStarted
    | AttemptFailed
    | PolicyRuling
    | ToolCalled
    | PartialRecorded
    | Routed
    | EscalationPending
    | ApprovalApplied
    | UsageUpdated
    | TaskFinished
    | RunFinished
)
"""Any event of a run."""

_KINDS: Final[dict[str, type[RunEvent]]] = {
    cls.__name__: cls
    for cls in (
        RunStarted,
        TaskStarted,
        AttemptFailed,
        PolicyRuling,
        ToolCalled,
        PartialRecorded,
        Routed,
        EscalationPending,
        ApprovalApplied,
        UsageUpdated,
        TaskFinished,
        RunFinished,
    )
}
# JSON written before 0.3 named a person's answers decisions: still read, for one release.
_OLD_KINDS: Final = {"DecisionApplied": ApprovalApplied}
_OLD_KEYS: Final = {
    ApprovalApplied: {"decision": "approval"},
    EscalationPending: {"decisionId": "approvalId", "decision_id": "approval_id"},
}
_ADAPTERS: dict[type[RunEvent], TypeAdapter[Any]] = {}


def _adapter(cls: type[RunEvent]) -> TypeAdapter[Any]:
    # Built on first use: most runs never serialise an event.
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def parse_event(data: str | bytes | Mapping[str, Any]) -> Event:
    """An event from its JSON form (`to_json()` text or `to_dict()` data).

    Whatever `data` holds, only these two errors are raised.

    Raises:
        UsageError: `data` is not JSON, nests too deeply for JSON, or does not name a
            known event under "event".
        pydantic.ValidationError: its fields do not fit that event.
    """
    parsed: Any = _loads(data) if isinstance(data, str | bytes | bytearray) else data
    name = parsed.get("event") if isinstance(parsed, Mapping) else None
    kind = (_KINDS.get(name) or _OLD_KINDS.get(name)) if isinstance(name, str) else None
    if kind is None:
        shown = name if name is None or isinstance(name, str) else type(name).__name__
        raise UsageError(f"parse_event(data=) takes an event's JSON form; no event {shown!r}")
    old = _OLD_KEYS.get(kind, {})
    fields = {old.get(key, key): value for key, value in parsed.items() if key != "event"}
    event: Event = _adapter(kind).validate_python(fields)
    return event


_APPROVAL: Final = "(a person's answer is an approval)"


def _renamed(old: str, new: str, why: str) -> None:
    warnings.warn(
        f"{old} is now {new} {why}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )


def _loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        raise UsageError(
            f"parse_event(data=) takes an event's JSON form; not JSON: {exc}"
        ) from None
    except RecursionError:
        raise UsageError("parse_event(data=): the JSON nests too deeply") from None
