"""`AnthropicModel`: Claude through the official `anthropic` SDK, with one owner of retries."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pydantic

from agentmesh._numbers import number
from agentmesh._tracing import chat_span, record_response
from agentmesh.errors import UsageError
from agentmesh.models._base import ModelResponse
from agentmesh.models._caching import with_cache_breakpoints
from agentmesh.models._rates import report_headers
from agentmesh.models._sdk_model import SdkModel

if TYPE_CHECKING:
    import anthropic

    # Claude through Anthropic's API, Amazon Bedrock or Google Vertex AI: one Messages API.
    AnthropicClient: TypeAlias = (
        anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex
    )

__all__ = ["MODEL_ENV", "AnthropicModel", "claude_on"]

MODEL_ENV = "AGENTMESH_MODEL"
"""The environment variable `AnthropicModel` reads its model name from when given none."""
# Where the SDK sends requests when neither `base_url` nor ANTHROPIC_BASE_URL says.
_DEFAULT_BASE_URL = "https://api.anthropic.com"
_PROVIDER = "anthropic"  # gen_ai.provider.name, as the GenAI conventions spell it
_BEDROCK = "aws.bedrock"
_VERTEX = "gcp.vertex_ai"


class AnthropicModel(SdkModel["AnthropicClient"]):
    """Claude via `anthropic.AsyncAnthropic`.

    The SDK's own retries are off for every call (`max_retries=0`): agentmesh's
    `RetryPolicy` owns each retry once and honours `retry-after`, where the SDK's two
    default retries nested inside ours would multiply the load. Every call has a total
    deadline (`timeout`); the SDK's own timeout bounds each read, not the whole call.

    Nothing touches the network or the environment's key until the first call.

    Args:
        model: the model name; defaults to the `AGENTMESH_MODEL` environment variable.
        client: an `AsyncAnthropic` to use (its owner closes it), or the SDK's
            `AsyncAnthropicBedrock` / `AsyncAnthropicVertex` for Claude on Amazon Bedrock
            or Google Vertex AI (`model` is then the platform's model id); by default
            one is built at the first call from `api_key` / `base_url` or the
            environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`) and closed by
            `aclose()`.
        timeout: seconds for one whole call.
        stream: use the streaming endpoint (long outputs; mid-stream errors surface).
        prompt_caching: mark the system prompt, the tool definitions and the
            conversation so far with `cache_control` (ephemeral), so a retried call
            and the next turn of a tool loop read that prefix from the prompt cache.
            The first call writes it at a premium; `False` sends no marker.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        client: AnthropicClient | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool = False,
        prompt_caching: bool = True,
    ) -> None:
        name = model or os.environ.get(MODEL_ENV)
        if not name:
            raise UsageError(f"AnthropicModel needs a model name: pass model= or set {MODEL_ENV}")
        timeout = number("AnthropicModel(timeout=)", timeout, above=True, unit="seconds")
        self.name = name
        self.timeout = timeout
        self.stream = stream
        self.prompt_caching = prompt_caching
        self._client = client
        self._owns_client = client is None
        # Set by `claude_on`: the platform whose client this model builds, and its URL.
        self._platform: tuple[str, str] | None = None
        self._provider = _provider_of(client)
        self._api_key = api_key
        self._base_url = base_url

    @property
    def endpoint(self) -> str:
        """The base URL this model calls: its client's, or the one its client will have."""
        if self._client is not None:
            return str(self._client.base_url).rstrip("/")
        if self._platform is not None:
            return self._platform[1]
        return (self._base_url or os.environ.get("ANTHROPIC_BASE_URL") or _DEFAULT_BASE_URL).rstrip(
            "/"
        )

    @property
    def provider(self) -> str:
        """Who serves the model, as the GenAI conventions name it: `anthropic`,
        `aws.bedrock` or `gcp.vertex_ai`."""
        return self._provider

    def _sdk(self) -> AnthropicClient:
        # The SDK costs about a second to import: only a model that is used pays for it.
        import anthropic

        if self._client is None and self._platform is not None:
            self._client = _platform_client(self._platform[0])  # again, after aclose()
        elif self._client is None:
            self._client = anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self._base_url)
        return self._client.with_options(max_retries=0, timeout=self.timeout)

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": max_tokens,
            "messages": list(messages),
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = list(tools)
        if tool_choice is not None:
            params["tool_choice"] = dict(tool_choice)
        if self.prompt_caching:
            params = with_cache_breakpoints(params)
        provider = self.provider
        with chat_span(provider=provider, model=self.name, max_tokens=max_tokens) as current:
            response = await self._send(params)
            record_response(current, response, provider=provider, model=self.name)
        return response

    async def _send(self, params: dict[str, Any]) -> ModelResponse:
        """One request, its answer checked: a malformed one is a transient failure."""
        import anthropic

        client = self._sdk()
        try:
            async with asyncio.timeout(self.timeout):
                if self.stream:
                    async with client.messages.stream(**params) as events:
                        report_headers(events.response.headers)
                        message: object = await events.get_final_message()
                else:
                    # The raw response first: its rate-limit headers feed the run's gate.
                    raw = await client.messages.with_raw_response.create(**params)
                    report_headers(raw.headers)
                    message = await raw.parse()
        except anthropic.APIStatusError as exc:
            report_headers(exc.response.headers)  # a 429's say when the limits return
            raise
        except json.JSONDecodeError as exc:
            raise self._unparseable(f"the body is not valid JSON: {exc}") from exc
        except AssertionError as exc:
            # The SDK's stream accumulator asserts on a body that is not a well-formed
            # event stream (a proxy's HTML page, an event cut in half).
            raise self._unparseable(f"the event stream is malformed: {exc!r}") from exc
        from anthropic.types import Message

        if not isinstance(message, Message):
            # The SDK hands back a bare string for a 200 that is not JSON (a proxy's HTML
            # page, say): that is not an answer.
            raise self._unparseable(f"expected a message, got {type(message).__name__}")
        if message.stop_reason is None:
            # A stream whose connection dropped before message_stop: an unfinished answer.
            raise self._unparseable("the answer ended before the model finished it")
        try:
            # warnings=False: a block type this SDK version does not know is kept as-is.
            return ModelResponse.model_validate(message.model_dump(mode="json", warnings=False))
        except pydantic.ValidationError as exc:
            raise self._unparseable(f"{exc.error_count()} problem(s): {exc}") from exc

    async def _close_client(self, client: AnthropicClient) -> None:
        await client.close()

    def __repr__(self) -> str:
        return f"AnthropicModel({self.name!r}, timeout={self.timeout}, stream={self.stream})"


def claude_on(platform: str, name: str) -> AnthropicModel:
    """Claude on `platform` ("bedrock" or "vertex"): a model that owns its SDK client.

    The client takes its region, project and credentials from the environment, as the
    SDK reads them (`AWS_REGION`, the AWS credential chain or `AWS_BEARER_TOKEN_BEDROCK`;
    `CLOUD_ML_REGION`, `ANTHROPIC_VERTEX_PROJECT_ID` and Google's default credentials);
    building it touches no network. Raises `UsageError` when the environment says too
    little (no region, no Vertex project) for the SDK to build one.
    """
    client = _platform_client(platform)
    model = AnthropicModel(name, client=client)
    # Built here, for this model alone: aclose() closes it, the next call builds another.
    model._owns_client = True
    model._platform = (platform, str(client.base_url).rstrip("/"))
    return model


def _platform_client(platform: str) -> AnthropicClient:
    import anthropic

    if platform == "vertex" and not os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID"):
        # The SDK builds the URL, project included, before it loads any credentials.
        raise UsageError("Claude on vertex needs the ANTHROPIC_VERTEX_PROJECT_ID variable")
    try:
        if platform == "bedrock":
            return anthropic.AsyncAnthropicBedrock()
        return anthropic.AsyncAnthropicVertex()
    except (ValueError, anthropic.AnthropicError) as exc:
        raise UsageError(f"Claude on {platform}: {exc}") from None


def _provider_of(client: AnthropicClient | None) -> str:
    # A client is an object of the SDK, so the SDK is imported by then.
    anthropic = sys.modules.get("anthropic")
    if anthropic is None or client is None:
        return _PROVIDER
    if isinstance(client, anthropic.AsyncAnthropicBedrock):
        return _BEDROCK
    if isinstance(client, anthropic.AsyncAnthropicVertex):
        return _VERTEX
    return _PROVIDER
