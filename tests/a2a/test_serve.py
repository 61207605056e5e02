"""`agentmesh.a2a.serve` against the A2A SDK's own client, on loopback: each row of the
outcome -> task state table in docs/how-to/a2a.md, the card, the policies, a person's
answer given over A2A, and the bearer token."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import CancelTaskRequest, SendMessageRequest, TaskState

from agentmesh.a2a import A2AAgent, serve
from agentmesh.approvals import Edit
from agentmesh.checkpoints import MemoryStore
from agentmesh.coordinator import Coordinator
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.errors import UsageError
from agentmesh.report import CoverageStatus
from agentmesh.retry import RetryPolicy
from agentmesh.task import Task
from tests.a2a import served
from tests.a2a.served import TOKEN, Exchange, apps, message, running, sdk_send

DESK = {"skill": "desk"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running(apps) as url:
        yield url


async def ask(base: str, query: str, *, streaming: bool = True, **metadata: object) -> Exchange:
    said = message(query, skill=metadata.pop("skill", "desk"), **metadata)
    return await sdk_send(f"{base}/agents", said, streaming=streaming)


def envelope_of(exchange: Exchange) -> ErrorEnvelope:
    [wire] = [part for part in exchange.data() if isinstance(part, dict) and part.get("isError")]
    return ErrorEnvelope.model_validate(wire)


class TestCard:
    async def test_the_skills_are_the_subagents(self, base: str) -> None:
        """The card names each subagent as a skill, with its description, and streams."""
        async with httpx.AsyncClient() as http:
            card = (await http.get(f"{base}/agents/.well-known/agent-card.json")).json()
        skills = {skill["id"]: skill["description"] for skill in card["skills"]}
        assert skills == {
            "desk": "Ends each task the way its query says.",
            "refunds": "Refunds an order, or wipes a table when asked to.",
        }
        assert card["capabilities"]["streaming"] is True
        assert card["supportedInterfaces"][0]["url"] == f"{base}/agents/"
        assert "securitySchemes" not in card

    async def test_a_coordinator_is_one_skill(self, base: str) -> None:
        """A served coordinator is one skill, named as the server is."""
        async with httpx.AsyncClient() as http:
            card = (await http.get(f"{base}/hub/.well-known/agent-card.json")).json()
        assert [skill["id"] for skill in card["skills"]] == ["hub"]


@pytest.mark.parametrize("streaming", [True, False])
class TestStates:
    async def test_text_is_a_completed_task_with_a_text_artifact(
        self, base: str, streaming: bool
    ) -> None:
        """A text result is one artifact of one text part; the success's fields are its metadata."""
        done = await ask(base, "text", streaming=streaming)
        assert done.state == "TASK_STATE_COMPLETED"
        [artifact] = done.task.artifacts
        assert [part.text for part in artifact.parts] == ["hello"]
        assert artifact.metadata["agentmesh"]["source"] == "desk"

    async def test_structured_data_is_a_data_part(self, base: str, streaming: bool) -> None:
        """Structured data is one data part holding it whole."""
        done = await ask(base, "data", streaming=streaming)
        assert done.state == "TASK_STATE_COMPLETED"
        [artifact] = done.task.artifacts
        assert get_data_parts(list(artifact.parts)) == [{"n": 3, "items": [1, 2.5], "ok": True}]

    async def test_an_empty_success_completes_with_no_artifact(
        self, base: str, streaming: bool
    ) -> None:
        """Searched and found nothing: completed, not failed, and no artifact."""
        done = await ask(base, "empty", streaming=streaming)
        assert done.state == "TASK_STATE_COMPLETED"
        assert list(done.task.artifacts) == []

    async def test_a_business_envelope_is_rejected_with_the_envelope(
        self, base: str, streaming: bool
    ) -> None:
        """A business failure is `rejected`; the envelope's camelCase JSON travels whole."""
        done = await ask(base, "business", streaming=streaming)
        assert done.state == "TASK_STATE_REJECTED"
        envelope = envelope_of(done)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.BUSINESS,
            "order_shipped",
        )
        assert envelope.user_message == "sorry"
        text = done.task.status.message.parts[0].text
        assert text.startswith("desk failed (business/order_shipped")

    async def test_another_envelope_is_failed_with_its_partial_results(
        self, base: str, streaming: bool
    ) -> None:
        """Any other failure is `failed`, its partial results in the envelope."""
        done = await ask(base, "partial", streaming=streaming)
        assert done.state == "TASK_STATE_FAILED"
        envelope = envelope_of(done)
        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.partial_results is not None
        assert envelope.partial_results.findings == ({"page": 1},)

    async def test_topic_and_metadata_become_the_task_s(self, base: str, streaming: bool) -> None:
        """The message's `topic` and metadata reach the subagent's task (`skill` does not)."""
        done = await ask(base, "metadata", streaming=streaming, topic="orders", customer="c-7", n=2)
        [artifact] = done.task.artifacts
        [data] = get_data_parts(list(artifact.parts))
        assert data == {"topic": "orders", "metadata": {"customer": "c-7", "n": 2}}

    async def test_a_message_naming_no_skill_of_several_is_a_validation_failure(
        self, base: str, streaming: bool
    ) -> None:
        """With several subagents, a message must name one: else a validation envelope."""
        done = await sdk_send(f"{base}/agents", message("text"), streaming=streaming)
        assert done.state == "TASK_STATE_FAILED"
        envelope = envelope_of(done)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.VALIDATION,
            "unknown_skill",
        )
        assert envelope.alternative_approaches == ("desk", "refunds")

    async def test_a_message_without_text_is_a_validation_failure(
        self, base: str, streaming: bool
    ) -> None:
        """The query is the message's text: none is a validation envelope, nothing runs."""
        done = await ask(base, " ", streaming=streaming)
        assert done.state == "TASK_STATE_FAILED"
        assert envelope_of(done).error_type == "empty_query"


class TestCancel:
    async def test_a_cancelled_task_cancels_its_run(self, base: str) -> None:
        """`tasks/cancel` ends the task `canceled` and the subagent's run with it."""
        async with httpx.AsyncClient(timeout=10) as http:
            card = await A2ACardResolver(http, f"{base}/agents").get_agent_card()
            client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
            request = SendMessageRequest(message=message("slow", skill="desk"))
            stream = client.send_message(request)
            first = await anext(stream)
            ended = await client.cancel_task(CancelTaskRequest(id=first.task.id))
            await stream.aclose()
        assert TaskState.Name(ended.status.state) == "TASK_STATE_CANCELED"
        for _ in range(100):  # the run's cancellation lands a moment after the answer
            if served.STOPPED:
                break
            await asyncio.sleep(0.01)
        assert served.STOPPED == ["slow"]


class TestProgress:
    async def test_the_run_s_events_stream_as_working_updates(self, base: str) -> None:
        """Progress streams as `working` updates, one per event, before the end."""
        done = await ask(base, "partial")
        updates = done.updates()
        assert updates[0] == "started: 'partial'"
        assert "PartialRecorded: desk found 1 so far" in updates
        assert any(line.startswith("AttemptFailed: desk attempt 1") for line in updates)


class TestPolicies:
    async def test_a_forbidden_call_is_refused_over_a2a(self, base: str) -> None:
        """The server's policies hold as in-process: the call is not made, the task fails."""
        done = await ask(base, "wipe users", skill="refunds")
        assert done.state == "TASK_STATE_FAILED"
        envelope = envelope_of(done)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.PERMISSION,
            "policy_blocked",
        )
        assert envelope.policy is not None
        assert envelope.policy.policy == "no_wipe"
        assert served.WIPED == []


class TestApprovals:
    async def refund(self, base: str, order: str, amount: int = 500) -> Exchange:
        return await ask(base, "refund", skill="refunds", order=order, amount=amount)

    async def test_a_pending_approval_is_input_required_and_an_answer_resumes(
        self, base: str
    ) -> None:
        """A call a policy asks about waits (`input-required`); "approve" on the task makes it."""
        asked = await self.refund(base, "A-1")
        assert asked.state == "TASK_STATE_INPUT_REQUIRED"
        [question] = asked.data()[0]["pendingApprovals"]
        assert (question["tool"], question["arguments"]["order"]) == ("refund", "A-1")
        assert served.REFUNDS["A-1"] == 0
        done = await sdk_send(f"{base}/agents", message("approve", task=asked.task))
        assert done.state == "TASK_STATE_COMPLETED"
        assert [part.text for part in done.task.artifacts[0].parts] == ["refunded 500 on A-1"]
        assert served.REFUNDS["A-1"] == 1

    async def test_a_rejection_ends_the_task_without_the_call(self, base: str) -> None:
        """ "reject: <reason>" ends the task as the person's rejection; nothing is refunded."""
        asked = await self.refund(base, "B-2")
        done = await sdk_send(f"{base}/agents", message("reject: too much", task=asked.task))
        assert done.state == "TASK_STATE_FAILED"
        envelope = envelope_of(done)
        assert envelope.error_type == "rejected"
        assert "too much" in envelope.message
        assert served.REFUNDS["B-2"] == 0

    async def test_an_edit_makes_the_call_with_the_new_arguments(self, base: str) -> None:
        """A data part `{"action": "edit", "arguments": ...}` makes the call as edited."""
        asked = await self.refund(base, "C-3")
        [question] = asked.data()[0]["pendingApprovals"]
        edit = message("edit", task=asked.task)
        edit.parts.add().data.struct_value.update(
            {"approvalId": question["id"], "action": "edit", "arguments": {"amount": 90}}
        )
        done = await sdk_send(f"{base}/agents", edit)
        assert done.state == "TASK_STATE_COMPLETED"
        assert [part.text for part in done.task.artifacts[0].parts] == ["refunded 90 on C-3"]

    async def test_an_answer_that_does_not_fit_asks_again(self, base: str) -> None:
        """An answer that is not one keeps the task waiting, and says why."""
        asked = await self.refund(base, "D-4")
        again = await sdk_send(f"{base}/agents", message("maybe later", task=asked.task))
        assert again.state == "TASK_STATE_INPUT_REQUIRED"
        assert again.task.status.message.parts[0].text.startswith("The answer was not taken")
        assert served.REFUNDS["D-4"] == 0

    async def test_two_answers_at_once_through_two_replicas_make_the_call_once(
        self, base: str
    ) -> None:
        """Two clients approve at once, each through another server on the same stores:
        the call is made once, and no answer ends the task otherwise."""
        asked = await sdk_send(f"{base}/r1", message("refund", order="E-5", amount=500))
        assert asked.state == "TASK_STATE_INPUT_REQUIRED"
        both = await asyncio.gather(
            sdk_send(f"{base}/r1", message("approve", task=asked.task, by="ann")),
            sdk_send(f"{base}/r2", message("approve", task=asked.task, by="bob")),
            return_exceptions=True,
        )
        assert served.REFUNDS["E-5"] == 1
        for one in both:
            # One that comes once the task is over is refused by the SDK: nothing to answer.
            assert isinstance(one, Exchange) or "terminal state" in str(one)
        assert any(
            isinstance(one, Exchange) and one.state == "TASK_STATE_COMPLETED" for one in both
        )

    async def test_a_coordinator_s_question_is_answered_the_same_way(self, base: str) -> None:
        """A coordinator's run waits too; answered, it resumes and its report is the artifact."""
        asked = await sdk_send(f"{base}/hub", message("refund", order="F-6", amount=500))
        assert asked.state == "TASK_STATE_INPUT_REQUIRED"
        done = await sdk_send(f"{base}/hub", message("approve", task=asked.task))
        assert done.state == "TASK_STATE_COMPLETED"
        markdown, report = done.task.artifacts[0].parts
        assert "refunded 500 on F-6" in markdown.text
        assert get_data_parts([report])[0]["coverageRatio"] == 1
        assert served.REFUNDS["F-6"] == 1

    async def test_a_coordinator_task_holding_a_secret_resumes_too(self, base: str) -> None:
        """The store keeps the task masked; the resume runs the task as the client sent it."""
        secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"
        said = message("refund", order="S-8", amount=500, api_key=secret)
        asked = await sdk_send(f"{base}/hub", said)
        done = await sdk_send(f"{base}/hub", message("approve", task=asked.task))
        assert done.state == "TASK_STATE_COMPLETED"
        assert served.REFUNDS["S-8"] == 1
        assert secret not in str(done.task.artifacts)


@pytest.mark.parametrize("streaming", [True, False])
class TestAgentmeshToAgentmesh:
    @pytest.mark.parametrize("query", ["text", "data", "empty"])
    async def test_a_success_is_as_a_direct_call(
        self, base: str, streaming: bool, query: str
    ) -> None:
        """Our client against our server: the same data, empty stays empty."""
        direct = await served.desk.run(query)
        remote = await self.remote(base, streaming).run(Task(query=query, metadata=DESK))
        assert isinstance(direct, Success)
        assert isinstance(remote, Success)
        assert (remote.data, remote.is_empty) == (direct.data, direct.is_empty)

    @pytest.mark.parametrize("query", ["partial", "business"])
    async def test_an_envelope_is_as_a_direct_call(
        self, base: str, streaming: bool, query: str
    ) -> None:
        """A failure crosses whole, partial results and all; `details` adds "over A2A"."""
        direct = await served.desk.run(query)
        remote = await self.remote(base, streaming).run(Task(query=query, metadata=DESK))
        assert isinstance(direct, ErrorEnvelope)
        assert isinstance(remote, ErrorEnvelope)
        assert remote.model_dump(exclude={"details"}) == direct.model_dump(exclude={"details"})
        assert remote.details is not None
        assert remote.details.startswith("from desk over A2A")

    async def test_a_person_answers_a_remote_agentmesh_question_through_our_coordinator(
        self, base: str, streaming: bool
    ) -> None:
        """Both halves at once: the remote run's approval is our pending approval; the
        person's answer goes back to the same remote task, which makes its call once."""
        order = f"M-{streaming}"
        remote = self.remote(base, streaming)
        coordinator = Coordinator([remote], store=MemoryStore())
        task = Task(query="refund", metadata={"skill": "refunds", "order": order, "amount": 500})
        first = await coordinator.run([task], run_id=f"mesh-{streaming}")
        [pending] = first.pending_approvals
        assert "refund" in pending.reason
        assert served.REFUNDS[order] == 0
        done = await coordinator.resume(
            f"mesh-{streaming}", approvals={pending.id: Edit(query="approve")}
        )
        [entry] = done.coverage
        assert entry.status is CoverageStatus.COVERED
        assert [finding.content for finding in done.findings] == [f"refunded 500 on {order}"]
        assert served.REFUNDS[order] == 1
        again = await coordinator.resume(f"mesh-{streaming}")
        assert not again.pending_approvals
        assert served.REFUNDS[order] == 1

    @staticmethod
    def remote(base: str, streaming: bool) -> A2AAgent:
        return A2AAgent(f"{base}/agents", retry=RetryPolicy.never(), streaming=streaming)


class TestToken:
    async def test_without_the_token_a_request_is_refused(self, base: str) -> None:
        """No token, or a wrong one: 401, which our client reads as permission."""
        for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}):
            agent = A2AAgent(f"{base}/guarded", headers=headers, retry=RetryPolicy.never())
            outcome = await agent.run("text")
            assert isinstance(outcome, ErrorEnvelope)
            assert outcome.error_type == "authentication_failed"

    async def test_with_the_token_it_is_served(self, base: str) -> None:
        """The right bearer token is served; the card, open to all, says one is needed."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        outcome = await A2AAgent(f"{base}/guarded", headers=headers).run("text")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello"
        async with httpx.AsyncClient() as http:
            card = (await http.get(f"{base}/guarded/.well-known/agent-card.json")).json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"


class TestMisuse:
    def test_serve_checks_its_arguments(self) -> None:
        """Bad arguments fail at `serve`, naming what is wrong."""
        with pytest.raises(UsageError, match="at least one"):
            serve([])
        with pytest.raises(UsageError, match="two subagents"):
            serve([served.desk, served.desk])
        with pytest.raises(UsageError, match="16 characters"):
            serve(served.desk, token="short")
        with pytest.raises(UsageError, match="url"):
            serve(served.desk, url="ftp://example.org")
        with pytest.raises(UsageError, match="give it to the Coordinator"):
            serve(Coordinator([served.desk]), timeout=3)
