"""One model's attempts behind the run's `ModelHealth`: claimed, made, judged.

Each attempt of a model turn claims its model first, in one step:

    claim ──ticket──► rates ──► the call (admitted by the usage limits, counted) ──► release
      ├──full──► wait for a slot of the model's window (or for the model to go out)
      └──out───► no call: a `CallFailed` whose envelope says why and since when; final, so
                 no local retry is spent on it, and a `FallbackModel` goes on with its
                 next model (`skipped` tells the turn it was a skip, not a failure)

`rates`: when the model's answers report rate limits (`anthropic-ratelimit-*`), the call
takes one request, its estimated input tokens and its `max_tokens` from what remains, or
waits until they fit; a wait that would pass the task's deadline is not started: a
transient `rate_limited` envelope says when capacity returns (`retry_after`).

A call that fails once its model is out (its own failure opened the breaker, or another
task's did meanwhile) is final too: its retry would only be refused after the backoff.

The verdict is the envelope the attempt's exception classifies to (the classifier is
the task's, as for the envelope the retry loop makes of it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from agentmesh.breaker import BreakerState
from agentmesh.classify import Classifier
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType
from agentmesh.errors import CallFailed
from agentmesh.models import Model, ModelHealth, ModelResponse

__all__ = ["ModelGate"]

# The envelope's type when the limits leave no room before the deadline: a 429's.
_RATE_LIMITED: Final = "rate_limited"


class ModelGate:
    """The attempts of one model in one turn, through the run's model health."""

    __slots__ = (
        "attempted_query",
        "classifier",
        "deadline",
        "health",
        "log",
        "model",
        "needs",
        "skipped",
        "sleep",
        "source",
        "work",
    )

    def __init__(
        self,
        health: ModelHealth,
        model: Model,
        work: Callable[[int], Awaitable[ModelResponse]],
        *,
        classifier: Classifier,
        deadline: float | None,
        source: str,
        attempted_query: dict[str, Any],
        log: Any,
        needs: Callable[[], Mapping[str, int]] = dict,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        # The task's parts, given one by one: the gate sits below the task engine.
        self.health, self.model, self.work, self.log = health, model, work, log
        self.classifier, self.deadline = classifier, deadline
        self.source, self.attempted_query = source, attempted_query
        self.skipped = False  # an attempt found the model out and did not call it
        self.needs = needs  # what one call takes of the model's rate limits, by family
        self.sleep = sleep  # the retry policy's: a test records the waits

    async def attempt(self, number: int) -> ModelResponse:
        ticket = await self._claim(number)
        health, model = self.health, self.model
        heard: dict[str, str] = {}
        try:
            taken = await self._rates(number)
            with health.rate_headers() as heard:
                response = await self.work(number)
        except CallFailed:
            health.cancel(model, ticket)  # refused before any call was made
            raise
        except Exception as exc:
            verdict = self.classifier.classify(
                exc, source=self.source, attempted_query=self.attempted_query, attempts=number
            )
            health.settle_rates(model, heard)  # a 429's headers: what is left, and when
            health.release(model, ticket, verdict)
            if self.health.state(self.model) is not BreakerState.CLOSED:
                # The model is out now (this failure, or another task's, opened its
                # breaker): a retry would be refused after its backoff. Final here, so
                # the chain goes on with its next model at once.
                raise CallFailed(verdict) from exc
            raise
        except BaseException:
            self.health.cancel(self.model, ticket)
            raise
        health.settle_rates(model, heard, unspent=_unspent(taken, response))
        health.release(model, ticket, None)
        return response

    async def _rates(self, number: int) -> Mapping[str, int] | None:
        """Take this call's share of the model's rate limits, waiting until it fits;
        what was taken (None: no limit known). Raises when the wait passes the deadline."""
        loop = asyncio.get_running_loop()
        while True:
            claim = self.health.admit_rates(self.model, self.needs)
            if not isinstance(claim, float):
                return claim
            if self.deadline is not None and loop.time() + claim > self.deadline:
                raise CallFailed(self._no_capacity(claim, number - 1))
            self.log.debug("model_rate_wait", attempt=number, seconds=round(claim, 3))
            started = loop.time()
            await self.sleep(claim)
            # A sleep that did not take its time (a test's recorded sleep, which moves a
            # fake server's clock instead) moves the gate's clock as far: else it would
            # wait for a refill that never comes.
            self.health.rates_slept(self.model, claim - (loop.time() - started))

    def _no_capacity(self, wait: float, attempts: int) -> ErrorEnvelope:
        name = self.model.name
        return ErrorEnvelope(
            error_category=ErrorCategory.TRANSIENT,
            error_type=_RATE_LIMITED,
            is_retryable=True,
            message=(
                f"model {name}'s rate limits have no room for this call before the "
                f"task's deadline; they do in {wait:.1f}s. Not called"
            ),
            attempted_query=self.attempted_query,
            source=self.source,
            attempts=attempts,
            retry_after=wait,
            details=f"model {name} rate-limited: its reported limits return in {wait:.3f}s",
        )

    async def _claim(self, number: int) -> int:
        """A ticket for this attempt, after waiting for a slot; raises when the model is out."""
        health, model, first = self.health, self.model, False
        while True:
            claim = health.claim(model)
            if isinstance(claim, int):
                return claim
            if isinstance(claim, str):
                self.skipped = True
                self.log.debug("model_skipped", attempt=number, reason=claim)
                raise CallFailed(self._out(claim, number - 1))
            self.log.debug("model_window_full", attempt=number)
            if self.deadline is None:
                await health.wait(model, first=first)
            else:
                async with asyncio.timeout_at(self.deadline):
                    await health.wait(model, first=first)
            first = True  # woken for a slot: first in line if a newcomer took it

    def _out(self, reason: str, attempts: int) -> ErrorEnvelope:
        """The envelope of an attempt not made: the model is out, and why."""
        name, health = self.model.name, self.health
        outage = health.outage(self.model)
        since = "" if outage is None else f" since {outage[0]:%H:%M:%S} UTC"
        back_in = health.back_in(self.model)
        if reason == ErrorType.QUOTA_EXHAUSTED:
            until = (
                "" if outage is None or outage[1] is None else f" until {outage[1]:%H:%M:%S} UTC"
            )
            return ErrorEnvelope(
                error_category=ErrorCategory.BUSINESS,
                error_type=ErrorType.QUOTA_EXHAUSTED,
                is_retryable=False,
                message=f"model {name}'s quota is exhausted{since}{until or ' for this run'}; "
                "not called",
                attempted_query=self.attempted_query,
                source=self.source,
                attempts=attempts,
                retry_after=back_in,
                details=f"model {name} out: {ErrorType.QUOTA_EXHAUSTED}",
            )
        wait = 0.0 if back_in is None else back_in
        return ErrorEnvelope(
            error_category=ErrorCategory.TRANSIENT,
            error_type=reason,
            is_retryable=True,
            message=(
                f"model {name} is out ({reason}{since}); not called. One call probes it "
                f"again in {wait:.1f}s"
            ),
            attempted_query=self.attempted_query,
            source=self.source,
            attempts=attempts,
            retry_after=wait,
            details=f"model {name} out: {reason}; its breaker is open",
        )


def _unspent(taken: Mapping[str, int] | None, response: ModelResponse) -> dict[str, int]:
    """What an answered call took of the rate limits and did not spend."""
    if not taken or response.usage.unusable:
        return {}
    usage = response.usage
    return {
        "input-tokens": taken.get("input-tokens", 0)
        - usage.input_tokens
        - usage.cache_creation_input_tokens,
        "output-tokens": taken.get("output-tokens", 0) - usage.output_tokens,
    }
