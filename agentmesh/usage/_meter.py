"""Run-wide usage limits, enforced in code: `UsageLimits` and the run scope's `UsageMeter`.

Like the retry budget, the meter belongs to the run (`RunScope.usage`): every model call
of every task asks it first (`admit`), and no call starts once a limit is reached. A
call already in flight is let finish and counted (`settle`), so the run overshoots a
token or a soft cost limit by at most what the calls in flight used; a `max_model_calls`
limit is never overshot, since a call is counted when it starts.

A hard cost cap (`UsageLimits(max_cost_usd=..., hard=True)`) is never passed: `admit`
reserves the call's worst-case cost (`agentmesh.usage._estimate`) beside what was spent
and what the calls in flight reserved, in one step with no `await` between the check and
the reservation, and `settle` replaces the reservation with the actual cost. A call that
fits once the calls in flight have settled waits for them; one that cannot fit
beside what was spent is refused, and from then on the cap is reached for the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentmesh._logging import get_logger
from agentmesh._numbers import number, whole
from agentmesh.errors import UsageError
from agentmesh.usage._estimate import estimated_input_tokens, worst_case_cost
from agentmesh.usage._prices import PriceTable
from agentmesh.usage._records import ModelUsage, UsageSummary

__all__ = ["UsageLimits", "UsageMeter"]


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Limits on what the model calls of a run (or of one subagent in it) may use.

    Input tokens count cache writes and cache reads too (they are input); total tokens
    are input and output together. None means no limit.

    Args:
        max_input_tokens: input tokens, cached ones included.
        max_output_tokens: output tokens.
        max_total_tokens: input and output tokens.
        max_cost_usd: US dollars, at the run's prices; a model with no known price may
            not be called under this limit (its cost could not be counted).
        max_model_calls: model requests started, failed ones included.
        hard: whether `max_cost_usd` is a hard cap, never passed however many calls are
            in flight: each call reserves its worst-case cost before it starts (its input
            estimated from the request, deliberately high, and `max_tokens` of output)
            and settles to its actual cost after. False (the default): the cap is soft,
            calls start while the spend is under it and those in flight may pass it.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_model_calls: int | None = None
    hard: bool = False

    def __post_init__(self) -> None:
        for name in (
            "max_input_tokens",
            "max_output_tokens",
            "max_total_tokens",
            "max_model_calls",
        ):
            value = getattr(self, name)
            if value is not None:
                whole(f"UsageLimits({name}=)", value, at_least=0)
        if self.max_cost_usd is not None:
            number("UsageLimits(max_cost_usd=)", self.max_cost_usd)
        if not isinstance(self.hard, bool):
            raise UsageError(f"UsageLimits(hard=) takes True or False, got {self.hard!r}")
        if self.hard and self.max_cost_usd is None:
            raise UsageError("UsageLimits(hard=True) makes max_cost_usd a hard cap: set it too")

    def _refusal(
        self, used: _Counts, *, starting: bool, priced: bool = True
    ) -> tuple[str, str] | None:
        """The limit no new call may start past with `used` so far, and why; None: one may."""
        calls = used.calls + 1 if starting else used.calls
        checks = (
            ("max_model_calls", self.max_model_calls, calls, used.calls),
            ("max_input_tokens", self.max_input_tokens, used.input_total, used.input_total),
            ("max_output_tokens", self.max_output_tokens, used.output, used.output),
            ("max_total_tokens", self.max_total_tokens, used.total, used.total),
        )
        for name, limit, measured, shown in checks:
            if limit is None:
                continue
            # A call limit holds the next call; a token limit stops calls once it is reached.
            over = measured > limit if name == "max_model_calls" else measured >= limit
            if over:
                return name, f"{name}={limit} reached ({shown} used)"
        if self.max_cost_usd is not None:
            if not priced:
                return "max_cost_usd", "max_cost_usd is set and this model has no known price"
            if used.capped is not None:
                return "max_cost_usd", used.capped
            if used.cost >= self.max_cost_usd:
                return "max_cost_usd", (
                    f"max_cost_usd={self.max_cost_usd:g} reached (${used.cost:.6f} used)"
                )
        return None

    def _reservation(self, used: _Counts, cost: float) -> tuple[bool, str] | None:
        """Whether a call whose worst case is `cost` cannot fit under the hard cap beside
        `used` (True) or must wait for the calls in flight (False), and why; None: it fits."""
        cap = self.max_cost_usd
        assert cap is not None  # hard=True requires it
        if used.cost + used.reserved + cost <= cap:
            return None
        never = used.cost + cost > cap
        why = (
            f"max_cost_usd={cap:g} (hard) reached: this call reserves up to ${cost:.6f}, "
            f"${used.cost:.6f} is spent and ${used.reserved:.6f} reserved by calls in flight"
        )
        return never, why


@dataclass(frozen=True, slots=True)
class _Held:
    """A call a hard cost cap holds until calls in flight settle: it fits once they have."""

    reason: str

    def __str__(self) -> str:
        return f"{self.reason}; held until the deadline"


@dataclass(slots=True)
class _Counts:
    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    calls: int = 0  # started, those in flight included
    cost: float = 0.0
    reserved: float = 0.0  # the worst cases of the calls in flight under a hard cap
    holding: int = 0  # calls in flight with a reservation
    capped: str | None = None  # why a hard cap refused a call for good: it is reached

    def reserve(self, cost: float) -> None:
        self.reserved += cost
        self.holding += 1

    def release(self, cost: float) -> None:
        self.holding -= 1
        # Back to exactly zero when nothing is held: no float drift over a long run.
        self.reserved = self.reserved - cost if self.holding else 0.0

    @property
    def input_total(self) -> int:
        return self.input + self.cache_creation + self.cache_read

    @property
    def total(self) -> int:
        return self.input_total + self.output

    def add(self, line: ModelUsage) -> None:
        self.input += line.input_tokens
        self.output += line.output_tokens
        self.cache_creation += line.cache_creation_tokens
        self.cache_read += line.cache_read_tokens
        self.cost += line.cost_usd or 0.0


class UsageMeter:
    """The usage of one run so far, and its limits: asked before every model call.

    Args:
        limits: the run's limits (the coordinator's `usage_limits`); none by default.
        prices: the run's prices; `DEFAULT_PRICES` by default.
    """

    __slots__ = ("_by_model", "_by_subagent", "_released", "_run", "limits", "prices", "stop")

    def __init__(self, limits: UsageLimits | None = None, prices: PriceTable | None = None) -> None:
        if limits is not None and not isinstance(limits, UsageLimits):
            raise UsageError(f"usage_limits= takes UsageLimits, got {limits!r}")
        self.limits = limits
        self.prices = prices if prices is not None else PriceTable()
        self._run = _Counts()
        self._by_subagent: dict[str, _Counts] = {}
        self._by_model: dict[str, ModelUsage] = {}
        self._released: asyncio.Event | None = None
        # The first run-wide limit that refused a call or a task, and why: the report's
        # "stopped by" line. None while no run-wide limit has refused anything.
        self.stop: tuple[str, str] | None = None

    def _of(self, subagent: str) -> _Counts:
        counts = self._by_subagent.get(subagent)
        if counts is None:
            counts = self._by_subagent[subagent] = _Counts()
        return counts

    @staticmethod
    def estimated_input_tokens(request: Mapping[str, Any]) -> int:
        """Input tokens `request` (the keywords of `Model.create`) costs at most: the
        local, high-side estimate a hard cost cap reserves and a model's rate limits are
        claimed with (no tokenizer, no network)."""
        return estimated_input_tokens(request)

    def worst_case_cost(self, model: str, request: Mapping[str, Any]) -> float | None:
        """The most a call of `model` with `request` (the keywords of `Model.create`) can
        cost at the run's prices, as a hard cap reserves it; None: `model` has no price."""
        price = self.prices.price_of(model)
        return None if price is None else worst_case_cost(price, request)

    async def admit(
        self,
        model: str,
        subagent: str,
        limits: UsageLimits | None = None,
        request: Mapping[str, Any] | None = None,
        *,
        deadline: float | None = None,
    ) -> float | str:
        """Count a call of `model` as started and reserve its worst-case cost under a hard
        cap (the amount reserved, 0.0 without one), or say why it may not start (a str).

        A call a hard cap holds (it fits once the calls in flight have settled) waits for
        them here, never past `deadline` (the event loop's clock): still held then, it is
        refused. See `_admit_now` for the limits and the request.
        """
        admitted = self._admit_now(model, subagent, limits, request)
        while isinstance(admitted, _Held):
            if not await self._settled_by(deadline):
                return str(admitted)
            admitted = self._admit_now(model, subagent, limits, request)
        return admitted

    def admit_now(
        self,
        model: str,
        subagent: str,
        limits: UsageLimits | None = None,
        *,
        worst_case: float | None = None,
    ) -> float | str | None:
        """`admit` in one step, for a meter kept away from the calls it counts (the Ray
        executor's run-state actor): the call's worst-case cost under a hard cap is
        given (`worst_case`), estimated where the request is. What was reserved, why
        the call may not start, or None: a hard cap holds it until calls in flight
        settle (ask again then)."""
        admitted = self._admit_now(model, subagent, limits, None, worst_case)
        return None if isinstance(admitted, _Held) else admitted

    def _admit_now(
        self,
        model: str,
        subagent: str,
        limits: UsageLimits | None,
        request: Mapping[str, Any] | None,
        worst_case: float | None = None,
    ) -> float | str | _Held:
        """`admit` as it stands now: reserved, refused, or held for calls in flight.

        `limits` are the subagent's own (`LLMSubagent(usage_limits=...)`), on what that
        subagent used in the run; the run's own limits apply to every call. `request`
        (the keywords of `Model.create`) is what a hard cap estimates the cost of.
        Checked and reserved in one step: no `await` between them.
        """
        price = self.prices.price_of(model)
        counts = self._of(subagent)
        held: _Held | None = None
        cost = 0.0
        for bound, used, whose in (
            (self.limits, self._run, "the run's"),
            (limits, counts, f"subagent {subagent}'s"),
        ):
            if bound is None:
                continue
            refused = bound._refusal(used, starting=True, priced=price is not None)
            if refused is None and bound.hard:
                assert price is not None  # refused above when unpriced
                if worst_case is None:
                    if request is None:
                        raise UsageError("a hard cost cap needs the request to reserve its cost")
                    worst_case = worst_case_cost(price, request)
                cost = worst_case
                reservation = bound._reservation(used, cost)
                if reservation is not None:
                    never, why = reservation
                    if not never:
                        held = held or _Held(f"{whose} usage limit: {why}")
                        continue
                    used.capped = why
                    refused = "max_cost_usd", why
            if refused is not None:
                return self._refused(used, f"{whose} usage limit: ", refused)
        if held is not None:
            return held
        for used in (self._run, counts):
            used.calls += 1
            if cost:
                used.reserve(cost)
        return cost

    def _refused(self, used: _Counts, whose: str, refused: tuple[str, str]) -> str:
        reason = whose + refused[1]
        if used is self._run and self.stop is None:
            self.stop = refused[0], reason
        return reason

    async def _settled_by(self, deadline: float | None) -> bool:
        """Wait until a call in flight settles its reservation; False at `deadline`."""
        if self._released is None:
            self._released = asyncio.Event()
        try:
            async with asyncio.timeout_at(deadline):
                await self._released.wait()
        except TimeoutError:
            return False
        return True

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
        """Count what an admitted call used (nothing for a failed one); its usage line.

        `unknown_tokens`: the answer's counts were unusable; the call counts, its
        unknown tokens do not, and its cost is unknown. `reserved`: what `admit`
        reserved for it, released now that its actual cost is counted instead.
        """
        price = self.prices.price_of(model)
        tokens = input_tokens + output_tokens + cache_creation_tokens + cache_read_tokens
        cost = (
            None
            if unknown_tokens
            else price.cost(input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens)
            if price is not None
            else (0.0 if tokens == 0 else None)
        )
        line = ModelUsage(
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_creation_tokens=cache_creation_tokens,
            cache_read_tokens=cache_read_tokens,
            reasoning_tokens=reasoning_tokens,
            model_calls=1,
            cost_usd=cost,
            unknown_token_calls=int(unknown_tokens),
        )
        self._run.add(line)
        counts = self._of(subagent)
        counts.add(line)
        known = self._by_model.get(model)
        self._by_model[model] = line if known is None else known + line
        if reserved:
            self._release(line, counts, reserved)
        return line

    def _release(self, line: ModelUsage, counts: _Counts, reserved: float) -> None:
        self._run.release(reserved)
        counts.release(reserved)
        if line.cost_usd is None or line.cost_usd > reserved:
            # The estimate fell short (or the answer's counts were unusable): the cap
            # holds only as far as the reservations were right. Said, never hidden.
            get_logger().warning(  # made here: a logger at import would load structlog
                "usage_reservation_exceeded",
                model=line.model,
                reserved_usd=reserved,
                cost_usd=line.cost_usd,
            )
        if self._released is not None:
            # Every waiting call looks again; those that still do not fit wait anew.
            self._released.set()
            self._released = None

    def total(self) -> UsageSummary:
        """What the run's settled model calls used so far, by model (fail-overs not listed)."""
        return UsageSummary.of(self._by_model.values())

    def exhausted(self) -> str | None:
        """Why the run's limits let no new task start, or None (for tasks not started)."""
        if self.limits is None:
            return None
        refused = self.limits._refusal(self._run, starting=True)
        return (
            None
            if refused is None
            else self._refused(self._run, "the run's usage limit: ", refused)
        )

    @property
    def model_calls(self) -> int:
        """Model calls started in the run so far."""
        return self._run.calls

    @property
    def total_tokens(self) -> int:
        return self._run.total

    def __repr__(self) -> str:
        return f"<UsageMeter {self._run.calls} calls, {self._run.total} tokens>"
