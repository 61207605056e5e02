"""The report of a run, as plain data: findings, coverage, task histories and routes.

`Report` is what `Coordinator.run` returns; its records (`CoverageEntry`, `TaskRecord`,
`Step`) and the coordinator's routes (`Accept`, `RetryWithFeedback`, ... : a `Route`)
are values that produce nothing and import nothing of the hub or of the events, so
both can use them. `agentmesh.coordinator` re-exports every name here.

`Route` was called `RouteDecision` until 0.2; the old name still imports, with a
`DeprecationWarning`, for one release.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.report._records import (
    CoverageEntry,
    CoverageStatus,
    Finding,
    Step,
    TaskRecord,
    UsageStop,
)
from agentmesh.report._report import Report
from agentmesh.report._routes import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    TryAlternative,
)

__all__ = [
    "Accept",
    "AcceptEmpty",
    "CoverageEntry",
    "CoverageStatus",
    "Escalate",
    "Finding",
    "RecordGap",
    "Report",
    "RetryWithFeedback",
    "Route",
    "Step",
    "TaskRecord",
    "TryAlternative",
    "UsageStop",
]


__getattr__ = kept_for_one_release(
    __name__,
    {
        "RouteDecision": (
            "is now Route (the coordinator's route, not a person's decision)",
            lambda: Route,
        )
    },
)
