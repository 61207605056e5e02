"""The hub: `Coordinator`, the `Router` and its routes, synthesis, the `Report`.

The report and the routes live in `agentmesh.report` (plain data, below the hub and
the events); they are re-exported here, as before. `RouteDecision` (now `Route`) still
imports, with a `DeprecationWarning`, for one release.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.coordinator._coordinator import AlternativeHandler, Coordinator
from agentmesh.coordinator._limits import RunLimits
from agentmesh.coordinator._llm_helpers import LLMRewriter
from agentmesh.coordinator._llm_synthesizer import LLMSynthesizer
from agentmesh.coordinator._router import Rewriter, RouteContext, Router, RouterLike
from agentmesh.coordinator._synthesis import DeterministicSynthesizer, Synthesizer
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    CoverageEntry,
    CoverageStatus,
    Escalate,
    Finding,
    RecordGap,
    Report,
    RetryWithFeedback,
    Route,
    Step,
    TaskRecord,
    TryAlternative,
    UsageStop,
)

__all__ = [
    "Accept",
    "AcceptEmpty",
    "AlternativeHandler",
    "Coordinator",
    "CoverageEntry",
    "CoverageStatus",
    "DeterministicSynthesizer",
    "Escalate",
    "Finding",
    "LLMRewriter",
    "LLMSynthesizer",
    "RecordGap",
    "Report",
    "RetryWithFeedback",
    "Rewriter",
    "Route",
    "RouteContext",
    "Router",
    "RouterLike",
    "RunLimits",
    "Step",
    "Synthesizer",
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
