"""Failures of the exchange itself: nothing listening, a card pointing elsewhere, options."""

from __future__ import annotations

import pytest

from agentmesh.a2a import A2AAgent
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.errors import UsageError
from agentmesh.retry import RetryPolicy
from tests.a2a.conftest import Remote, free_port


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


def test_the_subagent_options_are_typed_keywords() -> None:
    import inspect

    from agentmesh.subagents import SubagentKwargs

    parameters = inspect.signature(A2AAgent).parameters
    assert set(SubagentKwargs.__annotations__) <= set(parameters)
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    with pytest.raises(UsageError, match="retri"):
        A2AAgent("http://127.0.0.1:1", retri=3)  # type: ignore[call-arg]


def test_the_url_must_be_http() -> None:
    with pytest.raises(UsageError, match="http"):
        A2AAgent("ftp://example.org")


def test_import_agentmesh_imports_no_a2a() -> None:
    import subprocess
    import sys

    code = "import sys, agentmesh; print(any(m.split('.')[0] == 'a2a' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_dropped_stream_is_followed_by_task_id_not_resent(remote: str) -> None:
    before = Remote.runs["drop"]
    retrying = RetryPolicy(max_attempts=3, initial_delay=0)
    agent = A2AAgent(f"{remote}/dropping", retry=retrying, poll_interval=0.1)
    outcome = await agent.run("drop")
    assert isinstance(outcome, Success)
    assert outcome.data == "after the drop"
    assert outcome.attempts == 1
    assert Remote.runs["drop"] == before + 1


async def test_a_dropped_stream_that_ends_failed_keeps_what_it_handed_back(remote: str) -> None:
    before = Remote.runs["partial-drop"]
    retrying = RetryPolicy(max_attempts=3, initial_delay=0)
    agent = A2AAgent(f"{remote}/dropping", retry=retrying, poll_interval=0.1)
    outcome = await agent.run("partial-drop")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.message == "lost the rest"
    assert outcome.partial_results is not None
    assert outcome.partial_results.findings == ({"rows": 2},)
    assert Remote.runs["partial-drop"] == before + 1


async def test_a_429_s_retry_after_is_the_envelope_s(remote: str) -> None:
    agent = A2AAgent(f"{remote}/status-429", retry=RetryPolicy(max_attempts=1))
    outcome = await agent.run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert (outcome.error_category, outcome.error_type) == (ErrorCategory.TRANSIENT, "rate_limited")
    assert outcome.retry_after == 7
    assert outcome.is_retryable  # refused before acting


async def test_a_500_to_the_message_may_have_acted_so_is_not_retried(remote: str) -> None:
    retrying = RetryPolicy(max_attempts=3, initial_delay=0)
    outcome = await A2AAgent(f"{remote}/status-500", retry=retrying).run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.TRANSIENT
    assert outcome.error_type == "unavailable"
    assert not outcome.is_retryable
    assert outcome.attempts == 1


async def test_a_503_to_the_message_was_refused_before_acting_so_is_retried(remote: str) -> None:
    retrying = RetryPolicy(max_attempts=2, initial_delay=0)
    outcome = await A2AAgent(f"{remote}/status-503", retry=retrying).run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.TRANSIENT
    assert outcome.is_retryable
    assert outcome.attempts == 2


def test_the_classifier_reads_the_sdk_errors_a_user_s_own_code_raises() -> None:
    from a2a.client.errors import A2AClientTimeoutError
    from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

    from agentmesh.classify import default_classifier

    timeout = default_classifier.to_agent_error(A2AClientTimeoutError("Client Request timed out"))
    assert (timeout.category, timeout.error_type) == (ErrorCategory.TRANSIENT, "timeout")
    assert default_classifier.may_have_taken_effect(A2AClientTimeoutError("timed out"))
    invalid = default_classifier.to_agent_error(InvalidParamsError("no such field"))
    assert invalid.category is ErrorCategory.VALIDATION
    missing = default_classifier.to_agent_error(TaskNotFoundError("task t-1"))
    assert (missing.category, missing.error_type) == (ErrorCategory.OTHER, "a2a_error")
    assert not default_classifier.may_have_taken_effect(TaskNotFoundError("task t-1"))


def test_once_the_remote_told_its_task_no_failure_is_retried_locally() -> None:
    """Polling a task whose stream dropped cannot connect: a retry would resend the task."""
    import httpx

    from agentmesh.a2a._errors import exchange_error
    from agentmesh.classify import default_classifier

    refused = httpx.ConnectError("connection refused")
    before = exchange_error(refused, sent=True, delivered=False, classifier=default_classifier)
    assert before.retryable  # never reached the remote agent: safe to send
    after = exchange_error(refused, sent=True, delivered=True, classifier=default_classifier)
    assert after.category is ErrorCategory.TRANSIENT
    assert not after.retryable
    assert after.details is not None
    assert "not sent twice" in after.details
