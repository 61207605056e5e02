"""Prompt-cache breakpoints for a Messages API request.

A `cache_control` marker on a block caches the whole prompt up to and including it; a
later request that starts with the same prefix reads it at a tenth of the price. We mark
the three places a tool loop re-sends unchanged: the system prompt, the tool definitions
(the last one), and the conversation so far (its last block), so a retry of a call and
the next turn of the loop both start with a cached prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_BREAKPOINTS", "breakpoints_in", "with_cache_breakpoints"]

MAX_BREAKPOINTS = 4
"""The API rejects a request with more `cache_control` markers than this."""

# Blocks the API does not let carry a marker.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def breakpoints_in(value: Any) -> int:
    """How many `cache_control` markers `value` (a request, or any part of one) holds."""
    if isinstance(value, Mapping):
        own = 1 if value.get("cache_control") is not None else 0
        return own + sum(breakpoints_in(item) for item in value.values())
    if isinstance(value, list | tuple):
        return sum(breakpoints_in(item) for item in value)
    return 0


def with_cache_breakpoints(params: dict[str, Any]) -> dict[str, Any]:
    """`params` with system, tools and conversation marked, within the API's limit.

    Markers the caller placed itself are kept and counted first; ours go, in order of
    how much each saves, to the system prompt, the last tool and the last message block
    while there is room. The caller's messages are copied, never changed.
    """
    room = MAX_BREAKPOINTS - breakpoints_in(params)
    marked = dict(params)
    if room > 0 and _unmarked_text(marked.get("system")):
        marked["system"] = [
            {"type": "text", "text": marked["system"], "cache_control": _ephemeral()}
        ]
        room -= 1
    tools = marked.get("tools")
    if room > 0 and tools and breakpoints_in(tools) == 0:
        marked["tools"] = [*tools[:-1], {**tools[-1], "cache_control": _ephemeral()}]
        room -= 1
    messages = marked.get("messages")
    if room > 0 and messages:
        last = _marked_message(messages[-1])
        if last is not None:
            marked["messages"] = [*messages[:-1], last]
    return marked


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}  # the default five-minute cache


def _unmarked_text(system: Any) -> bool:
    return isinstance(system, str) and bool(system)


def _marked_message(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message with a marker on its last block; None when it cannot take one."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None  # the API refuses a marker on empty text
        return {
            **message,
            "content": [{"type": "text", "text": content, "cache_control": _ephemeral()}],
        }
    if not isinstance(content, list) or not content:
        return None
    block = content[-1]
    if not isinstance(block, Mapping) or block.get("type") in _UNMARKABLE:
        return None
    if block.get("cache_control") is not None or (
        block.get("type") == "text" and not block.get("text")
    ):
        return None
    marked_block = {**block, "cache_control": _ephemeral()}
    return {**message, "content": [*content[:-1], marked_block]}
