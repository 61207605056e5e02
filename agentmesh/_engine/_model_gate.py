"""One model's attempts behind the run's `ModelHealth`: claimed, made, judged.

Each attempt of a model turn claims its model first, in one step:

    claim ──ticket──► the call (admitted by the usage limits, counted) ──► release(outcome)
      ├──full──► wait for a slot of the model's window (or for the model to go out)
      └──out───► no call: a `CallFailed` whose envelope says why and since when; final, so
                 no local retry is spent on it, and a `FallbackModel` goes on with its
                 next model (`skipped` tells the turn it was a skip, not a failure)

A call that fails once its model is out (its own failure opened the breaker, or another
task's did meanwhile) is final too: its retry would only be refused after the backoff.

The verdict is the envelope the attempt's exception classifies to (the classifier is
the task's, as for the envelope the retry loop makes of it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agentmesh.breaker import BreakerState
from agentmesh.classify import Classifier
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType
from agentmesh.errors import CallFailed
from agentmesh.models import Model, ModelHealth, ModelResponse

__all__ = ["ModelGate"]


class ModelGate:
    """The attempts of one model in one turn, through the run's model health."""

    __slots__ = (
        "attempted_query",
        "classifier",
        "deadline",
        "health",
        "log",
        "model",
        "skipped",
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
    ) -> None:
        # The task's parts, given one by one: the gate sits below the task engine.
        self.health, self.model, self.work, self.log = health, model, work, log
        self.classifier, self.deadline = classifier, deadline
        self.source, self.attempted_query = source, attempted_query
        self.skipped = False  # an attempt found the model out and did not call it

    async def attempt(self, number: int) -> ModelResponse:
        ticket = await self._claim(number)
        try:
            response = await self.work(number)
        except CallFailed:
            self.health.cancel(self.model, ticket)  # refused before any call was made
            raise
        except Exception as exc:
            verdict = self.classifier.classify(
                exc, source=self.source, attempted_query=self.attempted_query, attempts=number
            )
            self.health.release(self.model, ticket, verdict)
            if self.health.state(self.model) is not BreakerState.CLOSED:
                # The model is out now (this failure, or another task's, opened its
                # breaker): a retry would be refused after its backoff. Final here, so
                # the chain goes on with its next model at once.
                raise CallFailed(verdict) from exc
            raise
        except BaseException:
            self.health.cancel(self.model, ticket)
            raise
        self.health.release(self.model, ticket, None)
        return response

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
