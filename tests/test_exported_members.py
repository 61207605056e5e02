"""The public surface is exactly what we mean to export: every public module's `__all__`.

A public module is one without a leading underscore anywhere in its dotted path. Each is
pinned below; a new public module, a name added to or dropped from an `__all__`, fails here
until the table says so (and `tests/test_reference_pages.py` asks for its reference entry).
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

import agentmesh
import agentmesh._engine._rulings
import agentmesh.envelope
import agentmesh.pipeline

PACKAGE = Path(agentmesh.__file__).parent

# One line per public module: what `from module import *` gives, nothing more, nothing less.
PUBLIC_API: dict[str, set[str]] = {
    "agentmesh": {
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
    },
    "agentmesh.breaker": {"BreakerState", "CircuitBreaker"},
    "agentmesh.checkpoints": {
        "Checkpoint",
        "CheckpointError",
        "CheckpointStore",
        "EventTable",
        "KeepsEventLogs",
        "LogHead",
        "LoggedRow",
        "MemoryStore",
        "PostgresStore",
        "RunStamp",
        "SQLiteStore",
        "Watch",
        "WritesBehind",
        "event_table_of",
    },
    "agentmesh.agui": {
        "PROTOCOL_VERSION",
        "RunTranslator",
        "TasksFrom",
        "create_app",
        "last_user_message",
    },
    "agentmesh.console": {
        "Access",
        "AnswerTaken",
        "ApprovalState",
        "PlannedTask",
        "RunStatus",
        "RunSummary",
        "RunView",
        "answer_approval",
        "create_app",
        "list_runs",
        "load_run",
    },
    "agentmesh.classify": {
        "Classifier",
        "classify",
        "default_classifier",
        "is_strict",
        "set_strict",
        "strict",
    },
    # What a subagent's body sees; the engine's helpers left for `_partials`/`_rulings`.
    "agentmesh.context": {"Context", "PartialRecorder"},
    "agentmesh.coordinator": {
        "AlternativeHandler",
        "Coordinator",
        "DeterministicSynthesizer",
        "LLMRewriter",
        "LLMSynthesizer",
        "Rewriter",
        "RouteContext",
        "Router",
        "RouterLike",
        "RunLimits",
        "Synthesizer",
        # Re-exported from agentmesh.report (pinned by tests/unit/test_layers.py too).
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
    },
    "agentmesh.approvals": {
        "AnsweredApproval",
        "Approval",
        "ApprovalKind",
        "Approve",
        "Edit",
        "PendingApproval",
        "Reject",
    },
    # Deprecated: forwards the old names (with a warning) to agentmesh.approvals.
    "agentmesh.decisions": set(),
    "agentmesh.envelope": {
        "ErrorCategory",
        "ErrorEnvelope",
        "ErrorType",
        "Outcome",
        "PartialResults",
        "RetryCount",
        "Ruling",
        "Success",
        "ToolsLeftOut",
    },
    "agentmesh.errors": {
        "AgentError",
        "AgentmeshError",
        "BusinessError",
        "CallFailed",
        "CheckpointError",
        "InvalidInput",
        "PermissionDenied",
        "ToolCallFailed",
        "TransientError",
        "UsageError",
    },
    "agentmesh.events": {
        "DEFAULT_BUFFER",
        "DEFAULT_EVENT_LOG_BYTES",
        "AttemptFailed",
        "ApprovalApplied",
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
    },
    "agentmesh.a2a": {"A2AAgent", "serve"},
    "agentmesh.executors": {"Dispatch", "Executor", "LocalExecutor", "RayExecutor"},
    "agentmesh.mcp": {"MCPServer", "MCPTool", "serve"},
    "agentmesh.models": {
        "DEFAULT_FAILOVER_ON",
        "AnthropicModel",
        "ContentBlock",
        "FallbackModel",
        "GeminiModel",
        "Model",
        "ModelHealth",
        "ModelRequest",
        "ModelResponse",
        "OpenAIModel",
        "OtherBlock",
        "ScriptedModel",
        "TextBlock",
        "ToolUseBlock",
        "Usage",
        "resolve_model",
        # Re-exported from agentmesh.usage (the same objects, TestReExports).
        "DEFAULT_PRICES",
        "ModelFailover",
        "ModelPrice",
        "ModelUsage",
        "PriceTable",
        "UsageLimits",
        "UsageSummary",
    },
    "agentmesh.pipeline": {"Pipeline"},
    "agentmesh.policies": {
        "Match",
        "PolicyChain",
        "PostToolUse",
        "PreToolUse",
        "Ruling",
        "ToolCallEvent",
        "ToolPolicy",
        "ToolResultEvent",
        "deny_after_permission_error",
        "escalate_on",
        "forbid_retry",
        "post_tool_use",
        "pre_tool_use",
    },
    "agentmesh.report": {
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
    },
    "agentmesh.retry": {"Attempts", "RetryBudget", "RetryPolicy", "RetryResult", "Sleep"},
    "agentmesh.scope": {"RunScope"},
    "agentmesh.subagents": {
        "REPORT_FAILURE",
        "SUBMIT_RESULT",
        "FunctionSubagent",
        "LLMSubagent",
        "Subagent",
        "SubagentKwargs",
        "SubagentOptions",
        "ToolSource",
        "subagent",
    },
    "agentmesh.task": {"Task"},
    "agentmesh.testing": {
        "ChatCompletionReply",
        "ChatErrorReply",
        "ChatRawReply",
        "ChatReply",
        "ChatSlowReply",
        "ChatStreamCut",
        "ErrorReply",
        "FailTimes",
        "FakeChatCompletionsAPI",
        "FakeGeminiAPI",
        "FakeMessagesAPI",
        "GeminiAnswer",
        "GeminiError",
        "GeminiReply",
        "GeminiRequest",
        "GeminiSlow",
        "GeminiStreamCut",
        "MessageReply",
        "RawReply",
        "RecordedRequest",
        "RecordingSleep",
        "Reply",
        "SlowReply",
        "StreamErrorReply",
    },
    "agentmesh.throttle": {"Limiter", "RateLimitSpec", "RateReservations"},
    "agentmesh.tools": {
        "Impact",
        "MCPToolKwargs",
        "Tool",
        "ToolKwargs",
        "ToolOptions",
        "tool",
    },
    "agentmesh.usage": {
        "DEFAULT_PRICES",
        "ModelFailover",
        "ModelPrice",
        "ModelUsage",
        "PriceTable",
        "UsageLimits",
        "UsageMeter",
        "UsageSummary",
    },
}

# Stands for "the object of that name in the private module that now defines it".
PRIVATE_HOME = object()

# Names that left a public module's face: still importable there for one release, with a
# DeprecationWarning saying they are internal; the value is what the old path still gives.
PRIVATISED: dict[tuple[str, str], object] = {
    ("agentmesh.checkpoints", "DEFAULT_PATH"): Path(".agentmesh") / "checkpoints.sqlite",
    ("agentmesh.checkpoints", "SCHEMA_VERSION"): 1,
    ("agentmesh.classify", "PROGRAMMING_ERRORS"): (
        AttributeError,
        NameError,
        TypeError,
        AssertionError,
    ),
    # The engine's helper is `apply_ruling` now (issue 25, "one word, one meaning").
    ("agentmesh.context", "apply_verdict"): agentmesh._engine._rulings.apply_ruling,
    ("agentmesh.context", "merge_partials"): PRIVATE_HOME,
    ("agentmesh.envelope", "is_empty_value"): agentmesh.envelope._is_empty_value,
    ("agentmesh.models", "MODEL_ENV"): "AGENTMESH_MODEL",
    ("agentmesh.pipeline", "StageFn"): agentmesh.pipeline._StageFn,
    ("agentmesh.pipeline", "StageSpec"): agentmesh.pipeline._StageSpec,
    ("agentmesh.tools", "CONTEXT_PARAMETER"): "ctx",
    ("agentmesh.tools", "IDEMPOTENCY_KEY"): "idempotency_key",
}


def public_modules() -> set[str]:
    """Every module and package of the tree without a leading underscore in its path."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if not any(part.startswith("_") for part in parts):
            found.add(".".join(parts))
    return found


def module(name: str) -> object:
    # `agentmesh.classify` the attribute is the function; import the module by its name.
    return importlib.import_module(name)


class TestExportedMembers:
    def test_every_public_module_is_pinned(self) -> None:
        """The table names exactly the public modules of the package tree."""
        assert public_modules() == set(PUBLIC_API)

    @pytest.mark.parametrize("name", sorted(PUBLIC_API))
    def test_all_is_exactly_the_pinned_names(self, name: str) -> None:
        """A public module's `__all__` is its pinned list, without duplicates."""
        exported = module(name).__all__  # type: ignore[attr-defined]
        assert set(exported) == PUBLIC_API[name]
        assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"

    @pytest.mark.parametrize("name", sorted(PUBLIC_API))
    def test_every_exported_name_exists(self, name: str) -> None:
        """Each name in `__all__` is an attribute of its module (a star import works)."""
        namespace: dict[str, object] = {}
        exec(f"from {name} import *", namespace)  # the user's spelling of "everything"
        assert PUBLIC_API[name] <= set(namespace)

    def test_nothing_private_is_exported(self) -> None:
        """No `__all__` lists an underscore name."""
        assert not [n for names in PUBLIC_API.values() for n in names if n.startswith("_")]


class TestReExports:
    def test_the_executors_stay_apart_from_the_coordinator(self) -> None:
        """The executor seam is exported by `agentmesh.executors` only."""
        assert not PUBLIC_API["agentmesh.executors"] & PUBLIC_API["agentmesh.coordinator"]

    @pytest.mark.parametrize(
        ("upper", "lower", "kept_apart"),
        [
            # The run's meter belongs to the run scope, not to a model.
            ("agentmesh.models", "agentmesh.usage", {"UsageMeter"}),
            ("agentmesh.coordinator", "agentmesh.report", set()),
        ],
    )
    def test_a_re_export_is_the_same_object(
        self, upper: str, lower: str, kept_apart: set[str]
    ) -> None:
        """A name a package re-exports from another is that package's object, not a copy."""
        for name in PUBLIC_API[lower] - kept_apart:
            assert getattr(module(upper), name) is getattr(module(lower), name), name


class TestPrivatised:
    @pytest.mark.parametrize(("where", "name"), sorted(PRIVATISED))
    def test_the_old_path_still_imports_with_a_warning(self, where: str, name: str) -> None:
        """A name made private still gives what it gave at the old path, with a
        DeprecationWarning."""
        with pytest.warns(DeprecationWarning, match=f"{where}.{name} is internal"):
            old = getattr(module(where), name)
        expected = PRIVATISED[(where, name)]
        if expected is not PRIVATE_HOME:
            assert old == expected  # the same value (a function: the same object)
            return
        home = old.__module__
        assert any(part.startswith("_") for part in home.split(".")), home
        assert old is getattr(module(home), name)

    @pytest.mark.parametrize(("where", "name"), sorted(PRIVATISED))
    def test_it_is_no_longer_exported(self, where: str, name: str) -> None:
        """A star import of the old module no longer brings the name (and does not warn)."""
        namespace: dict[str, object] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(f"from {where} import *", namespace)
        assert name not in namespace
