"""A model call's worst-case cost, known before it is made: what a hard cost cap reserves.

No tokenizer is downloaded and nothing is asked of the network: the input is estimated
from the request's own text, deliberately on the high side, and the output is at most
`max_tokens` (the Messages API never writes more).

The input estimate is the request as JSON (messages, system prompt, tools, tool choice:
quotes, braces and keys counted too), with

* one token per 2 ASCII characters, rounded up (Claude's tokenizer runs near 3.5
  characters a token on English prose and fewer on code and JSON: 2 leaves room for
  both),
* one token per byte of every other character in UTF-8 (a byte-level tokenizer never
  makes more tokens than bytes: a CJK character is 3, an emoji 4),
* 8 tokens per message and 16 per request (the roles and turn markers the API adds),
* 600 tokens when tools are given (the tool-use system prompt the API adds: 300 to 530
  tokens, by model).

Erring high costs little: a hard cap then holds a few more calls until others settle,
and stops the run at most one call's worst case early. Erring low would let the cap be
passed (`usage_reservation_exceeded` is logged when an actual cost passes its
reservation). An image or a document sent as base64 counts as its text, far above what
it really costs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from agentmesh.usage._prices import ModelPrice

__all__ = ["estimated_input_tokens", "worst_case_cost"]

_ASCII_PER_TOKEN: Final = 2
_PER_MESSAGE: Final = 8
_PER_REQUEST: Final = 16
_TOOL_PROMPT: Final = 600


def estimated_input_tokens(request: Mapping[str, Any]) -> int:
    """Input tokens `request` (the keywords of `Model.create`) costs at most, by the rules above."""
    parts = {key: request.get(key) for key in ("system", "messages", "tools", "tool_choice")}
    text = json.dumps(parts, ensure_ascii=False, default=str, separators=(",", ":"))
    ascii_chars = len(text.encode("ascii", "ignore"))  # counted in C, not per character
    other_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    messages = request.get("messages") or ()
    return (
        -(-ascii_chars // _ASCII_PER_TOKEN)
        + other_bytes
        + _PER_MESSAGE * len(messages)
        + _PER_REQUEST
        + (_TOOL_PROMPT if request.get("tools") else 0)
    )


def worst_case_cost(price: ModelPrice, request: Mapping[str, Any]) -> float:
    """The most `request` can cost in US dollars: its input at the dearest input price
    (a cache write costs more than plain input) and `max_tokens` of output."""
    input_tokens = estimated_input_tokens(request)
    output_tokens = int(request.get("max_tokens") or 0)
    return (
        input_tokens * max(price.input, price.cache_write, price.cache_read)
        + output_tokens * price.output
    ) / 1_000_000
