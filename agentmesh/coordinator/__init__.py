"""The hub: `Coordinator`, the `Router` and its routes, synthesis, the `Report`.

The report and the routes live in `agentmesh.report` (plain data, below the hub and
the events); they are re-exported here, as before. `RouteDecision` (now `Route`) still
imports, with a `DeprecationWarning`, for one release.
"""

import warnings
from typing import Any

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
]


def __getattr__(name: str) -> Any:
    if name != "RouteDecision":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        "agentmesh's RouteDecision is now Route (the coordinator's route, not a person's "
        "decision); the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return Route
