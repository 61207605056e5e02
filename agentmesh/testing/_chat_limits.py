"""The rate limits a `FakeChatCompletionsAPI` can put on its clients, as OpenAI reports them.

Two token buckets per model, requests and tokens per minute, replenished continuously up
to the limit. Every answer for a limited model carries
`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, `reset` the time until the bucket
is full again as a duration (`1s`, `6m0s`, `20ms`). A request that does not fit is
refused with 429 `rate_limit_exceeded` (type `requests` or `tokens`) and the same headers,
and costs nothing. A request's tokens are its prompt estimated from its JSON (`messages`
and `tools`, four characters a token) and its `max_completion_tokens` (or `max_tokens`),
taken at admission; once answered, what the reply did not use of them comes back.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ChatLimits", "LimitTicket"]

_CHARS_PER_TOKEN: Final = 4
_FAMILIES: Final = ("requests", "tokens")


@dataclass(slots=True)
class _Bucket:
    limit: int
    per_second: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.per_second)
        self.at = now

    def full_in(self) -> float:
        return (self.limit - self.level) / self.per_second


@dataclass(frozen=True, slots=True)
class LimitTicket:
    """What an admitted request took, to settle once it is answered."""

    model: str
    prompt: int
    tokens: int


def _duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: `20ms` below a second, else `6m0s` / `1.5s`."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    rest_text = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest_text}s" if minutes else f"{rest_text}s"


def request_tokens(body: Mapping[str, Any]) -> tuple[int, int]:
    """A request's estimated prompt tokens and the completion tokens it may use."""
    prompt = {key: body[key] for key in ("messages", "tools") if key in body}
    estimate = math.ceil(len(json.dumps(prompt)) / _CHARS_PER_TOKEN)
    most = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return estimate, most if isinstance(most, int) else 0


class ChatLimits:
    """Per-model buckets; `admit` takes a request or says why not, `settle` gives back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, dict[str, _Bucket]] = {}

    def set(self, model: str, per_minute: Mapping[str, int], minute: float) -> None:
        """Limit `model`; `*`: one set of buckets that every other model shares."""
        now = time.monotonic()
        with self._lock:
            self._buckets[model] = {
                family: _Bucket(limit, limit / minute, float(limit), now)
                for family, limit in per_minute.items()
            }

    def admit(
        self, model: str, body: Mapping[str, Any]
    ) -> tuple[LimitTicket | None, Mapping[str, str], str | None]:
        """(the ticket, the headers to send, the family that refused the request or None)."""
        prompt, most = request_tokens(body)
        needs = {"requests": 1, "tokens": prompt + most}
        with self._lock:
            buckets = self._buckets.get(model) or self._buckets.get("*")
            if not buckets:
                return None, {}, None
            now = time.monotonic()
            for bucket in buckets.values():
                bucket.refill(now)
            for family, bucket in buckets.items():
                if bucket.level < min(needs[family], bucket.limit):
                    return None, _headers(buckets), family
            for family, bucket in buckets.items():
                bucket.level -= min(needs[family], bucket.limit)
            return LimitTicket(model, prompt, needs["tokens"]), _headers(buckets), None

    def settle(self, ticket: LimitTicket | None, completion_tokens: int) -> Mapping[str, str]:
        """Give back the tokens an answered request took and did not use; the headers."""
        if ticket is None:
            return {}
        with self._lock:
            buckets = self._buckets.get(ticket.model) or self._buckets.get("*")
            if not buckets:
                return {}
            tokens = buckets.get("tokens")
            if tokens is not None:
                tokens.refill(time.monotonic())
                unused = max(0, ticket.tokens - ticket.prompt - completion_tokens)
                tokens.level = min(tokens.limit, tokens.level + unused)
            return _headers(buckets)


def _headers(buckets: Mapping[str, _Bucket]) -> dict[str, str]:
    headers = {}
    for family in _FAMILIES:
        bucket = buckets.get(family)
        if bucket is None:
            continue
        headers[f"x-ratelimit-limit-{family}"] = str(bucket.limit)
        headers[f"x-ratelimit-remaining-{family}"] = str(max(0, math.floor(bucket.level)))
        headers[f"x-ratelimit-reset-{family}"] = _duration(bucket.full_in())
    return headers
