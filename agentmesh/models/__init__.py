"""Models: the `Model` protocol, `AnthropicModel` (the real SDK) and `ScriptedModel` (offline).

Also what a run's model calls may use and did use: `FallbackModel` chains, `UsageLimits`,
the usage an outcome carries (`UsageSummary`, `ModelUsage`, `ModelFailover`) and the
prices that give it a cost (`DEFAULT_PRICES`, `ModelPrice`, `PriceTable`). These live in
`agentmesh.usage` and are re-exported here.
"""

from agentmesh.models._anthropic import MODEL_ENV, AnthropicModel
from agentmesh.models._base import (
    ContentBlock,
    Model,
    ModelRequest,
    ModelResponse,
    OtherBlock,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from agentmesh.models._fallback import DEFAULT_FAILOVER_ON, FallbackModel
from agentmesh.models._scripted import ScriptedModel
from agentmesh.usage import (
    DEFAULT_PRICES,
    ModelFailover,
    ModelPrice,
    ModelUsage,
    PriceTable,
    UsageLimits,
    UsageSummary,
)

__all__ = [
    "DEFAULT_FAILOVER_ON",
    "DEFAULT_PRICES",
    "MODEL_ENV",
    "AnthropicModel",
    "ContentBlock",
    "FallbackModel",
    "Model",
    "ModelFailover",
    "ModelPrice",
    "ModelRequest",
    "ModelResponse",
    "ModelUsage",
    "OtherBlock",
    "PriceTable",
    "ScriptedModel",
    "TextBlock",
    "ToolUseBlock",
    "Usage",
    "UsageLimits",
    "UsageSummary",
]
