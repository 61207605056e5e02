"""A run's model health and usage limits on Ray: kept in the run-state actor, for the cluster.

Locally every task of a run asks one `ModelHealth` and one `UsageMeter`, in one event
loop, and each claim is one step with no `await` inside. On Ray the tasks run in many
processes, so the run's health and meter live in the run-state actor (`RunModels`,
one per run) and a worker's scope holds stand-ins that ask it (`ClusterModelHealth`,
`ClusterUsageMeter`). The actor runs one method at a time, so each claim is still one
step, taken in one actor call: a breaker's probe, a slot of a model's window, a
rate-limit admission, a hard cap's reservation, a model call counted against
`max_model_calls`. Nothing is checked on a worker and then taken.

What a worker learns from each answer (the model's breaker state, since when it is
out, when it may be probed, whether it reports rate limits) it keeps for the questions
the engine asks next without a round trip. What tells the actor something and needs no
answer (a call ended well, its rate-limit headers, a call's usage) is posted (`Outbox`)
and sent without waiting, in one call per turn of the task's event loop, and always
before the task's next question: Ray runs one caller's calls to an actor in order.

A claim blocks the task's event loop for its round trip (as a retry-budget lease does):
the engine takes a claim in one step, without an `await`. A task whose model's window is
full, or whose call a hard cap holds until calls in flight settle, asks again after a
short, growing pause (`_POLL`), never past its deadline: the actor cannot wake a waiter
in another process. A task whose worker is lost, cut or cancelled never gives its
tickets back: the driver's word to the actor does (`RunModels.drop`). A claim whose
answer does not come in time is given up by the worker, which names it (`abandon`): the
actor may still grant it, and then frees the slot at once, for the abandon comes after.

A run without usage limits never asks the actor about usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentmesh.breaker import BreakerState
from agentmesh.envelope import ErrorEnvelope
from agentmesh.models import Model, ModelHealth, ModelResponse
from agentmesh.scope import RunScope
from agentmesh.usage import ModelUsage, PriceTable, UsageLimits, UsageMeter

__all__ = [
    "ClusterModelHealth",
    "ClusterUsageMeter",
    "ModelTerms",
    "Outbox",
    "RunModels",
    "Settings",
    "View",
    "model_terms",
]

# How long a task waits before asking again for a slot or a reservation: it starts
# short and doubles to the longest, so that 64 waiting tasks do not flood the actor.
_POLL: Final = (0.005, 0.2)
# How long a worker waits for the actor's answer to a claim.
_ACTOR_TIMEOUT: Final = 30.0

View = tuple[str, datetime.datetime | None, datetime.datetime | None, float | None, bool]
"""What a claim's answer says of the model: its breaker state, since when and until when it
is out, the seconds until it may be called again (None: unknown), whether it reports
rate limits."""


Settings = tuple[int, float, int, int | None]
"""A `ModelHealth`'s settings: failure threshold, reset after, initial and most concurrency."""


@dataclass(frozen=True, slots=True)
class ModelTerms:
    """What a worker needs to keep a run's models in the actor as the driver would: the
    health's settings, the run's usage limits and its prices (shipped once)."""

    health: Settings
    limits: UsageLimits | None
    prices: Any  # a Shipment of the run's PriceTable


def model_terms(scope: RunScope, ship: Callable[[object, str], Any]) -> ModelTerms:
    """The run's model terms, as the driver's scope holds them."""
    health, meter = scope.model_health, scope.usage
    return ModelTerms(
        (
            health.failure_threshold,
            health.reset_after,
            health.initial_concurrency,
            health.max_concurrency,
        ),
        meter.limits,
        ship(meter.prices, "the run's prices"),
    )


@dataclass(slots=True)
class _Seat:
    """A model as the actor knows it: by the key its health is kept under, never called."""

    name: str

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        raise AssertionError("the run-state actor never calls a model")


class RunModels:
    """One run's model health and usage meter, in the run-state actor (made on first use)."""

    __slots__ = ("_health", "held", "meter", "seats")

    def __init__(self) -> None:
        self._health: ModelHealth | None = None
        self.meter: UsageMeter | None = None
        self.seats: dict[str, _Seat] = {}
        # ticket -> (the dispatch that holds it, its model's key, the dispatch's number of
        # the claim): a task whose worker is lost or cut never gives its tickets back, so
        # the driver's word does (`drop`); a claim whose answer came too late, the
        # worker's (`abandon`).
        self.held: dict[int, tuple[str, str, int]] = {}

    def health(self, settings: Settings | None = None) -> ModelHealth:
        if self._health is None:
            threshold, reset_after, initial, ceiling = settings or (3, 30.0, 4, None)
            self._health = ModelHealth(
                failure_threshold=threshold,
                reset_after=reset_after,
                initial_concurrency=initial,
                max_concurrency=ceiling,
            )
        return self._health

    def seat(self, key: str) -> _Seat:
        seat = self.seats.get(key)
        if seat is None:
            seat = self.seats[key] = _Seat(key)
        return seat

    def view(self, key: str) -> View:
        health, seat = self.health(), self.seat(key)
        outage = health.outage(seat)
        since, until = (None, None) if outage is None else outage
        limited = health.admit_rates(seat, dict) is not None  # takes nothing: asks only
        return health.state(seat).value, since, until, health.back_in(seat), limited

    def claim(
        self, settings: Settings, key: str, call: str, number: int = 0
    ) -> tuple[int | str | None, View]:
        claim = self.health(settings).claim(self.seat(key))
        if isinstance(claim, int):
            self.held[claim] = (call, key, number)
        return claim, self.view(key)

    def release(self, key: str, ticket: int, failure: ErrorEnvelope | None) -> View:
        if self.held.pop(ticket, None) is not None:  # else dropped: its task was lost
            self.health().release(self.seat(key), ticket, failure)
        return self.view(key)

    def cancel(self, key: str, ticket: int) -> None:
        if self.held.pop(ticket, None) is not None:
            self.health().cancel(self.seat(key), ticket)

    def drop(self, call: str) -> None:
        """The dispatch `call` ended without its worker (lost, cut, cancelled): its slots
        and its probe are free again. Its cost reservations stay: what its calls spent
        is not known, and a hard cap must not be passed for it."""
        for ticket, (holder, key, _) in list(self.held.items()):
            if holder == call:
                self.cancel(key, ticket)

    def abandon(self, call: str, number: int) -> None:
        """The claim `number` of dispatch `call` was given up by its worker, which did not
        hear the answer in time: a ticket it was granted is free again (never used)."""
        for ticket, (holder, key, claimed) in list(self.held.items()):
            if holder == call and claimed == number:
                self.cancel(key, ticket)

    def admit(
        self,
        terms: tuple[UsageLimits | None, PriceTable],
        model: str,
        subagent: str,
        limits: UsageLimits | None,
        worst_case: float | None,
    ) -> tuple[float | str | None, tuple[str, str] | None]:
        """A call admitted by the run's and the subagent's limits (`terms`: the run's
        limits and prices), in one step; and why a run-wide limit stopped the run, if one
        did."""
        meter = self.meter
        if meter is None:
            meter = self.meter = UsageMeter(*terms)
        return meter.admit_now(model, subagent, limits, worst_case=worst_case), meter.stop


class Outbox:
    """What a worker's task tells the actor of its models without waiting for an answer,
    sent as one call per turn of the task's event loop (`StateActor.models_told`).

    Sent before any question the task asks the actor next, so the actor hears
    everything in the order it happened (Ray keeps one caller's calls in order).
    """

    __slots__ = ("_actor", "_run_id", "_scheduled", "messages")

    def __init__(self, actor: Any, run_id: str) -> None:
        self._actor, self._run_id = actor, run_id
        self.messages: list[tuple[str, tuple[Any, ...]]] = []
        self._scheduled = False

    def post(self, method: str, *args: Any) -> None:
        self.messages.append((method, args))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self.messages:
            messages, self.messages = self.messages, []
            self._actor.models_told.remote(self._run_id, messages)

    @property
    def actor(self) -> Any:
        """The actor, for a question: what was posted before it is sent first."""
        self.flush()
        return self._actor


class ClusterModelHealth(ModelHealth):
    """A worker's `ModelHealth`: every claim is taken in the run-state actor."""

    __slots__ = ("_call", "_claims", "_outbox", "_pause", "_run_id", "_terms", "_views")

    def __init__(self, outbox: Outbox, run_id: str, call: str, terms: ModelTerms) -> None:
        threshold, reset_after, initial, ceiling = terms.health
        super().__init__(
            failure_threshold=threshold,
            reset_after=reset_after,
            initial_concurrency=initial,
            max_concurrency=ceiling,
        )
        self._outbox, self._run_id, self._call, self._terms = outbox, run_id, call, terms
        # Per model: the actor's last word on it, and when it came (this clock).
        self._views: dict[str, tuple[View, float]] = {}
        self._pause: dict[str, float] = {}
        self._claims = 0  # claims asked: each is numbered, so one given up can be named

    def _seen(self, key: str, view: View) -> None:
        self._views[key] = (view, time.monotonic())

    def _view(self, model: Model) -> View | None:
        seen = self._views.get(self.key_of(model))
        return None if seen is None else seen[0]

    def state(self, model: Model) -> BreakerState:
        view = self._view(model)
        return BreakerState.CLOSED if view is None else BreakerState(view[0])

    def outage(self, model: Model) -> tuple[datetime.datetime, datetime.datetime | None] | None:
        view = self._view(model)
        return None if view is None or view[1] is None else (view[1], view[2])

    def back_in(self, model: Model) -> float | None:
        seen = self._views.get(self.key_of(model))
        if seen is None:
            return 0.0
        back_in = seen[0][3]
        return None if back_in is None else max(0.0, back_in - (time.monotonic() - seen[1]))

    def claim(self, model: Model) -> int | str | None:
        import ray

        key, actor = self.key_of(model), self._outbox.actor
        self._claims += 1
        number = self._claims
        ask = actor.model_claim.remote(self._run_id, self._terms.health, key, self._call, number)
        try:
            claim, view = ray.get(ask, timeout=_ACTOR_TIMEOUT)
        except BaseException:
            # The actor may grant the claim after all: give it back. Sent after the claim
            # by the same caller, it reaches the actor after it (Ray keeps their order).
            with contextlib.suppress(Exception):  # the actor is gone: nothing is held
                self._outbox.post("model_abandon", self._call, number)
                self._outbox.flush()
            raise
        self._seen(key, view)
        if claim is not None:
            self._pause.pop(key, None)
        result: int | str | None = claim
        return result

    async def wait(self, model: Model, *, first: bool = False) -> None:
        key = self.key_of(model)
        pause = self._pause.get(key, _POLL[0])
        self._pause[key] = min(_POLL[1], pause * 2)
        await asyncio.sleep(pause)

    def admit_rates(
        self, model: Model, needs: Callable[[], Mapping[str, int]]
    ) -> float | Mapping[str, int] | None:
        import ray

        view = self._view(model)
        if view is not None and not view[4]:
            return None  # no limit known: admitted without a round trip, as locally
        actor = self._outbox.actor
        ask = actor.model_rates.remote(self._run_id, self.key_of(model), dict(needs()))
        admitted: float | Mapping[str, int] | None = ray.get(ask, timeout=_ACTOR_TIMEOUT)
        return admitted

    def settle_rates(
        self,
        model: Model,
        headers: Mapping[str, str],
        *,
        unspent: Mapping[str, int] | None = None,
    ) -> None:
        if headers or unspent:
            self._outbox.post("model_heard", self.key_of(model), dict(headers), unspent or None)

    def rates_slept(self, model: Model, unslept: float) -> None:
        if unslept > 0:
            self._outbox.post("model_slept", self.key_of(model), unslept)

    def release(self, model: Model, ticket: int, failure: ErrorEnvelope | None) -> None:
        key = self.key_of(model)
        if failure is None:
            self._outbox.post("model_release", key, ticket, None)
            return
        import ray

        # The engine asks next whether the model is out now: wait for the answer.
        sent = self._outbox.actor.model_release.remote(self._run_id, key, ticket, failure)
        self._seen(key, ray.get(sent, timeout=_ACTOR_TIMEOUT))

    def cancel(self, model: Model, ticket: int) -> None:
        self._outbox.post("model_cancel", self.key_of(model), ticket)


class ClusterUsageMeter(UsageMeter):
    """A worker's `UsageMeter`: the run's and the subagents' limits are kept in the actor.

    It counts the task's own usage as any meter does (the lines it hands back); a call
    under a limit is admitted, and settled, by the actor's meter of the run.
    """

    __slots__ = ("_asked", "_outbox", "_run_id", "_terms")

    def __init__(self, outbox: Outbox, run_id: str, terms: ModelTerms, prices: PriceTable) -> None:
        super().__init__(None, prices)
        self._outbox, self._run_id, self._terms = outbox, run_id, terms
        # Calls the actor admitted and not settled yet, per (model, subagent).
        self._asked: dict[tuple[str, str], int] = {}

    async def admit(
        self,
        model: str,
        subagent: str,
        limits: UsageLimits | None = None,
        request: Mapping[str, Any] | None = None,
        *,
        deadline: float | None = None,
    ) -> float | str:
        run_limits = self._terms.limits
        if run_limits is None and limits is None:
            return await super().admit(model, subagent, None, request, deadline=deadline)
        worst_case = None
        hard = any(bound is not None and bound.hard for bound in (run_limits, limits))
        if hard and request is not None:
            worst_case = self.worst_case_cost(model, request)
        admitted = await self._ask(model, subagent, limits, worst_case, deadline)
        if not isinstance(admitted, str):
            key = (model, subagent)
            self._asked[key] = self._asked.get(key, 0) + 1
        return admitted

    async def _ask(
        self,
        model: str,
        subagent: str,
        limits: UsageLimits | None,
        worst_case: float | None,
        deadline: float | None,
    ) -> float | str:
        """The actor's answer, asked again while a hard cap holds the call."""
        loop, pause = asyncio.get_running_loop(), _POLL[0]
        while True:
            admitted, stop = await self._outbox.actor.usage_admit.remote(
                self._run_id, (self._terms.limits, self.prices), model, subagent, limits, worst_case
            )
            if stop is not None and self.stop is None:
                self.stop = stop
            if admitted is not None:
                result: float | str = admitted
                return result
            if deadline is not None and loop.time() + pause > deadline:
                return (
                    "the usage limit's hard cost cap held this call until the deadline: "
                    "the calls in flight reserve what is left of it"
                )
            await asyncio.sleep(pause)
            pause = min(_POLL[1], pause * 2)

    def settle(
        self,
        model: str,
        subagent: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_creation_tokens: int = 0,
        cache_read_tokens: int = 0,
        reasoning_tokens: int = 0,
        unknown_tokens: bool = False,
        reserved: float = 0.0,
    ) -> ModelUsage:
        tokens: dict[str, Any] = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_tokens": cache_creation_tokens,
            "cache_read_tokens": cache_read_tokens,
            "reasoning_tokens": reasoning_tokens,
            "unknown_tokens": unknown_tokens,
        }
        key = (model, subagent)
        asked = self._asked.get(key, 0)
        if asked:
            self._asked[key] = asked - 1
            self._outbox.post("usage_settle", model, subagent, tokens, reserved)
        return super().settle(model, subagent, **tokens)
