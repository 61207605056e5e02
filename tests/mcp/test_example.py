"""`examples/mcp_tools.py` runs offline and shows each outcome it promises."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.mcp.conftest import REPO


class TestExample:
    def test_the_mcp_example_runs_and_reports_each_outcome(self) -> None:
        """A success, the server's isError, a schema refusal and a policy denial, in order."""
        done = subprocess.run(
            [sys.executable, str(REPO / "examples" / "mcp_tools.py")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            # This checkout's agentmesh, whatever is installed.
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        out = done.stdout
        assert "get_current_time (idempotent): ['timezone']" in out
        assert '"timezone": "Europe/Amsterdam"' in out
        assert '"errorType": "tool_error"' in out
        assert '"errorType": "invalid_input"' in out
        assert '"errorType": "policy_blocked"' in out
