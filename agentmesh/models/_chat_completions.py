"""The Chat Completions wire form: Anthropic-shaped requests to it, its answers back.

A `Model` takes messages, tools and tool_choice in the Messages API's shapes; the Chat
Completions API (OpenAI's, and every OpenAI-compatible server's) wants:

    system prompt                     a first `system` message
    assistant `tool_use` blocks       the assistant message's `tool_calls` (arguments: JSON text)
    user `tool_result` blocks         one `tool` message per result, right after the call
    tools {name, description,         {"type": "function", "function": {name, description,
           input_schema}                 parameters}}
    tool_choice auto | any | tool     "auto" | "required" | {"type": "function", ...}

An answer comes back as a `ModelResponse`: text and tool calls as blocks (the call ids are
the provider's), `finish_reason` as a stop reason (`stop` -> end_turn, `tool_calls` ->
tool_use, `length` -> max_tokens, `content_filter` or a `refusal` -> refusal), and usage
with cached prompt tokens apart and reasoning tokens shown within the output. A streamed
answer's chunks are first folded into the same shape (`ChunkFold`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmesh.errors import UsageError
from agentmesh.models._base import ModelResponse, TextBlock, ToolUseBlock

__all__ = [
    "CONTENT_FILTERED",
    "ChunkFold",
    "Malformed",
    "chat_messages",
    "chat_tool_choice",
    "chat_tools",
    "response_of",
]

CONTENT_FILTERED: Final = "blocked by the provider's content filter (finish_reason content_filter)"
"""The refusal text of an answer the provider's content filter stopped."""

_STOP_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class Malformed(ValueError):  # a kind of answer, not a program error
    """The answer is not a chat completion this module can read (the model turns it into
    a transient `invalid_response`)."""


# --- requests ----------------------------------------------------------------------------


def chat_messages(
    system: str | None, messages: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages, the system prompt first."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            out.append(_assistant(content))
        elif role == "user":
            out.extend(_user(content))
        else:
            raise UsageError(f"a message's role is 'user' or 'assistant', got {role!r}")
    return out


def _assistant(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content or ():
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, separators=(",", ":"))
            function = {"name": block["name"], "arguments": arguments}
            calls.append({"id": block["id"], "type": "function", "function": function})
        # Other blocks (Claude's thinking, server tools) mean nothing to another provider.
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(content: Any) -> list[dict[str, Any]]:
    """A user turn: its tool results as `tool` messages first (they must follow the
    assistant's calls), then what else it says as one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content or ():
        kind = block.get("type")
        if kind == "tool_result":
            text = _text_of(block.get("content"))
            results.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
        else:
            raise UsageError(f"a user content block of type {kind!r} has no Chat Completions form")
    if not parts:
        return results
    if all(part["type"] == "text" for part in parts):
        joined = "\n\n".join(part["text"] for part in parts)
        return [*results, {"role": "user", "content": joined}]
    return [*results, {"role": "user", "content": parts}]


def _text_of(content: Any) -> str:
    """A tool result's content as text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "\n".join(
        block.get("text", "") if block.get("type") == "text" else json.dumps(block)
        for block in content
    )


def _image_url(block: Mapping[str, Any]) -> str:
    source = block.get("source") or {}
    if source.get("type") == "url":
        return str(source["url"])
    return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions as Chat Completions function tools."""
    out = []
    for tool in tools:
        if "input_schema" not in tool:
            raise UsageError(
                f"tool {tool.get('name')!r} has no input_schema: only function tools "
                "have a Chat Completions form"
            )
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool["input_schema"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def chat_tool_choice(tool_choice: Mapping[str, Any]) -> tuple[Any, bool | None]:
    """`tool_choice` as Chat Completions says it, and `parallel_tool_calls` (None: unsaid)."""
    kind = tool_choice.get("type")
    choice: Any
    if kind == "auto":
        choice = "auto"
    elif kind == "any":
        choice = "required"
    elif kind == "none":
        choice = "none"
    elif kind == "tool":
        choice = {"type": "function", "function": {"name": tool_choice["name"]}}
    else:
        raise UsageError(f"tool_choice type must be auto, any, tool or none, got {kind!r}")
    parallel = tool_choice.get("disable_parallel_tool_use")
    return choice, None if parallel is None else not parallel


# --- answers -----------------------------------------------------------------------------


def response_of(completion: Any) -> ModelResponse:
    """A chat completion (the JSON object) as a `ModelResponse`; `Malformed` if it is none."""
    if not isinstance(completion, Mapping):
        raise Malformed(f"expected a chat completion object, got {type(completion).__name__}")
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise Malformed("the answer has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise Malformed("the answer's choice has no message")
    finish = choice.get("finish_reason")
    if not isinstance(finish, str):
        raise Malformed("the answer ended before the model finished it (no finish_reason)")
    calls = tuple(_tool_use(call) for call in message.get("tool_calls") or ())
    refusal = message.get("refusal")
    text = message.get("content")
    if isinstance(refusal, str) and refusal:
        stop_reason, text = "refusal", refusal
    elif finish == "content_filter":
        stop_reason, text = "refusal", CONTENT_FILTERED
    elif calls and finish != "length":
        # Some compatible servers finish a turn of tool calls with "stop".
        stop_reason = "tool_use"
    else:
        stop_reason = _STOP_REASONS.get(finish, "end_turn")
    blocks: list[TextBlock | ToolUseBlock] = (
        [TextBlock(text=text)] if isinstance(text, str) and text else []
    )
    if stop_reason != "refusal":
        blocks.extend(calls)
    model = completion.get("model")
    return ModelResponse(
        content=tuple(blocks),
        stop_reason=stop_reason,
        usage=_usage(completion.get("usage")),
        model=model if isinstance(model, str) else "",
        id=completion.get("id") if isinstance(completion.get("id"), str) else None,
    )


def _tool_use(call: Any) -> ToolUseBlock:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise Malformed(f"a tool call without a function name: {call!r}"[:300])
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError as exc:
        raise Malformed(
            f"the arguments of the call to {function['name']} are not JSON: {exc}"
        ) from exc
    if not isinstance(parsed, dict):
        raise Malformed(f"the arguments of the call to {function['name']} are not an object")
    call_id = call.get("id")
    return ToolUseBlock(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{function['name']}",
        name=function["name"],
        input=parsed,
    )


def _usage(usage: Any) -> Any:
    """Chat Completions counts as `Usage`'s: cached prompt tokens apart from the input,
    reasoning tokens shown within the output. Not an object: unknown (see `Usage`)."""
    if not isinstance(usage, Mapping):
        return usage
    prompt = usage.get("prompt_tokens")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    uncached = prompt - cached if isinstance(prompt, int) and isinstance(cached, int) else prompt
    return {
        "input_tokens": uncached,
        "output_tokens": usage.get("completion_tokens"),
        "cache_read_input_tokens": cached,
        "reasoning_tokens": reasoning,
    }


class ChunkFold:
    """A streamed answer's chunks folded into one chat completion object.

    Text and refusal deltas are joined; a tool call arrives as deltas by `index` (its id
    and name in the first, the arguments' JSON in pieces); usage, when asked for with
    `stream_options.include_usage`, comes in a last chunk without choices.
    """

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: Any = None

    def add(self, chunk: Mapping[str, Any]) -> None:
        for key in ("id", "model"):
            if isinstance(chunk.get(key), str):
                self._top.setdefault(key, chunk[key])
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for call in delta.get("tool_calls") or ():
                self._add_call(call)
            if isinstance(choice.get("finish_reason"), str):
                self._finish = choice["finish_reason"]

    def _add_call(self, delta: Mapping[str, Any]) -> None:
        call = self._calls.setdefault(
            delta.get("index", len(self._calls)), {"id": None, "name": "", "arguments": []}
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        if function.get("name"):
            call["name"] += function["name"]
        if function.get("arguments"):
            call["arguments"].append(function["arguments"])

    def completion(self) -> dict[str, Any]:
        """The chat completion the chunks make up (no finish_reason if the stream was cut)."""
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
            }
            for _, call in sorted(self._calls.items())
        ]
        message = {
            "role": "assistant",
            "content": "".join(self._text) or None,
            "refusal": "".join(self._refusal) or None,
            "tool_calls": calls or None,
        }
        return {
            **self._top,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
            "usage": self._usage,
        }
