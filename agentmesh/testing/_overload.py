"""The load a `FakeMessagesAPI` can put on its clients: rate limits, 529 bursts, a spent quota.

Modelled on the Messages API's documented behaviour (Anthropic's "Rate limits" and
"Errors" pages, and the error details of the `anthropic` SDK):

* **Rate limits** are token buckets, one per model and per limit (requests, input tokens,
  output tokens per minute), replenished continuously up to the limit, not reset at
  fixed intervals. Every answer for a model with limits carries
  `anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining,reset}`;
  `reset` is the RFC 3339 time the bucket is full again, and `tokens` is the more
  restrictive of the input and output limits. A request that does not fit is refused
  with 429 `rate_limit_error` and `retry-after` (the seconds until it would fit), and
  costs nothing. Input tokens are estimated from the request (its `system`, `messages`
  and `tools` as JSON, four characters a token); `max_tokens` is reserved from the
  output bucket at admission and the reply's own output tokens are charged after it.
* **Overload** is 529 `overloaded_error` ("Overloaded"), for the next N requests or a
  share of the requests during a window: the load of everyone, not the client's own.
* **A spent quota** is 429 `rate_limit_error` whose `error.details.error_code` names it
  (`enforced_spend_limit_reached`: the organisation crossed its tier's monthly spend),
  until the quota resets hours away; `retry-after` says when, unless turned off (the
  real API sends none with a spend limit).

Time is the fake's own: a monotonic clock plus what `advance` added, so a test's recorded
sleep can move the server forward without waiting. A scaled minute (`minute=0.5`) makes
`retry-after` and the reset times fractional (the real API sends whole seconds).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["Load", "Refusal", "Ticket"]

_REAL_MINUTE: Final = 60.0
_CHARS_PER_TOKEN: Final = 4
# The buckets of a model, by the family name of their headers.
_REQUESTS, _INPUT, _OUTPUT = "requests", "input-tokens", "output-tokens"
_PER_MINUTE_WORDS: Final = {
    _REQUESTS: "requests",
    _INPUT: "input tokens",
    _OUTPUT: "output tokens",
}


@dataclass(slots=True)
class _Bucket:
    """A token bucket: `limit` per minute, replenished continuously up to `limit`."""

    limit: int
    per_second: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.per_second)
        self.at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` fits (at most the whole bucket: a request is never
        refused for good)."""
        missing = min(amount, self.limit) - self.level
        return max(0.0, missing / self.per_second)

    def until_full(self) -> float:
        return max(0.0, (self.limit - self.level) / self.per_second)


@dataclass(frozen=True, slots=True)
class _Limits:
    per_minute: Mapping[str, int]
    minute: float


@dataclass(slots=True)
class _Burst:
    """529s for the next `requests` requests (None: no count), `share` of them, until
    `until` (fake time; None: no end)."""

    requests: int | None
    share: float
    until: float | None
    retry_after: float | None
    seen: int = 0

    def over(self, now: float) -> bool:
        return (self.until is not None and now >= self.until) or self.requests == 0

    def hits(self, now: float) -> bool:
        if self.over(now):
            return False
        self.seen += 1
        # Evenly spread, never random: a share of 0.25 is every fourth request.
        hit = math.floor(self.seen * self.share) > math.floor((self.seen - 1) * self.share)
        if hit and self.requests is not None:
            self.requests -= 1
        return hit


@dataclass(frozen=True, slots=True)
class _Quota:
    until: float
    error_code: str | None
    retry_after: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer the load gives instead of the script: status, error type and headers."""

    status: int
    type: str
    message: str
    headers: Mapping[str, str]
    error_code: str | None = None


@dataclass(slots=True)
class Ticket:
    """An admitted request: what it took from its model's buckets, settled after the reply."""

    model: str
    reserved_output: int = 0
    buckets: dict[str, _Bucket] = field(default_factory=dict)


class Load:
    """Every model's buckets, bursts and quotas; thread-safe (requests run in threads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._offset = 0.0
        self._lock = threading.Lock()
        self._limits: dict[str | None, _Limits] = {}
        self._buckets: dict[str, dict[str, _Bucket]] = {}
        self._bursts: dict[str | None, _Burst] = {}
        self._quotas: dict[str | None, _Quota] = {}

    def now(self) -> float:
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds

    # configuration

    def set_limits(self, model: str | None, per_minute: Mapping[str, int], minute: float) -> None:
        with self._lock:
            if per_minute:
                self._limits[model] = _Limits(dict(per_minute), minute)
            else:
                self._limits.pop(model, None)
            # New limits start with full buckets.
            if model is None:
                self._buckets.clear()
            else:
                self._buckets.pop(model, None)

    def set_burst(
        self,
        model: str | None,
        requests: int | None,
        share: float,
        seconds: float | None,
        retry_after: float | None,
    ) -> None:
        with self._lock:
            if requests == 0 or share == 0:
                self._bursts.pop(model, None)
                return
            until = None if seconds is None else self.now() + seconds
            self._bursts[model] = _Burst(requests, share, until, retry_after)

    def set_quota(
        self, model: str | None, resets_in: float, error_code: str | None, retry_after: bool
    ) -> None:
        with self._lock:
            if resets_in <= 0:
                self._quotas.pop(model, None)
                return
            self._quotas[model] = _Quota(self.now() + resets_in, error_code, retry_after)

    # serving

    def admit(self, model: str, body: Mapping[str, Any]) -> Ticket | Refusal:
        """Take the request's share of `model`'s buckets, or say why it is refused."""
        with self._lock:
            now = self.now()
            buckets = self._buckets_of(model, now)
            # A model's own quota or burst first; once it is over, the one of every model.
            quotas = (self._quotas.get(model), self._quotas.get(None))
            quota = next((q for q in quotas if q is not None and now < q.until), None)
            if quota is not None:
                return _quota_refusal(quota, now, self._headers(model, buckets))
            bursts = (self._bursts.get(model), self._bursts.get(None))
            burst = next((b for b in bursts if b is not None and not b.over(now)), None)
            if burst is not None and burst.hits(now):
                headers = self._headers(model, buckets)
                if burst.retry_after is not None:
                    headers["retry-after"] = _seconds(burst.retry_after, whole=False)
                return Refusal(529, "overloaded_error", "Overloaded", headers)
            if not buckets:
                return Ticket(model)
            wanted = _wanted(body)
            waits = {family: bucket.wait_for(wanted[family]) for family, bucket in buckets.items()}
            waits = {family: wait for family, wait in waits.items() if wait > 0}
            if waits:
                return self._rate_limit_refusal(model, buckets, waits)
            for family, bucket in buckets.items():
                bucket.level -= min(wanted[family], bucket.limit)
            reserved = min(wanted[_OUTPUT], buckets[_OUTPUT].limit) if _OUTPUT in buckets else 0
            return Ticket(model, reserved, buckets)

    def settle(self, ticket: Ticket, output_tokens: int) -> dict[str, str]:
        """Charge the reply's output tokens instead of the reserved `max_tokens`; the
        headers of the answer."""
        with self._lock:
            output = ticket.buckets.get(_OUTPUT)
            if output is not None:
                output.refill(self.now())
                output.level = min(output.limit, output.level + ticket.reserved_output)
                output.level -= output_tokens
            return self._headers(ticket.model, ticket.buckets)

    def _buckets_of(self, model: str, now: float) -> dict[str, _Bucket]:
        limits = self._limits.get(model) or self._limits.get(None)
        if limits is None:
            return {}
        buckets = self._buckets.get(model)
        if buckets is None:
            buckets = {
                family: _Bucket(limit, limit / limits.minute, float(limit), now)
                for family, limit in limits.per_minute.items()
            }
            self._buckets[model] = buckets
        for bucket in buckets.values():
            bucket.refill(now)
        return buckets

    def _rate_limit_refusal(
        self, model: str, buckets: dict[str, _Bucket], waits: dict[str, float]
    ) -> Refusal:
        family = max(waits, key=lambda name: waits[name])
        limit = buckets[family].limit
        message = (
            f"This request would exceed the rate limit for your organization of {limit} "
            f"{_PER_MINUTE_WORDS[family]} per minute for {model}. Please try again later."
        )
        headers = self._headers(model, buckets)
        headers["retry-after"] = _seconds(waits[family], whole=self._real_time(model))
        return Refusal(429, "rate_limit_error", message, headers)

    def _real_time(self, model: str) -> bool:
        limits = self._limits.get(model) or self._limits.get(None)
        return limits is None or limits.minute == _REAL_MINUTE

    def _headers(self, model: str, buckets: Mapping[str, _Bucket]) -> dict[str, str]:
        if not buckets:
            return {}
        whole = self._real_time(model)
        headers: dict[str, str] = {}
        for family, bucket in buckets.items():
            headers.update(_family_headers(family, bucket, whole))
        tokens = [buckets[name] for name in (_INPUT, _OUTPUT) if name in buckets]
        if tokens:
            tightest = min(tokens, key=lambda bucket: bucket.level / bucket.limit)
            headers.update(_family_headers("tokens", tightest, whole))
        return headers


def _wanted(body: Mapping[str, Any]) -> dict[str, int]:
    """What a request takes from each bucket: one request, its estimated input tokens
    and its `max_tokens`."""
    prompt = {key: body[key] for key in ("system", "messages", "tools") if key in body}
    max_tokens = body.get("max_tokens")
    return {
        _REQUESTS: 1,
        _INPUT: math.ceil(len(json.dumps(prompt)) / _CHARS_PER_TOKEN),
        _OUTPUT: max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 0,
    }


def _family_headers(family: str, bucket: _Bucket, whole: bool) -> dict[str, str]:
    prefix = f"anthropic-ratelimit-{family}"
    return {
        f"{prefix}-limit": str(bucket.limit),
        f"{prefix}-remaining": str(max(0, math.floor(bucket.level))),
        f"{prefix}-reset": _rfc3339(time.time() + bucket.until_full(), whole=whole),
    }


def _quota_refusal(quota: _Quota, now: float, headers: dict[str, str]) -> Refusal:
    resets_in = quota.until - now
    regain = datetime.fromtimestamp(time.time() + resets_in, UTC)
    message = (
        "You have reached your API usage limits. You will regain access on "
        f"{regain:%Y-%m-%d} at {regain:%H:%M} UTC."
    )
    if quota.retry_after:
        headers["retry-after"] = _seconds(resets_in, whole=True)
    return Refusal(429, "rate_limit_error", message, headers, quota.error_code)


def _seconds(seconds: float, *, whole: bool) -> str:
    """A `retry-after` value: whole seconds, rounded up, as the real API sends; to the
    millisecond when time is scaled."""
    if whole:
        return str(math.ceil(seconds))
    return f"{math.ceil(seconds * 1000) / 1000:g}"


def _rfc3339(timestamp: float, *, whole: bool) -> str:
    if whole:
        return datetime.fromtimestamp(math.ceil(timestamp), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    moment = datetime.fromtimestamp(math.ceil(timestamp * 1000) / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
