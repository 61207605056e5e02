"""Translation between the Anthropic-shaped conversation and the Gemini API's.

`GeminiModel` speaks the `Model` protocol's shapes (tool_use / tool_result blocks, tools
with an `input_schema`, a `tool_choice`); the `google-genai` SDK takes contents, function
declarations and a tool config, and answers with candidates. Everything here works on
plain dicts (the SDK validates them and dumps its answer to one), so this module imports
no SDK.

Gemini gives a function call no id on the Developer API: the id of a `ToolUseBlock` is
then made from the answer's `responseId` and the call's position, stable for the same
answer, and never sent back (only ids the API gave are).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmesh.models._base import ModelResponse, TextBlock, ToolUseBlock, Usage

__all__ = [
    "MADE_ID_PREFIX",
    "REFUSED_FINISH",
    "contents_of",
    "response_of",
    "tool_config_of",
    "tools_of",
    "usage_of",
]

MADE_ID_PREFIX: Final = "gemini_call_"
"""How the id agentmesh made for a call the API gave none starts."""

# Answers the API cut short for what they said: the model's turn is a refusal.
REFUSED_FINISH: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
_STOP_REASONS: Final = {"STOP": "end_turn", "MAX_TOKENS": "max_tokens"}


# --- request ---------------------------------------------------------------------------


def contents_of(
    messages: Sequence[Mapping[str, Any]], signatures: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The conversation as Gemini contents: `assistant` is `model`, blocks become parts.

    A tool_result names no function, but Gemini's function response must: the name is
    the one of the tool_use block with the same id earlier in the conversation.
    """
    names: dict[str, str] = {}
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = "model" if message.get("role") == "assistant" else "user"
        parts = [
            part
            for block in _blocks(message.get("content"))
            if (part := _part_of(block, names, signatures)) is not None
        ]
        if not parts:
            continue
        # Turns alternate: two messages of one role in a row (an assistant turn with
        # nothing Gemini can take between them) are one content.
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _part_of(
    block: Mapping[str, Any], names: dict[str, str], signatures: Mapping[str, str]
) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"text": str(block.get("text", ""))} if block.get("text") else None
    if kind == "tool_use":
        call_id, name = str(block.get("id", "")), str(block.get("name", ""))
        names[call_id] = name
        call: dict[str, Any] = {"name": name, "args": dict(block.get("input") or {})}
        if not call_id.startswith(MADE_ID_PREFIX):
            call["id"] = call_id
        part: dict[str, Any] = {"function_call": call}
        # Gemini 3 checks the current turn's calls come back with their thought signature.
        if call_id in signatures:
            part["thought_signature"] = signatures[call_id]
        return part
    if kind == "tool_result":
        call_id = str(block.get("tool_use_id", ""))
        key = "error" if block.get("is_error") else "output"
        answer: dict[str, Any] = {
            "name": names.get(call_id, "unknown_tool"),
            "response": {key: _result_text(block.get("content"))},
        }
        if not call_id.startswith(MADE_ID_PREFIX):
            answer["id"] = call_id
        return {"function_response": answer}
    # Blocks with no Gemini counterpart (another provider's thinking, ...) are left out.
    return None


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        str(block.get("text", "")) for block in _blocks(content) if block.get("type") == "text"
    )


def tools_of(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions as one Gemini tool of function declarations."""
    if not tools:
        return []
    declarations = []
    for definition in tools:
        declaration: dict[str, Any] = {"name": definition["name"]}
        if definition.get("description"):
            declaration["description"] = definition["description"]
        if definition.get("input_schema"):
            # JSON Schema as it is: `parameters` would take only an OpenAPI subset.
            declaration["parameters_json_schema"] = dict(definition["input_schema"])
        declarations.append(declaration)
    return [{"function_declarations": declarations}]


def tool_config_of(tool_choice: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`auto` / `any` / `tool` / `none` as Gemini's function-calling mode."""
    if tool_choice is None:
        return None
    kind = tool_choice.get("type")
    if kind == "tool":
        config: dict[str, Any] = {
            "mode": "ANY",
            "allowed_function_names": [tool_choice["name"]],
        }
    else:
        config = {"mode": {"any": "ANY", "none": "NONE"}.get(str(kind), "AUTO")}
    return {"function_calling_config": config}


# --- answer ----------------------------------------------------------------------------


def usage_of(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Gemini's counts as `Usage`'s: cached prompt tokens apart, thoughts part of output.

    Tool-use prompt tokens (from a built-in tool's results) are input, billed as such.
    """
    if not metadata:
        return {}
    prompt = metadata.get("prompt_token_count") or 0
    cached = metadata.get("cached_content_token_count") or 0
    tool_prompt = metadata.get("tool_use_prompt_token_count") or 0
    answer = metadata.get("candidates_token_count") or 0
    thoughts = metadata.get("thoughts_token_count") or 0
    try:
        return {
            "input_tokens": prompt - cached + tool_prompt,
            "cache_read_input_tokens": cached,
            "output_tokens": answer + thoughts,
            "reasoning_tokens": thoughts,
        }
    except TypeError:
        # A count that is no number: Usage names it unusable, the answer still counts.
        return {"input_tokens": prompt, "output_tokens": answer}


def response_of(answer: Mapping[str, Any], model: str) -> ModelResponse | str:
    """The answer (the SDK's response dumped) as a `ModelResponse`, or what is wrong with it."""
    candidates = answer.get("candidates") or []
    if not candidates:
        return "the answer has no candidate"
    candidate = candidates[0]
    finish = candidate.get("finish_reason")
    if finish is None:
        return "the answer ended before the model finished it"
    usage = Usage.model_validate(usage_of(answer.get("usage_metadata")))
    meta = {"usage": usage, "model": answer.get("model_version") or model}
    meta["id"] = answer.get("response_id")
    if finish in REFUSED_FINISH:
        reason = f"blocked by the provider's safety filter (finish_reason {finish})"
        if candidate.get("finish_message"):
            reason += f": {candidate['finish_message']}"
        return ModelResponse(content=(TextBlock(text=reason),), stop_reason="refusal", **meta)
    if finish == "MALFORMED_FUNCTION_CALL":
        return f"the model wrote a malformed function call: {candidate.get('finish_message')}"
    blocks = _blocks_of(candidate, answer.get("response_id"))
    stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else None
    return ModelResponse(
        content=tuple(blocks), stop_reason=stop or _STOP_REASONS.get(finish, "end_turn"), **meta
    )


def _blocks_of(candidate: Mapping[str, Any], response_id: str | None) -> list[Any]:
    blocks: list[TextBlock | ToolUseBlock] = []
    parts = (candidate.get("content") or {}).get("parts") or []
    for index, part in enumerate(parts):
        if part.get("thought"):
            continue  # a thought summary: the model's notes, not its answer
        call = part.get("function_call")
        if call:
            blocks.append(
                ToolUseBlock(
                    id=call.get("id") or made_id(response_id, index, call),
                    name=call.get("name") or "",
                    input=call.get("args") or {},
                )
            )
        elif part.get("text"):
            if blocks and isinstance(blocks[-1], TextBlock):
                blocks[-1] = TextBlock(text=blocks[-1].text + part["text"])
            else:
                blocks.append(TextBlock(text=part["text"]))
    return blocks


def made_id(response_id: str | None, index: int, call: Mapping[str, Any]) -> str:
    """A call id for a call the API gave none: the same for the same answer."""
    if response_id:
        return f"{MADE_ID_PREFIX}{response_id}_{index}"
    digest = hashlib.sha256(json.dumps(call, sort_keys=True, default=str).encode()).hexdigest()
    return f"{MADE_ID_PREFIX}{digest[:16]}_{index}"


def signatures_of(answer: Mapping[str, Any], response: ModelResponse) -> dict[str, str]:
    """Each function call's thought signature, by the id its `ToolUseBlock` has."""
    candidates = answer.get("candidates") or []
    parts = ((candidates[0].get("content") or {}).get("parts") or []) if candidates else []
    signed = [p.get("thought_signature") for p in parts if p.get("function_call")]
    return {
        block.id: signature
        for block, signature in zip(response.tool_uses, signed, strict=False)
        if isinstance(signature, str)
    }
