"""Run-wide usage limits, enforced in code: `UsageLimits` and the run scope's `UsageMeter`.

Like the retry budget, the meter belongs to the run (`RunScope.usage`): every model call
of every task asks it first (`admit`), and no call starts once a limit is reached. A
call already in flight is let finish and counted (`settle`), so the run overshoots a
token or cost limit by at most what the calls in flight used; a `max_model_calls` limit
is never overshot, since a call is counted when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentmesh._numbers import number, whole
from agentmesh.errors import UsageError
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
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_model_calls: int | None = None

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

    def _refusal(self, used: _Counts, *, starting: bool, priced: bool = True) -> str | None:
        """Why no new call may start with `used` so far, or None when one may."""
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
                return f"{name}={limit} reached ({shown} used)"
        if self.max_cost_usd is not None:
            if not priced:
                return "max_cost_usd is set and this model has no known price"
            if used.cost >= self.max_cost_usd:
                return f"max_cost_usd={self.max_cost_usd:g} reached (${used.cost:.6f} used)"
        return None


@dataclass(slots=True)
class _Counts:
    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    calls: int = 0  # started, those in flight included
    cost: float = 0.0

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

    __slots__ = ("_by_model", "_by_subagent", "_run", "limits", "prices")

    def __init__(self, limits: UsageLimits | None = None, prices: PriceTable | None = None) -> None:
        if limits is not None and not isinstance(limits, UsageLimits):
            raise UsageError(f"usage_limits= takes UsageLimits, got {limits!r}")
        self.limits = limits
        self.prices = prices if prices is not None else PriceTable()
        self._run = _Counts()
        self._by_subagent: dict[str, _Counts] = {}
        self._by_model: dict[str, ModelUsage] = {}

    def _of(self, subagent: str) -> _Counts:
        counts = self._by_subagent.get(subagent)
        if counts is None:
            counts = self._by_subagent[subagent] = _Counts()
        return counts

    def admit(self, model: str, subagent: str, limits: UsageLimits | None = None) -> str | None:
        """Count a call of `model` as started, or say why it may not start.

        `limits` are the subagent's own (`LLMSubagent(usage_limits=...)`), on what that
        subagent used in the run; the run's own limits apply to every call.
        """
        priced = self.prices.price_of(model) is not None
        for bound, used, whose in (
            (self.limits, self._run, "the run's"),
            (limits, self._of(subagent), f"subagent {subagent}'s"),
        ):
            reason = None if bound is None else bound._refusal(used, starting=True, priced=priced)
            if reason is not None:
                return f"{whose} usage limit: {reason}"
        self._run.calls += 1
        self._of(subagent).calls += 1
        return None

    def settle(
        self,
        model: str,
        subagent: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_creation_tokens: int = 0,
        cache_read_tokens: int = 0,
        unknown_tokens: bool = False,
    ) -> ModelUsage:
        """Count what an admitted call used (nothing for a failed one); its usage line.

        `unknown_tokens`: the answer's counts were unusable; the call counts, its
        unknown tokens do not, and its cost is unknown.
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
            model_calls=1,
            cost_usd=cost,
            unknown_token_calls=int(unknown_tokens),
        )
        self._run.add(line)
        self._of(subagent).add(line)
        known = self._by_model.get(model)
        self._by_model[model] = line if known is None else known + line
        return line

    def total(self) -> UsageSummary:
        """What the run's settled model calls used so far, by model (fail-overs not listed)."""
        return UsageSummary.of(self._by_model.values())

    def exhausted(self) -> str | None:
        """Why the run's limits let no new task start, or None (for tasks not started)."""
        if self.limits is None:
            return None
        reason = self.limits._refusal(self._run, starting=True)
        return None if reason is None else f"the run's usage limit: {reason}"

    @property
    def model_calls(self) -> int:
        """Model calls started in the run so far."""
        return self._run.calls

    @property
    def total_tokens(self) -> int:
        return self._run.total

    def __repr__(self) -> str:
        return f"<UsageMeter {self._run.calls} calls, {self._run.total} tokens>"
