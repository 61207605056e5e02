"""Usage, limits and prices: what a run's model calls used, may use and cost.

The usage an outcome carries (`UsageSummary`, one `ModelUsage` per model, the
`ModelFailover`s of a `FallbackModel`), the limits a run or a subagent sets on it
(`UsageLimits`), the run's meter that holds its model calls to them (`UsageMeter`,
`RunScope.usage`) and the prices that give it a cost (`DEFAULT_PRICES`, `ModelPrice`,
`PriceTable`). `agentmesh.models` re-exports these names too, but for the meter.

The usage records sit below the envelope that carries them; the limits and prices check
their arguments with `UsageError`, above it, so they are loaded on first use.
"""

from typing import TYPE_CHECKING, Any

from agentmesh.usage._records import ModelFailover, ModelUsage, UsageSummary

if TYPE_CHECKING:
    from agentmesh.usage._meter import UsageLimits, UsageMeter
    from agentmesh.usage._prices import DEFAULT_PRICES, ModelPrice, PriceTable

__all__ = [
    "DEFAULT_PRICES",
    "ModelFailover",
    "ModelPrice",
    "ModelUsage",
    "PriceTable",
    "UsageLimits",
    "UsageMeter",
    "UsageSummary",
]

_CHECKED_NAMES = frozenset(
    {"DEFAULT_PRICES", "ModelPrice", "PriceTable", "UsageLimits", "UsageMeter"}
)


def __getattr__(name: str) -> Any:
    # `agentmesh.envelope` imports the records from here, and `agentmesh.errors` imports the
    # envelope: loading the limits (which import `errors`) with the records would be a circle.
    if name in ("UsageLimits", "UsageMeter"):
        from agentmesh.usage import _meter

        return getattr(_meter, name)
    if name in _CHECKED_NAMES:
        from agentmesh.usage import _prices

        return getattr(_prices, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names are there too, though not loaded yet: `dir()` and completion see them.
    return sorted(set(globals()) | _CHECKED_NAMES)
