"""The hub: `Coordinator`, the `Router` and its decisions, synthesis, the `Report`."""

from agentmesh.coordinator._coordinator import AlternativeHandler, Coordinator
from agentmesh.coordinator._decisions import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    RouteDecision,
    TryAlternative,
)
from agentmesh.coordinator._llm_helpers import LLMRewriter, LLMSynthesizer
from agentmesh.coordinator._report import (
    CoverageEntry,
    CoverageStatus,
    Finding,
    Report,
    Step,
    TaskRecord,
)
from agentmesh.coordinator._router import Rewriter, RouteContext, Router, RouterLike
from agentmesh.coordinator._synthesis import DeterministicSynthesizer, Synthesizer

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
    "RouteContext",
    "RouteDecision",
    "Router",
    "RouterLike",
    "Step",
    "Synthesizer",
    "TaskRecord",
    "TryAlternative",
]
