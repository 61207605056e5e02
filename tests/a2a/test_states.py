"""Each row of the state -> outcome table in docs/how-to/a2a.md, against a real A2A server,
followed by its stream (`/stream`) and by the blocking send (`/block`)."""

from __future__ import annotations

import pytest

from agentmesh.a2a import A2AAgent
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.retry import RetryPolicy
from agentmesh.task import Task
from tests.a2a.conftest import REMOTE_ENVELOPE, TOKEN, Remote

pytestmark = pytest.mark.parametrize("path", ["stream", "block"])

NO_RETRY = RetryPolicy(max_attempts=1)


def agent(remote: str, path: str, **options: object) -> A2AAgent:
    return A2AAgent(f"{remote}/{path}", name="remote", retry=NO_RETRY, **options)  # type: ignore[arg-type]


async def test_completed_text_artifact_is_the_data(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("text")
    assert isinstance(outcome, Success)
    assert outcome.data == "hello"
    assert not outcome.is_empty


async def test_completed_text_and_data_parts_keep_their_kinds(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("parts")
    assert isinstance(outcome, Success)
    assert outcome.data == ["hello", {"n": 3, "x": [1.5]}]


async def test_completed_without_artifacts_is_an_empty_success(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("empty")
    assert isinstance(outcome, Success)
    assert outcome.is_empty


async def test_topic_and_metadata_travel_with_the_message(remote: str, path: str) -> None:
    task = Task(query="metadata", topic="orders", metadata={"customer": "c-7", "n": 2})
    outcome = await agent(remote, path).run(task)
    assert isinstance(outcome, Success)
    assert outcome.data == {"metadata": {"customer": "c-7", "n": 2, "topic": "orders"}}


async def test_failed_with_a_message_is_other_with_that_message(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("fail")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.OTHER
    assert outcome.error_type == "remote_failed"
    assert "disk full" in outcome.message
    assert "sk-remote" not in outcome.model_dump_json()  # a secret it echoed is masked


async def test_failed_without_a_message_says_so(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("fail-silent")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.OTHER
    assert "without a message" in outcome.message


async def test_failed_with_an_agentmesh_envelope_keeps_it_whole(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("fail-envelope")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.BUSINESS
    assert outcome.error_type == REMOTE_ENVELOPE.error_type
    assert outcome.source == "orders"
    assert outcome.alternative_approaches == ("refund",)
    assert outcome.details is not None
    assert "over A2A" in outcome.details


async def test_rejected_is_business(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("reject")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.BUSINESS
    assert outcome.error_type == "rejected"
    assert outcome.message == "not my kind of task"


async def test_canceled_is_transient_cancelled_and_not_resent(remote: str, path: str) -> None:
    before = Remote.runs["cancel"]
    retrying = RetryPolicy(max_attempts=3, initial_delay=0)
    outcome = await A2AAgent(f"{remote}/{path}", retry=retrying).run("cancel")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.TRANSIENT
    assert outcome.error_type == "cancelled"
    assert Remote.runs["cancel"] == before + 1


async def test_auth_required_is_permission(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("auth")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.PERMISSION
    assert outcome.error_type == "auth_required"
    assert outcome.message == "sign in first"


async def test_input_required_is_a_question_for_a_person(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("input")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.PERMISSION
    assert outcome.error_type == "input_required"
    assert "which year?" in outcome.message
    assert outcome.policy is not None
    assert outcome.policy.action == "escalate"  # a coordinator escalates it, whatever its router
    assert "sk-remote" not in outcome.model_dump_json()  # the question is masked


async def test_artifacts_before_a_failure_are_its_partial_results(remote: str, path: str) -> None:
    outcome = await agent(remote, path).run("partial-fail")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_type == "remote_failed"
    assert outcome.message == "the second half failed"
    assert outcome.partial_results is not None
    assert outcome.partial_results.findings == ("first half",)


async def test_artifacts_over_the_bound_fail_as_too_large(remote: str, path: str) -> None:
    outcome = await agent(remote, path, max_artifact_bytes=1000).run("big")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.OTHER
    assert outcome.error_type == "response_too_large"
    assert not outcome.is_retryable


async def test_a_timeout_after_sending_is_transient_and_not_sent_twice(
    remote: str, path: str
) -> None:
    before = Remote.runs["slow"]
    retrying = RetryPolicy(max_attempts=3, initial_delay=0)
    outcome = await A2AAgent(f"{remote}/{path}", timeout=0.5, retry=retrying).run("slow")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.TRANSIENT
    assert outcome.error_type == "timeout"
    assert not outcome.is_retryable
    assert outcome.details is not None
    assert "not sent twice" in outcome.details
    assert outcome.attempts == 1
    # At most once: on a loaded machine the server may not have started it yet.
    assert Remote.runs["slow"] <= before + 1


async def test_headers_reach_the_remote_and_never_the_envelope(remote: str, path: str) -> None:
    guarded = A2AAgent(f"{remote}/guarded", headers={"Authorization": TOKEN}, retry=NO_RETRY)
    assert isinstance(await guarded.run("text"), Success)
    assert TOKEN not in repr(guarded)
    refused = A2AAgent(
        f"{remote}/guarded", headers={"Authorization": "Bearer wrong-one-0123456789"}
    )
    outcome = await refused.run("text")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_category is ErrorCategory.PERMISSION
    assert outcome.error_type == "authentication_failed"  # a 401, as every provider says
    assert "wrong-one" not in outcome.model_dump_json()


async def test_a_task_given_up_at_the_timeout_is_cancelled_remotely(remote: str, path: str) -> None:
    before = sum(Remote.cancelled.values())
    outcome = await agent(remote, path, timeout=0.5).run("slow")
    assert isinstance(outcome, ErrorEnvelope)
    assert outcome.error_type == "timeout"
    # Streaming gave us the task's id; a blocking send that timed out never did.
    assert sum(Remote.cancelled.values()) == before + (1 if path == "stream" else 0)
