"""OpenAI's model strings through `resolve_model`, and the servers that speak Chat
Completions without being OpenAI: a real call through the SDK to FakeChatCompletionsAPI,
with or without a key, and their errors classified as OpenAI's."""

from __future__ import annotations

import pytest

from agentmesh import ErrorCategory, ErrorEnvelope, Success
from agentmesh.models import OpenAIModel, resolve_model
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import ChatReply, FakeChatCompletionsAPI
from tests.retrying import fast_retry

F = FakeChatCompletionsAPI
TRANSIENT, VALIDATION = ErrorCategory.TRANSIENT, ErrorCategory.VALIDATION


class TestModelStrings:
    async def test_openai_reads_its_key_and_base_url_from_the_environment(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        fake_chat_completions_api.enqueue(F.text("hello from GPT"))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
        monkeypatch.setenv("OPENAI_BASE_URL", fake_chat_completions_api.base_url)
        async with resolve_model("openai:gpt-5-mini") as model:
            assert isinstance(model, OpenAIModel)
            assert model.name == "gpt-5-mini"
            assert model.endpoint == fake_chat_completions_api.base_url
            outcome = await LLMSubagent("a", model).run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello from GPT"
        request = fake_chat_completions_api.requests[0]
        assert request.model == "gpt-5-mini"
        assert request.api_key == "sk-from-the-environment"

    async def test_a_compatible_server_that_needs_no_key_answers_without_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No OPENAI_API_KEY at all: the string still makes a model that calls the server."""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        with FakeChatCompletionsAPI(F.text("Bonjour !"), require_auth=False) as local:
            async with resolve_model(f"openai-compatible:llama3.1@{local.base_url}") as model:
                assert isinstance(model, OpenAIModel)
                assert model.endpoint == local.base_url
                outcome = await LLMSubagent("translator", model).run("hello, in French")
            assert isinstance(outcome, Success)
            assert outcome.data == "Bonjour !"
            assert local.requests[0].model == "llama3.1"
            assert local.requests[0].path == "/v1/chat/completions"

    async def test_a_gateway_gets_its_own_key_and_never_openai_s(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A gateway that wants a key (LiteLLM, OpenRouter) gets OPENAI_COMPATIBLE_API_KEY;
        OpenAI's own key (OPENAI_API_KEY) never goes to a server the string names."""
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-openai-only")
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-gateway")
        with FakeChatCompletionsAPI(F.text("ok"), api_key="sk-gateway") as gateway:
            async with resolve_model(f"openai-compatible:some/model@{gateway.base_url}") as m:
                outcome = await LLMSubagent("a", m).run("hi")
            assert isinstance(outcome, Success)
            assert gateway.requests[0].model == "some/model"
        monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY")
        with FakeChatCompletionsAPI(F.text("ok"), require_auth=False) as local:
            async with resolve_model(f"openai-compatible:m@{local.base_url}") as m:
                await LLMSubagent("a", m).run("hi")
            assert "sk-proj-openai-only" not in str(local.requests[0].headers)


def vllm_error(status: int, message: str, type: str) -> ChatReply:
    """vLLM's error body: the error object at the top level, the status as its code."""
    body = (
        f'{{"object": "error", "message": "{message}", "type": "{type}", '
        f'"param": null, "code": {status}}}'
    )
    return F.garbage(body, status=status, content_type="application/json")


class TestErrors:
    """A compatible server's errors are read as OpenAI's, by their HTTP status when the
    body is the server's own."""

    @pytest.mark.parametrize(
        ("reply", "category", "error_type", "retried"),
        [
            (vllm_error(400, "max_tokens must be at least 1", "BadRequestError"), VALIDATION,
             "invalid_request", False),
            (vllm_error(404, "The model `llama9` does not exist.", "NotFoundError"), VALIDATION,
             "not_found", False),
            (F.error(404, 'model "llama9" not found, try pulling it first', type="api_error"),
             VALIDATION, "not_found", False),
            (F.garbage("Service Unavailable", status=503), TRANSIENT, "unavailable", True),
            (F.error(429, retry_after=1), TRANSIENT, "rate_limited", True),
            (F.garbage("upstream connect error", status=502), TRANSIENT, "server_error", True),
        ],
        ids=["vllm-400", "vllm-404", "ollama-404", "plain-503", "gateway-429", "proxy-502"],
    )  # fmt: skip
    async def test_each_is_the_envelope_openai_s_would_be(
        self,
        reply: ChatReply,
        category: ErrorCategory,
        error_type: str,
        retried: bool,
    ) -> None:
        with FakeChatCompletionsAPI(handler=lambda request: reply, require_auth=False) as local:
            async with OpenAIModel("llama3.1", api_key="unused", base_url=local.base_url) as m:
                outcome = await LLMSubagent("a", m, retry=fast_retry(attempts=2)).run("hi")
            assert isinstance(outcome, ErrorEnvelope)
            assert (outcome.error_category, outcome.error_type) == (category, error_type)
            assert local.request_count == (2 if retried else 1)
