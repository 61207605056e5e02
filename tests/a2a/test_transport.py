"""Failures of the exchange itself: nothing listening, a card pointing elsewhere, options."""

from __future__ import annotations

import pytest

from agentmesh.a2a import A2AAgent
from agentmesh.envelope import ErrorCategory, ErrorEnvelope
from agentmesh.errors import UsageError
from agentmesh.retry import RetryPolicy
from tests.a2a.conftest import free_port


async def test_nothing_listening_is_transient_and_retried() -> None:
    retrying = RetryPolicy(max_attempts=2, initial_delay=0)
    agent = A2AAgent(f"http://127.0.0.1:{free_port()}", name="gone", retry=retrying)
    outcome = await agent.run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.TRANSIENT
    assert outcome.error_type == "unavailable"
    assert outcome.attempts == 2  # never sent: safe to try again


async def test_a_card_pointing_to_another_host_is_not_followed(remote: str) -> None:
    agent = A2AAgent(f"{remote}/elsewhere", retry=RetryPolicy(max_attempts=1))
    outcome = await agent.run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.PERMISSION
    assert outcome.error_type == "card_host_not_allowed"


def test_the_url_must_be_http() -> None:
    with pytest.raises(UsageError, match="http"):
        A2AAgent("ftp://example.org")


def test_import_agentmesh_imports_no_a2a() -> None:
    import subprocess
    import sys

    code = "import sys, agentmesh; print(any(m.split('.')[0] == 'a2a' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
