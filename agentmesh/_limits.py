"""Size limits on what is copied into envelopes: they travel to models, logs and reports.

A rejected 10 MB argument must not be echoed back to the model in full; what is cut is
said to be, never dropped silently. (Partial results have their own bound, in
`envelope.PartialResults`.)
"""

from __future__ import annotations

from typing import Any, Final

from agentmesh._redaction import redact, redact_text

__all__ = ["MAX_QUERY_STRING", "recorded", "shorten"]

MAX_QUERY_STRING: Final = 2_000
"""Characters of one string kept in an envelope's `attemptedQuery`."""


def shorten(value: Any, limit: int = MAX_QUERY_STRING) -> Any:
    """`value` with every string longer than `limit` cut, saying how much was cut."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}...[truncated {len(value) - limit} of {len(value)} characters]"
    if isinstance(value, dict):
        return {key: shorten(item, limit) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [shorten(item, limit) for item in value]
    return value


def recorded(value: Any) -> Any:
    """What an envelope may carry of a value a caller sent: secrets masked, size bounded."""
    if type(value) is str:  # a task's query, once per task: no walk through the shapes
        text = redact_text(value)
        return text if len(text) <= MAX_QUERY_STRING else shorten(text)
    return shorten(redact(value))
