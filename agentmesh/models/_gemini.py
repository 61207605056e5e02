"""`GeminiModel`: Gemini through the official `google-genai` SDK, with one owner of retries."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import pydantic

from agentmesh._numbers import number
from agentmesh._tracing import chat_span, record_response
from agentmesh.errors import BusinessError, PermissionDenied, UsageError
from agentmesh.models._base import ModelResponse
from agentmesh.models._gemini_wire import (
    contents_of,
    response_of,
    signatures_of,
    tool_config_of,
    tools_of,
)
from agentmesh.models._sdk_model import SdkModel

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

__all__ = ["GeminiModel"]

# Where the SDK sends Gemini Developer API requests when no base URL is given.
_DEFAULT_BASE_URL: Final = "https://generativelanguage.googleapis.com"
_PROVIDER: Final = "gcp.gemini"  # gen_ai.provider.name, as the GenAI conventions spell it
# Thought signatures kept for the calls of recent turns (see GeminiModel).
_KEPT_SIGNATURES: Final = 1024


class GeminiModel(SdkModel["genai.Client"]):
    """Gemini via `google.genai.Client(...).aio`, the Gemini Developer API.

    Takes and answers the `Model` protocol's Anthropic-shaped conversation: tool_use and
    tool_result blocks become function calls and responses, tools function declarations
    (their `input_schema` sent as JSON Schema), `tool_choice` the function-calling mode.
    A function call the API gave no id gets a stable one made from the answer's id.

    The SDK retries nothing: every call asks for one attempt (its `HttpRetryOptions`),
    whatever the client was built with, and its automatic function calling and
    continuation are off, so one `create` is one request. agentmesh's `RetryPolicy`
    owns every retry. Every call has a total deadline (`timeout`).

    An answer the safety filters stopped (finish reason `SAFETY`, `RECITATION`,
    `PROHIBITED_CONTENT`, ...) is a refusal (`stop_reason="refusal"`, the text saying
    why); a prompt the API blocks (`prompt_feedback.block_reason`) raises
    `BusinessError(error_type="refused")`.

    Gemini 3 wants each function call sent back with the thought signature it came
    with; the model keeps those of its recent calls (a call made by another model
    instance or provider goes back without one, which Gemini accepts for past turns).

    Args:
        model: the model name, e.g. `"gemini-2.5-flash"`.
        client: a `google.genai.Client` to use (its owner closes it); pass `base_url`
            too to name its endpoint. Keep its httpx2 transport: the errors of the
            SDK's aiohttp one are not classified as precisely. By default one is built
            at the first call from `api_key` / `base_url` or the environment
            (`GOOGLE_API_KEY`, `GEMINI_API_KEY`), always on httpx2, and closed by
            `aclose()`.
        timeout: seconds for one whole call.
        stream: use the streaming endpoint (`streamGenerateContent`).
    """

    def __init__(
        self,
        model: str,
        *,
        client: genai.Client | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError(f"GeminiModel needs a model name, got {model!r}")
        self.name = model
        self.timeout = number("GeminiModel(timeout=)", timeout, above=True, unit="seconds")
        self.stream = stream
        self._client = client
        self._owns_client = client is None
        self._api_key = api_key
        self._base_url = base_url
        self._signatures: OrderedDict[str, str] = OrderedDict()

    @property
    def endpoint(self) -> str:
        """The base URL this model calls: `base_url`, else the SDK's `GOOGLE_GEMINI_BASE_URL`,
        else the API's."""
        base_url = self._base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL")
        return (base_url or _DEFAULT_BASE_URL).rstrip("/")

    def _sdk(self) -> genai.Client:
        # The SDK costs a second or so to import: only a model that is used pays for it.
        from google import genai
        from google.genai import types

        if self._client is None:
            import httpx2

            # httpx2 whatever else is installed: with aiohttp present the SDK would use it,
            # and its errors (a refused connection is an OSError of aiohttp's) are not the
            # ones agentmesh classifies.
            options = types.HttpOptions(
                base_url=self._base_url,
                async_client_args={"transport": httpx2.AsyncHTTPTransport()},
            )
            try:
                self._client = genai.Client(api_key=self._api_key, http_options=options)
            except ValueError as exc:  # no key given and none in the environment
                raise PermissionDenied(
                    f"GeminiModel({self.name!r}) has no API key: {exc}",
                    error_type="authentication_failed",
                    details="pass api_key= or set GOOGLE_API_KEY / GEMINI_API_KEY",
                ) from exc
        return self._client

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        from google.genai import types

        config: dict[str, Any] = {
            "max_output_tokens": max_tokens,
            # One attempt, whatever the client's options: agentmesh owns each retry.
            "http_options": {
                "retry_options": {"attempts": 1},
                "timeout": max(1, round(self.timeout * 1000)),  # milliseconds
            },
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        if system:
            config["system_instruction"] = system
        if tools:
            config["tools"] = tools_of(tools)
        if tools and (tool_config := tool_config_of(tool_choice)) is not None:
            config["tool_config"] = tool_config
        # Checked here, not in the request's try: a config the SDK refuses is our bug.
        typed = types.GenerateContentConfig.model_validate(config)
        contents = contents_of(messages, self._signatures)
        with chat_span(provider=_PROVIDER, model=self.name, max_tokens=max_tokens) as current:
            response = await self._send(contents, typed)
            record_response(current, response, provider=_PROVIDER, model=self.name)
        return response

    async def _send(
        self, contents: list[dict[str, Any]], config: types.GenerateContentConfig
    ) -> ModelResponse:
        """One request, its answer checked: a malformed one is a transient failure."""
        from google.genai import errors

        models = self._sdk().aio.models
        try:
            async with asyncio.timeout(self.timeout):
                if self.stream:
                    answer = await self._streamed(models, contents, config)
                else:
                    reply = await models.generate_content(
                        model=self.name, contents=contents, config=config
                    )
                    answer = reply.model_dump(mode="json", exclude_none=True, warnings=False)
        except (errors.UnknownApiResponseError, json.JSONDecodeError) as exc:
            raise self._unparseable(f"the body is not valid JSON: {exc}") from exc
        except pydantic.ValidationError as exc:
            raise self._unparseable(f"{exc.error_count()} problem(s): {exc}") from exc
        return self._answered(answer)

    async def _streamed(
        self, models: Any, contents: list[dict[str, Any]], config: types.GenerateContentConfig
    ) -> dict[str, Any]:
        """The stream's chunks as one answer: their parts in order, the last counts."""
        parts: list[dict[str, Any]] = []
        answer: dict[str, Any] = {}
        candidate: dict[str, Any] = {}
        stream = await models.generate_content_stream(
            model=self.name, contents=contents, config=config
        )
        # Closed at once however the loop ends (an error chunk, the deadline): the
        # connection goes back to the pool now, not when the generator is collected.
        async with contextlib.aclosing(stream):
            async for reply in stream:
                chunk = reply.model_dump(mode="json", exclude_none=True, warnings=False)
                answer.update({k: v for k, v in chunk.items() if k != "candidates"})
                for piece in chunk.get("candidates", [])[:1]:
                    parts.extend((piece.get("content") or {}).get("parts") or [])
                    candidate.update({k: v for k, v in piece.items() if k != "content"})
        if candidate or parts:
            answer["candidates"] = [{**candidate, "content": {"role": "model", "parts": parts}}]
        return answer

    def _answered(self, answer: dict[str, Any]) -> ModelResponse:
        feedback = answer.get("prompt_feedback") or {}
        if feedback.get("block_reason"):
            reason = f"the prompt was blocked ({feedback['block_reason']})"
            if feedback.get("block_reason_message"):
                reason += f": {feedback['block_reason_message']}"
            raise BusinessError(
                f"{self.name} refused the request: {reason}",
                error_type="refused",
                details=f"prompt_feedback.block_reason: {feedback['block_reason']}",
            )
        try:
            response = response_of(answer, self.name)
        except pydantic.ValidationError as exc:
            raise self._unparseable(f"{exc.error_count()} problem(s): {exc}") from exc
        if isinstance(response, str):
            raise self._unparseable(response)
        self._keep_signatures(signatures_of(answer, response))
        return response

    def _keep_signatures(self, signatures: Mapping[str, str]) -> None:
        for call_id, signature in signatures.items():
            self._signatures[call_id] = signature
        while len(self._signatures) > _KEPT_SIGNATURES:
            self._signatures.popitem(last=False)

    async def _close_client(self, client: genai.Client) -> None:
        await client.aio.aclose()
        client.close()  # the SDK builds a synchronous HTTP client too

    def __repr__(self) -> str:
        return f"GeminiModel({self.name!r}, timeout={self.timeout}, stream={self.stream})"
