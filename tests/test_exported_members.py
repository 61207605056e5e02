"""The public surface is exactly what we mean to export."""

import importlib

import agentmesh
import agentmesh.approvals
import agentmesh.checkpoints
import agentmesh.coordinator
import agentmesh.events
import agentmesh.executors
import agentmesh.policies
import agentmesh.report
import agentmesh.subagents
import agentmesh.testing
import agentmesh.usage


def test_agentmesh_exports_exactly_the_public_api() -> None:
    """Nothing private leaks into `agentmesh.__all__`, and every name there exists."""
    assert set(agentmesh.__all__) == {
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
        "PolicyVerdict",
        "Report",
        "RetryBudget",
        "RetryPolicy",
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
    }
    for module in (
        agentmesh,
        agentmesh.checkpoints,
        agentmesh.coordinator,
        agentmesh.approvals,
        agentmesh.events,
        agentmesh.executors,
        agentmesh.policies,
        agentmesh.report,
        agentmesh.subagents,
        agentmesh.testing,
        agentmesh.usage,
    ):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_checkpoints_exports_exactly_the_stores() -> None:
    """`agentmesh.checkpoints` exports the store protocol, the stores and their record."""
    assert set(agentmesh.checkpoints.__all__) == {
        "DEFAULT_PATH",
        "SCHEMA_VERSION",
        "Checkpoint",
        "CheckpointError",
        "CheckpointStore",
        "MemoryStore",
        "PostgresStore",
        "SQLiteStore",
    }


def test_executors_exports_exactly_the_executors() -> None:
    """`agentmesh.executors` exports the seam (`Executor`, `Dispatch`) and both executors."""
    assert set(agentmesh.executors.__all__) == {
        "Dispatch",
        "Executor",
        "LocalExecutor",
        "RayExecutor",
    }
    assert not {"Dispatch", "Executor", "LocalExecutor"} & set(agentmesh.coordinator.__all__)


def test_approvals_exports_the_answers_and_the_pending_approval() -> None:
    """`agentmesh.approvals` exports a person's answers and what they answer."""
    assert set(agentmesh.approvals.__all__) == {
        "AnsweredApproval",
        "Approval",
        "ApprovalKind",
        "Approve",
        "Edit",
        "PendingApproval",
        "Reject",
    }


def test_events_exports_exactly_the_events_and_the_stream() -> None:
    """`agentmesh.events` exports the event classes, their reader and the stream."""
    assert set(agentmesh.events.__all__) == {
        "DEFAULT_BUFFER",
        "AttemptFailed",
        "ApprovalApplied",
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
    }


def test_report_exports_exactly_the_report_and_the_routes() -> None:
    """`agentmesh.report` exports the report, its records and the coordinator's routes."""
    assert set(agentmesh.report.__all__) == {
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
    }


def test_mcp_exports_the_server_and_its_tools() -> None:
    """`agentmesh.mcp` exports `MCPServer` and `MCPTool` (and `serve`, the server side)."""
    import agentmesh.mcp

    assert set(agentmesh.mcp.__all__) == {"MCPServer", "MCPTool", "serve"}
    for name in agentmesh.mcp.__all__:
        assert hasattr(agentmesh.mcp, name), f"agentmesh.mcp.{name}"


def test_usage_exports_the_records_limits_and_prices() -> None:
    """`agentmesh.usage` exports usage records, limits and prices; `models` re-exports them."""
    import agentmesh.models

    assert set(agentmesh.usage.__all__) == {
        "DEFAULT_PRICES",
        "ModelFailover",
        "ModelPrice",
        "ModelUsage",
        "PriceTable",
        "UsageLimits",
        "UsageSummary",
    }
    for name in agentmesh.usage.__all__:
        assert getattr(agentmesh.models, name) is getattr(agentmesh.usage, name), name
    assert set(agentmesh.usage.__all__) <= set(dir(agentmesh.usage))


def test_classify_exports_the_classifier_and_strict_mode() -> None:
    """`agentmesh.classify` exports the classifier, its default and the strict switch."""
    # `agentmesh.classify` the attribute is the function; the module is imported by name.
    module = importlib.import_module("agentmesh.classify")
    assert set(module.__all__) == {
        "PROGRAMMING_ERRORS",
        "Classifier",
        "classify",
        "default_classifier",
        "is_strict",
        "set_strict",
        "strict",
    }
    for name in module.__all__:
        assert hasattr(module, name), f"agentmesh.classify.{name}"
