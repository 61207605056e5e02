"""The SDK's `MCPError` in the classifier (user code may call the SDK itself); lazy imports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp import MCPError

from agentmesh import ErrorCategory, ErrorEnvelope, classify


def envelope(exc: BaseException) -> ErrorEnvelope:
    return classify(exc, source="tool", attempted_query="q", attempts=1)


class TestMCPErrorCodes:
    @pytest.mark.parametrize(
        ("code", "category", "error_type", "retryable"),
        [
            (-32000, ErrorCategory.TRANSIENT, "unavailable", True),
            (-32001, ErrorCategory.TRANSIENT, "timeout", True),
            (-32602, ErrorCategory.VALIDATION, "invalid_params", False),
            (-32603, ErrorCategory.OTHER, "mcp_error", False),
            (-32601, ErrorCategory.OTHER, "mcp_error", False),
        ],
    )
    def test_each_json_rpc_code_has_its_meaning(
        self, code: int, category: ErrorCategory, error_type: str, retryable: bool
    ) -> None:
        """Decided by the code, never by the message text; the code is in details."""
        result = envelope(MCPError(code, "whatever the server says"))
        assert result.error_category is category
        assert result.error_type == error_type
        assert result.is_retryable is retryable
        assert f"JSON-RPC error {code}" in result.details

    def test_nested_anyio_groups_classify_to_the_leaf(self) -> None:
        """ExceptionGroup[ExceptionGroup[MCPError]] is the MCPError's meaning, not `other`."""
        group = ExceptionGroup(
            "unhandled errors in a TaskGroup",
            [ExceptionGroup("inner", [MCPError(-32000, "Connection closed")])],
        )
        result = envelope(group)
        assert result.error_category is ErrorCategory.TRANSIENT
        assert result.error_type == "unavailable"
        assert result.is_retryable


class TestLazyImports:
    def test_importing_agentmesh_does_not_import_the_sdk(self) -> None:
        """`import agentmesh` costs none of the SDK (nor classifying an ordinary error)."""
        code = (
            "import sys, agentmesh\n"
            "agentmesh.classify(OSError(), source='s', attempted_query='q', attempts=1)\n"
            "print(sorted(m for m in ('mcp', 'anyio', 'httpx2', 'jsonschema') if m in sys.modules))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert done.stdout.strip() == "[]"
