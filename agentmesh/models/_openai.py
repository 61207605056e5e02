"""`OpenAIModel`: OpenAI's Chat Completions API, or any server that speaks it, through the
official `openai` SDK, with one owner of retries."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from agentmesh._numbers import number
from agentmesh._redaction import redact_text
from agentmesh._tracing import chat_span, record_response
from agentmesh.errors import UsageError
from agentmesh.models._base import ModelResponse
from agentmesh.models._chat_completions import (
    ChunkFold,
    Malformed,
    chat_messages,
    chat_tool_choice,
    chat_tools,
    response_of,
)
from agentmesh.models._rates import report_headers
from agentmesh.models._sdk_model import SdkModel

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIModel"]

# Where the SDK sends requests when neither `base_url` nor OPENAI_BASE_URL says.
_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_PROVIDER = "openai"  # gen_ai.provider.name, as the GenAI conventions spell it


class OpenAIModel(SdkModel["openai.AsyncOpenAI"]):
    """A model behind the Chat Completions API, via `openai.AsyncOpenAI`.

    OpenAI's own models, and any OpenAI-compatible server given its `base_url` (vLLM,
    Ollama, LM Studio, a LiteLLM proxy, OpenRouter); Azure OpenAI through the SDK's
    `AsyncAzureOpenAI` passed as `client`. Conversations and tools in the Messages API's
    shapes are translated to Chat Completions and the answer back, so an `LLMSubagent`
    (tools, typed output) runs on it unchanged.

    The SDK's own retries are off for every call (`max_retries=0`): agentmesh's
    `RetryPolicy` owns each retry and honours `retry-after`. Every call has a total
    deadline (`timeout`). Nothing touches the network or the environment's key until the
    first call.

    Args:
        model: the model name, as the server knows it (`gpt-5-mini`, `llama3.1`).
        client: an `AsyncOpenAI` (or `AsyncAzureOpenAI`) to use (its owner closes it); by
            default one is built at the first call from `api_key` / `base_url` or the
            environment (`OPENAI_API_KEY`, `OPENAI_BASE_URL`) and closed by `aclose()`.
        api_key: the key; a local server that wants none still needs some string.
        base_url: the API's root, e.g. `http://localhost:11434/v1`.
        timeout: seconds for one whole call.
        stream: use the streaming endpoint; usage is asked for with
            `stream_options.include_usage`.
        max_tokens_param: the request field that carries `max_tokens`:
            `max_completion_tokens` (OpenAI's, which its reasoning models require) or
            `max_tokens` for an older compatible server that knows only that one.
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool = False,
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = (
            "max_completion_tokens"
        ),
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError(f"OpenAIModel needs a model name, got {model!r}")
        if max_tokens_param not in ("max_completion_tokens", "max_tokens"):
            raise UsageError(
                "OpenAIModel(max_tokens_param=) is 'max_completion_tokens' or 'max_tokens', "
                f"got {max_tokens_param!r}"
            )
        self.name = model
        self.timeout = number("OpenAIModel(timeout=)", timeout, above=True, unit="seconds")
        self.stream = stream
        self.max_tokens_param = max_tokens_param
        self._client = client
        self._owns_client = client is None
        self._api_key = api_key
        self._base_url = base_url

    @property
    def endpoint(self) -> str:
        """The base URL this model calls: its client's, or the one its client will have."""
        if self._client is not None:
            return str(self._client.base_url).rstrip("/")
        return (self._base_url or os.environ.get("OPENAI_BASE_URL") or _DEFAULT_BASE_URL).rstrip(
            "/"
        )

    def _sdk(self) -> openai.AsyncOpenAI:
        # The SDK is imported by the first call only: `import agentmesh` never pays for it.
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url)
        return self._client.with_options(max_retries=0, timeout=self.timeout)

    def _params(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> dict[str, Any]:
        """The Chat Completions request body `create` sends for these arguments."""
        params: dict[str, Any] = {
            "model": self.name,
            "messages": chat_messages(system, messages),
            self.max_tokens_param: max_tokens,
        }
        if tools:
            params["tools"] = chat_tools(tools)
        if tool_choice is not None:
            choice, parallel = chat_tool_choice(tool_choice)
            params["tool_choice"] = choice
            if parallel is not None and tools:
                params["parallel_tool_calls"] = parallel
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        params = self._params(
            messages=messages,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            max_tokens=max_tokens,
        )
        with chat_span(provider=_PROVIDER, model=self.name, max_tokens=max_tokens) as current:
            response = await self._send(params)
            record_response(current, response, provider=_PROVIDER, model=self.name)
        return response

    async def _send(self, params: dict[str, Any]) -> ModelResponse:
        """One request, its answer checked: a malformed one is a transient failure."""
        import openai

        client = self._sdk()
        try:
            async with asyncio.timeout(self.timeout):
                # The raw response first: its headers feed the run's rate gate.
                raw = await client.chat.completions.with_raw_response.create(**params)
                report_headers(raw.headers)
                answer: Any = raw.parse()
                if self.stream:
                    answer = await _folded(answer)
                elif isinstance(answer, pydantic.BaseModel):
                    answer = answer.model_dump(mode="json", warnings=False)
        except openai.APIStatusError as exc:
            report_headers(exc.response.headers)  # a 429's say when the limits return
            raise
        except json.JSONDecodeError as exc:
            raise self._unparseable(f"the body is not valid JSON: {exc}") from exc
        try:
            return response_of(answer)
        except (Malformed, pydantic.ValidationError) as exc:
            raise self._unparseable(str(exc)) from exc

    async def _close_client(self, client: openai.AsyncOpenAI) -> None:
        await client.close()

    def __repr__(self) -> str:
        return (
            # A base URL may carry a password or a key in its query: the repr goes to logs.
            f"OpenAIModel({self.name!r}, endpoint={redact_text(self.endpoint)!r}, "
            f"timeout={self.timeout}, "
            f"stream={self.stream})"
        )


async def _folded(stream: Any) -> Any:
    """A streamed answer's chunks as one chat completion object (see `ChunkFold`)."""
    fold = ChunkFold()
    try:
        async for chunk in stream:
            if isinstance(chunk, pydantic.BaseModel):
                fold.add(chunk.model_dump(mode="json", warnings=False))
            elif isinstance(chunk, Mapping):
                fold.add(chunk)
    finally:
        # Ended early (the deadline, a chunk that is not JSON): the connection is closed
        # now, not whenever the stream is collected.
        await stream.close()
    return fold.completion()
