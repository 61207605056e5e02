"""The options every subagent takes, defined once: a keyword set and its checked value.

`Subagent`, `@subagent` and `LLMSubagent` take these as keyword arguments
(`**options: Unpack[SubagentKwargs]`) and hand them to `SubagentOptions.of`, so a new
option is a field here (and its key in `SubagentKwargs`), not a parameter in every
signature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final, TypedDict

from agentmesh.breaker import CircuitBreaker
from agentmesh.classify import Classifier, default_classifier
from agentmesh.errors import UsageError
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryPolicy
from agentmesh.throttle import Limiter, RateLimitSpec

__all__ = ["DEFAULT_RETRY", "SubagentKwargs", "SubagentOptions"]

DEFAULT_RETRY = RetryPolicy()


class SubagentKwargs(TypedDict, total=False):
    """The subagent options as keyword arguments; see `Subagent` for what each means."""

    retry: RetryPolicy | None
    alternatives: Iterable[str]
    policies: Sequence[ToolPolicy]
    rate_limit: RateLimitSpec | None
    max_concurrency: int | None
    classifier: Classifier | None
    checkpoint: bool
    breaker: CircuitBreaker | None


# Keywords newcomers reach for that live elsewhere: the error says where.
_HINTS: Final = {
    "description": (
        " (a subagent's description is its function's docstring, or the class attribute"
        " `description`; as_tool(description=...) sets the one a lead's model sees)"
    ),
}


@dataclasses.dataclass(frozen=True, slots=True)
class SubagentOptions:
    """A subagent's options, checked and with the defaults filled in.

    `rate_limit` and `max_concurrency` are checked by the `Limiter` they make (`limiter`).
    """

    retry: RetryPolicy = DEFAULT_RETRY
    alternatives: tuple[str, ...] = ()
    policies: tuple[ToolPolicy, ...] = ()
    rate_limit: RateLimitSpec | None = None
    max_concurrency: int | None = None
    classifier: Classifier = default_classifier
    checkpoint: bool = False
    breaker: CircuitBreaker | None = None

    @classmethod
    def of(cls, owner: str, options: SubagentKwargs) -> SubagentOptions:
        """Check the keyword arguments given to subagent `owner`; UsageError names the one."""
        unknown = options.keys() - _FIELDS
        if unknown:
            first = sorted(unknown)[0]
            raise UsageError(
                f"subagent {owner}: unexpected keyword argument {first!r}; "
                f"the options are {', '.join(sorted(_FIELDS))}{_HINTS.get(first, '')}"
            )
        alternatives = options.get("alternatives", ())
        if isinstance(alternatives, str):
            raise UsageError(f"subagent {owner}: alternatives must be a list of names")
        retry = options.get("retry")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise UsageError(f"subagent {owner}: retry= takes a RetryPolicy, got {retry!r}")
        policies = tuple(options.get("policies", ()))
        for policy in policies:
            if not isinstance(policy, ToolPolicy):
                raise UsageError(
                    f"subagent {owner}: {policy!r} is not a policy; decorate it with "
                    "@pre_tool_use or @post_tool_use"
                )
        breaker = options.get("breaker")
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise UsageError(f"subagent {owner}: breaker= takes a CircuitBreaker")
        return cls(
            retry=retry or DEFAULT_RETRY,
            alternatives=tuple(alternatives),
            policies=policies,
            rate_limit=options.get("rate_limit"),
            max_concurrency=options.get("max_concurrency"),
            classifier=options.get("classifier") or default_classifier,
            checkpoint=options.get("checkpoint", False),
            breaker=breaker,
        )

    def limiter(self, owner: str) -> Limiter:
        """A new `Limiter` for subagent `owner` (each subagent has its own slots)."""
        return Limiter(
            name=f"subagent {owner}",
            rate_limit=self.rate_limit,
            max_concurrency=self.max_concurrency,
        )


_FIELDS = frozenset(SubagentKwargs.__annotations__)
