"""`RateGate`: one model's rate limits as its server reports them, claimed before each call.

The Messages API reports its per-minute limits on every answer, a 429 included:
`anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`, where
`reset` is the RFC 3339 time the bucket is full again. The buckets are token buckets,
replenished continuously, so `remaining` and `reset` together give the rate of refill:
`(limit - remaining) / (reset - now)`, a rate that holds until the limit changes.

The gate keeps one such bucket per reported limit and, before each call, takes one
request, the call's estimated input tokens and its `max_tokens` from all of them at once
(`admit`: one step, no `await` between the check and the take), or says how long until
they fit. What a call took that its answer did not spend goes back (`settle`). A report
never raises a bucket above what this side already took from it (the smaller of the two
counts): calls admitted here may not have reached the server yet. A 429's headers count
as any answer's: the limit it ran out of reads 0 until it refills.

OpenAI (and the compatible servers that copy it) reports
`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, `reset` the time until the
bucket is full as a duration (`6m0s`, `20ms`): the same buckets, `requests` and `tokens`,
where a call's `tokens` are its input and its `max_tokens` together, as OpenAI counts
them against the limit.

A model whose answers carry no such header (`ScriptedModel`, a server without limits)
has no bucket, and the gate admits every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from agentmesh._numbers import duration_seconds

__all__ = ["FAMILIES", "RateGate", "heard_headers", "report_headers"]

# The limits a call draws on, by the family name of their headers.
FAMILIES: Final = ("requests", "input-tokens", "output-tokens")
_PREFIX: Final = "anthropic-ratelimit-"
# OpenAI's headers, `x-ratelimit-limit-requests`, ...: its `tokens` take input and output.
_OPENAI_PREFIX: Final = "x-ratelimit-"
_OPENAI_FAMILIES: Final = ("requests", "tokens")
# The Messages API's limits are per minute: the refill rate until a report says better.
_MINUTE: Final = 60.0


# Where a model reports the rate-limit headers of the call in progress: the attempt that
# makes the call listens (`heard_headers`), the model reports (`report_headers`). A
# context variable, so each task's call hears only its own answer.
_HEARD: ContextVar[dict[str, str] | None] = ContextVar("agentmesh_rate_headers", default=None)


@contextmanager
def heard_headers() -> Iterator[dict[str, str]]:
    """The rate-limit headers a model reports while inside: {} when it reported none."""
    heard: dict[str, str] = {}
    token = _HEARD.set(heard)
    try:
        yield heard
    finally:
        _HEARD.reset(token)


def report_headers(headers: Mapping[str, str] | None) -> None:
    """Report an answer's headers (its rate-limit ones are kept) to the call listening."""
    heard = _HEARD.get()
    if heard is None or headers is None:
        return
    heard.clear()
    heard.update(
        (name.lower(), value)
        for name, value in headers.items()
        if name.lower().startswith((_PREFIX, _OPENAI_PREFIX)) or name.lower() == "retry-after"
    )


@dataclass(frozen=True, slots=True)
class _Report:
    """One limit as an answer reported it."""

    limit: int
    remaining: int
    full_in: float  # seconds until the bucket is full again

    @property
    def measured_rate(self) -> float | None:
        """Tokens a second the bucket refills at, when this report can tell (not full)."""
        if self.remaining < self.limit and self.full_in > 0:
            return (self.limit - self.remaining) / self.full_in
        return None


def _reports(headers: Mapping[str, str], wall: float) -> dict[str, _Report]:
    reports = _openai_reports(headers)
    for family in FAMILIES:
        prefix = f"{_PREFIX}{family}"
        try:
            limit = int(headers[f"{prefix}-limit"])
            remaining = int(headers[f"{prefix}-remaining"])
            reset = datetime.fromisoformat(headers[f"{prefix}-reset"])
        except (KeyError, ValueError):
            continue
        if limit < 1 or reset.tzinfo is None:
            continue
        reports[family] = _Report(limit, max(0, min(remaining, limit)), reset.timestamp() - wall)
    return reports


def _openai_reports(headers: Mapping[str, str]) -> dict[str, _Report]:
    reports = {}
    for family in _OPENAI_FAMILIES:
        try:
            limit = int(headers[f"{_OPENAI_PREFIX}limit-{family}"])
            remaining = int(headers[f"{_OPENAI_PREFIX}remaining-{family}"])
        except (KeyError, ValueError):
            continue
        full_in = duration_seconds(headers.get(f"{_OPENAI_PREFIX}reset-{family}"))
        if limit < 1 or full_in is None:
            continue
        reports[family] = _Report(limit, max(0, min(remaining, limit)), full_in)
    return reports


def _with_tokens(amounts: Mapping[str, int]) -> Mapping[str, int]:
    """`amounts` with OpenAI's `tokens`, input and output together, when not given."""
    if "tokens" in amounts:
        return amounts
    both = amounts.get("input-tokens", 0) + amounts.get("output-tokens", 0)
    return {**amounts, "tokens": both}


@dataclass(slots=True)
class _Bucket:
    """One limit as this side counts it: `level` at `at`, refilled at `per_second`.

    `per_second` is measured from the reports, `(limit - remaining) / full_in`. An answer
    read late (a busy event loop, a slow network) makes `full_in` look shorter and the
    rate faster, never slower; so of the rates measured for one limit the slowest is the
    truest, and the bucket keeps it (`measured`) until the limit itself changes.
    """

    limit: int
    level: float
    at: float
    per_second: float
    measured: bool = False

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + max(0.0, now - self.at) * self.per_second)
        self.at = now

    def wait_for(self, amount: int) -> float:
        """Seconds until `amount` fits (at most the whole bucket: never refused for good)."""
        missing = min(amount, self.limit) - self.level
        return max(0.0, missing / self.per_second)

    def report(self, seen: _Report, now: float) -> None:
        self.refill(now)
        if seen.limit != self.limit:
            self.limit, self.measured = seen.limit, False
            self.per_second = seen.limit / _MINUTE
        rate = seen.measured_rate
        if rate is not None and (not self.measured or rate < self.per_second):
            self.per_second, self.measured = rate, True
        self.level = min(self.level, seen.remaining)


class RateGate:
    """One model's buckets, as its answers report them; see the module's docstring."""

    __slots__ = ("_buckets", "skew")

    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}
        # Seconds the gate's clock is ahead of the monotonic one: waits a test recorded.
        self.skew = 0.0

    @property
    def limited(self) -> bool:
        """Whether any limit was reported: without one the gate admits every call."""
        return bool(self._buckets)

    def admit(
        self, needs: Callable[[], Mapping[str, int]], now: float
    ) -> float | Mapping[str, int] | None:
        """Take a call's `needs` (per family) from every bucket, or the seconds until
        they fit. One step: nothing else can take between the check and the take.

        Returns what was taken, the seconds to wait, or None: no limit is known, nothing
        taken (`needs` is then not even asked).
        """
        if not self.limited:
            return None
        taken = needs()
        if "tokens" in self._buckets:
            taken = _with_tokens(taken)
        waits = [0.0]
        for family, bucket in self._buckets.items():
            bucket.refill(now)
            waits.append(bucket.wait_for(taken.get(family, 0)))
        wait = max(waits)
        if wait > 0:
            return wait
        for family, bucket in self._buckets.items():
            bucket.level -= min(taken.get(family, 0), bucket.limit)
        return taken

    def settle(self, unspent: Mapping[str, int], now: float) -> None:
        """Give back what an answered call took and did not spend."""
        if "tokens" in self._buckets:
            unspent = _with_tokens(unspent)
        for family, amount in unspent.items():
            bucket = self._buckets.get(family)
            if bucket is not None and amount > 0:
                bucket.refill(now)
                bucket.level = min(bucket.limit, bucket.level + amount)

    def report(self, headers: Mapping[str, str], now: float, wall: float) -> None:
        """What an answer's headers say of the limits, read at `now` (monotonic) and
        `wall` (the wall clock its reset times are in)."""
        for family, seen in _reports(headers, wall).items():
            bucket = self._buckets.get(family)
            if bucket is None:
                rate = seen.measured_rate
                self._buckets[family] = _Bucket(
                    seen.limit,
                    seen.remaining,
                    now,
                    seen.limit / _MINUTE if rate is None else rate,
                    measured=rate is not None,
                )
            else:
                bucket.report(seen, now)
