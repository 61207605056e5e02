"""The options of a tool, defined once: keyword sets and their checked value.

`Tool`, `@tool`, `MCPTool` and `MCPServer.tool` take these as keyword arguments
(`**options: Unpack[...]`), so a new option is a field here, not a parameter in every
signature. An MCP tool has no name or description of its own to give (the server's) and
its `idempotent` may be None (follow the server's annotations), hence two keyword sets
that share the limits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Literal, TypedDict, get_args

from agentmesh.breaker import CircuitBreaker
from agentmesh.errors import UsageError
from agentmesh.retry import RetryPolicy
from agentmesh.throttle import Limiter, RateLimitSpec

__all__ = [
    "TOOL_KEYWORDS",
    "Impact",
    "MCPToolKwargs",
    "ToolKwargs",
    "ToolOptions",
    "check_keywords",
]

Impact = Literal["financial", "legal", "safety"]
"""What a tool can harm (`tool(impact=...)`): lets policies single out risky tools."""


class _ToolLimits(TypedDict, total=False):
    impact: Impact | None
    retry: RetryPolicy | None
    rate_limit: RateLimitSpec | None
    max_concurrency: int | None


class ToolKwargs(_ToolLimits, total=False):
    """The options of `Tool` and `@tool` as keyword arguments; see `tool` for each."""

    name: str | None
    description: str | None
    idempotent: bool
    breaker: CircuitBreaker | None


class MCPToolKwargs(_ToolLimits, total=False):
    """The options of `MCPTool` and `MCPServer.tool`; see `MCPTool` for each."""

    idempotent: bool | None
    timeout: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOptions:
    """A tool's options as given, checked (None: the default, e.g. the function's name).

    `rate_limit` and `max_concurrency` are checked by the `Limiter` they make (`limiter`).
    """

    name: str | None = None
    description: str | None = None
    idempotent: bool = False
    impact: Impact | None = None
    retry: RetryPolicy | None = None
    rate_limit: RateLimitSpec | None = None
    max_concurrency: int | None = None
    breaker: CircuitBreaker | None = None

    @classmethod
    def of(cls, owner: str, options: ToolKwargs) -> ToolOptions:
        """Check the keyword arguments given to tool `owner`; UsageError names the wrong one."""
        check_keywords(f"@tool {owner}", options, TOOL_KEYWORDS)
        impact = options.get("impact")
        if impact is not None and impact not in get_args(Impact):
            raise UsageError(
                f"@tool(impact=) must be one of {get_args(Impact)} or None, got {impact!r}"
            )
        retry = options.get("retry")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise UsageError(f"@tool {owner}: retry= takes a RetryPolicy, got {retry!r}")
        breaker = options.get("breaker")
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise UsageError(f"{owner}: breaker= takes a CircuitBreaker, got {breaker!r}")
        return cls(
            name=options.get("name"),
            description=options.get("description"),
            idempotent=options.get("idempotent", False),
            impact=impact,
            retry=retry,
            rate_limit=options.get("rate_limit"),
            max_concurrency=options.get("max_concurrency"),
            breaker=breaker,
        )

    def limiter(self, owner: str) -> Limiter:
        """A new `Limiter` for tool `owner` (each tool object has its own slots)."""
        return Limiter(
            name=f"tool {owner}", rate_limit=self.rate_limit, max_concurrency=self.max_concurrency
        )


def check_keywords(owner: str, given: Mapping[str, object], allowed: Collection[str]) -> None:
    """Refuse a keyword that is no option: `**options` would otherwise swallow a typo."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise UsageError(
            f"{owner}: unexpected keyword argument {unknown[0]!r}; "
            f"the options are {', '.join(sorted(allowed))}"
        )


TOOL_KEYWORDS = frozenset(ToolKwargs.__annotations__)
