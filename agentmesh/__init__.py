"""agentmesh: hub-and-spoke multi-agent systems that fail well.

An error is data: every subagent run ends in one `Outcome`, a `Success` (maybe empty) or
an `ErrorEnvelope` that says what failed, what was tried, what was found and what else
could work. See the README for a tour.
"""

from typing import Any

from agentmesh import errors
from agentmesh._logging import configure_logging, redact_secrets
from agentmesh._signatures import kept_for_one_release
from agentmesh._tracing import configure_tracing
from agentmesh.breaker import BreakerState, CircuitBreaker
from agentmesh.classify import Classifier, classify, default_classifier
from agentmesh.context import Context
from agentmesh.coordinator import Coordinator
from agentmesh.envelope import (
    ErrorCategory,
    ErrorEnvelope,
    Outcome,
    PartialResults,
    Ruling,
    Success,
)
from agentmesh.errors import (
    AgentError,
    AgentmeshError,
    BusinessError,
    CallFailed,
    InvalidInput,
    PermissionDenied,
    ToolCallFailed,
    TransientError,
    UsageError,
)
from agentmesh.pipeline import Pipeline
from agentmesh.report import Report
from agentmesh.retry import RetryBudget, RetryPolicy
from agentmesh.subagents import Subagent, subagent
from agentmesh.task import Task
from agentmesh.tools import Tool, tool

__all__ = [
    "AgentError",
    "AgentmeshError",
    "BreakerState",
    "BusinessError",
    "CallFailed",
    "CircuitBreaker",
    "Classifier",
    "Context",
    "Coordinator",
    "ErrorCategory",
    "ErrorEnvelope",
    "InvalidInput",
    "Outcome",
    "PartialResults",
    "PermissionDenied",
    "Pipeline",
    "Report",
    "RetryBudget",
    "RetryPolicy",
    "Ruling",
    "Subagent",
    "Success",
    "Task",
    "Tool",
    "ToolCallFailed",
    "TransientError",
    "UsageError",
    "classify",
    "configure_logging",
    "configure_tracing",
    "default_classifier",
    "redact_secrets",
    "subagent",
    "tool",
]

_DISTRIBUTION = "agentmesh-failwell"
_RENAMED = frozenset({"ValidationError"})
# Names the root exported before issue 25, still served for one release, with a warning.
_kept = kept_for_one_release(
    __name__, {"PolicyVerdict": ("is now Ruling (a policy's ruling)", lambda: Ruling)}
)


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        return getattr(errors, name)  # warns, and names the new spelling
    if name != "__version__":
        return _kept(name)  # warns for an old name; any other is an AttributeError
    # Read when asked: importlib.metadata costs milliseconds the import need not pay.
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(_DISTRIBUTION)
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), "__version__"})
