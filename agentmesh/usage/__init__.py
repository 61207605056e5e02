"""Usage, limits and prices: what a run's model calls used, may use and cost.

The usage an outcome carries (`UsageSummary`, one `ModelUsage` per model, the
`ModelFailover`s of a `FallbackModel`), the limits a run or a subagent sets on it
(`UsageLimits`), the run's meter that holds its model calls to them (`UsageMeter`,
`RunScope.usage`) and the prices that give it a cost (`DEFAULT_PRICES`, `ModelPrice`,
`PriceTable`). `agentmesh.models` re-exports these names too, but for the meter.

The usage records sit below the envelope that carries them; the limits and prices check
their arguments with `UsageError`, above it, so they are loaded on first use.
"""

from typing import TYPE_CHECKING

from agentmesh._signatures import loaded_at_first_use
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

# `agentmesh.envelope` imports the records from here, and `agentmesh.errors` imports the
# envelope: loading the limits and prices (which import `errors`) with the records would
# be a circle.
__getattr__, __dir__ = loaded_at_first_use(
    __name__,
    {
        "UsageLimits": "agentmesh.usage._meter",
        "UsageMeter": "agentmesh.usage._meter",
        "DEFAULT_PRICES": "agentmesh.usage._prices",
        "ModelPrice": "agentmesh.usage._prices",
        "PriceTable": "agentmesh.usage._prices",
    },
)
